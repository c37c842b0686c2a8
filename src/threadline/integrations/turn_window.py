"""threadline's window of a session with room left for the turn in progress.

A framework hook (Pydantic AI's history processor, LangGraph's pre-model hook) asks
for the conversation to send the model while a turn is running: the turn's own
messages (the user's request and the tool calls and results since) are not all in
the session yet and must be sent whole, after the session's history. ``turn_window``
builds the session's window (``build_context``, or ``prepare_context`` with a
compactor, so nothing falls out unsummarized) in the budget those messages, the
instructions and the tool schemas leave: the model input as a whole stays within
``context_limit - response_reserve``. The window keeps each tool call with its
result (the builder's units); a turn that cannot fit on its own is refused
(``ContextOverflow``), never sent over the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadline.catalog import lookup
from threadline.context.builder import build_context, window_cost
from threadline.context.policy import ContextPolicy
from threadline.errors import ContextOverflow
from threadline.messages import Message
from threadline.store.protocol import Session
from threadline.tokens import counter_for

if TYPE_CHECKING:
    from threadline.compaction.compactor import Compactor


def budget_of(policy: ContextPolicy, model: str | None) -> int:
    """What the model input may hold: ``context_limit - response_reserve``."""
    limit = policy.context_limit or lookup(model).context_window
    return max(0, limit - policy.response_reserve)


def turn_window(
    session: Session | None,
    turn: Sequence[Message],
    *,
    policy: ContextPolicy,
    model: str | None,
    compactor: Compactor | None = None,
    instructions: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    held: int = 0,
) -> list[Message]:
    """The session's window (oldest first) to send before ``turn``, so that the
    instructions, the tool schemas, the window and ``turn`` fit the policy's budget
    together; ``[]`` when there is no session or no room for its history. ``held``:
    how many of the turn's first messages the session holds already, so the window
    counts them itself (the caller sends them once, with the turn)."""
    model = model or (session.model if session is not None else None) or lookup(None).name
    counter = counter_for(model)
    cost = window_cost(counter)
    fixed = counter.count_tools(list(tools))
    if instructions:
        fixed += counter.count_message(Message.system(instructions))
    costs = [cost(m) for m in turn]
    extra = fixed + sum(costs)
    budget = budget_of(policy, model)
    needed = extra + counter.count_messages([])
    if needed > budget:
        raise ContextOverflow(
            f"the turn in progress needs {needed} tokens with the instructions and tools "
            f"alone, over the budget of {budget} (context_limit - response_reserve)",
            needed=needed,
            budget=budget,
        )
    if session is None:
        return []
    limit = policy.context_limit or lookup(model).context_window
    room = policy.model_copy(update={"context_limit": limit - fixed - sum(costs[held:])})
    session.refresh()
    try:
        if compactor is not None:
            from threadline.compaction.compactor import prepare_context

            window = prepare_context(session, compactor, model=model, policy=room)
        else:
            window = build_context(session, model=model, policy=room)
    except ContextOverflow:
        return []  # the turn fits, the history's protected messages do not beside it
    return window.messages
