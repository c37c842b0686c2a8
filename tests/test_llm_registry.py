"""Model strings -> providers: parsing, keys from the environment, base URLs, end to end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FakeAnthropic, FakeOpenAI
from threadline.errors import ConfigError, MissingCredentials
from threadline.llm import (
    PROVIDERS,
    ChatModel,
    ChatRequest,
    RetryPolicy,
    parse_model,
    resolve_model,
)
from threadline.llm.anthropic_provider import AnthropicChatModel
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.messages import Message

ENV_VARS = sorted(
    {v for p in PROVIDERS.values() for v in (p.key_env, p.base_url_env) if v} | {"OLLAMA_HOST"}
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the variables they set, whatever the developer's shell holds."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("spec", "provider", "model"),
    [
        ("openai/gpt-4o", "openai", "gpt-4o"),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("ollama/llama3.1:8b", "ollama", "llama3.1:8b"),
        (
            "openrouter/meta-llama/llama-3.3-70b-instruct",
            "openrouter",
            "meta-llama/llama-3.3-70b-instruct",
        ),
        ("vllm/Qwen/Qwen2.5-7B-Instruct", "vllm", "Qwen/Qwen2.5-7B-Instruct"),
        ("llama.cpp/local", "llamacpp", "local"),
        ("OpenAI/gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("gpt-4o", "openai", "gpt-4o"),
        ("claude-haiku-4-5", "anthropic", "claude-haiku-4-5"),
    ],
)
def test_parse_model(spec: str, provider: str, model: str) -> None:
    parsed = parse_model(spec)
    assert (parsed.provider.name, parsed.model) == (provider, model)


@pytest.mark.parametrize("spec", ["", "   ", "nosuch/model", "openai/", "openai//"])
def test_bad_model_strings(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_model(spec)


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown provider 'acme'.*openai.*compatible/MODEL"):
        parse_model("acme/model-x")


def test_openai_needs_its_key() -> None:
    with pytest.raises(MissingCredentials, match=r"OPENAI_API_KEY.*export OPENAI_API_KEY="):
        resolve_model("openai/gpt-4o")


def test_anthropic_needs_its_key() -> None:
    with pytest.raises(MissingCredentials, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic/claude-haiku-4-5")


def test_openrouter_needs_its_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")  # not the one OpenRouter wants
    with pytest.raises(MissingCredentials, match="OPENROUTER_API_KEY"):
        resolve_model("openrouter/meta-llama/llama-3.3-70b-instruct")


def test_openrouter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or")
    model = resolve_model("openrouter/anthropic/claude-3.5-sonnet")
    assert isinstance(model, OpenAIChatModel)
    assert model.model == "anthropic/claude-3.5-sonnet"
    assert model.base_url == "https://openrouter.ai/api/v1"
    assert model.provider == "openrouter"


def test_ollama_needs_no_key() -> None:
    model = resolve_model("ollama/llama3.1")
    assert isinstance(model, OpenAIChatModel)
    assert model.base_url == "http://localhost:11434/v1"
    assert model.model == "llama3.1"


def test_ollama_host_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    assert resolve_model("ollama/qwen2.5").base_url == "http://10.0.0.5:11434/v1"  # type: ignore[attr-defined]


def test_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        resolve_model("compatible/my-model")


def test_compatible_uses_openai_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1")
    model = resolve_model("compatible/my-model")
    assert model.base_url == "http://127.0.0.1:9999/v1"  # type: ignore[attr-defined]


def test_base_url_override_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_BASE_URL", "http://elsewhere:8000/v1")
    model = resolve_model("vllm/m", base_url="http://gpu-box:8000/v1")
    assert model.base_url == "http://gpu-box:8000/v1"  # type: ignore[attr-defined]


def test_overrides_reach_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = RetryPolicy(max_retries=7, base_delay=0.01)
    model = resolve_model("openai/gpt-4o", api_key="sk-explicit", retry=policy, max_retries=1)
    assert isinstance(model, OpenAIChatModel)
    assert model.retry.max_retries == 1 and model.retry.base_delay == 0.01


def test_every_provider_resolves_to_a_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for spec in PROVIDERS.values():
        if spec.key_env:
            monkeypatch.setenv(spec.key_env, "k")
        if spec.base_url_env:
            monkeypatch.setenv(spec.base_url_env, "http://127.0.0.1:1/v1")
    for name, spec in PROVIDERS.items():
        model = resolve_model(
            f"{name}/claude-haiku-4-5" if spec.api == "anthropic" else f"{name}/m"
        )
        assert isinstance(model, ChatModel)
        kind = AnthropicChatModel if spec.api == "anthropic" else OpenAIChatModel
        assert isinstance(model, kind), name


# -- end to end against the fakes ----------------------------------------------------


@pytest.fixture
def openai_srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def test_compatible_model_talks_to_the_server(
    openai_srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_srv.url)
    openai_srv.reply_text("from a compatible server")
    model = resolve_model("compatible/local-model")
    reply = model.complete(ChatRequest([Message.user("hi")]))
    assert reply.message.text == "from a compatible server"
    assert openai_srv.last_json["model"] == "local-model"


def test_anthropic_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropic() as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        srv.reply_text("hello from claude")
        model = resolve_model("claude-haiku-4-5")
        assert isinstance(model, AnthropicChatModel)
        assert model.complete(ChatRequest([Message.user("hi")])).message.text == "hello from claude"
        assert srv.last_request.headers["authorization"] == "Bearer sk-ant-test"
