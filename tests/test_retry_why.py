"""A retry after a failure says which failure; a retry after a success invents none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_decisions import decisions
from threadline.compaction.decisions import user_strength
from threadline.compaction.retry import retry_why
from threadline.messages import Message, ToolCall


@settings(max_examples=40, deadline=None)
@given(
    ask=st.sampled_from(["try again", "Retry", "please try it again", "rerun it"]),
    failure=st.sampled_from(
        ["spawn: incomplete, 0 of 4 complete", "build failed", "Error: timed out"]
    ),
)
def test_a_retry_after_a_failure_names_it(ask: str, failure: str) -> None:
    assert retry_why(f"{ask}, but keep the defaults", failure + "\nmore", False) == (
        f"(retry after: {failure})"
    )
    assert retry_why(f"{ask}, but keep the defaults", "All 4 tasks complete", False) is None
    assert retry_why("keep the defaults", failure, True) is None


def test_a_rule_in_a_lower_case_clause_counts() -> None:
    assert user_strength("try again. but don't change the reasoning effort") >= 1.0
    assert user_strength("try again. it went fine") == 0.0


def test_the_retry_the_person_asks_for_carries_the_failure() -> None:
    """Run F: "try again, but don't change reasoning effort" read as a bare quote; the batch
    of subagents had just failed. Records shaped like a Pi session."""
    spawn = ToolCall(id="p1", name="spawn_pi", arguments={"tasks": ["fix lint in a.ts"]})
    said = decisions(
        [
            Message.user("Fix the lint errors with subagents."),
            Message.assistant("", tool_calls=[spawn]),
            Message.tool("spawn_pi: x incomplete - 0 of 8 complete\nx task-1", tool_call_id="p1"),
            Message.user("try again. but don't change reasoning effort from defaults"),
            Message.assistant("Retrying.", tool_calls=[spawn.model_copy(update={"id": "p2"})]),
            Message.tool("spawn_pi: 8 of 8 complete", tool_call_id="p2"),
        ]
    )
    joined = "\n".join(said)
    assert "don't change reasoning effort" in joined
    assert "(retry after: spawn_pi: x incomplete - 0 of 8 complete)" in joined
