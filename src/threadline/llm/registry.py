"""Model strings to chat models: ``provider/model`` -> a configured ``ChatModel``.

A model string names a provider and the model as that provider knows it:
``openai/gpt-4o``, ``anthropic/claude-sonnet-4-5``, ``ollama/llama3.1``,
``openrouter/meta-llama/llama-3.3-70b-instruct`` (everything after the first
slash is the model). A bare name (``gpt-4o``, ``claude-sonnet-4-5``) is
given the provider the model catalog knows it by.

Each provider is one row of ``PROVIDERS``: which API it speaks, its default
base URL, the environment variables for its key and base URL, and whether a
key is needed at all (local servers need none). Adding an OpenAI-compatible
service is adding a row. Provider modules are imported only when used, so a
missing SDK is reported (with the extra to install) only to those who need it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from threadline.catalog import lookup
from threadline.errors import ConfigError, MissingCredentials
from threadline.llm.base import ChatModel

Api = Literal["openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """How to reach one provider."""

    name: str
    api: Api
    """Which wire format it speaks: Chat Completions or Anthropic Messages."""
    base_url: str | None
    """Default base URL; None means the SDK's own (OpenAI's or Anthropic's)."""
    key_env: str | None
    """Environment variable holding the API key."""
    key_required: bool = True
    base_url_env: str | None = None
    """Environment variable that overrides ``base_url``."""
    hint: str = ""
    """Said when the key is missing: where to get one or how to start the server."""


OLLAMA_DEFAULT_URL = "http://localhost:11434/v1"
OLLAMA_HOST_ENV = "OLLAMA_HOST"
"""Ollama's own variable: ``host:port`` or a URL, without the ``/v1`` suffix."""

PROVIDERS: Mapping[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            "openai",
            "openai",
            None,
            "OPENAI_API_KEY",
            base_url_env="OPENAI_BASE_URL",
            hint="get a key at https://platform.openai.com/api-keys",
        ),
        ProviderSpec(
            "anthropic",
            "anthropic",
            None,
            "ANTHROPIC_API_KEY",
            base_url_env="ANTHROPIC_BASE_URL",
            hint="get a key at https://console.anthropic.com/settings/keys",
        ),
        ProviderSpec(
            "ollama",
            "openai",
            OLLAMA_DEFAULT_URL,
            "OLLAMA_API_KEY",
            key_required=False,
            hint="start the server with `ollama serve` and pull the model with `ollama pull`",
        ),
        ProviderSpec(
            "openrouter",
            "openai",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
            base_url_env="OPENROUTER_BASE_URL",
            hint="get a key at https://openrouter.ai/keys",
        ),
        ProviderSpec(
            "vllm",
            "openai",
            "http://localhost:8000/v1",
            "VLLM_API_KEY",
            key_required=False,
            base_url_env="VLLM_BASE_URL",
            hint="start it with `vllm serve MODEL` or pass base_url",
        ),
        ProviderSpec(
            "llamacpp",
            "openai",
            "http://localhost:8080/v1",
            "LLAMACPP_API_KEY",
            key_required=False,
            base_url_env="LLAMACPP_BASE_URL",
            hint="start it with `llama-server -m MODEL.gguf` or pass base_url",
        ),
        ProviderSpec(
            "lmstudio",
            "openai",
            "http://localhost:1234/v1",
            "LMSTUDIO_API_KEY",
            key_required=False,
            base_url_env="LMSTUDIO_BASE_URL",
            hint="start LM Studio's local server",
        ),
        ProviderSpec(
            "compatible",
            "openai",
            None,
            "OPENAI_API_KEY",
            key_required=False,
            base_url_env="OPENAI_BASE_URL",
            hint="set OPENAI_BASE_URL to the server's /v1 URL",
        ),
        ProviderSpec(
            "deepseek",
            "openai",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_API_KEY",
            hint="get a key at https://platform.deepseek.com/api_keys",
        ),
        ProviderSpec(
            "groq",
            "openai",
            "https://api.groq.com/openai/v1",
            "GROQ_API_KEY",
            hint="get a key at https://console.groq.com/keys",
        ),
        ProviderSpec(
            "mistral",
            "openai",
            "https://api.mistral.ai/v1",
            "MISTRAL_API_KEY",
            hint="get a key at https://console.mistral.ai/api-keys",
        ),
        ProviderSpec(
            "gemini",
            "openai",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "GEMINI_API_KEY",
            hint="get a key at https://aistudio.google.com/apikey",
        ),
        ProviderSpec(
            "together",
            "openai",
            "https://api.together.xyz/v1",
            "TOGETHER_API_KEY",
            hint="get a key at https://api.together.ai/settings/api-keys",
        ),
    )
}

