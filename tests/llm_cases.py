"""The SDK providers' tests' common ground: one ``ProviderCase`` per provider, fixtures, helpers.

``tests/test_llm_providers.py`` runs what every provider must do the same against each
case; ``tests/test_llm_openai.py`` and ``tests/test_llm_anthropic.py`` test each wire
format, with the same fixtures for their own case. A module picks its case(s) by
parametrizing ``case`` and binds the fixtures ``srv``, ``retries`` and ``model`` from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes import FakeAnthropic, FakeOpenAI, FakeServer
from threadline.llm import ChatRequest, ChatResponse, RetryEvent, RetryPolicy
from threadline.llm.anthropic_provider import AnthropicChatModel
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.llm.registry import PROVIDERS
from threadline.messages import Message

FAST = RetryPolicy(base_delay=0.001, max_delay=0.005)
"""Real backoff shape, tiny delays."""
GREP_TOOL = {
    "name": "grep",
    "description": "Search files for a pattern.",
    "parameters": {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    },
}


@dataclass(frozen=True)
class ProviderCase:
    """A provider, its fake server, and the finish reasons its API names."""

    name: str
    server: type[FakeServer]
    model_class: type[AnthropicChatModel] | type[OpenAIChatModel]
    model: str
    stop_finish: str
    """The finish reason of a reply that ends by itself."""
    tool_finish: str
    """The finish reason of a reply that calls tools."""

    @property
    def key_env(self) -> str:
        """The variable the provider's key is read from."""
        return str(PROVIDERS[self.name].key_env)


CASES = (
    ProviderCase(
        "anthropic", FakeAnthropic, AnthropicChatModel, "claude-haiku-4-5", "end_turn", "tool_use"
    ),
    ProviderCase("openai", FakeOpenAI, OpenAIChatModel, "gpt-4o", "stop", "tool_calls"),
)
ANTHROPIC, OPENAI = CASES


@pytest.fixture
def srv(case: ProviderCase) -> Iterator[Any]:
    with case.server() as server:
        yield server


@pytest.fixture
def retries() -> list[RetryEvent]:
    return []


@pytest.fixture
def model(case: ProviderCase, srv: FakeServer, retries: list[RetryEvent]) -> Iterator[Any]:
    with case.model_class(
        case.model, api_key="test", base_url=srv.url, retry=FAST, on_retry=retries.append
    ) as chat:
        yield chat


def ask(text: str = "hi", **kw: object) -> ChatRequest:
    return ChatRequest([Message.system("You are terse."), Message.user(text)], **kw)  # type: ignore[arg-type]


def drain(stream: Iterator[str | ChatResponse]) -> tuple[list[str], ChatResponse]:
    """The text chunks of a stream, and its final response (checked to come last)."""
    items = list(stream)
    final = items[-1]
    assert isinstance(final, ChatResponse)
    chunks = items[:-1]
    assert all(isinstance(c, str) for c in chunks)
    return [c for c in chunks if isinstance(c, str)], final
