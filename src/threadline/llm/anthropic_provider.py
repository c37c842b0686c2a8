"""Anthropic Messages API, on the official SDK.

Messages go out through ``threadline.interop.anthropic_format.to_anthropic``
(system prompt as a parameter, alternating turns, tool results as
``tool_result`` blocks); the reply's content blocks come back as one
assistant ``Message``: text blocks joined, ``tool_use`` blocks as tool calls,
``thinking`` blocks kept in ``metadata["thinking"]`` so they can be replayed.
Streaming reads the raw server-sent events (``message_start``,
``content_block_*`` with ``text_delta`` and ``input_json_delta``,
``message_delta``, ``message_stop``) and builds the same reply.

Sampling: the API version the SDK sends rejects ``temperature`` (even 1.0),
so ``ChatRequest.temperature`` is ignored here rather than failing every call.

Usage: Anthropic's ``input_tokens`` counts only the uncached part of the
prompt. threadline's ``Usage.input_tokens`` means the whole prompt (as
OpenAI's ``prompt_tokens`` does), because that is what calibrates the token
counter; so it is ``input + cache_read + cache_creation`` here, with the two
cache figures also in ``cached_tokens`` and ``cache_write_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Unpack

from threadline.llm.sdk_model import SDKChatModel, SDKOptions, missing_sdk

try:
    import anthropic
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise missing_sdk("Anthropic", "anthropic") from _exc

from threadline.catalog import lookup
from threadline.errors import ContextLengthExceeded, ModelError
from threadline.interop.anthropic_format import RAW_ARGUMENTS_KEY, to_anthropic
from threadline.llm.base import ChatRequest, ChatResponse
from threadline.llm.retry import Retryable, retryable_status
from threadline.messages import Message, ToolCall, Usage

ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY"
MAX_TOKENS_CAP = 16_384
"""Default ``max_tokens`` is the model's output cap, but no more than this: the API
needs a number, and reserving a 64k reply on every call wastes the window."""
CONTEXT_LENGTH_PHRASES = ("prompt is too long", "too many tokens", "context window")
"""Lower-case phrases in a 400 ``invalid_request_error`` that mean the prompt is too long."""
RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
"""In-stream error types that are retried when nothing was shown yet."""
NEUTRAL_TOOL_CHOICES: Mapping[str, dict[str, Any]] = {
    "none": {"type": "none"},
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "any": {"type": "any"},
}


def tool_to_anthropic(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A neutral ``{name, description, parameters}`` definition as an Anthropic tool.

    A definition in OpenAI's ``{"type": "function", "function": {...}}`` shape is
    accepted too; one already carrying ``input_schema`` passes through.
    """
    if "input_schema" in tool:
        return dict(tool)
    if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
        tool = tool["function"]
    out: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        out["description"] = tool["description"]
    out["input_schema"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return out


def tool_choice_to_anthropic(choice: str) -> dict[str, Any]:
    """``none``, ``auto``, ``required`` (``any``) map to Anthropic's; other strings name a tool."""
    if choice in NEUTRAL_TOOL_CHOICES:
        return dict(NEUTRAL_TOOL_CHOICES[choice])
    return {"type": "tool", "name": choice}


def default_max_tokens(model: str) -> int:
    """The model's published output cap, at most ``MAX_TOKENS_CAP``."""
    return min(lookup(model).max_output, MAX_TOKENS_CAP)


def usage_from_anthropic(raw: Any) -> Usage:
    """Anthropic usage as threadline ``Usage``; ``input_tokens`` is the whole prompt."""
    if raw is None:
        return Usage()
    uncached = getattr(raw, "input_tokens", None)
    read = getattr(raw, "cache_read_input_tokens", None)
    written = getattr(raw, "cache_creation_input_tokens", None)
    total = None if uncached is None else uncached + (read or 0) + (written or 0)
    return Usage(
        input_tokens=total,
        output_tokens=getattr(raw, "output_tokens", None),
        cached_tokens=read,
        cache_write_tokens=written,
    )


def _tool_call(block: Mapping[str, Any]) -> ToolCall:
    data = block.get("input")
    if isinstance(data, Mapping) and set(data) == {RAW_ARGUMENTS_KEY}:
        raw = data[RAW_ARGUMENTS_KEY]
        if isinstance(raw, str):
            return ToolCall(id=block["id"], name=block["name"], raw_arguments=raw)
    if isinstance(data, str):  # a streamed argument string that was not JSON
        return ToolCall.from_json_arguments(id=block["id"], name=block["name"], arguments=data)
    arguments = dict(data) if isinstance(data, Mapping) else {}
    return ToolCall(id=block["id"], name=block["name"], arguments=arguments)


def message_from_blocks(
    blocks: Iterable[Mapping[str, Any]], *, model: str, usage: Usage
) -> Message:
    """The assistant ``Message`` for a reply's content blocks."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    metadata: dict[str, Any] = {}
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(_tool_call(block))
        elif kind in ("thinking", "redacted_thinking"):
            metadata.setdefault("thinking", []).append(dict(block))
        else:
            metadata.setdefault("unsupported_blocks", []).append(dict(block))
    return Message.assistant(
        "".join(texts), tool_calls=calls, model=model, usage=usage, metadata=metadata
    )


def _error_fields(exc: anthropic.APIStatusError) -> tuple[str, str]:
    """``(error type, message)`` from an Anthropic error body."""
    body = exc.body
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        return str(error.get("type") or ""), str(error.get("message") or exc.message)
    if isinstance(body, str) and body.strip():
        return "", body.strip()
    return "", exc.message


def is_context_length_error(exc: anthropic.APIStatusError) -> bool:
    kind, message = _error_fields(exc)
    if exc.status_code == 413 or kind == "request_too_large":
        return True
    if exc.status_code != 400:
        return False
    text = message.lower()
    return any(phrase in text for phrase in CONTEXT_LENGTH_PHRASES)


class AnthropicChatModel(SDKChatModel[anthropic.Anthropic]):
    """A ``ChatModel`` over Anthropic's Messages API."""

    sdk_error = anthropic.AnthropicError
    timeout_error = anthropic.APITimeoutError
    connection_error = anthropic.APIConnectionError

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        provider: str = "anthropic",
        api_key_env: str | None = ANTHROPIC_API_KEY_ENV,
        **options: Unpack[SDKOptions],
    ) -> None:
        """``max_tokens`` is the default reply cap (a request's own wins).

        The key is ``api_key``, else the ``api_key_env`` variable, else
        ``MissingCredentials``; the base URL is ``base_url``, else
        ``ANTHROPIC_BASE_URL`` (read by the SDK), else Anthropic's.
        """
        super().__init__(
            model, anthropic.Anthropic, provider=provider, api_key_env=api_key_env, **options
        )
        self.max_tokens = max_tokens if max_tokens is not None else default_max_tokens(model)

    # -- ChatModel ------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResponse:
        kwargs = self._request_kwargs(request)
        reply = self._call(lambda: self._client.messages.create(**kwargs), request.cancel)
        usage = usage_from_anthropic(reply.usage)
        name = reply.model or self.model
        blocks = [block.model_dump(exclude_none=True) for block in reply.content]
        try:
            message = message_from_blocks(blocks, model=name, usage=usage)
        except (ValueError, KeyError) as exc:  # InvalidMessage, ValidationError
            raise ModelError(f"{self._where()}: malformed content in the reply: {exc}") from exc
        return ChatResponse(
            message=message, model=name, usage=usage, finish_reason=reply.stop_reason
        )

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        kwargs = self._request_kwargs(request)
        kwargs["stream"] = True
        # An "overloaded" error event before any text is retried like an error status.
        acc = yield from self._stream_text(
            lambda: self._client.messages.create(**kwargs), _StreamAssembler, request.cancel
        )
        usage = usage_from_anthropic(acc.usage)
        name = acc.model or self.model
        try:
            message = message_from_blocks(acc.blocks(), model=name, usage=usage)
        except (ValueError, KeyError) as exc:
            raise ModelError(f"{self._where()}: malformed content in the stream: {exc}") from exc
        yield ChatResponse(message=message, model=name, usage=usage, finish_reason=acc.stop_reason)

    # -- internals ------------------------------------------------------------

    def _request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        system, messages = to_anthropic(request.messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self.max_tokens,
        }
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [tool_to_anthropic(t) for t in request.tools]
            if request.tool_choice is not None:
                kwargs["tool_choice"] = tool_choice_to_anthropic(request.tool_choice)
        # request.temperature is deliberately not sent: the API version the SDK speaks
        # (anthropic-version 2026-10-21) rejects temperature / top_p / top_k with a 400.
        if request.extra:
            kwargs["extra_body"] = dict(request.extra)
        return kwargs

    def _translate_reply(self, exc: Exception, where: str, suffix: str) -> ModelError:
        if isinstance(exc, anthropic.APIStatusError):
            kind, message = _error_fields(exc)
            if is_context_length_error(exc):
                return ContextLengthExceeded(f"{where}: context length exceeded: {message}")
            if exc.status_code < 400:
                return ModelError(f"{where}: error in the stream: {kind}: {message}{suffix}")
            label = f" {kind}" if kind else ""
            return self._status_error(where, exc.status_code, message, suffix, label=label)
        return ModelError(f"{where}: {exc}")

    def _classify_reply(self, exc: BaseException) -> Retryable | None:
        if not isinstance(exc, anthropic.APIStatusError):
            return None
        kind, message = _error_fields(exc)
        if exc.status_code < 400:  # an error event inside a 200 stream
            if kind in RETRYABLE_STREAM_ERRORS:
                return Retryable(f"error in the stream: {kind}: {message}")
            return None
        return retryable_status(exc.status_code, message, exc.response.headers, kind=kind)


