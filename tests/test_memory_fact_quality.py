"""Fact quality as an independent judge read it (issue 37, second sample, seed 37).

Each case is a LoCoMo turn as said (``bench/memory_judge_sample.py``, conv-26 and
conv-30), who said it to whom, and what its facts must hold or must not: the concrete
event kept and the mood alone dropped; no person rewritten into a garbled phrase
("Jon and others have put Jon and others' hearts", "people who back Melanie",
"refreshing for Caroline's soul"); advice, cheer and thanks no fact at all."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.memory import ExtractiveExtractor
from threadline.memory.instructions import clauses
from threadline.memory.persons import rewritable
from threadline.memory.statements import third_person
from threadline.memory.substance import concrete, with_subject
from threadline.messages import Message


def facts_of(speaker: str, addressee: str, text: str) -> list[str]:
    out = ExtractiveExtractor(episodes=False).extract(
        [
            Message.user("How was your week?", name=addressee, seq=1),
            Message.user(text, name=speaker, seq=2),
        ],
        scope="agent:a",
        session_id="s",
    )
    return [f.statement for f in out.facts if f.seq == 2]


def garbled(fact: str, speaker: str) -> bool:
    """A group named twice, or an "X and others'" possessive: what the judge marked G."""
    group = f"{speaker} and others"
    return fact.count(group) > 1 or f"{group}'" in fact


# -- splitting keeps the event, drops the mood --------------------------------------


def test_the_event_is_kept_and_the_mood_after_it_is_never_a_fact_alone() -> None:
    """F17: "Really made Melanie think about taking care of Melanie and others' minds"
    was a fact; the charity race it was about was not in it."""
    facts = facts_of(
        "Melanie",
        "Caroline",
        "Hey Caroline, since we last chatted, I've had a lot of things happening to me. I ran "
        "a charity race for mental health last Saturday – it was really rewarding. Really "
        "made me think about taking care of our minds.",
    )
    assert any("Melanie ran a charity race for mental health last Saturday" in f for f in facts)
    assert not any(f.startswith(("Really made", "It really made")) for f in facts)
    assert not any("and others" in f for f in facts)  # "since we last chatted": no group


def test_a_named_thing_is_kept_with_its_person_rewritten_once() -> None:
    """F11: the Perseid meteor shower sentence was dropped and "Melanie and others all
    made wishes" kept."""
    facts = facts_of(
        "Melanie",
        "Caroline",
        "I'll always remember our camping trip last year when we saw the Perseid meteor "
        "shower. It was so amazing lying there and watching the sky light up with streaks of "
        "light. We all made wishes and felt so at one with the universe. That's a memory I'll "
        "never forget.",
    )
    assert any("saw the Perseid meteor shower" in f for f in facts)
    assert not any(garbled(f, "Melanie") for f in facts)


def test_a_pride_parade_is_kept_and_a_we_of_everyone_is_dropped() -> None:
    """F55: "Caroline and others are not alone in this fight" was kept, the parade not."""
    facts = facts_of(
        "Caroline",
        "Melanie",
        "Last weekend our city held a pride parade! So many people marched through the "
        "streets waving flags, holding signs and celebrating love and diversity. I missed it "
        "but it was a powerful reminder that we are not alone in this fight for equality and "
        "inclusivity. Change is possible!",
    )
    assert any("Caroline's city held a pride parade" in f for f in facts)
    assert not any("and others" in f for f in facts)


