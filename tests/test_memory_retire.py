"""Supersession by meaning in a coding session (issue 37, point 3): a negation or an
"only" retires the earlier clause it contradicts, a shared word alone never does, and a
change taken back is said as taken back, not as its opposite."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import WORDS
from tests.test_memory_coding import _current
from threadline.memory.retire import exclusive, negated


def test_saying_there_is_none_retires_the_clause_that_said_it() -> None:
    facts = _current(
        "There is only one mode where you play against the computer.",
        "ai.js: Evaluation and minimax search for the opponent.",
        "Make it so the user can drag and drop the pieces to move them.",
        "For now, make it so there is no AI, but all pieces are controlled by the user.",
    )
    assert "There is only one mode where you play against the computer." not in facts
    assert "There is no AI, but all pieces are controlled by the user." in facts
    assert "ai.js: Evaluation and minimax search for the opponent." in facts  # a file's name
    assert "The user can drag and drop the pieces to move them." in facts  # "drop" is no denial


def test_no_concept_of_a_thing_retires_the_clause_it_is_most_of() -> None:
    facts = _current(
        "rules.js: Pure game logic (state shape, move generation, check detection).",
        "Let's have a red highlight when a king is in check.",
        "Change the rule such that the game is lost when the king is captured. There is also "
        'no concept of "check".',
    )
    assert "Have a red highlight when a king is in check." not in facts
    assert any(f.startswith("rules.js: Pure game logic") for f in facts)


def test_only_in_a_go_back_turn_reverts_the_changes_it_rules_out() -> None:
    facts = _current(
        "Make sure the script also creates a log.txt next to it.",
        "Remove the -o option and always write to prompt_history.md.",
        "Make it so the script first writes exported-session.jsonl, and then reads it.",
        "The script didn't write it. Make it so the script generates exported-session.jsonl "
        "in the current working directory.",
        "I want that file to be generated when running the script.",
        "Let's go back to the version where export_development_history.py reads from an "
        "existing exported-session.jsonl file. Make it so the script "
        "export_development_history.py is minimal and only writes the prompt_history.md file.",
    )
    assert "Remove the -o option and always write to prompt_history.md." in facts  # same file
    said = [f for f in facts if not f.startswith("Reverted")]
    stale = ("first writes", "generates", "wants", "log.txt")
    assert not any(s in f for f in said for s in stale)
    assert (
        "Reverted at the user's request: the change for \"The script also creates a log.txt "
        'next to it".'
    ) in facts  # the change taken back, not its opposite


def test_only_outside_a_go_back_turn_takes_one_chain_and_says_nothing_reverted() -> None:
    facts = _current(
        "Make it so the script writes exported-session.jsonl in the working directory.",
        "export_development_history.py only writes prompt_history.md.",
    )
    assert facts == ["export_development_history.py only writes prompt_history.md."]


_PLAIN = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


@given(new=_PLAIN, earlier=st.lists(_PLAIN, max_size=6))
def test_a_clause_that_denies_nothing_retires_nothing(new: str, earlier: list[str]) -> None:
    """Whatever words two clauses share, no negation and no "only": nothing is retired."""
    pairs = [(e, f"slot {i}") for i, e in enumerate(earlier)]
    if any(w in new.split() for w in ("no", "without", "remove", "only", "more")):
        return
    assert negated(new, pairs, set()) is None
    assert exclusive(new, pairs, set()) == []


@given(thing=st.sampled_from(WORDS), earlier=st.lists(_PLAIN, max_size=6))
def test_what_is_retired_said_what_is_denied(thing: str, earlier: list[str]) -> None:
    pairs = [(e, f"slot {i}") for i, e in enumerate(earlier)]
    slot = negated(f"There is no {thing}.", pairs, set())
    if slot is not None:
        said = dict((s, e) for e, s in pairs)[slot]
        from threadline.memory.retire import canonical

        assert canonical(thing) <= canonical(said)


def test_describing_a_thing_anew_replaces_the_whole_run_of_revisions_and_no_more() -> None:
    facts = _current(
        "Let's have a red highlight when a king is in check.",
        "try again",
        "The highlight for a piece that can be taken has its corners highlighted in green.",
        "That's almost right. But the highlight for the piece that can be taken should only "
        "have a quarter-circle in each corner.",
        "That's almost right. I just want to invert the slope of each circle in the corners.",
        "Let me describe the highlight for the taken piece differently: you draw a circle "
        "around the piece. Then you fill the space between the circle and the square in green.",
    )
    assert facts == [
        "Have a red highlight when a king is in check.",
        "You draw a circle around the piece.",
        "You fill the space between the circle and the square in green.",
    ]


_INSTRUCTIONS = st.sampled_from(
    [
        "Make the green dot for viable locations 30% bigger.",
        "The cooldown should start at the top, not the left.",
        "Put the plans in the /specs folder.",
        "There is no AI, all pieces are controlled by the user.",
        "Don't commit until the final step.",
        "export_development_history.py only writes prompt_history.md.",
        "The script writes exported-session.jsonl in the working directory.",
    ]
)


@given(turns=st.lists(_INSTRUCTIONS, min_size=1, max_size=5), how=st.sampled_from(["undo", "back"]))
def test_what_is_undone_is_never_current_and_is_said_as_a_change_taken_back(
    turns: list[str], how: str
) -> None:
    last = turns[-1].rstrip(".")
    undo = "undo the last change" if how == "undo" else "go back to the version before that"
    facts = _current(*turns, undo)
    assert not any(f.rstrip(".").endswith(last[1:]) and not f.startswith("Reverted") for f in facts)
    for f in facts:
        if f.startswith("Reverted"):
            assert f.startswith("Reverted at the user's request: the change for \"")
