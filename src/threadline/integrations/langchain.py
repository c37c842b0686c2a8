"""A LangChain chat message history backed by any threadline store.

``ThreadlineChatMessageHistory(session_id, store=...)`` is a
``BaseChatMessageHistory``: ``messages``, ``add_messages`` and ``clear``, where
``clear`` appends a retraction record (``store/retraction.py``) instead of
deleting, so the history keeps what was said. ``window_messages(policy, model)``
returns threadline's budgeted window (checkpoint summary, then the recent
messages that fit, tool calls never split from their results) as LangChain
messages.

Each LangChain message becomes one threadline message the context engine
understands (role, text, tool calls, tool-call id), and keeps LangChain's own
serialisation (``message_to_dict``, less what the threadline message already
holds) in ``metadata["langchain"]``, so every message type comes back exactly:
ids, names, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
content blocks, artifacts. A message some other face wrote (the CLI, the Agents
SDK adapter, a window's summary) is read as the nearest LangChain type.

LangChain deprecates the interface this face implements (``BaseChatMessageHistory``
since langchain-core 1.6.4, ``RunnableWithMessageHistory`` since 1.3.3, both to go
in 2.0) in favour of LangGraph persistence: new code should use
``integrations.langgraph`` (``ThreadlineSaver``) and, for long-term memory,
``integrations.langgraph_store`` (``ThreadlineStore``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from threadline.context.builder import build_context
from threadline.context.policy import ContextPolicy
from threadline.errors import InvalidMessage, UsageError
from threadline.integrations.binding import Bound, Face, bare_key
from threadline.messages import Message, Role, ToolCall
from threadline.store.checks import RESULT_LOOKBACK
from threadline.store.protocol import Session

FACE = Face("langchain", "lc", legacy_id=bare_key)
"""A history ``KEY`` is session ``lc-KEY`` (``integrations/binding.py``)."""
METADATA_KEY = "langchain"
"""Message metadata key holding LangChain's serialisation of the message."""
_ROLES: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
}
_CHAT_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
}


class ThreadlineChatMessageHistory(Bound, BaseChatMessageHistory):
    """LangChain chat history over a threadline session (see the module docstring).

    ``store`` is a store URL (opened here, closed by ``close``), an open ``Store``, or
    ``None`` for the default store; the session (``lc-<session_id>``) is created on
    the first write.
    """

    face = FACE

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message in view, oldest first."""
        session = self._binding.find()
        return [] if session is None else [to_langchain(m) for m in session.messages()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages as one atomic batch."""
        batch = list(messages)
        if not batch:
            return
        session = self._binding.for_write()
        session.append(to_threadline(batch, answerable=recent_calls(session, batch)))

    def clear(self) -> None:
        """Retract every message (append-only: the history keeps them)."""
        session = self._binding.find()
        if session is not None:
            session.retract_all()

    def window_messages(
        self,
        policy: ContextPolicy | None = None,
        model: str | None = None,
        *,
        system_prompt: str | None = None,
    ) -> list[BaseMessage]:
        """threadline's budgeted window for ``model`` as LangChain messages: the system
        prompt, the checkpoint summary, then the recent messages that fit."""
        session = self._binding.find()
        if session is None:
            return [SystemMessage(system_prompt)] if system_prompt else []
        window = build_context(
            session.refresh(),
            model=model or self._binding.model,
            policy=policy,
            system_prompt=system_prompt,
        )
        return [to_langchain(m, in_window=True) for m in window.messages]


# -- LangChain -> threadline ---------------------------------------------------------


def recent_calls(session: Session, batch: Sequence[BaseMessage]) -> set[str]:
    """Call ids a tool message of ``batch`` may answer: calls in the batch and in the
    recent view (what ``Session.append`` accepts)."""
    ids = {c.get("id") for m in batch if isinstance(m, AIMessage) for c in m.tool_calls}
    if any(isinstance(m, ToolMessage) and m.tool_call_id not in ids for m in batch):
        ids |= {c.id for m in session.tail(RESULT_LOOKBACK[-1]) for c in m.tool_calls}
    return {i for i in ids if isinstance(i, str)}