@pytest.mark.parametrize(
    ("speaker", "addressee", "text"),
    [
        # F4: pride in the listener and an imperative with a "you"
        ("Gina", "Jon", "I'm always proud of you. Enjoy the good feels tomorrow, you earned it!"),
        # F31: cheer and a "we" of everyone
        (
            "Caroline",
            "Melanie",
            "Yeah Mel, let's spread love and understanding! Thanks for the support and "
            "encouragement. We can tackle life's challenges together! We got this!",
        ),
        # F57: advice
        (
            "Gina",
            "Jon",
            "Believe in yourself, Jon! The process may be tough, but you got this. Push through "
            "and it'll be worth it. Don't forget to take breaks and dance it out when you need "
            "to destress!",
        ),
        # F51: praise and a generic "yourself"
        (
            "Caroline",
            "Melanie",
            "That's great, Mel! Taking time for yourself is so important. You're doing an "
            "awesome job looking after yourself and your family!",
        ),
        # F47: a fragment of cheer
        (
            "Gina",
            "Jon",
            "Yeah Jon, I'm here for you! Chasing our dreams and helping each other out. Let's "
            "keep movin' forward!",
        ),
    ],
)
def test_encouragement_advice_and_reactions_are_no_fact(
    speaker: str, addressee: str, text: str
) -> None:
    assert facts_of(speaker, addressee, text) == []


# -- the person rewriting: resolved, said of anyone, or dropped --------------------


def test_a_we_is_never_named_twice() -> None:
    """F43: "Jon and others have put Jon and others' hearts into Jon's dreams and Jon is
    sure Jon and others will make it"."""
    facts = facts_of(
        "Jon",
        "Gina",
        "Thanks! Your words mean a lot. I'm staying positive and rehearsing for the festival "
        "in June. We've put our hearts into our dreams and I'm sure we'll make it.",
    )
    assert "Jon is staying positive and rehearsing for the festival in June." in " ".join(facts)
    assert not any(garbled(f, "Jon") or "Jon's dreams" in f for f in facts)


@pytest.mark.parametrize(
    ("speaker", "addressee", "text", "wrong"),
    [
        # F14: "Having people who back Melanie makes such a huge difference"
        (
            "Caroline",
            "Melanie",
            "Yeah, it's true! Having people who back you makes such a huge difference. It's "
            "great to see how far LGBTQ rights have come, but there's still plenty of progress "
            "to be made. I wanna help make a difference.",
            "back Melanie",
        ),
        # F41: "Nature can be so refreshing for Caroline's soul"
        (
            "Melanie",
            "Caroline",
            "Hey Caroline! It's so good to hear from you! That pic is so beautiful, the colors "
            "really pop. Biking sounds like a great way to get out in nature. We went camping "
            "with the kids a few weeks ago, had a blast exploring the forest and hiking. Nature "
            "can be so refreshing for your soul. Any plans coming up?",
            "Caroline's soul",
        ),
        # F52: "a way to really connect with who Caroline is"
        (
            "Melanie",
            "Caroline",
            "Wow, Caroline, that's so cool! Art can be so healing and a way to really connect "
            "with who you are. We're all individual and wonderfully imperfect.",
            "who Caroline is",
        ),
    ],
)
def test_a_generic_you_is_never_the_person_spoken_to(
    speaker: str, addressee: str, text: str, wrong: str
) -> None:
    facts = facts_of(speaker, addressee, text)
    assert not any(wrong in f for f in facts)
    assert not any(garbled(f, speaker) or f"{speaker} and others are all" in f for f in facts)


def test_a_we_of_everyone_is_dropped_or_said_of_anyone() -> None:
    """F7: "moments like these remind Caroline and others how important Caroline's loved
    ones are"; F2: "the ones Caroline and others choose"."""
    loved = facts_of(
        "Caroline",
        "Melanie",
        "Glad your son is okay, Melanie. Life's unpredictable, but moments like these remind "
        "us how important our loved ones are. Family's everything.",
    )
    chosen = facts_of(
        "Caroline",
        "Melanie",
        "Thanks so much, Melanie! It's beautiful! It really brings home how much love's in "
        "families - both blood and the ones we choose. I hope to build my own family and put "
        "a roof over kids who haven't had that before.",
    )
    for fact in loved + chosen:
        assert "Caroline and others" not in fact and "Caroline's loved ones" not in fact
    assert any("Caroline hopes to build Caroline's own family" in f for f in chosen)


