"""Hypothesis strategies for histories: text turns, tool chains, and broken chains."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from threadline import ContextPolicy, Message, ToolCall

WORDS = ["alpha", "beta", "src/app.py", "error", "ok", "42", "config", "the", "a", "run", "x=1"]


def text(max_words: int = 400, *, min_words: int = 0) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), min_size=min_words, max_size=max_words).map(" ".join)


@st.composite
def tool_chain(draw: st.DrawFn, *, broken: bool = False) -> list[Message]:
    """An assistant message calling 1-3 tools (ids unique within it, as a store requires)
    and their results, some lost when ``broken``."""
    numbers = draw(st.lists(st.integers(0, 10**9), min_size=1, max_size=3, unique=True))
    calls = [ToolCall(id=f"call_{i}", name="grep", arguments={"q": "x"}) for i in numbers]
    out = [Message.assistant(draw(text(20)), tool_calls=calls)]
    for call in calls:
        if broken and draw(st.booleans()):
            continue  # a crash lost this result
        out.append(Message.tool(draw(text(1500)), tool_call_id=call.id, name=call.name))
    return out


@st.composite
def history(
    draw: st.DrawFn, *, min_units: int = 1, max_units: int = 40, broken: bool = False
) -> list[Message]:
    units = draw(st.integers(min_units, max_units))
    out: list[Message] = []
    for _ in range(units):
        kind = draw(st.sampled_from(["user", "assistant", "chain", "chain"]))
        if kind == "user":
            out.append(Message.user(draw(text(200))))
        elif kind == "assistant":
            out.append(Message.assistant(draw(text(300))))
        else:
            out.extend(draw(tool_chain(broken=broken)))
        if broken and draw(st.integers(0, 20)) == 0:
            out.append(Message.tool("orphan result", tool_call_id="nobody-called-this"))
    return out


@st.composite
def interleaved(draw: st.DrawFn, *, max_steps: int = 40) -> list[Message]:
    """Parallel calls and their results in any logged order: results of earlier calls may
    arrive after later assistant or user messages (one block a line, as Claude Code logs
    them), some never arrive, some arrive twice, and some answer no call at all."""
    out: list[Message] = []
    waiting: list[str] = []
    answered: list[str] = []
    made = 0
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(["user", "text", "calls", "calls", "result", "result", "odd"]))
        if kind == "user":
            out.append(Message.user(draw(text(60, min_words=1))))
        elif kind == "text":
            out.append(Message.assistant(draw(text(60, min_words=1))))
        elif kind == "calls":
            count = draw(st.integers(1, 3))
            calls = [
                ToolCall(id=f"call_{made + i}", name="grep", arguments={"q": "x"})
                for i in range(count)
            ]
            made += count
            out.append(Message.assistant(draw(text(20)), tool_calls=calls))
            waiting += [c.id for c in calls]
        elif kind == "result" and waiting:
            call_id = waiting.pop(draw(st.integers(0, len(waiting) - 1)))
            out.append(Message.tool(draw(text(300)), tool_call_id=call_id, name="grep"))
            answered.append(call_id)
        elif kind == "odd":
            if answered and draw(st.booleans()):
                call_id = draw(st.sampled_from(answered))
                out.append(Message.tool("a duplicate result", tool_call_id=call_id, name="grep"))
            else:
                out.append(Message.tool("orphan result", tool_call_id="nobody-called-this"))
    return out


def policies(
    min_limit: int, max_limit: int, **more: st.SearchStrategy[Any]
) -> st.SearchStrategy[ContextPolicy]:
    """Window policies with a context limit from ``min_limit`` to ``max_limit``, either
    trim strategy and pruning off (so counts stay exact); ``more`` draws other fields."""
    return st.builds(
        ContextPolicy,
        context_limit=st.integers(min_limit, max_limit),
        response_reserve=st.integers(0, 500),
        min_recent_messages=st.integers(0, 8),
        trim_strategy=st.sampled_from(["stable", "greedy"]),
        pruning=st.just(False),
        **more,
    )
