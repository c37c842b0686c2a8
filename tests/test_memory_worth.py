"""What a person would write down of a conversation (issue 37, item 2): a fact is
concrete content, not a reaction, a truth about anyone, a caption or a pronoun pointing
nowhere; a mood statement goes only beside a concrete one, as its context."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.memory import ExtractiveExtractor
from threadline.memory.substance import MOOD_WORDS
from threadline.memory.worth import worth_a_fact
from threadline.messages import Message

QUESTION = "What's new with you?"


def facts_of(speaker: str, addressee: str, text: str) -> list[str]:
    out = ExtractiveExtractor(episodes=False).extract(
        [Message.user(QUESTION, name=addressee, seq=1), Message.user(text, name=speaker, seq=2)],
        scope="agent:a",
        session_id="s",
    )
    return [f.statement for f in out.facts if f.seq == 2]


def test_a_reaction_to_the_person_spoken_to_is_no_fact() -> None:
    assert facts_of("Melanie", "Caroline", "I'm in awe of your courage as a trans person.") == []
    assert facts_of("Gina", "Jon", "You're incredibly talented and passionate about dance!") == []
    assert facts_of("Jon", "Gina", "Thanks! Your words mean a lot. You're right.") == []


def test_a_truth_about_anyone_is_no_fact() -> None:
    assert facts_of("Caroline", "Melanie", "Life's too short to do anything else!") == []
    kids = "Kids are amazingly resilient in tough situations."
    assert facts_of("Caroline", "Melanie", kids) == []
    assert facts_of("Melanie", "Caroline", "Pets sure do bring so much joy to us!") == []


def test_a_caption_or_a_pronoun_pointing_nowhere_is_no_fact() -> None:
    assert facts_of("Melanie", "Caroline", "Here's a pic of my family camping at the beach.") == []
    assert facts_of("Melanie", "Caroline", "They're my biggest motivation and support.") == []
    assert facts_of("Jon", "Gina", "It helps me keep track of ideas and milestones.") == []


def test_concrete_content_is_a_fact_even_in_a_short_turn() -> None:
    (trip,) = facts_of("John", "Maria", "Just got back from a family road trip yesterday!")
    assert trip.startswith("John just got back from a family road trip")
    assert facts_of("John", "Tim", "I was in Chicago, it was awesome!") == [
        "John was in Chicago, it was awesome!"
    ]
    store = "I started my own online clothing store not so long ago - pretty cool, huh?"
    assert facts_of("Gina", "Jon", store) == [
        "Gina started Gina's own online clothing store not so long ago!"
    ]
    assert facts_of("Tim", "John", "I will always love reading, personally.") == [
        "Tim will always love reading, personally."
    ]


def test_a_mood_goes_beside_the_concrete_statement_and_filler_goes() -> None:
    (fact,) = facts_of(
        "Caroline",
        "Melanie",
        "Hey Mel! Long time no talk! I went to a pride parade last Friday. It made me feel so "
        "accepted.",
    )
    assert fact.startswith("Caroline went to a pride parade last Friday")
    assert fact.endswith("It made Caroline feel so accepted.")
    assert "time no talk" not in fact


def test_a_tag_question_or_an_offer_to_show_is_no_question() -> None:
    (fact,) = facts_of(
        "Melanie", "Caroline", "FYI, I finished another pottery project - want to see a pic?"
    )
    assert fact == "Melanie finished another pottery project!"


_MOOD = sorted(w for w in MOOD_WORDS if w.isalpha())


@given(st.lists(st.sampled_from(_MOOD), min_size=1, max_size=8))
def test_words_of_mood_alone_are_never_worth_a_fact(words: list[str]) -> None:
    assert not worth_a_fact("I " + " ".join(words) + ".", True, ("Ana", "Bo"))


@given(
    st.text(alphabet=st.characters(categories=("Ll", "Zs")), min_size=1, max_size=60),
    st.booleans(),
)
def test_a_time_said_never_makes_a_statement_less_worth_a_fact(
    text: str, first_person: bool
) -> None:
    if worth_a_fact(text, first_person):
        assert worth_a_fact(f"{text} last Friday", first_person)