ALIASES: Mapping[str, str] = {
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "google": "gemini",
    "openai-compatible": "compatible",
    "mistralai": "mistral",
}
"""Other names for providers, including the catalog's names for model makers."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed model string."""

    provider: ProviderSpec
    model: str
    """The model as the provider knows it (no provider prefix)."""


def provider_names() -> list[str]:
    return sorted(PROVIDERS)


def _provider(name: str) -> ProviderSpec | None:
    key = name.strip().lower()
    return PROVIDERS.get(ALIASES.get(key, key))


def parse_model(spec: str) -> ModelSpec:
    """Split ``provider/model``, or find the provider of a bare model name in the catalog."""
    text = spec.strip()
    if not text:
        raise ConfigError("an empty model name; use provider/model, e.g. openai/gpt-4o")
    head, sep, rest = text.partition("/")
    if sep:
        provider = _provider(head)
        if provider is None:
            raise ConfigError(
                f"unknown provider {head!r} in model {spec!r}; known providers: "
                f"{', '.join(provider_names())} (for another OpenAI-compatible server use "
                f"compatible/MODEL with OPENAI_BASE_URL, or openrouter/{text})"
            )
        if not rest.strip("/"):
            raise ConfigError(f"model {spec!r} names a provider but no model")
        return ModelSpec(provider, rest)
    info = lookup(text)
    provider = _provider(info.provider)
    if provider is None:
        raise ConfigError(
            f"cannot tell which provider serves {spec!r}; write it as provider/{text} "
            f"(providers: {', '.join(provider_names())})"
        )
    return ModelSpec(provider, text)


def _ollama_url() -> str | None:
    host = os.environ.get(OLLAMA_HOST_ENV, "").strip()
    if not host:
        return None
    if "://" not in host:
        host = f"http://{host}"
    return host.rstrip("/") + "/v1"


def _base_url(provider: ProviderSpec, override: str | None) -> str | None:
    if override:
        return override
    if provider.base_url_env and os.environ.get(provider.base_url_env):
        return os.environ[provider.base_url_env]
    if provider.name == "ollama":
        return _ollama_url() or provider.base_url
    return provider.base_url


def resolve_model(spec: str, **overrides: Any) -> ChatModel:
    """A ready ``ChatModel`` for ``spec``; ``overrides`` go to the provider's constructor.

    Common overrides: ``api_key``, ``base_url``, ``timeout`` (the whole request),
    ``first_byte_timeout`` (each wait for data), ``retry``,
    ``max_retries``, ``on_retry``. A missing key raises ``MissingCredentials``
    naming the variable to set; a missing SDK raises ``ConfigError`` naming the
    extra to install.
    """
    parsed = parse_model(spec)
    provider = parsed.provider
    base_url = _base_url(provider, overrides.pop("base_url", None))
    if provider.name == "compatible" and not base_url:
        raise ConfigError(
            f"model {spec!r}: a compatible/ model needs the server's URL: set OPENAI_BASE_URL "
            "(e.g. export OPENAI_BASE_URL=http://localhost:8000/v1) or pass base_url"
        )
    api_key = overrides.pop("api_key", None)
    if api_key is None and provider.key_env:
        api_key = os.environ.get(provider.key_env) or None
    if api_key is None and provider.key_required:
        hint = f"; {provider.hint}" if provider.hint else ""
        raise MissingCredentials(
            f"no API key for {provider.name} (model {spec!r}): set the {provider.key_env} "
            f"environment variable, e.g. export {provider.key_env}=...{hint}"
        )
    model_class: Callable[..., ChatModel]
    try:  # a missing SDK names the extra to install
        if provider.api == "anthropic":
            from threadline.llm.anthropic_provider import AnthropicChatModel

            model_class = AnthropicChatModel
        else:
            from threadline.llm.openai_provider import OpenAIChatModel

            model_class = OpenAIChatModel
            overrides["require_api_key"] = provider.key_required
    except ImportError as exc:
        raise ConfigError(str(exc)) from exc
    return model_class(
        parsed.model,
        api_key=api_key,
        base_url=base_url,
        provider=provider.name,
        api_key_env=provider.key_env,
        **overrides,
    )
