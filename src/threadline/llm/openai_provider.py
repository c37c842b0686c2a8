"""OpenAI Chat Completions, and every server that speaks it.

One class serves OpenAI itself and the compatible servers (Ollama, vLLM,
llama.cpp's server, LM Studio, OpenRouter, ...): they differ only in base
URL, in whether a key is needed, and in small dialect points that are
constructor options here (``max_tokens`` vs ``max_completion_tokens``,
``stream_options``). The wire format is the SDK's; threadline messages go out
through ``threadline.interop.openai_format`` and replies come back as a
``Message`` with tool calls, the model name and the usage the server reported.

The SDK's own retries are off; ``threadline.llm.retry`` retries instead, and
every SDK exception leaves as a ``ModelError`` (``ContextLengthExceeded``,
``MissingCredentials``) raised from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Unpack

from threadline.llm.sdk_model import SDKChatModel, SDKOptions, missing_sdk

try:
    import openai
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise missing_sdk("OpenAI", "openai") from _exc

from threadline.errors import ContextLengthExceeded, ModelError
from threadline.interop.openai_format import to_openai, tool_call_from_openai
from threadline.llm.base import ChatRequest, ChatResponse
from threadline.llm.retry import Retryable, retryable_status
from threadline.messages import Message, ToolCall, Usage

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
CONTEXT_LENGTH_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
"""Error codes / types that mean "prompt longer than the window" (OpenAI, llama.cpp)."""
CONTEXT_LENGTH_PHRASES = (
    "maximum context length",  # OpenAI, vLLM, OpenRouter
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the available context size",  # llama.cpp server
    "prompt is too long",
    "input is too long",
)
"""Lower-case phrases in a 400 error's message that mean the same."""
RETRYABLE_STREAM_ERRORS = frozenset({"server_error", "rate_limit_exceeded", "overloaded_error"})
"""Error types of an in-stream error event that are retried when nothing was shown yet."""
NEUTRAL_TOOL_CHOICES = {"none": "none", "auto": "auto", "required": "required", "any": "required"}

MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]


