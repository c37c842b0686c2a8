"""Standing requirements (issue 31): a long run's spec kept request by request, a later
request replacing an earlier one only when it says so, a bare undo taking one back."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, imported, section, store
from threadline.compaction.progress import Segment
from threadline.compaction.standing import clause, requirement_lines, requirements
from threadline.store.protocol import Store

__all__ = ["store"]  # the fixture


def asked(*titles: str) -> list[Segment]:
    return [Segment("", t, "request", 10 * (i + 1)) for i, t in enumerate(titles)]


def test_a_refinement_adds_and_an_instead_replaces() -> None:
    held = requirements(
        asked(
            "Make the cooldown ring turn counter-clockwise around each piece",
            "Make the capture highlight a ring of four corner arcs",
            "Make the capture highlight ring stay on while dragging a piece",
            "The cooldown ring should turn clockwise instead, around each piece",
        )
    )
    texts = [t for _, t in held]
    assert not any("counter-clockwise" in t for t in texts)  # replaced: "instead"
    assert any("four corner arcs" in t for t in texts)  # refined, still holds
    assert any("stay on while dragging" in t for t in texts)
    assert any("clockwise instead" in t for t in texts)


def test_a_bare_undo_takes_back_the_request_before_it() -> None:
    held = requirements(
        asked(
            "Use piece images downloaded from the lichess cburnett set",
            "Make the dark square highlight fade on hover",
            "undo the last change, it broke the highlight",
        )
    )
    assert [s for s, _ in held] == [10]


def test_a_bug_report_or_a_question_is_no_requirement() -> None:
    held = requirements(
        asked("When I run the export script the responses look empty", "which file holds x?")
    )
    assert held == []


@given(
    st.lists(
        st.sampled_from(
            [
                "Make the board squares 64px wide",
                "undo the last change",
                "Use a darker green for the board squares instead",
                "Add a premove queue for pieces in cooldown",
            ]
        ),
        max_size=8,
    ),
    st.integers(min_value=0, max_value=300),
)
def test_lines_stay_within_budget_and_name_only_requests_asked(
    titles: list[str], budget: int
) -> None:
    segs = asked(*titles)
    lines = requirement_lines(segs, budget=budget, skip=set())
    assert sum(len(line.split()) for line in lines) <= budget
    starts = {s.start for s in segs}
    assert all(int(line.split("#")[1].split(")")[0]) in starts for line in lines)


def test_a_pasted_example_is_no_requirement() -> None:
    text = (
        "When I run the export the responses are missing. Eg: Prompt #1: I want to make a "
        "board game. Response: [none]"
    )
    assert clause(text) is None
    assert clause("Nothing happens on new game. It should start a new game.") == (
        "It should start a new game."
    )


def test_answers_to_the_agents_questions_detail_a_request_and_replace_nothing() -> None:
    held = requirements(
        asked(
            "Now add pre-moves: a piece in cooldown can be pre-moved with a green arrow",
            "1: a pre-moved piece whose square becomes occupied takes it instead 2: cancel",
            "When a king is in check, that player can still move their other pieces",
        )
    )
    assert [s for s, _ in held] == [10, 20, 30]


def test_a_request_answered_with_details_keeps_what_was_asked() -> None:
    from threadline.compaction.progress import Progress

    p = Progress()
    p.request(1, "Now add pre-moves: pieces in cooldown can be pre-moved, shown by a green arrow.")
    p.request(3, "1: a valid pre-move runs when the cooldown ends 2: an invalid one is dropped")
    (seg,) = p.segments
    assert seg.start == 3 and "pre-moves" in seg.asks


def test_a_requirement_already_among_the_decisions_is_not_repeated() -> None:
    segs = asked("The cooldown ring should turn clockwise, starting at the top of the square")
    decided = ["User: The cooldown ring should turn clockwise, starting at the top of the square"]
    assert requirement_lines(segs, budget=100, skip=set(), said=decided) == []
    assert len(requirement_lines(segs, budget=100, skip=set())) == 1


PARTS = ["board", "clock", "sidebar", "banner", "arrows", "sounds", "menu", "header", "footer"]
LOOKS = ["wider", "darker"]
SPECS = [
    "Use the lichess cburnett piece images from the assets folder",
    "Make the timer ring turn counter-clockwise around each piece",
    *(
        f"Make the {part} panel {look} than the rest of the page"
        for part in PARTS
        for look in LOOKS[:2]
    ),
    "The timer ring should turn clockwise instead of counter-clockwise",
    "Add a button that flips the board orientation",
]


def test_a_long_run_keeps_its_spec_in_current_state(store: Store, tmp_path: Path) -> None:
    """Run E: 37 requests folded into "37 requests"; the spec the person built is the state."""
    log = ClaudeLog()
    for i, spec in enumerate(SPECS):
        log.user(spec)
        log.call(
            "Edit", {"file_path": f"{CWD}/src/part{i}.js", "old_string": "a", "new_string": "b"}
        )
        log.say("Done.")
    session = imported(store, log.write(tmp_path / "run.jsonl"), checkpoints=0)
    summary = compacted(session)
    state = "\n".join(section(summary, "current_state"))
    assert "Requirement (#" in state
    assert "clockwise instead of counter-clockwise" in summary
    assert "turn counter-clockwise around each piece" not in state  # replaced: "instead"
    assert "Earlier work" in state  # the account folded the oldest requests...
    assert "Requirement (#" in state  # ...and the spec they set is still there
    assert len(summary.split()) <= 600 + 60  # the headings and bullets' marks
