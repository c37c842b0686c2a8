"""The model catalog: context window, output cap and tokenizer family per model.

Budgets need to know how big a model's window is and which tokenizer counts
its tokens. The data lives in ``catalog.json`` (shipped in the package); a
user can add models at runtime with ``register_model`` or point the
``THREADLINE_CATALOG`` environment variable at a JSON file of the same shape,
which is merged over the built-in data (loaded lazily, once).

Names are matched loosely, because callers pass what their provider calls the
model: ``openai/gpt-4o``, ``anthropic/claude-sonnet-4-5-20250929``,
``ollama/llama3.1:8b``, ``openrouter/meta-llama/llama-3.3-70b-instruct``. The
provider prefix is dropped (and remembered as a hint), the bare name is
lower-cased, and the longest catalog key that prefixes it at a boundary
(``-``, ``.``, ``:``, ``@``, ``_``, ``/``) wins. OpenRouter-style dotted
versions (``claude-3.5-sonnet``) are retried with dashes.

An unknown model is never an error: it gets a conservative default window
and a tokenizer family guessed from its name or provider, and one warning per
model name per process says so.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from threadline.errors import ConfigError
from threadline.json_limits import MAX_JSON_DEPTH, nesting_too_deep

DEFAULT_MODEL = "gpt-4o"
"""The model assumed when none is given."""
UNKNOWN_CONTEXT_WINDOW = 128_000
UNKNOWN_MAX_OUTPUT = 4_096
UNKNOWN_PROVIDER = "unknown"
GENERIC_FAMILY = "generic"
"""The tokenizer family of the generic (most conservative) estimator."""
CATALOG_ENV = "THREADLINE_CATALOG"
"""Environment variable naming a JSON file merged over the built-in catalog."""
CATALOG_RESOURCE = "catalog.json"
NAME_BOUNDARIES = frozenset("-.:@_/")
"""Characters that may follow a catalog key inside a longer (versioned) name."""

FIELDS = ("provider", "tokenizer", "context_window", "max_output")

# Family guesses for unknown models: substrings of the bare name, checked in order.
_NAME_FAMILY_HINTS: tuple[tuple[str, str], ...] = (
    ("claude", "anthropic"),
    ("gemini", "google"),
    ("gemma", "google"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("codestral", "mistral"),
    ("ministral", "mistral"),
    ("pixtral", "mistral"),
    ("magistral", "mistral"),
    ("devstral", "mistral"),
    ("llama", "llama"),
    ("qwen", "qwen"),
    ("qwq", "qwen"),
    ("deepseek", "deepseek"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-4-", "cl100k_base"),
    ("gpt-", "o200k_base"),
    ("chatgpt", "o200k_base"),
)
_OPENAI_REASONING_PREFIXES = ("o1", "o3", "o4")

# Family guesses from a provider prefix (``anthropic/...``).
_PROVIDER_FAMILY_HINTS: Mapping[str, str] = {
    "openai": "o200k_base",
    "azure": "o200k_base",
    "anthropic": "anthropic",
    "bedrock": "anthropic",
    "google": "google",
    "gemini": "google",
    "vertex_ai": "google",
    "mistral": "mistral",
    "mistralai": "mistral",
    "meta": "llama",
    "meta-llama": "llama",
    "qwen": "qwen",
    "alibaba": "qwen",
    "deepseek": "deepseek",
}
_FAMILY_PROVIDERS: Mapping[str, str] = {
    "o200k_base": "openai",
    "cl100k_base": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "mistral": "mistral",
    "llama": "meta",
    "qwen": "alibaba",
    "deepseek": "deepseek",
}


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What threadline knows about one model."""

    name: str
    """The catalog key that matched, or the bare requested name when unknown."""
    provider: str
    tokenizer: str
    """Tokenizer family: ``o200k_base``, ``cl100k_base``, ``anthropic``, ``google``, ..."""
    context_window: int
    max_output: int
    known: bool
    """False when the numbers are defaults for a model the catalog lacks."""


_lock = threading.RLock()
_builtin: dict[str, dict[str, Any]] | None = None
_override_loaded = False
_override: dict[str, dict[str, Any]] = {}
_registered: dict[str, dict[str, Any]] = {}
_merged: dict[str, dict[str, Any]] | None = None
_warned: set[str] = set()


def _reset_caches() -> None:
    """Forget loaded data, registrations and issued warnings (for tests)."""
    global _builtin, _override_loaded, _merged
    with _lock:
        _builtin = None
        _override_loaded = False
        _override.clear()
        _registered.clear()
        _merged = None
        _warned.clear()


def _validate_entries(data: object, source: str) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ConfigError(f"{source}: expected a JSON object with a 'models' object")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data["models"].items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: model {name!r} must be an object")
        out[name.lower()] = _validate_fields(entry, f"{source}: model {name!r}")
    return out