def to_threadline(messages: Sequence[BaseMessage], *, answerable: set[str]) -> list[Message]:
    """LangChain messages as threadline messages. A tool message whose call is not in
    ``answerable`` (LangChain allows it; a model API does not) is kept as a user message,
    so no view ever shows a result without its call; it still reads back as it was."""
    out: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise InvalidMessage(
                f"message {index}: expected a LangChain message, got {type(message).__name__}"
            )
        out.append(_one(message, answerable))
    return out


def _one(message: BaseMessage, answerable: set[str]) -> Message:
    dumped = message_to_dict(message)
    data: dict[str, Any] = dumped["data"]
    role = _role(dumped["type"], data)
    if isinstance(message.content, str):
        content = data.pop("content")
    else:
        content = _blocks_text(message.content)
    calls: list[ToolCall] = []
    if isinstance(message, AIMessage):
        calls = [
            ToolCall(id=c["id"], name=c["name"], arguments=dict(c["args"]))
            for c in message.tool_calls
            if c.get("id")
        ]
        if _lc_calls(calls) == data.get("tool_calls"):
            data.pop("tool_calls")
    if role == "tool" and getattr(message, "tool_call_id", None) not in answerable:
        role = "user"
    meta = {METADATA_KEY: {"type": dumped["type"], "data": data}}
    if role == "tool":
        assert isinstance(message, ToolMessage)
        return Message.tool(
            content, tool_call_id=message.tool_call_id, name=message.name, metadata=meta
        )
    return Message(role=role, content=content, tool_calls=calls, name=message.name, metadata=meta)


def _role(kind: str, data: dict[str, Any]) -> Role:
    if kind in ("chat", "ChatMessageChunk"):
        return _CHAT_ROLES.get(str(data.get("role", "")).lower(), "user")
    return _ROLES.get(kind, "user")  # function messages and anything newer read as user text


def _blocks_text(content: list[str | dict[Any, Any]]) -> str:
    """The text of a list of content blocks (what threadline counts and shows)."""
    texts = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "\n".join(texts)


def _lc_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [{"name": c.name, "args": c.arguments, "id": c.id, "type": "tool_call"} for c in calls]


# -- threadline -> LangChain ---------------------------------------------------------


def to_langchain(m: Message, *, in_window: bool = False, owned: bool = False) -> BaseMessage:
    """A threadline message as the LangChain message it was made from, or the nearest
    type. In a window, a message whose role the view changed reads as its view role.
    ``owned``: ``m`` was read for this call alone and is not used again, so the
    LangChain message is built from its kept data as it is, not from a deep copy."""
    kept = m.metadata.get(METADATA_KEY)
    if isinstance(kept, dict) and isinstance(kept.get("data"), dict):
        kind = str(kept.get("type"))
        role = _role(kind, kept["data"])
        if not in_window or role == m.role:
            return _restore(m, kind, kept["data"] if owned else copy.deepcopy(kept["data"]))
    return _nearest(m)


def _restore(m: Message, kind: str, data: dict[str, Any]) -> BaseMessage:
    data = dict(data)
    if "content" not in data or _blocks_text(data["content"]) != m.text:
        data["content"] = m.text  # a string, or blocks a view has shortened
    if kind in ("ai", "AIMessageChunk") and "tool_calls" not in data:
        data["tool_calls"] = _lc_calls(m.tool_calls)
    try:
        return messages_from_dict([{"type": kind, "data": data}])[0]
    except (ValueError, TypeError) as exc:
        raise UsageError(f"message {m.seq}: stored LangChain message does not load: {exc}") from exc


def _nearest(m: Message) -> BaseMessage:
    if m.role == "tool":
        return ToolMessage(m.text, tool_call_id=m.tool_call_id or "", name=m.name)
    if m.role == "assistant":
        return AIMessage(m.text, tool_calls=_lc_calls(m.tool_calls), name=m.name)
    if m.role == "system":
        return SystemMessage(m.text, name=m.name)
    return HumanMessage(m.text, name=m.name)
