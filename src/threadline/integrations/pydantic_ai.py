"""Pydantic AI message histories in a threadline session.

``ThreadlineHistory(session_id, store=...)`` stores the ``ModelMessage`` lists an
agent run returns (``history.add(result.new_messages())``) and gives them back:
``messages()`` is the whole history exactly as stored (``ModelMessagesTypeAdapter``
shapes: prompts, tool calls and returns, thinking parts, usage, timestamps), and
``window(policy, model, compactor=...)`` is threadline's budgeted, compacted view of
it for ``agent.run(prompt, message_history=history.window(...))``: the checkpoint
summary, then the recent messages that fit, where a tool return never comes without
its call.

Each model message becomes threadline messages the context engine reads: a
``ModelResponse`` one assistant message (text, tool calls); a ``ModelRequest`` one
message per part that needs its own (a ``tool`` message per tool return, a user
message for the prompts, a system message for system prompts). Each keeps its parts
as Pydantic AI serialises them, and the request's or response's own fields, in
``metadata["pydantic_ai"]``, so the history reads back exactly; a part a window
shortened (a pruned tool return) or made (the summary, an interrupted call's
result) reads back as the nearest Pydantic AI part holding the window's text.

Inside a run, ``history.processor(policy)`` is a history processor
(``Agent(capabilities=[ProcessHistory(history.processor(policy))])``, Pydantic AI's
``history_processors``), and ``WindowCapability(history.processor(policy))`` the
same as a capability that also counts the request's tool schemas: before each model
request the run's own messages (its prompt, tool calls and returns) are kept whole
and follow the session's budgeted window, given in place of any earlier history the
run was handed (``integrations/turn_window.py``): what the model gets fits
``context_limit - response_reserve``. The run's system prompts go first, once.

``aadd``, ``amessages`` and ``awindow`` are the same methods run in a worker thread,
one call at a time per history, so the event loop never waits on the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from threadline.context.builder import build_context
from threadline.context.policy import ContextPolicy
from threadline.errors import InvalidMessage
from threadline.integrations.binding import Bound, Face, bare_key, missing_extra
from threadline.integrations.turn_window import turn_window
from threadline.messages import Message, Role, ToolCall
from threadline.stamps import new_id
from threadline.store.checks import RESULT_LOOKBACK

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise missing_extra("Pydantic AI", "pydantic-ai", exc) from exc

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext

    from threadline.compaction.compactor import Compactor

T = TypeVar("T")
MOVED_PROMPTS = "threadline_moved_prompts"
"""Metadata of the request holding a run's system prompts before the window: the run id."""

FACE = Face("pydantic_ai", "pa", legacy_id=bare_key)
"""A history ``KEY`` is session ``pa-KEY`` (``integrations/binding.py``)."""
METADATA_KEY = "pydantic_ai"
"""Message metadata: ``{"group", "message", "parts"}``: the model message it belongs to
(an id), that message's own fields (``parts`` empty), and the parts it holds."""


