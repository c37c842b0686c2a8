"""Model catalog: name matching, unknown models, user overrides."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadline import catalog
from threadline.errors import ConfigError


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(catalog.CATALOG_ENV, raising=False)
    catalog._reset_caches()
    yield
    catalog._reset_caches()


@pytest.mark.parametrize(
    ("model", "name", "provider", "tokenizer", "window"),
    [
        (None, "gpt-4o", "openai", "o200k_base", 128_000),
        ("openai/gpt-4o", "gpt-4o", "openai", "o200k_base", 128_000),
        ("gpt-4o-2024-08-06", "gpt-4o", "openai", "o200k_base", 128_000),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", "openai", "o200k_base", 128_000),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini", "openai", "o200k_base", 1_047_576),
        ("gpt-4-0613", "gpt-4", "openai", "cl100k_base", 8_192),
        ("gpt-4-turbo-2024-04-09", "gpt-4-turbo", "openai", "cl100k_base", 128_000),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo", "openai", "cl100k_base", 16_385),
        ("gpt-5.1-codex-max", "gpt-5.1-codex", "openai", "o200k_base", 400_000),
        ("o4-mini", "o4-mini", "openai", "o200k_base", 200_000),
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5", "anthropic", "anthropic", 200_000),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", "anthropic", "anthropic", 200_000),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku", "anthropic", "anthropic", 200_000),
        ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet", "anthropic", "anthropic", 200_000),
        ("ollama/llama3.1:8b", "llama3.1", "meta", "llama", 131_072),
        ("openrouter/meta-llama/llama-3.3-70b-instruct", "llama-3.3", "meta", "llama", 131_072),
        ("gemini-1.5-pro-002", "gemini-1.5-pro", "google", "google", 2_097_152),
        ("google/gemini-2.5-flash", "gemini-2.5-flash", "google", "google", 1_048_576),
        ("mistral-large-latest", "mistral-large", "mistral", "mistral", 131_072),
        ("qwen2.5-coder:32b", "qwen2.5-coder", "alibaba", "qwen", 32_768),
        ("deepseek/deepseek-reasoner", "deepseek-reasoner", "deepseek", "deepseek", 128_000),
    ],
)
def test_lookup_matches_provider_and_versioned_names(
    model: str | None, name: str, provider: str, tokenizer: str, window: int
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a known model never warns
        info = catalog.lookup(model)
    assert (info.name, info.provider, info.tokenizer, info.context_window) == (
        name,
        provider,
        tokenizer,
        window,
    )
    assert info.known
    assert 0 < info.max_output <= info.context_window


def test_prefix_needs_a_boundary() -> None:
    with pytest.warns(UserWarning):
        info = catalog.lookup("o1x-experimental")
    assert not info.known


def test_unknown_model_defaults_and_warns_once() -> None:
    with pytest.warns(UserWarning, match="my-private-model") as record:
        info = catalog.lookup("my-private-model")
    assert len(record) == 1
    assert "128,000" in str(record[0].message)
    assert info == catalog.ModelInfo(
        name="my-private-model",
        provider=catalog.UNKNOWN_PROVIDER,
        tokenizer=catalog.GENERIC_FAMILY,
        context_window=catalog.UNKNOWN_CONTEXT_WINDOW,
        max_output=catalog.UNKNOWN_MAX_OUTPUT,
        known=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            assert catalog.lookup("my-private-model") == info


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-99-ultra", "anthropic"),
        ("ollama/mixtral:8x7b", "mistral"),
        ("qwq-32b", "qwen"),
        ("gpt-9-preview", "o200k_base"),
        ("anthropic/house-model", "anthropic"),
        ("gemma3:27b", "google"),
    ],
)
def test_unknown_model_family_is_guessed(model: str, family: str) -> None:
    with pytest.warns(UserWarning):
        info = catalog.lookup(model)
    assert info.tokenizer == family
    assert not info.known


def test_register_model_adds_and_overrides() -> None:
    info = catalog.register_model("acme/rocket-1", context_window=50_000, tokenizer="llama")
    assert info.name == "rocket-1" and info.known
    assert info.context_window == 50_000
    assert info.max_output == catalog.UNKNOWN_MAX_OUTPUT
    assert catalog.lookup("rocket-1:latest").context_window == 50_000
    catalog.register_model("gpt-4o", max_output=1_000)
    assert catalog.lookup("gpt-4o-2024-11-20").max_output == 1_000
    assert catalog.lookup("gpt-4o").context_window == 128_000


def test_register_model_validates() -> None:
    with pytest.raises(ConfigError, match="context_window"):
        catalog.register_model("brand-new")
    with pytest.raises(ConfigError, match="positive integer"):
        catalog.register_model("gpt-4o", context_window=-1)
    with pytest.raises(ConfigError, match="unknown field"):
        catalog.register_model("gpt-4o", window=5)


def test_register_model_after_unknown_warning_takes_effect() -> None:
    with pytest.warns(UserWarning):
        assert not catalog.lookup("later-model").known
    catalog.register_model("later-model", context_window=9_000)
    assert catalog.lookup("later-model").context_window == 9_000


def test_override_file_is_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "models.json"
    path.write_text(
        json.dumps(
            {
                "models": {
                    "gpt-4o": {"context_window": 64_000},
                    "house-llm": {
                        "provider": "acme",
                        "tokenizer": "qwen",
                        "context_window": 32_000,
                        "max_output": 2_000,
                    },
                }
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    gpt = catalog.lookup("gpt-4o")
    assert gpt.context_window == 64_000 and gpt.max_output == 16_384
    assert catalog.lookup("house-llm-v2") == catalog.ModelInfo(
        "house-llm", "acme", "qwen", 32_000, 2_000, True
    )
    # loaded once: later edits of the file are not seen until the cache resets
    path.write_text("{}", encoding="utf-8")
    assert catalog.lookup("gpt-4o").context_window == 64_000


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "invalid JSON"),
        ("[]", "'models' object"),
        ('{"models": {"x": 5}}', "must be an object"),
        ('{"models": {"x": {"context_window": "big"}}}', "positive integer"),
        ('{"models": {"x": {"tokens": 5}}}', "unknown field"),
    ],
)
def test_bad_override_file_is_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, match: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    with pytest.raises(ConfigError, match=match) as info:
        catalog.lookup("gpt-4o")
    assert str(path) in str(info.value)


def test_missing_override_file_is_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "absent.json"
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    with pytest.raises(ConfigError, match="cannot read") as info:
        catalog.lookup(None)
    assert str(path) in str(info.value)


def test_builtin_catalog_is_sane() -> None:
    names = catalog.known_models()
    assert len(names) > 50
    for name in names:
        info = catalog.lookup(name)
        assert info.known and info.name == name
        assert info.tokenizer in {
            "o200k_base",
            "cl100k_base",
            "anthropic",
            "google",
            "mistral",
            "llama",
            "qwen",
            "deepseek",
        }
        assert 0 < info.max_output <= info.context_window
