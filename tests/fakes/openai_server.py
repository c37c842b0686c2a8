"""A local server speaking OpenAI Chat Completions, for tests.

``POST /v1/chat/completions`` answers with a ``chat.completion`` object, or,
when the request says ``"stream": true``, with ``chat.completion.chunk``
events (``data: {...}`` lines, tool-call argument deltas keyed by index, a
usage-only chunk when ``stream_options.include_usage`` is set, then
``data: [DONE]``). Errors carry OpenAI's ``{"error": {message, type, param,
code}}`` body; the context-length error is the exact one OpenAI sends. Scripted like
every fake (``tests.fakes``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.base import (
    FAKE_CREATED,
    FakeServer,
    RecordedRequest,
    Rendered,
    Reply,
    StreamFailure,
    arguments_json,
    pieces,
)

DEFAULT_ERRORS: dict[int, tuple[str, str, str | None]] = {
    400: ("invalid_request_error", "Invalid request.", None),
    401: (
        "invalid_request_error",
        "Incorrect API key provided: test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
    ),
    403: ("invalid_request_error", "You are not allowed to sample from this model", None),
    404: (
        "invalid_request_error",
        "The model `no-such-model` does not exist or you do not have access to it.",
        "model_not_found",
    ),
    429: (
        "tokens",
        "Rate limit reached for gpt-4o in organization org-fake on tokens per min (TPM): "
        "Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s.",
        "rate_limit_exceeded",
    ),
    500: (
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
        None,
    ),
    503: ("server_error", "The engine is currently overloaded, please try again later.", None),
}
"""``status -> (type, message, code)`` as OpenAI sends them."""


def context_length_message(limit: int, requested: int) -> str:
    return (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {requested} tokens. Please reduce the length of the messages."
    )


class FakeOpenAI(FakeServer):
    """Scripted OpenAI Chat Completions server; ``url`` ends in ``/v1``."""

    endpoint = "/v1/chat/completions"
    url_suffix = "/v1"
    rate_limit_header = "x-ratelimit-remaining-tokens"
    errors = DEFAULT_ERRORS

    @property
    def env(self) -> dict[str, str]:
        """The environment a child ``threadline`` process needs to call this server."""
        return {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": self.url}

    def fail_context_length(self, *, limit: int = 128_000, requested: int = 131_072) -> None:
        """The 400 OpenAI sends when the prompt does not fit the window."""
        self.fail(
            400,
            message=context_length_message(limit, requested),
            error_type="invalid_request_error",
            code="context_length_exceeded",
        )

    # -- rendering ------------------------------------------------------------------

    def _tool_calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or f"call_fake{self.next_id():04d}",
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_json(call.arguments)},
            }
            for call in reply.tool_calls
        ]

    def _usage(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        prompt, completion = self.usage_numbers(reply, request)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens or 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    @staticmethod
    def _finish(reply: Reply) -> str:
        if reply.finish_reason:
            return reply.finish_reason
        return "tool_calls" if reply.tool_calls else "stop"

    def render_json(self, reply: Reply, request: RecordedRequest) -> Rendered:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if reply.text or not reply.tool_calls else None,
            "refusal": None,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls(reply)
        body = {
            "id": f"chatcmpl-fake{self.next_id():04d}",
            "object": "chat.completion",
            "created": FAKE_CREATED,
            "model": self.requested_model(request, reply),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish(reply),
                }
            ],
            "usage": self._usage(reply, request),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }
        return self.json_body(200, body, self.id_headers())

    def _chunk_maker(self, reply: Reply, request: RecordedRequest) -> Any:
        data = request.json()
        options = data.get("stream_options") if isinstance(data, dict) else None
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        base = {
            "id": f"chatcmpl-fake{self.next_id():04d}",
            "object": "chat.completion.chunk",
            "created": FAKE_CREATED,
            "model": self.requested_model(request, reply),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload: dict[str, Any] = {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                payload["usage"] = None
            return sse(payload)

        def usage_chunk() -> bytes | None:
            if not include_usage:
                return None
            return sse({**base, "choices": [], "usage": self._usage(reply, request)})

        return chunk, usage_chunk

    def render_stream(self, reply: Reply, request: RecordedRequest) -> Rendered:
        chunk, usage_chunk = self._chunk_maker(reply, request)
        events = [chunk({"role": "assistant", "content": "", "refusal": None})]
        events.extend(chunk({"content": piece}) for piece in self.text_chunks(reply))
        for index, call in enumerate(self._tool_calls(reply)):
            function = call["function"]
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": function["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            events.extend(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in pieces(function["arguments"])
            )
        events.append(chunk({}, self._finish(reply)))
        last = usage_chunk()
        if last is not None:
            events.append(last)
        events.append(b"data: [DONE]\n\n")
        return Rendered(200, self.sse_headers(), events=events)

    def stream_text(self, reply: Reply, request: RecordedRequest) -> list[bytes]:
        chunk, _ = self._chunk_maker(reply, request)
        events = [chunk({"role": "assistant", "content": "", "refusal": None})]
        events.extend(chunk({"content": piece}) for piece in self.text_chunks(reply))
        return events

    def stream_error(self, failure: StreamFailure) -> bytes:
        error = {
            "message": failure.message,
            "type": failure.error_type,
            "param": None,
            "code": None,
        }
        return sse({"error": error})

    def error_body(self, error_type: str, message: str, code: str | None) -> dict[str, Any]:
        error = {
            "message": message,
            "type": error_type,
            "param": "messages" if code == "context_length_exceeded" else None,
            "code": code,
        }
        return {"error": error}


def sse(payload: Any) -> bytes:
    """One ``data:`` event as OpenAI frames it (no ``event:`` line)."""
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()
