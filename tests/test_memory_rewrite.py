"""The person rewriting (issue 37): the garbled facts the issue found, and their kin.

Each case is a turn as said, who said it to whom, and the fact it must become; none
may come out garbled ("Andrew twoes", "James`m", "mentionings", "the assistant plays")
or framed as "X said ..." (the fact's subject and source already say who)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.memory import ExtractiveExtractor
from threadline.memory.statements import third_person
from threadline.messages import Message

QUESTION = "How was your week?"
CASES = [
    # generic "you": anyone could hear them, not the person spoken to
    (
        "Audrey",
        "Andrew",
        "We walked to the lake with the dogs on Sunday. The breeze was nice and you could "
        "hear birds chirping.",
        "Audrey and others walked to the lake with the dogs on Sunday. The breeze was nice "
        "and you could hear birds chirping.",
    ),
    # "you two" is the person spoken to and someone else
    (
        "Andrew",
        "Audrey",
        "I love the garden you two are creating for the dogs.",
        "Andrew loves the garden Audrey and others are creating for the dogs.",
    ),
    # a contraction typed with a backtick, a typographic and a plain apostrophe
    (
        "James",
        "John",
        "I`m lucky to have my job at the bakery.",
        "James is lucky to have James's job at the bakery.",
    ),
    (
        "James",
        "John",
        "I’ve been painting landscapes since 2019.",
        "James has been painting landscapes since 2019.",
    ),
    (
        "James",
        "John",
        "I'll start the pottery class at the community center downtown in May.",
        "James will start the pottery class at the community center downtown in May.",
    ),
    # an "-ing" form after "you" is no verb to conjugate
    (
        "Audrey",
        "Andrew",
        "I remember you mentioning the trail near the old mill.",
        "Audrey remembers Andrew mentioning the trail near the old mill.",
    ),
    # no "X said" framing for a statement about something else
    (
        "Tom",
        "Ana",
        "The new bakery on Main Street opens on Friday at eight.",
        "The new bakery on Main Street opens on Friday at eight.",
    ),
    # "you both" and "you guys" like "you two"
    (
        "Maria",
        "Gina",
        "I think you both deserve the trip to Lisbon after running the Boston marathon.",
        "Maria thinks Gina and others deserve the trip to Lisbon after running the Boston "
        "marathon.",
    ),
    # "makes you feel": generic again
    (
        "Nate",
        "Joanna",
        "Hiking up Mount Tam at sunrise makes you feel alive and calm.",
        "Hiking up Mount Tam at sunrise makes you feel alive and calm.",
    ),
]
GARBLED = re.compile(
    r"twoes|\w[`´‘ʼ]m\b|\w+ings\b|\bsaid\b|the assistant (?:play|plays)|\b\w+ guyses\b"
)


def _fact_of(speaker: str, addressee: str, text: str) -> str:
    out = ExtractiveExtractor(episodes=False).extract(
        [Message.user(QUESTION, name=addressee, seq=1), Message.user(text, name=speaker, seq=2)],
        scope="agent:a",
        session_id="s",
    )
    return " ".join(f.statement for f in out.facts if f.seq == 2)


@pytest.mark.parametrize(("speaker", "addressee", "text", "expected"), CASES)
def test_a_person_is_rewritten_without_garbling(
    speaker: str, addressee: str, text: str, expected: str
) -> None:
    fact = _fact_of(speaker, addressee, text)
    assert fact == expected
    assert not GARBLED.search(fact)


def test_you_in_a_users_instruction_is_never_the_assistant() -> None:
    spec = "Build a chess game where you play against the computer, with an undo button."
    out = ExtractiveExtractor(episodes=False).extract(
        [Message.user(spec, seq=1)], scope="agent:a", session_id="s"
    )
    assert [f.statement for f in out.facts] == [spec]
    assert third_person("You always run the linter first", "the user") == (
        "You always run the linter first"
    )


@given(
    apostrophe=st.sampled_from(["'", "’", "`", "´", "‘", "ʼ"]),
    ending=st.sampled_from([("m", "is"), ("ve", "has"), ("ll", "will"), ("d", "would")]),
)
def test_a_contraction_with_any_apostrophe_becomes_the_full_verb(
    apostrophe: str, ending: tuple[str, str]
) -> None:
    clitic, verb = ending
    out = third_person(f"I{apostrophe}{clitic} keen on Lisbon", "Ana")
    assert out == f"Ana {verb} keen on Lisbon"
