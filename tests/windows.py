"""Checks on a built context window that more than one property test makes."""

from __future__ import annotations

from threadline import (
    ContextOverflow,
    ContextPolicy,
    ContextWindow,
    Message,
    Session,
    build_context,
    open_store,
)
from threadline.store.encoding import prepare_messages


def raw_session(msgs: list[Message], *, batch: int = 7) -> Session:
    """A session holding ``msgs`` stored through the low-level append, a batch at a time,
    so crash-broken and out-of-order chains get in as an import stores them."""
    store = open_store("memory://")
    s = store.create_session(agent="prop", model="gpt-4o")
    for i in range(0, len(msgs), batch):
        store.append_messages(s.id, prepare_messages(s.model, msgs[i : i + batch]))
    return s.refresh()


def check_units(window: list[Message]) -> None:
    """No tool result without its call, no call without its results right after it."""
    i = 0
    while i < len(window):
        m = window[i]
        assert m.role != "tool", f"tool result at {i} without its call"
        ids = [c.id for c in m.tool_calls]
        results = window[i + 1 : i + 1 + len(ids)]
        assert [r.role for r in results] == ["tool"] * len(ids)
        assert [r.tool_call_id for r in results] == ids
        i += 1 + len(ids)


def checked_window(s: Session, policy: ContextPolicy) -> ContextWindow | None:
    """The window for ``s`` with the budget (invariant 3) and whole units (invariant 2)
    checked; ``None`` when it cannot fit, after checking the overflow is real."""
    try:
        w = build_context(s, system_prompt="You are a careful agent.", policy=policy)
    except ContextOverflow as exc:
        assert exc.needed > exc.budget
        return None
    assert policy.context_limit is not None
    assert w.tokens <= policy.context_limit - policy.response_reserve  # invariant 3
    check_units([m for m in w.messages if not m.summary and m.role != "system"])  # invariant 2
    return w
