"""The ChatModel protocol: one call to a chat model, provider-neutral.

Providers (OpenAI-compatible, Anthropic, the demo's simulated model, test
fakes) implement ``complete``; ``stream`` yields text as it arrives and returns
the same final reply. Everything crossing this boundary is a threadline
``Message``; provider formats stay inside the providers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from threadline.messages import Message, Usage

DEFAULT_TIMEOUT = 600.0
"""Seconds for one whole model request (a long reply from a slow local model can take
minutes)."""
DEFAULT_FIRST_BYTE_TIMEOUT = 60.0
"""Seconds to wait for the first byte of a reply, and for each next chunk: a server that
accepted the request and then says nothing is given up on (and retried) after this."""


@dataclass(slots=True)
class ChatRequest:
    """What to send. ``tools`` are neutral definitions: ``{name, description, parameters}``."""

    messages: Sequence[Message]
    tools: Sequence[Mapping[str, Any]] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: str | None = None
    """``"none"`` forbids tool use (the summarizer sets it); None leaves it to the model."""
    extra: dict[str, Any] = field(default_factory=dict)
    cancel: threading.Event | None = None
    """Set from another thread to end the call: a provider that can closes the request in
    flight (``threadline.llm.cancel``) and raises ``CallCancelled``."""


@dataclass(slots=True)
class ChatResponse:
    message: Message
    """The assistant reply, with ``tool_calls``, ``model`` and ``usage`` filled in."""
    model: str
    usage: Usage
    finish_reason: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    model: str
    """The model name as the provider knows it (no ``provider/`` prefix)."""

    def complete(self, request: ChatRequest) -> ChatResponse: ...

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        """Yields text chunks, then the final ``ChatResponse`` as the last item."""
        ...