def tool_to_openai(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A neutral ``{name, description, parameters}`` definition as a Chat Completions tool.

    A definition already in OpenAI's shape (``{"type": "function", ...}``) passes through.
    """
    if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
        return dict(tool)
    function: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def tool_choice_to_openai(choice: str) -> str | dict[str, Any]:
    """``none`` / ``auto`` / ``required`` pass through; any other string names one tool."""
    if choice in NEUTRAL_TOOL_CHOICES:
        return NEUTRAL_TOOL_CHOICES[choice]
    return {"type": "function", "function": {"name": choice}}


def usage_from_openai(raw: Any) -> Usage:
    """``CompletionUsage`` (or None) as a threadline ``Usage``; cached tokens are a subset."""
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    return Usage(
        input_tokens=getattr(raw, "prompt_tokens", None),
        output_tokens=getattr(raw, "completion_tokens", None),
        cached_tokens=getattr(details, "cached_tokens", None) if details is not None else None,
        cache_write_tokens=(
            getattr(details, "cache_write_tokens", None) if details is not None else None
        ),
    )


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()
    return exc.message


def is_context_length_error(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 413):
        return False
    body = exc.body if isinstance(exc.body, Mapping) else {}
    codes = {str(body.get("code") or ""), str(body.get("type") or "")}
    if codes & CONTEXT_LENGTH_CODES:
        return True
    text = _error_message(exc).lower()
    return any(phrase in text for phrase in CONTEXT_LENGTH_PHRASES)


class OpenAIChatModel(SDKChatModel[openai.OpenAI]):
    """A ``ChatModel`` over the Chat Completions API of OpenAI or a compatible server."""

    sdk_error = openai.OpenAIError
    timeout_error = openai.APITimeoutError
    connection_error = openai.APIConnectionError
    key_hint = "check that the key is valid for this server"

    def __init__(
        self,
        model: str,
        *,
        provider: str = "openai",
        api_key_env: str | None = OPENAI_API_KEY_ENV,
        require_api_key: bool = True,
        max_tokens_param: MaxTokensParam | None = None,
        stream_usage: bool = True,
        **options: Unpack[SDKOptions],
    ) -> None:
        """``provider`` names the service in errors (``ollama``, ``openrouter``, ...).

        The key is ``api_key``, else the ``api_key_env`` variable; when neither is
        set a keyless server gets a placeholder and any other raises
        ``MissingCredentials``. ``max_tokens_param`` defaults to OpenAI's current
        ``max_completion_tokens`` on api.openai.com and to the widely supported
        ``max_tokens`` elsewhere. ``stream_usage`` asks for a usage chunk at the
        end of a stream (``stream_options``), which a few old servers reject.
        """
        super().__init__(
            model,
            openai.OpenAI,
            provider=provider,
            api_key_env=api_key_env,
            require_api_key=require_api_key,
            **options,
        )
        self.stream_usage = stream_usage
        if max_tokens_param is None:
            official = self.base_url.startswith("https://api.openai.com")
            max_tokens_param = "max_completion_tokens" if official else "max_tokens"
        self.max_tokens_param: MaxTokensParam = max_tokens_param

    # -- ChatModel ------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResponse:
        kwargs = self._request_kwargs(request)
        completion = self._call(
            lambda: self._client.chat.completions.create(**kwargs), request.cancel
        )
        if not completion.choices:
            raise ModelError(f"{self._where()}: the reply had no choices")
        choice = completion.choices[0]
        raw = choice.message
        try:
            calls = [tool_call_from_openai(tc.model_dump()) for tc in raw.tool_calls or []]
        except ValueError as exc:  # InvalidMessage, pydantic's ValidationError
            raise ModelError(f"{self._where()}: malformed tool call in the reply: {exc}") from exc
        metadata: dict[str, Any] = {}
        reasoning = getattr(raw, "reasoning_content", None)
        if isinstance(reasoning, str) and reasoning:
            metadata["reasoning"] = reasoning
        if isinstance(raw.refusal, str) and raw.refusal:
            metadata["refusal"] = raw.refusal
        return self._response(
            text=raw.content or "",
            calls=calls,
            model=completion.model,
            usage=usage_from_openai(completion.usage),
            finish_reason=choice.finish_reason,
            metadata=metadata,
        )

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        kwargs = self._request_kwargs(request)
        kwargs["stream"] = True
        if self.stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        # An error event before any text is retried like an error status.
        acc = yield from self._stream_text(
            lambda: self._client.chat.completions.create(**kwargs),
            _StreamAssembler,
            request.cancel,
        )
        try:
            calls = acc.tool_calls()
        except ValueError as exc:  # InvalidMessage, pydantic's ValidationError
            raise ModelError(f"{self._where()}: malformed tool call in the stream: {exc}") from exc
        metadata: dict[str, Any] = {}
        if acc.reasoning:
            metadata["reasoning"] = "".join(acc.reasoning)
        yield self._response(
            text="".join(acc.text),
            calls=calls,
            model=acc.model,
            usage=usage_from_openai(acc.usage),
            finish_reason=acc.finish_reason,
            metadata=metadata,
        )

    # -- internals ------------------------------------------------------------

    def _request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai(request.messages),
        }
        if request.tools:
            kwargs["tools"] = [tool_to_openai(t) for t in request.tools]
            if request.tool_choice is not None:
                kwargs["tool_choice"] = tool_choice_to_openai(request.tool_choice)
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs[self.max_tokens_param] = request.max_tokens
        if request.extra:
            kwargs["extra_body"] = dict(request.extra)
        return kwargs

    def _response(
        self,
        *,
        text: str,
        calls: Sequence[ToolCall],
        model: str | None,
        usage: Usage,
        finish_reason: str | None,
        metadata: dict[str, Any],
    ) -> ChatResponse:
        name = model or self.model
        message = Message.assistant(
            text, tool_calls=calls, model=name, usage=usage, metadata=metadata
        )
        return ChatResponse(message=message, model=name, usage=usage, finish_reason=finish_reason)

    def _translate_reply(self, exc: Exception, where: str, suffix: str) -> ModelError:
        if isinstance(exc, openai.APIStatusError):
            message = _error_message(exc)
            if is_context_length_error(exc):
                return ContextLengthExceeded(f"{where}: context length exceeded: {message}")
            return self._status_error(where, exc.status_code, message, suffix)
        if isinstance(exc, openai.APIResponseValidationError):
            return ModelError(f"{where}: the reply did not match the API schema: {exc.message}")
        if isinstance(exc, openai.APIError):
            return ModelError(f"{where}: error in the stream: {exc.message}{suffix}")
        return ModelError(f"{where}: {exc}")

    def _classify_reply(self, exc: BaseException) -> Retryable | None:
        if isinstance(exc, openai.APIStatusError):
            return retryable_status(exc.status_code, _error_message(exc), exc.response.headers)
        if isinstance(exc, openai.APIError):
            # an error event inside a 200 stream: worth a retry when the server says so
            body = exc.body if isinstance(exc.body, Mapping) else {}
            if body.get("type") in RETRYABLE_STREAM_ERRORS:
                return Retryable(f"error in the stream: {exc.message}")
        return None


class _StreamAssembler:
    """Builds the final reply from ``chat.completion.chunk`` deltas.

    Tool calls arrive in pieces keyed by ``index``: the first piece carries the
    id and name, the rest append to the argument string. A few servers omit
    ``index``; their pieces are keyed by id, or appended to the last call.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.model: str | None = None
        self.usage: Any = None
        self.finish_reason: str | None = None
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Any) -> str:
        if getattr(chunk, "model", None):
            self.model = chunk.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        out: list[str] = []
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                out.append(delta.content)
            reasoning = getattr(delta, "reasoning_content", None)
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
            for piece in delta.tool_calls or []:
                self._add_call_piece(piece)
        text = "".join(out)
        if text:
            self.text.append(text)
        return text

    def _add_call_piece(self, piece: Any) -> None:
        index = piece.index
        if index is None:
            by_id = [i for i, c in self._calls.items() if piece.id and c["id"] == piece.id]
            if by_id:
                index = by_id[0]
            elif piece.id or not self._calls:
                index = len(self._calls)
            else:
                index = max(self._calls)
        call = self._calls.setdefault(index, {"id": None, "name": "", "arguments": []})
        if piece.id and not call["id"]:
            call["id"] = piece.id
        function = piece.function
        if function is not None:
            if function.name and not call["name"]:
                call["name"] = function.name
            if function.arguments:
                call["arguments"].append(function.arguments)

    def tool_calls(self) -> list[ToolCall]:
        calls = []
        for index in sorted(self._calls):
            call = self._calls[index]
            calls.append(
                tool_call_from_openai(
                    {
                        "id": call["id"] or f"call_{index}",
                        "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                    }
                )
            )
        return calls
