"""A LangGraph pre-model hook that hands the model threadline's window of the thread.

``window_hook(saver, policy)`` is a runnable for ``create_react_agent(...,
pre_model_hook=window_hook(saver, policy), checkpointer=saver)`` (or a node of a
graph of your own, before the model's): it returns ``{"llm_input_messages": ...}``,
what the model is sent in place of the thread's whole ``messages`` (which the state
keeps). That is the thread's session (``ThreadlineSaver.thread_session``: the
current branch) as threadline's context builder windows it, the checkpoint summary
first, with a ``compactor`` compacting first so nothing falls out unsummarized, and
after it the turn in progress (the state's messages from the latest request on),
whole and as the state has them: a checkpoint is written after its step, so the
session may hold some of the turn or none of it when the hook runs, and the window
shows none of it. The window is sized so that all of it, with the ``instructions``
(the agent's prompt) and the ``tools`` given, fits ``context_limit -
response_reserve`` (``integrations/turn_window.py``); a tool call never goes without
its result, and a turn that cannot fit is refused (``ContextOverflow``) before the
model is called.

The window follows the thread's history in threadline, which is append-only: a
message the graph removed from its state (``RemoveMessage``) or edited stays in it
as it was said.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool

from threadline.context.policy import ContextPolicy
from threadline.integrations.langchain import METADATA_KEY, to_langchain, to_threadline
from threadline.integrations.langgraph import ThreadlineSaver
from threadline.integrations.turn_window import turn_window

if TYPE_CHECKING:
    from threadline.compaction.compactor import Compactor
    from threadline.store.protocol import Session

INPUT_KEY = "llm_input_messages"
"""The state key ``create_react_agent`` sends the model instead of ``messages``."""


def window_hook(
    saver: ThreadlineSaver,
    policy: ContextPolicy | None = None,
    *,
    model: str | None = None,
    compactor: Compactor | None = None,
    instructions: str | None = None,
    tools: Sequence[Any] = (),
    messages_key: str = "messages",
) -> RunnableLambda[Any, dict[str, list[BaseMessage]]]:
    """The pre-model hook (sync and async; the async one reads the store in a worker
    thread) giving the model the thread's budgeted window (see the module docstring).
    ``tools`` are the agent's tools (LangChain tools, functions or schemas), counted
    in the budget with ``instructions``."""
    fit = _Fit(
        saver,
        policy or ContextPolicy(),
        model,
        compactor,
        instructions,
        [_schema(t) for t in tools],
        messages_key,
    )

    async def afit(state: Any, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        return await asyncio.to_thread(fit, state, config)

    return RunnableLambda(fit, afunc=afit, name="threadline_window")


@dataclass(frozen=True)
class _Fit:
    """The hook's one implementation: state and config in, the model's input out."""

    saver: ThreadlineSaver
    policy: ContextPolicy
    model: str | None
    compactor: Compactor | None
    instructions: str | None
    tools: list[dict[str, Any]]
    messages_key: str

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        messages = _state_messages(state, self.messages_key)
        thread_id = (config.get("configurable") or {}).get("thread_id")
        session = self.saver.thread_session(thread_id) if thread_id is not None else None
        turn = _turn(messages)
        window = turn_window(
            session,
            to_threadline(turn, answerable=_calls(turn)),
            policy=self.policy,
            model=self.model or self.saver.model,
            compactor=self.compactor,
            instructions=self.instructions,
            tools=self.tools,
            held=_held(session, turn),  # in the window already: not counted beside it
        )
        history = [to_langchain(m, in_window=True) for m in window]
        return {INPUT_KEY: [*_besides(history, turn), *turn]}


def _besides(history: list[BaseMessage], turn: list[BaseMessage]) -> list[BaseMessage]:
    """The window less what the turn sends itself: its messages the session stored
    meanwhile, and the stand-in result the window gives a call of the turn that the
    session holds without its result yet."""
    sent = {m.id for m in turn if m.id is not None}
    calls = _calls(turn)
    return [
        m
        for m in history
        if (m.id is None or m.id not in sent)
        and not (isinstance(m, ToolMessage) and m.tool_call_id in calls)
    ]


def _held(session: Session | None, turn: list[BaseMessage]) -> int:
    """How many of the turn's first messages the session holds already (the saver
    keeps a checkpoint's messages as it writes it, so some of the turn may be stored
    when the hook runs): the window counts those itself, ``_besides`` drops them from
    it and the turn sends them, so the turn's room is only for the rest."""
    if session is None or not turn:
        return 0
    ids = set()
    for m in session.tail(len(turn)):
        kept = m.metadata.get(METADATA_KEY)
        if isinstance(kept, dict) and isinstance(kept.get("data"), dict):
            ids.add(kept["data"].get("id"))
    held = 0
    while held < len(turn) and turn[held].id is not None and turn[held].id in ids:
        held += 1
    return held


def _state_messages(state: Any, key: str) -> list[BaseMessage]:
    value = state.get(key) if isinstance(state, dict) else getattr(state, key, None)
    return list(value or [])


def _turn(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The turn in progress: from the latest request (``HumanMessage``) on, and back
    to the call of any tool result in it. It is sent whole after the window, which
    leaves it room and shows none of it (the session may hold some of it already)."""
    first = _turn_start(messages)
    called = {m.tool_call_id for m in messages[first:] if isinstance(m, ToolMessage)}
    while first > 0 and called - _calls(messages[first:]):
        first -= 1  # a result's call goes with it
    return messages[first:]


def _turn_start(messages: list[BaseMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return 0


def _calls(messages: Sequence[BaseMessage]) -> set[str]:
    ids = {c.get("id") for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return {i for i in ids if isinstance(i, str)}


def _schema(tool: Any) -> dict[str, Any]:
    """A tool as threadline counts it: name, description, parameters."""
    function: dict[str, Any] = convert_to_openai_tool(tool)["function"]
    return {
        "name": function.get("name", ""),
        "description": function.get("description", ""),
        "parameters": function.get("parameters", {}),
    }
