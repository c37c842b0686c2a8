"""One small OpenAI chat file's messages (system, user, a tool call and its result, the
answer), for the tests that import such a file through the API and through the CLI."""

from __future__ import annotations

from typing import Any

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "calc", "arguments": '{"expr": "2+2"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c", "name": "calc", "content": "4"},
    {"role": "assistant", "content": "done"},
]