class ThreadlineHistory(Bound):
    """Pydantic AI message history over a threadline session (see the module docstring).

    ``store`` is a store URL (opened here, closed by ``close``), an open ``Store``, or
    ``None`` for the default store; the session (``pa-<session_id>``) is created with
    ``model`` and ``agent`` on the first ``add``.
    """

    face = FACE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()

    def add(self, messages: Sequence[ModelMessage]) -> None:
        """Append model messages (e.g. ``result.new_messages()``) as one atomic batch."""
        batch = list(messages)
        if not batch:
            return
        session = self._binding.for_write()
        calls = {c.id for m in session.tail(RESULT_LOOKBACK[-1]) for c in m.tool_calls}
        session.append(to_threadline(batch, answerable=calls))

    def messages(self) -> list[ModelMessage]:
        """The whole history, as it was added."""
        session = self._binding.find()
        return [] if session is None else to_pydantic_ai(session.messages())

    def window(
        self,
        policy: ContextPolicy | None = None,
        model: str | None = None,
        *,
        compactor: Compactor | None = None,
    ) -> list[ModelMessage]:
        """threadline's budgeted window for ``model`` as Pydantic AI messages, for
        ``agent.run(message_history=...)``. With a ``compactor``, history that would
        fall out of the window is summarized first (nothing falls out unsummarized)."""
        session = self._binding.find()
        if session is None:
            return []
        session.refresh()
        model = model or self._binding.model
        if compactor is not None:
            from threadline.compaction.compactor import prepare_context

            window = prepare_context(session, compactor, model=model, policy=policy)
        else:
            window = build_context(session, model=model, policy=policy)
        return to_pydantic_ai(window.messages, in_window=True)

    # -- async: the same methods, off the event loop
    async def aadd(self, messages: Sequence[ModelMessage]) -> None:
        """``add`` in a worker thread."""
        batch = list(messages)
        await self._offload(lambda: self.add(batch))

    async def amessages(self) -> list[ModelMessage]:
        """``messages`` in a worker thread."""
        return await self._offload(self.messages)

    async def awindow(
        self,
        policy: ContextPolicy | None = None,
        model: str | None = None,
        *,
        compactor: Compactor | None = None,
    ) -> list[ModelMessage]:
        """``window`` in a worker thread."""
        return await self._offload(lambda: self.window(policy, model, compactor=compactor))

    async def _offload(self, fn: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn()

        return await asyncio.to_thread(locked)

    # -- inside a run
    def processor(
        self,
        policy: ContextPolicy | None = None,
        *,
        model: str | None = None,
        compactor: Compactor | None = None,
    ) -> WindowProcessor:
        """A history processor giving the model this history's budgeted window before
        the run's own messages: ``ProcessHistory(history.processor(policy))``, or
        ``WindowCapability(history.processor(policy))`` to count the tools too."""
        return WindowProcessor(self, policy or ContextPolicy(), model, compactor)

    def _fit(
        self,
        messages: list[ModelMessage],
        run_id: str | None,
        tools: list[dict[str, Any]],
        processor: WindowProcessor,
    ) -> list[ModelMessage]:
        moved = _moved_prompts(messages, run_id)
        turn = _this_run(messages, run_id)
        converted = to_threadline([*moved, *turn], answerable=set())
        window = turn_window(
            self._binding.find(),
            converted,
            policy=processor.policy,
            model=processor.model or self._binding.model,
            compactor=processor.compactor,
            instructions=_instructions(turn),
            tools=tools,
        )
        if not window and not moved:
            return turn
        shown = {m.text for m in converted if m.role == "system"}
        kept = []
        for m in window:  # a system prompt each run repeats is shown once
            if m.role == "system" and not m.synthetic:
                if m.text in shown:
                    continue
                shown.add(m.text)
            kept.append(m)
        head, turn = _prompt_first(moved, turn, run_id)
        return [*head, *to_pydantic_ai(kept, in_window=True), *turn]


@dataclasses.dataclass
class WindowProcessor:
    """``ThreadlineHistory.processor``: a Pydantic AI history processor."""

    history: ThreadlineHistory
    policy: ContextPolicy
    model: str | None
    compactor: Compactor | None

    async def __call__(
        self, ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        return await self.fit(ctx, messages, [])

    async def fit(
        self, ctx: RunContext[Any], messages: list[ModelMessage], tools: list[dict[str, Any]]
    ) -> list[ModelMessage]:
        """``messages`` as the model gets them: the window, then the run's own."""
        given = list(messages)
        return await self.history._offload(
            lambda: self.history._fit(given, ctx.run_id, tools, self)
        )


@dataclasses.dataclass
class WindowCapability(ProcessHistory[Any]):
    """``ProcessHistory`` that counts the request's tool schemas in the budget too:
    ``Agent(capabilities=[WindowCapability(history.processor(policy))])``."""

    processor: WindowProcessor

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        parameters = request_context.model_request_parameters
        tools = [
            {
                "name": t.name,
                "description": t.description or "",
                "parameters": t.parameters_json_schema,
            }
            for t in [*parameters.function_tools, *parameters.output_tools]
        ]
        messages = await self.processor.fit(ctx, request_context.messages, tools)
        request_context.messages = list(messages)
        ctx.messages[:] = messages
        return request_context


def _this_run(messages: list[ModelMessage], run_id: str | None) -> list[ModelMessage]:
    """The messages the run made (its run id): from its first on, the earlier history
    being what the window replaces; without a run id, from the latest prompt on."""
    for index, message in enumerate(messages):
        if run_id is not None and getattr(message, "run_id", None) == run_id:
            return messages[index:]
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest) and any(
            isinstance(p, UserPromptPart) for p in message.parts
        ):
            return messages[index:]
    return messages


def _moved_prompts(messages: list[ModelMessage], run_id: str | None) -> list[ModelMessage]:
    """The request of system prompts an earlier request of this run moved to the front
    (``_prompt_first``), if any."""
    first = messages[0] if messages else None
    if isinstance(first, ModelRequest) and first.metadata == {MOVED_PROMPTS: run_id}:
        return [first]
    return []


def _prompt_first(
    moved: list[ModelMessage], turn: list[ModelMessage], run_id: str | None
) -> tuple[list[ModelMessage], list[ModelMessage]]:
    """The run's system prompts in a request of their own, which goes before the window
    (Pydantic AI sends one found later in the history as a user message; the request
    is marked so the run's next request finds it), and the run's messages without
    them."""
    first = turn[0] if turn else None
    if isinstance(first, ModelRequest):
        prompts = [p for p in first.parts if isinstance(p, SystemPromptPart)]
        rest = [p for p in first.parts if not isinstance(p, SystemPromptPart)]
        if prompts and rest:
            marked = ModelRequest(parts=prompts, metadata={MOVED_PROMPTS: run_id})
            return [marked], [dataclasses.replace(first, parts=rest), *turn[1:]]
    return moved, turn


def _instructions(turn: list[ModelMessage]) -> str | None:
    """The instructions the request carries (Pydantic AI sends them apart from the
    messages, the latest request's)."""
    for message in reversed(turn):
        if isinstance(message, ModelRequest):
            return message.instructions or None
    return None


# -- Pydantic AI -> threadline ---------------------------------------------------------


def _dumped(message: ModelMessage) -> dict[str, Any]:
    data: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    return data


def to_threadline(messages: Iterable[ModelMessage], *, answerable: set[str]) -> list[Message]:
    """Model messages as threadline messages. A tool return whose call is neither in
    ``answerable`` nor earlier in ``messages`` is kept as a user message, so no view
    shows a result without its call (it still reads back as it was)."""
    out: list[Message] = []
    answerable = set(answerable)
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest | ModelResponse):
            raise InvalidMessage(
                f"message {index}: expected a Pydantic AI ModelMessage, got "
                f"{type(message).__name__}"
            )
        data = _dumped(message)
        parts = data.pop("parts")
        fields = {"group": new_id(), "message": {**data, "parts": []}}
        when = getattr(message, "timestamp", None) or datetime.now(UTC)
        if isinstance(message, ModelResponse):
            calls = [
                ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=_arguments(p))
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            answerable.update(c.id for c in calls)
            out.append(
                Message(
                    role="assistant",
                    content=_text(parts),
                    tool_calls=calls,
                    model=message.model_name,
                    metadata={METADATA_KEY: {**fields, "parts": parts}},
                    created_at=when,
                )
            )
            continue
        for role, call_id, held in _request_pieces(parts):
            meta = {METADATA_KEY: {**fields, "parts": held}}
            if role == "tool" and call_id in answerable:
                out.append(
                    Message.tool(
                        _text(held),
                        tool_call_id=call_id,
                        name=held[0].get("tool_name"),
                        metadata=meta,
                        created_at=when,
                    )
                )
            else:
                out.append(
                    Message(
                        role="user" if role == "tool" else role,
                        content=_text(held),
                        metadata=meta,
                        created_at=when,
                    )
                )
    return out


