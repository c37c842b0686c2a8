"""A kept tail whose size is one tool call's arguments still fits a small window.

A Claude Code run that ends by writing a whole file carries the file in the ``Write``
call's ``content`` argument: no text block to cut, so the protected tail could not fit
16k. Emergency truncation now cuts oversized string arguments in the window's copy,
keeping the call's id and name (it still pairs with its result); the store keeps all.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.windows import checked_window, raw_session
from threadline import ContextPolicy, Message
from threadline.context.truncation import truncate_arguments
from threadline.messages import ToolCall

POLICY = ContextPolicy(context_limit=8000, response_reserve=1000, min_recent_messages=6)


def tail_with_a_write(body: str) -> list[Message]:
    """A request, a Bash + Write turn (shaped as Claude Code's), their results, a reply."""
    calls = [
        ToolCall(id="toolu_01A", name="Bash", arguments={"command": "mkdir -p docs"}),
        ToolCall(
            id="toolu_01B",
            name="Write",
            arguments={"file_path": "/home/dev/app/docs/plan.md", "content": body},
        ),
    ]
    return [
        Message.user("write the plan into docs/plan.md"),
        Message.assistant("", tool_calls=calls),
        Message.tool("", tool_call_id="toolu_01A", name="Bash"),
        Message.tool(
            "File created successfully at: /home/dev/app/docs/plan.md",
            tool_call_id="toolu_01B",
            name="Write",
        ),
        Message.assistant("Wrote the plan to `docs/plan.md`."),
    ]


@settings(max_examples=25, deadline=None)
@given(
    st.integers(40_000, 90_000),
    st.sampled_from(["word ", "line of the plan\n", "def f(a):\n    return a + 1\n"]),
)
def test_a_huge_write_in_the_protected_tail_fits_with_the_call_whole(size: int, unit: str) -> None:
    body = (unit * (size // len(unit) + 1))[:size]
    session = raw_session(tail_with_a_write(body))
    window = checked_window(session, POLICY)  # the budget holds, calls pair with results
    assert window is not None
    (turn,) = [m for m in window.messages if m.tool_calls]
    assert [c.id for c in turn.tool_calls] == ["toolu_01A", "toolu_01B"]
    content = turn.tool_calls[1].arguments["content"]
    assert "truncated" in content and content.startswith(body[:100])
    assert turn.tool_calls[1].arguments["file_path"] == "/home/dev/app/docs/plan.md"
    stored = next(m for m in session.messages() if m.tool_calls)
    assert stored.tool_calls[1].arguments["content"] == body  # the store keeps it whole


def test_small_arguments_are_left_alone() -> None:
    (_, turn, *_) = tail_with_a_write("short")
    assert truncate_arguments(turn, POLICY) is None
