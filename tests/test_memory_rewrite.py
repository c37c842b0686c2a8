"""The person rewriting (issue 37): the garbled facts the issue found, and their kin.

Each case is a turn as said, who said it to whom, and the fact it must become; none
may come out garbled ("Andrew twoes", "James`m", "mentionings", "the assistant plays")
or framed as "X said ..." (the fact's subject and source already say who)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.memory import ExtractiveExtractor, is_signal
from threadline.memory.base import Fact
from threadline.memory.statements import third_person
from threadline.messages import Message

QUESTION = "How was your week?"
CASES = [
    # generic "you": anyone could hear them, not the person spoken to ("one")
    (
        "Audrey",
        "Andrew",
        "We walked to the lake with the dogs on Sunday. The breeze was nice and you could "
        "hear birds chirping.",
        "Audrey and others walked to the lake with the dogs on Sunday. The breeze was nice "
        "and one could hear birds chirping.",
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
    # an adverb between "I" and the verb is no verb; a vocative name is not said twice
    (
        "Jon",
        "Gina",
        "I already started doing the social media plan and posted some of my dance videos.",
        "Jon already started doing the social media plan and posted some of Jon's dance videos.",
    ),
    (
        "Melanie",
        "Caroline",
        "That must have been tough for you, Caroline. I know the adoption process takes months.",
        "Melanie knows the adoption process takes months.",  # the reaction is no fact
    ),
    (
        "Gina",
        "Jon",
        "Jon, you must be so excited about opening the dance studio downtown on Friday!",
        "Jon must be so excited about opening the dance studio downtown on Friday!",
    ),
    # found in the judge sample: "need" is no past form, "help you reach" takes no
    # conjugation, "I wanna" is "wants to", "our lives" is not one person's
    (
        "Melanie",
        "Caroline",
        "After the accident, I've thought a lot about how much I need my family.",
        "After the accident, Melanie has thought a lot about how much Melanie needs Melanie's "
        "family.",
    ),
    (
        "Gina",
        "Jon",
        "Instagram and TikTok can help you reach a younger crowd for the studio.",
        "Instagram and TikTok can help Jon reach a younger crowd for the studio.",
    ),
    (
        "Caroline",
        "Melanie",
        "I wanna help make a difference for trans youth in the city.",
        "Caroline wants to help make a difference for trans youth in the city.",
    ),
    (
        "Caroline",
        "Melanie",
        "I made a stained glass window for the church in May. It shows time changing our lives.",
        "Caroline made a stained glass window for the church in May.",  # "our lives": anyone's
    ),
    # "makes you feel": generic again
    (
        "Nate",
        "Joanna",
        "Hiking up Mount Tam at sunrise makes you feel alive and calm.",
        "Hiking up Mount Tam at sunrise makes one feel alive and calm.",
    ),
]
GARBLED = re.compile(
    r"\b(\w+), \1\b|alreadies|twoes|\w[`´‘ʼ]m\b|\w+ings\b|\bsaid\b|wannas|lookses"
    r"|\b(?:Melanie|Jon) need\b|help \w+ reaches"
    r"|the assistant (?:play|plays)|\b\w+ guyses\b"
)


def _facts(speaker: str, addressee: str, text: str) -> list[Fact]:
    """The facts of ``text``, said by ``speaker`` in answer to ``addressee`` asking
    ``QUESTION``."""
    out = ExtractiveExtractor(episodes=False).extract(
        [Message.user(QUESTION, name=addressee, seq=1), Message.user(text, name=speaker, seq=2)],
        scope="agent:a",
        session_id="s",
    )
    return out.facts


def _fact_of(speaker: str, addressee: str, text: str) -> str:
    return " ".join(f.statement for f in _facts(speaker, addressee, text) if f.seq == 2)


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


def test_harness_text_is_never_a_fact() -> None:
    caveat = (
        "Caveat: The messages below were generated by the user while running local commands. "
        "DO NOT respond to these messages or otherwise consider them in your response unless "
        "the user explicitly asks you to."
    )
    harness = [
        caveat,
        "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
        "<command-args></command-args>",
        "<local-command-stdout>Set model to Opus 4 for the NEW project</local-command-stdout>",
    ]
    messages = [Message.user(text, seq=i) for i, text in enumerate(harness, start=1)]
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    assert out.facts == [] and out.episodes == [] and out.entities == []
    assert not any(is_signal(m) for m in messages)
    person = Message.user("Always put the plans in /specs and never commit before the final step.")
    assert is_signal(person)


def test_a_word_in_capitals_is_no_entity_but_names_and_paths_are() -> None:
    from threadline.memory.extract import find_entities

    found = dict(find_entities("A NEW task with HIGH priority: Priya Raman edits src/app/main.py."))
    assert "NEW" not in found and "HIGH" not in found
    assert {"Priya Raman", "src/app/main.py"} <= set(found)


def test_a_long_turn_becomes_short_facts_without_its_commentary() -> None:
    """Distil, do not restate (issue 37, point 2): statements of one turn share a fact up
    to about 30 words; a rating with nothing of the speaker's in it is no fact."""
    text = (
        "Yeah, I have a few plans. I'm thinking of working with some fashion bloggers and "
        "influencers in the next few months to get more attention for my store. Plus, I'm "
        "going to do more ads so I can reach more people. I'm really focused on building my "
        "customer base and making my store a top destination for fashion fans. It's awesome "
        "to see it all coming together! You, Jon? What do you have going for your dance studio?"
    )
    facts = _facts("Gina", "Jon", text)
    assert [f.statement for f in facts] == [
        "Gina is thinking of working with some fashion bloggers and influencers in the next few "
        "months to get more attention for Gina's store. Plus, Gina is going to do more ads so "
        "Gina can reach more people.",
        "Gina is really focused on building Gina's customer base and making Gina's store a top "
        "destination for fashion fans.",
    ]
    assert all(f.subject == "Gina" for f in facts)


def test_a_rating_or_a_cheer_is_no_fact_but_what_was_done_is() -> None:
    turn = (
        "That bowl is gorgeous! Let's keep going and chase your dreams! "
        "I glazed it in my studio in Lisbon."
    )
    facts = _facts("Gina", "Jon", turn)
    assert [f.statement for f in facts] == ["Gina glazed it in Gina's studio in Lisbon."]


def test_a_pronoun_that_points_at_an_earlier_turn_is_no_fact() -> None:
    """Issue 37: "He loves checking out new hiking trails", where he is the dog of the
    turn before: out of context the fact names no one, so it is left out."""
    turn = "He loves checking out new hiking trails. I take him to the lake every Sunday morning."
    out = ExtractiveExtractor(episodes=False).extract(
        [
            Message.user("How is your dog Max doing?", name="Andrew", seq=1),
            Message.user(turn, name="Audrey", seq=2),
        ],
        scope="agent:a",
        session_id="s",
    )
    assert [f.statement for f in out.facts] == [
        "Audrey takes him to the lake every Sunday morning."
    ]