def _answered_call(part: dict[str, Any]) -> str | None:
    """The call a request part is the result of: a tool return's (a retried call's
    too, in 2.x), or a 1.x ``RetryPromptPart``'s that names its tool (``ModelRetry``
    raised by the tool, or its arguments refused); None for any other part."""
    kind = part.get("part_kind")
    answers = kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name"))
    call_id = part.get("tool_call_id")
    return call_id if answers and isinstance(call_id, str) else None


def _request_pieces(parts: list[dict[str, Any]]) -> list[tuple[Role, str | None, list[Any]]]:
    """A request's parts by the threadline message each goes in: a tool message per
    result of a call, and runs of the other parts by role (system prompts, the rest
    user)."""
    pieces: list[tuple[Role, str | None, list[Any]]] = []
    for part in parts:
        kind = part.get("part_kind")
        call_id = _answered_call(part)
        if call_id is not None:
            pieces.append(("tool", call_id, [part]))
            continue
        role: Role = "system" if kind == "system-prompt" else "user"
        if pieces and pieces[-1][0] == role:
            pieces[-1][2].append(part)
        else:
            pieces.append((role, None, [part]))
    return pieces or [("user", None, [])]


def _arguments(part: ToolCallPart) -> dict[str, Any]:
    try:
        return part.args_as_dict()
    except ValueError:
        return {"_raw": part.args if isinstance(part.args, str) else ""}