def test_a_we_that_did_something_is_the_speaker_and_others() -> None:
    (fact,) = facts_of(
        "Melanie",
        "Caroline",
        "We went camping with the kids at Lake Tahoe last month.",
    )
    assert fact.startswith("Melanie and others went camping with the kids at Lake Tahoe")


def test_a_fragment_gets_its_subject_back() -> None:
    """F3: "Just creating an experience that'll make 'em wanna come back." had no
    subject; a leading verb of feeling points back and joins the sentence before it."""
    assert with_subject("Just creating an experience that'll make 'em wanna come back.") == (
        "I'm just creating an experience that'll make 'em wanna come back.",
        False,
    )
    assert with_subject("Gonna continue my edu and check out career options.")[0] == (
        "I'm gonna continue my edu and check out career options."
    )
    assert with_subject("Really made me think about it.") == (
        "It really made me think about it.",
        True,
    )
    assert with_subject("Dancing lets us be ourselves.") == ("Dancing lets us be ourselves.", False)
    assert with_subject("Love the colors and the sunset vibe.") == ("", False)


def test_concrete_content_is_a_name_a_number_a_time_or_things() -> None:
    assert concrete("I ran a charity race for mental health last Saturday")
    assert concrete('"Brave" by Sara Bareilles has a lot of significance for me')
    assert concrete("My daughter turned 7")
    assert not concrete("Really made me think about taking care of our minds")
    assert not concrete("I'm so proud of you, it means a lot", names=("Gina", "Jon"))


GENERIC = [
    "Nature can be so refreshing for your soul.",
    "Having people who back you makes such a huge difference.",
    "Taking time for yourself is so important.",
    "It's important to be kind to yourself when you feel down.",
    "Moments like these remind us how important our loved ones are.",
    "We can tackle life's challenges together!",
    "Push through and it'll be worth it.",
    "Don't forget to take breaks when you need to destress.",
    "It's in these vulnerable moments that we bond and understand each other.",
    "You could also collaborate with local influencers.",
]
CONCRETE = [
    "I adopted a beagle named Max in March.",
    "My sister moved to Porto last year.",
    "We went hiking on Mount Tam yesterday.",
    "I'm starting a pottery class at the community center next week.",
]


@settings(max_examples=60, deadline=None)
@given(
    sentences=st.lists(st.sampled_from(GENERIC + CONCRETE), min_size=1, max_size=6),
    names=st.sampled_from([("Ana", "Ben"), ("Gina", "Jon"), ("Caroline", "Melanie")]),
)
def test_no_generic_person_is_ever_mapped_to_someone(
    sentences: list[str], names: tuple[str, str]
) -> None:
    """Whatever a turn mixes, a "you" or "we" of anyone never becomes the person spoken
    to or "X and others", and a group is named at most once per fact."""
    speaker, addressee = names
    facts = facts_of(speaker, addressee, " ".join(sentences))
    for fact in facts:
        assert addressee not in fact
        assert not garbled(fact, speaker)
        assert not re.search(rf"\b{speaker} and others (?:can|are all|bond)\b", fact)


def test_rewritable_drops_only_the_clause_it_cannot_rewrite() -> None:
    assert rewritable(
        "I missed it but it was a reminder that we are not alone in this fight.", True, "Ana"
    ) == ("I missed it.")
    assert rewritable("Enjoy the good feels tomorrow, you earned it!", True, "Ana") == ""
    assert rewritable("Check out these kids I met at the shelter!", True, "Ana") == (
        "Check out these kids I met at the shelter!"
    )


# -- coding facts: a subject, a true statement ---------------------------------------