class _StreamAssembler:
    """Builds the reply's content blocks from Messages API stream events."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.usage: Any = None
        self.stop_reason: str | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}

    def add(self, event: Any) -> str:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.model = event.message.model
            self.usage = event.message.usage
        elif kind == "content_block_start":
            self._blocks[event.index] = event.content_block.model_dump(exclude_none=True)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            if event.delta.stop_reason:
                self.stop_reason = event.delta.stop_reason
            self._merge_usage(event.usage)
        return ""

    def _delta(self, index: int, delta: Any) -> str:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
            return str(delta.text)
        if kind == "input_json_delta":
            self._json.setdefault(index, []).append(delta.partial_json)
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = delta.signature
        return ""

    def _merge_usage(self, delta_usage: Any) -> None:
        """``message_delta`` usage is cumulative; its non-null fields win."""
        if delta_usage is None:
            return
        if self.usage is None:
            self.usage = delta_usage
            return
        merged = self.usage.model_copy()
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = getattr(delta_usage, name, None)
            if value is not None:
                setattr(merged, name, value)
        self.usage = merged

    def blocks(self) -> list[dict[str, Any]]:
        out = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if index in self._json:
                text = "".join(self._json[index])
                block["input"] = _parse_input(text)
            out.append(block)
        return out


def _parse_input(text: str) -> dict[str, Any] | str:
    """Streamed tool input; an unparseable string is kept verbatim as raw arguments."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text