def _text(parts: list[dict[str, Any]]) -> str:
    """What threadline shows, counts and searches of some parts: their text, a tool
    return's content as text (JSON when it is not text); thinking is left out."""
    texts = []
    for part in parts:
        kind = part.get("part_kind")
        if kind in ("text", "system-prompt", "retry-prompt"):
            content = part.get("content")
            texts.append(content if isinstance(content, str) else json.dumps(content))
        elif kind == "user-prompt":
            content = part.get("content")
            if isinstance(content, str):
                texts.append(content)
            else:
                texts.extend(c for c in content or [] if isinstance(c, str))
        elif kind == "tool-return":
            content = part.get("content")
            texts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(texts)


# -- threadline -> Pydantic AI ---------------------------------------------------------


def to_pydantic_ai(messages: Sequence[Message], *, in_window: bool = False) -> list[ModelMessage]:
    """Threadline messages (a history or a window) as model messages: each stored
    model message comes back as it was; a message a view changed or made, or another
    face wrote, as the nearest request or response. In a window, a tool return kept as
    a user message (its call is not in the session) reads as the user's text, so no
    window sends a result without its call."""
    out: list[ModelMessage] = []
    group: str | None = None
    pending: dict[str, Any] | None = None
    for m in messages:
        kept = m.metadata.get(METADATA_KEY)
        if isinstance(kept, dict) and isinstance(kept.get("message"), dict):
            parts = kept.get("parts") or []
            stray = m.role != "tool" and any(_answered_call(p) for p in parts)
            if _text(parts) != m.text or (in_window and stray):  # a view changed it
                parts = [_nearest_part(m)]
            if pending is not None and kept.get("group") == group:
                pending["parts"].extend(parts)
                continue
            _flush(pending, out)
            group, pending = kept.get("group"), {**kept["message"], "parts": list(parts)}
            continue
        _flush(pending, out)
        group, pending = None, None
        out.append(_nearest(m))
    _flush(pending, out)
    return out


def _flush(pending: dict[str, Any] | None, out: list[ModelMessage]) -> None:
    if pending is not None:
        out.extend(ModelMessagesTypeAdapter.validate_python([pending]))


def _nearest_part(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        part: Any = ToolReturnPart(
            tool_name=m.name or "", content=m.text, tool_call_id=m.tool_call_id or ""
        )
    elif m.role == "system":
        part = SystemPromptPart(m.text)
    elif m.role == "assistant":
        part = TextPart(m.text)
    else:
        part = UserPromptPart(m.text)
    dumped = _dumped(
        ModelResponse(parts=[part]) if m.role == "assistant" else ModelRequest(parts=[part])
    )
    result: dict[str, Any] = dumped["parts"][0]
    return result


def _nearest(m: Message) -> ModelMessage:
    if m.role == "assistant":
        parts: list[Any] = [TextPart(m.text)] if m.text else []
        parts += [
            ToolCallPart(tool_name=c.name, args=dict(c.arguments), tool_call_id=c.id)
            for c in m.tool_calls
        ]
        return ModelResponse(parts=parts or [TextPart("")], model_name=m.model)
    if m.role == "tool":
        return ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name=m.name or "", content=m.text, tool_call_id=m.tool_call_id or ""
                )
            ]
        )
    if m.role == "system":
        return ModelRequest(parts=[SystemPromptPart(m.text)])
    return ModelRequest(parts=[UserPromptPart(m.text)])
