"""A local server speaking Anthropic's Messages API, for tests.

``POST /v1/messages`` answers with a ``message`` object (``text`` and
``tool_use`` content blocks, ``stop_reason``, usage with the cache fields),
or, when the request says ``"stream": true``, with the named events Anthropic
sends: ``message_start``, ``ping``, ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``) /
``content_block_stop`` per block, ``message_delta`` with the stop reason and
output usage, ``message_stop``. Errors carry ``{"type": "error", "error":
{type, message}, "request_id": ...}``; the context-length error is the exact
"prompt is too long" one. Like the real API (version 2026-10-21), it refuses a
request without ``max_tokens`` or with ``temperature`` / ``top_p`` / ``top_k``.
Scripted like every fake (``tests.fakes``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.base import (
    Failure,
    FakeServer,
    RecordedRequest,
    Rendered,
    Reply,
    StreamFailure,
    pieces,
)

REJECTED_PARAMETERS = ("temperature", "top_p", "top_k")
"""Sampling parameters that API version 2026-10-21 refuses (even at their defaults)."""
ERROR_TYPES: dict[int, tuple[str, str, str | None]] = {
    400: ("invalid_request_error", "Invalid request.", None),
    401: ("authentication_error", "invalid x-api-key", None),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
        None,
    ),
    404: ("not_found_error", "model: no-such-model", None),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes.", None),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 30,000 input "
        "tokens per minute. Please try again later.",
        None,
    ),
    500: ("api_error", "Internal server error", None),
    529: ("overloaded_error", "Overloaded", None),
}
"""``status -> (error type, message, code)`` as Anthropic sends them (no codes)."""


class FakeAnthropic(FakeServer):
    """Scripted Anthropic Messages server; ``url`` is the SDK's ``base_url``."""

    endpoint = "/v1/messages"
    url_suffix = ""
    request_id_header = "request-id"
    rate_limit_header = "anthropic-ratelimit-input-tokens-remaining"
    errors = ERROR_TYPES
    server_error_type = "api_error"

    def fail_context_length(self, *, tokens: int = 208_310, limit: int = 200_000) -> None:
        """The 400 Anthropic sends when the prompt does not fit the window."""
        self.fail(
            400,
            message=f"prompt is too long: {tokens} tokens > {limit} maximum",
            error_type="invalid_request_error",
        )

    def validate(self, request: RecordedRequest) -> Failure | None:
        """What API version 2026-10-21 rejects before generating anything."""
        body = request.json()
        if not isinstance(body, dict):
            return Failure(400, message="invalid JSON body", error_type="invalid_request_error")
        for name in ("model", "messages", "max_tokens"):
            if name not in body:
                return Failure(
                    400, message=f"{name}: Field required", error_type="invalid_request_error"
                )
        for name in REJECTED_PARAMETERS:
            if name in body:
                return Failure(
                    400,
                    message=f"{name}: Extra inputs are not permitted",
                    error_type="invalid_request_error",
                )
        return None

    # -- rendering ------------------------------------------------------------------

    def _blocks(self, reply: Reply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            arguments = call.arguments
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id or f"toolu_fake{self.next_id():04d}",
                    "name": call.name,
                    # a string stands for arguments that are not a JSON object; the
                    # non-streaming API can only send objects, so it is wrapped
                    "input": arguments if isinstance(arguments, dict) else {"_raw": arguments},
                }
            )
        return blocks

    def _usage(
        self, reply: Reply, request: RecordedRequest, *, output: bool = True
    ) -> dict[str, Any]:
        prompt, completion = self.usage_numbers(reply, request)
        read = reply.cached_tokens or 0
        written = reply.cache_write_tokens or 0
        return {
            # Anthropic's input_tokens excludes the cached part of the prompt
            "input_tokens": max(prompt - read - written, 0),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": completion if output else 1,
            "service_tier": "standard",
        }

    @staticmethod
    def _stop(reply: Reply) -> str:
        if reply.finish_reason:
            return reply.finish_reason
        return "tool_use" if reply.tool_calls else "end_turn"

    def _message(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        return {
            "id": f"msg_fake{self.next_id():04d}",
            "type": "message",
            "role": "assistant",
            "model": self.requested_model(request, reply),
            "content": self._blocks(reply),
            "stop_reason": self._stop(reply),
            "stop_sequence": None,
            "usage": self._usage(reply, request),
        }

    def render_json(self, reply: Reply, request: RecordedRequest) -> Rendered:
        return self.json_body(200, self._message(reply, request), self.id_headers())

    def _stream_start(self, reply: Reply, request: RecordedRequest) -> list[bytes]:
        message = self._message(reply, request)
        message.update(
            content=[], stop_reason=None, usage=self._usage(reply, request, output=False)
        )
        return [
            event("message_start", {"type": "message_start", "message": message}),
            event("ping", {"type": "ping"}),
        ]

    def _text_block(self, index: int, chunks: list[str]) -> list[bytes]:
        events = [
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        ]
        events.extend(
            event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
            for piece in chunks
        )
        return events

    def render_stream(self, reply: Reply, request: RecordedRequest) -> Rendered:
        events = self._stream_start(reply, request)
        index = 0
        if reply.text:
            events.extend(self._text_block(index, self.text_chunks(reply)))
            events.append(block_stop(index))
            index += 1
        for call in reply.tool_calls:
            arguments = call.arguments
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            start = {
                "type": "tool_use",
                "id": call.id or f"toolu_fake{self.next_id():04d}",
                "name": call.name,
                "input": {},
            }
            events.append(
                event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            for piece in ["", *pieces(text)]:
                events.append(
                    event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
            events.append(block_stop(index))
            index += 1
        _, completion = self.usage_numbers(reply, request)
        events.append(
            event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self._stop(reply), "stop_sequence": None},
                    "usage": {"output_tokens": completion},
                },
            )
        )
        events.append(event("message_stop", {"type": "message_stop"}))
        return Rendered(200, [*self.sse_headers(), *self.id_headers()], events=events)

    def stream_text(self, reply: Reply, request: RecordedRequest) -> list[bytes]:
        return [*self._stream_start(reply, request), *self._text_block(0, self.text_chunks(reply))]

    def stream_error(self, failure: StreamFailure) -> bytes:
        error = {"type": failure.error_type, "message": failure.message}
        return event("error", {"type": "error", "error": error})

    def error_body(self, error_type: str, message: str, code: str | None) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": "req_fake",
        }


def event(name: str, payload: dict[str, Any]) -> bytes:
    """One named server-sent event, framed as Anthropic frames it."""
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def block_stop(index: int) -> bytes:
    return event("content_block_stop", {"type": "content_block_stop", "index": index})