def test_a_list_items_later_pieces_take_its_name_as_their_subject() -> None:
    """ "Imports helpers from rules.js." and "Imports state.js (and piece mapping)." were
    facts with no subject (rtchess #352)."""
    turn = (
        "Give more details about this proposal again:\n"
        "- rules.js: Pure game logic (state shape, initial board, move generation).\n"
        "- ai.js: Evaluation + minimax/findBestMove; imports helpers from rules.js.\n"
        "- state.js: Game/session state container and mutators (reset/new game, playMove); "
        "calls into rules.js/ai.js but no DOM work.\n"
        "- ui.js: All DOM rendering/wiring: board drawing with highlights/drag handling. "
        "Imports state.js (and piece mapping)."
    )
    said = [c.text for c in clauses(turn)]
    assert "ai.js imports helpers from rules.js." in said
    assert "state.js calls into rules.js/ai.js but no DOM work." in said
    assert "ui.js imports state.js (and piece mapping)." in said
    assert not any(c.startswith(("Imports", "Calls", "imports")) for c in said)


def test_a_fragment_with_no_subject_to_give_is_no_fact() -> None:
    """ "Controlled by a single player." (rtchess #467)."""
    said = [c.text for c in clauses("Update the readme. For now controlled by a single player.")]
    assert not any("ontrolled" in c for c in said)
    assert [c.text for c in clauses("Tests pass on CI only with the flag.")] == [
        "Tests pass on CI only with the flag."
    ]


def test_a_one_off_request_joined_to_a_spec_is_cut_off() -> None:
    """ "The board is even and have another go at the piece design" (rtchess #108) read
    as a statement that is false."""
    said = [
        c.text
        for c in clauses(
            "Let's make sure the board is even and have another go at the piece design "
            "(they look wierd currently)"
        )
    ]
    assert said == ["The board is even."]
    kept = [c.text for c in clauses("Finalize the existing session and create a new one.")]
    assert kept == ["Finalize the existing session and create a new one."]


def test_a_parenthesis_cut_in_two_is_not_left_open() -> None:
    """ "The old normal mode is no longer specified)." (rtchess #557)."""
    said = [
        c.text
        for c in clauses(
            "Make the lightweight mode the only mode (you don't specify -l and it always does "
            "it. The old normal mode is no longer specified). Also remove the -o option."
        )
    ]
    assert all(c.count("(") == c.count(")") for c in said)
    assert "Make the lightweight mode the only mode." in said


def test_a_hyphenated_verb_agrees_whole_and_a_listeners_thing_stays_theirs() -> None:
    """Second sample: "Jon colors-code achievements"; "getting one's dance studio
    noticed" where the studio was Jon's ("is key" is no sign of a generic "you")."""
    assert facts_of(
        "Jon", "Gina", "I color-code achievements so I can easily track my progress."
    ) == ["Jon color-codes achievements so Jon can easily track Jon's progress."]
    (fact,) = facts_of(
        "Gina",
        "Jon",
        "Yeah Jon, marketing is key for getting your dance studio noticed on Instagram.",
    )
    assert "Jon's dance studio" in fact


def test_an_object_you_takes_no_verb_ending_and_an_offer_stays_addressed() -> None:
    """From the second sample's observations: "bring Melanie joys" ("bring you joy"),
    "Gina could help one with making content ... if one wants" (an offer to Jon),
    "Jon and others haven't talked in a few days" (the conversation itself)."""
    assert third_person("Art is helping you bring you joy!", "Caroline", "Melanie") == (
        "Art is helping Melanie bring Melanie joy!"
    )
    assert third_person("I know you love pottery.", "Caroline", "Melanie") == (
        "Caroline knows Melanie loves pottery."
    )
    offer = facts_of(
        "Gina",
        "Jon",
        "I could help you with making content or even managing your accounts if you want.",
    )
    assert offer == [
        "Gina could help Jon with making content or even managing Jon's accounts if Jon wants."
    ]
    talked = facts_of(
        "Jon",
        "Gina",
        "We haven't talked in a few days. Been rehearsing hard and working on business plans.",
    )
    assert talked == ["Jon has been rehearsing hard and working on business plans."]
