"""The person rewriting on the garbled facts an independent judge found (issue 37,
round 2): reflexives, "my kids and I ... our", a name called at a turn's start,
"I'm" before a perfect participle, a bare "one", "the user's" twice in a sentence;
and time words: a figure of speech gets no date, "tomorrow" gets one."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.memory import ExtractiveExtractor
from threadline.memory.statements import third_person
from threadline.memory.timeexpr import date_labels
from threadline.memory.vocative import called
from threadline.messages import Message

SAID = datetime(2023, 6, 9, 13, 0, tzinfo=UTC)
GARBLED = re.compile(
    r"\bthemself\b|\bthemselves\b|\b(\w+)'s (?:kids|friends|family) and \1\b"
    r"|\b\w+ is (?:sunk|been|spent)\b|\bhas been one\b|^\w+, you\b|the user's \w+ .*the user's"
)


def _facts(text: str, speaker: str, addressee: str | None) -> str:
    turns = [Message.user("How was your week?", name=addressee, seq=1, created_at=SAID)]
    turns = turns if addressee else []
    turns.append(Message.user(text, name=speaker, seq=2, created_at=SAID))
    out = ExtractiveExtractor(episodes=False).extract(turns, scope="agent:a", session_id="s")
    return " ".join(f.statement for f in out.facts if f.seq == 2)


CASES = [
    (
        "Caroline",
        "Melanie",
        "Thanks, Mel! I felt liberated and empowered doing it. Painting helps me explore my "
        "identity and be true to myself. It's definitely therapeutic.",
        "be true to who Caroline is",
    ),
    (
        "Gina",
        "Jon",
        "Thanks! Got the tattoo a few years ago, it stands for freedom - dancing without "
        "worrying what people think. A reminder to follow my passions and express myself.",
        "express Gina's feelings",
    ),
    (
        "Melanie",
        "Caroline",
        "Wow, Caroline! It really conveys unity and strength - such a gorgeous piece! My kids "
        "and I just finished another painting like our last one.",
        "Melanie and Melanie's kids just finished another painting like their last one.",
    ),
    (
        "Melanie",
        "Caroline",
        "Thanks, Caroline! These are for running. Been running longer since our last chat - "
        "a great way to destress and clear my mind.",
        "Melanie has been running longer - a great way to destress",
    ),
    (
        "Gina",
        "Jon",
        "Ha, yeah, Jon. I've been one 'cause I lost my job. I opened an online clothing store "
        "and it's been great!",
        "Gina lost Gina's job. Gina opened an online clothing store",
    ),
    (
        "Jon",
        "Gina",
        "Hey Gina! I'm turning my loves of dance into a business. I'm sunk tons of time into "
        "the studio lately.",
        "Jon has sunk tons of time into the studio lately.",
    ),
    (
        "Jon",
        None,
        "Gina, you won't believe it - I got mentored by this amazing business dude yesterday! "
        "It was really inspiring.",
        "Jon got mentored by this amazing business dude yesterday (2023-06-08)!",
    ),
    (
        "Ana",
        "Ben",
        "I pushed myself to finish the marathon in Porto. I finished it in four hours.",
        "Ana finished it in four hours.",
    ),
    (
        "Caroline",
        "Melanie",
        "Thanks, Melanie. This painting, 'Embracing Identity', is all about finding comfort and "
        "love in being yourself. My aim was to show warmth and self-acceptance.",
        "finding comfort and love in being oneself.",
    ),
    (
        "Ana",
        "Ben",
        "I built the garden shed myself last spring.",
        "Ana built the garden shed last spring.",
    ),
]


@pytest.mark.parametrize(("speaker", "addressee", "text", "expected"), CASES)
def test_a_judged_garbled_fact_reads_cleanly(
    speaker: str, addressee: str | None, text: str, expected: str
) -> None:
    fact = _facts(text, speaker, addressee)
    assert expected in fact
    assert not GARBLED.search(fact), fact


def test_a_users_possessive_is_their_once_the_user_is_named() -> None:
    out = third_person("The piece follows the cursor as I drag my piece to my square.", "the user")
    assert out == "The piece follows the cursor as the user drags their piece to their square."
    assert third_person("My board is blue. I like my board.", "the user") == (
        "The user's board is blue. The user likes their board."
    )


@given(
    name=st.sampled_from(["Gina", "Ana", "Jonas", "Melanie"]),
    opening=st.sampled_from(["{n}, you won't believe it", "Hey {n}!", "Hi {n}, ", "{n}, I"]),
)
def test_a_name_called_at_the_start_is_the_listener(name: str, opening: str) -> None:
    assert called(opening.format(n=name) + " I went to Porto.", "Zed") == name


@pytest.mark.parametrize(
    "text",
    ["Wow, you did it!", "Yeah, you know me.", "Sure, I can.", "Hey there!", "Porto is far."],
)
def test_a_word_that_is_no_name_is_never_the_listener(text: str) -> None:
    assert called(text, "Zed") is None


@pytest.mark.parametrize(
    "text",
    [
        "Time flies- feels like just yesterday I put this dress on!",
        "It seems like yesterday we moved here.",
        "I remember it like it was yesterday.",
        "I wasn't born yesterday.",
    ],
)
def test_a_time_word_in_a_figure_of_speech_gets_no_date(text: str) -> None:
    assert date_labels(text, SAID) == []


def test_tomorrow_and_yesterday_get_their_dates() -> None:
    assert date_labels("The official opening night is tomorrow.", SAID) == ["2023-06-10"]
    assert date_labels("I put this dress on yesterday.", SAID) == ["2023-06-08"]


def test_both_of_us_is_the_speaker_and_the_person_spoken_to() -> None:
    fact = _facts(
        "Nice, Gina! I'm happy that dance has such a special meaning to both of us.", "Jon", "Gina"
    )
    assert fact == "Jon is happy that dance has such a special meaning to Jon and Gina."


def test_me_before_i_is_never_the_name_twice() -> None:
    out = third_person("My family has been my rock, reminding me I'm not alone.", "Maria")
    assert out == "Maria's family has been Maria's rock, reminding Maria that Maria is not alone."


def test_judge_three_s_garbled_nearest_facts() -> None:
    """The final memory judge's three garbled rewrites among the facts shown beside the
    observations: "all of you" is the listener and others, "my life and I've" is two
    clauses, and an "us" before any "we" names the group instead of a "them" that points
    nowhere."""
    from threadline.memory.statements import third_person

    assert third_person("Feeling supported by all of you means so much.", "Jon", "Gina") == (
        "Feeling supported by Gina and others means so much."
    )
    said = third_person(
        "It's an important part of my life and I've made strong connections there.", "Caroline"
    )
    assert said == (
        "It's an important part of Caroline's life and Caroline has made strong connections there."
    )
    assert (
        third_person(
            "It reminds us that love is everywhere, even where we least expect it.", "Caroline"
        )
        == "It reminds Caroline and others that love is everywhere, even where they least "
        "expect it."
    )
    assert third_person("My kids and I just painted.", "Mel") == "Mel and Mel's kids just painted."