def _validate_fields(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = set(entry) - set(FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {list(FIELDS)}")
    for key in ("provider", "tokenizer"):
        if key in entry and (not isinstance(entry[key], str) or not entry[key]):
            raise ConfigError(f"{where}: {key} must be a non-empty string")
    for key in ("context_window", "max_output"):
        if key in entry:
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{where}: {key} must be a positive integer, got {value!r}")
    return dict(entry)


def _load_builtin() -> dict[str, dict[str, Any]]:
    text = resources.files("threadline").joinpath(CATALOG_RESOURCE).read_text(encoding="utf-8")
    return _validate_entries(json.loads(text), f"built-in {CATALOG_RESOURCE}")


def _load_override() -> dict[str, dict[str, Any]]:
    path_text = os.environ.get(CATALOG_ENV)
    if not path_text:
        return {}
    path = Path(path_text).expanduser()
    source = f"{CATALOG_ENV} file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read it ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text ({exc})") from exc
    deep = nesting_too_deep(text)  # the parser would recurse into it
    if deep is not None:
        raise ConfigError(f"{source}:{deep}: JSON nests more than {MAX_JSON_DEPTH} levels deep")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{source}: invalid JSON ({exc})") from exc
    return _validate_entries(data, source)


def _catalog() -> dict[str, dict[str, Any]]:
    """Built-in data, then the override file, then runtime registrations."""
    global _builtin, _override_loaded, _merged
    with _lock:
        if _merged is not None:
            return _merged
        if _builtin is None:
            _builtin = _load_builtin()
        if not _override_loaded:
            _override.update(_load_override())
            _override_loaded = True
        merged = {k: dict(v) for k, v in _builtin.items()}
        for layer in (_override, _registered):
            for name, entry in layer.items():
                merged.setdefault(name, {}).update(entry)
        _merged = merged
        return merged


def register_model(name: str, **fields: Any) -> ModelInfo:
    """Add or change a model at runtime; fields are those of ``ModelInfo``.

    A new model needs ``context_window``; the other fields default as for an
    unknown model. Returns the resulting entry.
    """
    global _merged
    key = _bare_name(name)[1]
    if not key:
        raise ConfigError("register_model needs a model name")
    entry = _validate_fields(fields, f"register_model({name!r})")
    with _lock:
        existing = _catalog().get(key)
        if existing is None and "context_window" not in entry:
            raise ConfigError(f"register_model({name!r}): a new model needs context_window")
        _registered.setdefault(key, {}).update(entry)
        _merged = None
        _warned.discard(key)
    return lookup(key)


def _bare_name(model: str) -> tuple[str | None, str]:
    """Split ``provider/.../model`` into (provider hint, lower-cased bare name)."""
    text = model.strip().lower()
    if "/" not in text:
        return None, text
    segments = [s for s in text.split("/") if s]
    if not segments:
        return None, ""
    return (segments[0] if len(segments) > 1 else None), segments[-1]


def _match(name: str, catalog: Mapping[str, Any]) -> str | None:
    if name in catalog:
        return name
    for end in range(len(name) - 1, 0, -1):
        if name[end] in NAME_BOUNDARIES and name[:end] in catalog:
            return name[:end]
    return None


def _find(name: str, catalog: Mapping[str, Any]) -> str | None:
    key = _match(name, catalog)
    if key is None and "." in name:
        key = _match(name.replace(".", "-"), catalog)  # claude-3.5-sonnet
    if key is None and "." in name:
        # Bedrock-style ``anthropic.claude-...`` / ``us.anthropic.claude-...``.
        rest = name
        while key is None and "." in rest:
            head, rest = rest.split(".", 1)
            if not head.isalpha():
                break
            key = _match(rest, catalog) or _match(rest.replace(".", "-"), catalog)
    return key


def guess_family(name: str, provider: str | None = None) -> str:
    """The tokenizer family an unknown model most likely uses."""
    for needle, family in _NAME_FAMILY_HINTS:
        if needle in name:
            return family
    if name.startswith(_OPENAI_REASONING_PREFIXES):
        return "o200k_base"
    if provider is not None and provider in _PROVIDER_FAMILY_HINTS:
        return _PROVIDER_FAMILY_HINTS[provider]
    return GENERIC_FAMILY


def lookup(model: str | None) -> ModelInfo:
    """What the catalog knows about ``model`` (``None`` means ``DEFAULT_MODEL``).

    Never raises for an unknown model (only for a bad override file): it gets
    ``UNKNOWN_CONTEXT_WINDOW`` / ``UNKNOWN_MAX_OUTPUT``, a guessed tokenizer
    family, ``known=False``, and one warning per name per process.
    """
    provider_hint, name = _bare_name(model if model is not None else DEFAULT_MODEL)
    catalog = _catalog()
    key = _find(name, catalog) if name else None
    if key is not None:
        entry = catalog[key]
        family = entry.get("tokenizer") or guess_family(key, provider_hint)
        return ModelInfo(
            name=key,
            provider=entry.get("provider")
            or provider_hint
            or _FAMILY_PROVIDERS.get(family, UNKNOWN_PROVIDER),
            tokenizer=family,
            context_window=int(entry.get("context_window", UNKNOWN_CONTEXT_WINDOW)),
            max_output=int(entry.get("max_output", UNKNOWN_MAX_OUTPUT)),
            known=True,
        )
    family = guess_family(name, provider_hint)
    info = ModelInfo(
        name=name,
        provider=provider_hint or _FAMILY_PROVIDERS.get(family, UNKNOWN_PROVIDER),
        tokenizer=family,
        context_window=UNKNOWN_CONTEXT_WINDOW,
        max_output=UNKNOWN_MAX_OUTPUT,
        known=False,
    )
    _warn_unknown(model if model is not None else name, info)
    return info


def _warn_unknown(requested: str, info: ModelInfo) -> None:
    with _lock:
        if info.name in _warned:
            return
        _warned.add(info.name)
    message = (
        f"model {requested!r} is not in threadline's catalog; assuming a "
        f"{info.context_window:,}-token window, {info.max_output:,} output tokens and the "
        f"{info.tokenizer!r} tokenizer (add it with threadline.catalog.register_model or a "
        f"{CATALOG_ENV} file)"
    )
    warnings.warn(message, UserWarning, stacklevel=3)


def known_models() -> list[str]:
    """Every catalog key, sorted."""
    return sorted(_catalog())
