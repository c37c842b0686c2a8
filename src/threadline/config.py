"""User settings: the opt-in ``config.toml`` and what threadline does with it at start-up.

The file lives in the user config directory
(``platformdirs.user_config_dir("threadline")/config.toml``, or the directory
``$THREADLINE_CONFIG_DIR``), or wherever ``$THREADLINE_CONFIG`` points::

    [session]
    retention_days = 30            # delete sessions not updated for 30 days
    max_storage_bytes = 10485760   # keep all sessions' messages under ~10 MB ("10MiB" works too)

These are the agent-shell reference's keys, with one difference: the reference
applies defaults (90 days, 50 MB) to everybody, while here nothing is deleted
unless the user wrote the rule down (history is append-only, invariant 1,
except for a rule the user configured). A missing file means no rules.

Every problem is a ``ConfigError`` naming the file and the field, and unknown
keys are errors rather than silently ignored: a misspelt ``retention_day``
must not quietly leave storage growing, nor a misspelt table.
"""

from __future__ import annotations

import os
import tomllib
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from threadline.errors import ConfigError, ThreadlineError, UsageError, file_validation_error
from threadline.json_limits import MAX_JSON_DEPTH, nesting_too_deep
from threadline.store.protocol import Store
from threadline.store.retention import (
    CleanupResult,
    apply_cleanup,
    describe,
    parse_size,
    plan_cleanup,
)

APP_NAME = "threadline"
CONFIG_ENV = "THREADLINE_CONFIG"
"""Path of the settings file, overriding the default location."""
CONFIG_DIR_ENV = "THREADLINE_CONFIG_DIR"
"""The user config directory (shared with agent files), overriding platformdirs."""
CONFIG_FILENAME = "config.toml"
MAX_CONFIG_BYTES = 1024 * 1024
"""A settings file larger than this is refused rather than parsed."""


class RetentionWarning(UserWarning):
    """Start-up retention could not run; the session goes on without it."""


class SessionSettings(BaseModel):
    """The ``[session]`` table."""

    model_config = ConfigDict(extra="forbid")

    retention_days: int | None = Field(default=None, ge=1, strict=True)
    """Delete sessions whose last update is older than this many days. Unset: never."""
    max_storage_bytes: int | None = Field(default=None, ge=1, strict=True)
    """Delete the least recently updated sessions while all messages together are
    larger than this. An integer, or a size such as ``"50MB"`` / ``"10MiB"``. Unset: no cap."""

    @field_validator("max_storage_bytes", mode="before")
    @classmethod
    def _size_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return parse_size(value)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def older_than(self) -> timedelta | None:
        return None if self.retention_days is None else timedelta(days=self.retention_days)

    @property
    def retention_configured(self) -> bool:
        return self.retention_days is not None or self.max_storage_bytes is not None


class Settings(BaseModel):
    """The whole settings file."""

    model_config = ConfigDict(extra="forbid")

    session: SessionSettings = Field(default_factory=SessionSettings)
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file these settings came from (``None``: no file, nothing configured)."""
        return self._source


def user_config_dir() -> Path:
    override = os.environ.get(CONFIG_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def config_path() -> Path:
    """Where the settings file is read from: ``$THREADLINE_CONFIG`` or the config dir."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    return user_config_dir() / CONFIG_FILENAME


def load_settings(path: Path | None = None) -> Settings:
    """Read and validate the settings file; a missing default file means no settings.

    A file named explicitly (``path`` or ``$THREADLINE_CONFIG``) must exist.
    """
    explicit = path is not None or bool(os.environ.get(CONFIG_ENV))
    path = path or config_path()
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes is too large for a settings file")
        raw = path.read_bytes()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"settings file not found: {path}") from None
        return Settings()
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a settings file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the settings file: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return parse_settings(text, source=path)


def parse_settings(text: str, *, source: Path | str = "<settings>") -> Settings:
    """Settings from TOML text; ``source`` names the file in every error."""
    deep = nesting_too_deep(text, toml=True)  # tomllib recurses into nested arrays
    if deep is not None:
        raise ConfigError(f"{source}:{deep}: TOML nests more than {MAX_JSON_DEPTH} levels deep")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: TOML syntax error: {exc}") from exc
    except RecursionError:  # not expected within the depth limit; still this file's problem
        raise ConfigError(f"{source}: TOML nests too deep to read") from None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            file_validation_error(
                exc,
                str(source),
                what="settings",
                unknown_field="unknown setting (check the spelling)",
            )
        ) from exc
    settings._source = Path(source)
    return settings


def apply_startup_retention(
    store: Store,
    settings: Settings,
    *,
    notify: Callable[[str], None] | None = None,
    now: datetime | None = None,
) -> CleanupResult | None:
    """Apply the configured retention rules once, when a program starts.

    Does nothing (and reads nothing) unless a rule is configured. Never touches
    a session a live process is attached to. Quiet unless it deletes something:
    then ``notify`` gets one line saying what went and what it freed. If the
    store fails meanwhile, a ``RetentionWarning`` says so and start-up goes on,
    since housekeeping must not keep anyone from their session.
    """
    rules = settings.session
    if not rules.retention_configured:
        return None
    try:
        plan = plan_cleanup(
            store,
            older_than=rules.older_than,
            max_storage_bytes=rules.max_storage_bytes,
            now=now,
        )
        result = apply_cleanup(store, plan) if plan.victims else CleanupResult()
    except ThreadlineError as exc:
        warnings.warn(f"session retention did not run: {exc}", RetentionWarning, stacklevel=2)
        return None
    if result.deleted and notify is not None:
        notify(f"retention: {describe(result)}")
    return result


__all__ = [
    "CONFIG_ENV",
    "RetentionWarning",
    "SessionSettings",
    "Settings",
    "apply_startup_retention",
    "config_path",
    "load_settings",
    "parse_settings",
]
