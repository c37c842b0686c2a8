"""A local server speaking OpenAI's Responses API (``POST /v1/responses``), for tests.

It answers text replies as one ``response`` object, the shape the OpenAI SDK (and the
OpenAI Agents SDK's default model over it) parses; errors carry OpenAI's ``{"error":
...}`` body. Streaming and tool calls are not spoken: a test that needs them scripts a
model of its own.

    with FakeResponses() as srv:
        srv.reply_text("hello")
        # OPENAI_BASE_URL=srv.url, OPENAI_API_KEY=test
"""

from __future__ import annotations

from typing import Any

from tests.fakes.base import FAKE_CREATED, Failure, FakeServer, RecordedRequest, Rendered, Reply


class FakeResponses(FakeServer):
    """Scripted Responses API server; ``url`` ends in ``/v1``."""

    endpoint = "/v1/responses"
    url_suffix = "/v1"

    def render_json(self, reply: Reply, request: RecordedRequest) -> Rendered:
        if reply.tool_calls:
            raise NotImplementedError("FakeResponses answers text only")
        data = request.json()
        prompt, completion = self.usage_numbers(reply, request)
        body: dict[str, Any] = {
            "id": f"resp_fake{self.next_id():04d}",
            "object": "response",
            "created_at": FAKE_CREATED,
            "status": "completed",
            "model": self.requested_model(request, reply),
            "output": [
                {
                    "type": "message",
                    "id": f"msg_fake{self.next_id():04d}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": data.get("tool_choice", "auto") if isinstance(data, dict) else "auto",
            "tools": [],
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            },
        }
        return self.json_body(200, body, self.id_headers())

    def render_failure(self, failure: Failure) -> Rendered:
        error = {
            "message": failure.message or f"HTTP {failure.status}",
            "type": failure.error_type or "invalid_request_error",
            "param": None,
            "code": failure.code,
        }
        return self.json_body(failure.status, {"error": error})
