"""Chat-model providers: the ``ChatModel`` protocol and its implementations.

Re-exports only. The provider classes are loaded on first use (module
``__getattr__``), so importing ``threadline.llm`` never needs the ``openai`` or
``anthropic`` SDK; ``resolve_model("provider/model")`` is the usual way in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from threadline.llm.base import ChatModel, ChatRequest, ChatResponse
from threadline.llm.cancel import CallCancelled, CancelToken
from threadline.llm.registry import (
    PROVIDERS,
    ModelSpec,
    ProviderSpec,
    parse_model,
    provider_names,
    resolve_model,
)
from threadline.llm.retry import NO_RETRIES, RetryEvent, RetryPolicy
from threadline.llm.scripted import ScriptedChatModel, tool_call

if TYPE_CHECKING:
    from threadline.llm.anthropic_provider import AnthropicChatModel
    from threadline.llm.openai_provider import OpenAIChatModel

__all__ = [
    "NO_RETRIES",
    "PROVIDERS",
    "AnthropicChatModel",
    "CallCancelled",
    "CancelToken",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ModelSpec",
    "OpenAIChatModel",
    "ProviderSpec",
    "RetryEvent",
    "RetryPolicy",
    "ScriptedChatModel",
    "parse_model",
    "provider_names",
    "resolve_model",
    "tool_call",
]

_LAZY = {
    "OpenAIChatModel": "threadline.llm.openai_provider",
    "AnthropicChatModel": "threadline.llm.anthropic_provider",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'threadline.llm' has no attribute {name!r}")
