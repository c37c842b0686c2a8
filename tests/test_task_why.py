"""An approach carries the reason its task's description states; never an invented one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_decisions import decisions, edit
from threadline.compaction.task_why import stated_why, with_why
from threadline.messages import Message, ToolCall

_SHOWN = (
    "o shop-7.2 · Stop dropping cart lines after the cap   [P1 · OPEN]\n"
    "Owner: Dana · Type: task\n\n"
    "DESCRIPTION\n"
    "{heading}\n"
    "The cart view drops cart lines after a cap of 5 and loses the coupon totals. "
    "Shoppers cannot see what they ordered.\n\n"
    "## Technical Specs\n- Remove the cap.\n"
)


@settings(max_examples=30, deadline=None)
@given(
    heading=st.sampled_from(
        ["## Why This Task Is Necessary", "## Motivation", "**Why:**", "Rationale:", "## Problem"]
    )
)
def test_the_first_sentence_under_a_why_heading_is_the_reason(heading: str) -> None:
    why = stated_why(_SHOWN.format(heading=heading))
    assert why == "The cart view drops cart lines after a cap of 5 and loses the coupon totals."


def test_no_heading_no_reason() -> None:
    assert stated_why("Why does it fail?\nThe cart view drops lines, see above.") is None
    assert stated_why("DESCRIPTION\nThe cart view drops cart lines after a cap of 5.") is None


def test_a_reason_on_other_things_is_not_attached() -> None:
    approach = "Approach: 1. Rename the login form; 2. Add a spinner"
    assert with_why(approach, "The cart view drops cart lines after a cap of 5.") == approach
    assert with_why(approach, None) == approach


def test_an_approach_to_a_shown_task_carries_its_reason() -> None:
    """Judges, run A: "Key Decisions list approaches but give no reasons", while the tracker
    item printed by `bd show` said why. Records shaped like a Claude Code session."""
    show = ToolCall(id="s1", name="Bash", arguments={"command": "bd show shop-7.2"})
    said = decisions(
        [
            Message.user("Work on shop-7.2."),
            Message.assistant("Reading the task.", tool_calls=[show]),
            Message.tool(_SHOWN.format(heading="## Why This Task Is Necessary"), tool_call_id="s1"),
            Message.assistant(
                "The changes needed in the cart view:\n\n"
                "1. Remove the 5-line cap on cart lines\n"
                "2. Keep the coupon totals per group\n",
                tool_calls=[edit("lib/shop/cart_view.ex")],
            ),
        ]
    )
    joined = "\n".join(said)
    assert "Remove the 5-line cap" in joined
    assert "(why: The cart view drops cart lines after a cap of 5" in joined
