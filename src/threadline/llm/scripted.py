"""A scripted chat model: plays back replies you give it, for your own tests.

``ScriptedChatModel(["hello", tool_call("search", q="x"), "done"])`` answers
the first request with the text ``hello``, the second with a call to
``search``, the third with ``done``; each request is recorded in
``.requests`` so a test can check what the agent sent. It implements the whole
``ChatModel`` protocol (``complete`` and ``stream``), so an agent under test
runs exactly the code it runs against a real provider.

A script item is one of: a string (a text reply); a ``ToolCall`` or a list of
them (a reply that calls tools); an assistant ``Message`` (sent as is); a
``ChatResponse``; an exception instance (raised, e.g. ``ContextLengthExceeded``);
or a callable taking the ``ChatRequest`` and returning any of these.

Usage is reported like a provider would: input tokens are the request's size
by threadline's counter (times ``input_scale``, to let tests exercise
calibration), output tokens the reply's size, unless the item brings its own.
"""

from __future__ import annotations

import math
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from threadline.errors import ModelError
from threadline.llm.base import ChatRequest, ChatResponse
from threadline.messages import Message, ToolCall, Usage
from threadline.tokens import counter_for

DEFAULT_SCRIPTED_MODEL = "scripted"
"""The model name a scripted model reports; say "simulated" to a user who might be misled."""
STREAM_PIECE = re.compile(r"\S+\s*|\s+")
"""Streamed text goes out a word (with its trailing space) at a time."""

ScriptItem: TypeAlias = (
    str
    | ToolCall
    | Sequence[ToolCall]
    | Message
    | ChatResponse
    | BaseException
    | Callable[[ChatRequest], Any]
)


def tool_call(
    name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None, **kwargs: Any
) -> ToolCall:
    """A tool call for a script: ``tool_call("read_file", path="a.py")``."""
    args = dict(arguments or {})
    args.update(kwargs)
    return ToolCall(id=id or f"call_{uuid.uuid4().hex[:16]}", name=name, arguments=args)


@dataclass(frozen=True, slots=True)
class RecordedChat:
    """One request the scripted model received, frozen at the time it was sent."""

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...]
    streamed: bool
    request: ChatRequest


class ScriptedChatModel:
    """A ``ChatModel`` that answers from a script and records every request."""

    def __init__(
        self,
        replies: Iterable[ScriptItem] = (),
        *,
        model: str = DEFAULT_SCRIPTED_MODEL,
        input_scale: float = 1.0,
        tokenizer_model: str | None = None,
        default: ScriptItem | None = None,
        record: bool = True,
    ) -> None:
        """``default`` answers once the script runs out (else ``ModelError``);
        ``tokenizer_model`` picks the counter for reported usage (default model's);
        ``record=False`` keeps only a count of requests (long simulated runs)."""
        if input_scale <= 0:
            raise ValueError("input_scale must be positive")
        self.model = model
        self.input_scale = input_scale
        self.default = default
        self._script: deque[ScriptItem] = deque(replies)
        self._counter = counter_for(tokenizer_model)
        self.record = record
        self.calls: list[RecordedChat] = []
        self.request_count = 0

    def __repr__(self) -> str:
        return f"ScriptedChatModel({self.model!r}, {len(self._script)} replies left)"

    @property
    def requests(self) -> list[ChatRequest]:
        """Every request received, oldest first."""
        return [c.request for c in self.calls]

    @property
    def remaining(self) -> int:
        return len(self._script)

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script."""
        self._script.extend(items)

    # -- ChatModel -----------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self._answer(request, streamed=False)

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        response = self._answer(request, streamed=True)
        yield from STREAM_PIECE.findall(response.message.text)
        yield response

    # -- internals ------------------------------------------------------------------

    def _next_item(self, request: ChatRequest) -> ScriptItem:
        if self._script:
            return self._script.popleft()
        if self.default is not None:
            return self.default
        raise ModelError(
            f"ScriptedChatModel: no scripted reply left for request #{self.request_count} "
            "(add more replies, or pass default=...)"
        )

    def _answer(self, request: ChatRequest, *, streamed: bool) -> ChatResponse:
        self.request_count += 1
        if self.record:
            self.calls.append(
                RecordedChat(
                    messages=tuple(request.messages),
                    tools=tuple(dict(t) for t in request.tools),
                    streamed=streamed,
                    request=request,
                )
            )
        item: Any = self._next_item(request)
        while callable(item) and not isinstance(item, BaseException | type):
            item = item(request)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, ChatResponse):
            return item
        message = self._as_message(item)
        usage = message.usage or self._usage(request, message)
        message = message.model_copy(update={"model": message.model or self.model, "usage": usage})
        return ChatResponse(
            message=message,
            model=message.model or self.model,
            usage=usage,
            finish_reason="tool_calls" if message.tool_calls else "stop",
        )

    @staticmethod
    def _as_message(item: Any) -> Message:
        if isinstance(item, Message):
            if item.role != "assistant":
                raise ModelError(
                    f"ScriptedChatModel: a scripted reply must be an assistant "
                    f"message, got role {item.role!r}"
                )
            return item
        if isinstance(item, str):
            return Message.assistant(item)
        if isinstance(item, ToolCall):
            return Message.assistant(tool_calls=[item])
        if isinstance(item, Sequence) and all(isinstance(c, ToolCall) for c in item):
            return Message.assistant(tool_calls=list(item))
        raise ModelError(f"ScriptedChatModel: cannot play back a {type(item).__name__}")

    def _usage(self, request: ChatRequest, reply: Message) -> Usage:
        estimated = self._counter.count_messages(request.messages)
        if request.tools:
            estimated += self._counter.count_tools(request.tools)
        output = self._counter.count_message(reply)
        return Usage(input_tokens=math.ceil(estimated * self.input_scale), output_tokens=output)


def with_usage(item: str | Message, *, input_tokens: int, output_tokens: int = 1) -> Message:
    """A scripted reply that reports exactly this usage."""
    message = Message.assistant(item) if isinstance(item, str) else item
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return message.model_copy(update={"usage": usage})
