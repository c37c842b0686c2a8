"""Storage backends behind one ``Store`` protocol, chosen by URL.

``open_store(url, create=...)`` understands ``sqlite:///path.db`` (the embedded default),
``memory://``, ``jsonl:///dir``, ``postgresql://...`` and ``redis://...``.
Backends import lazily, so a missing optional driver only matters when its
URL is used, and the error names the extra to install.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from threadline.errors import UsageError
from threadline.store.checkpoints import Checkpoint
from threadline.store.listing import SessionPage
from threadline.store.locks import LockHolder
from threadline.store.protocol import Session, Store
from threadline.store.search_records import SearchHit
from threadline.store.session_info import ScratchpadEntry, SessionInfo

STORE_ENV = "THREADLINE_STORE"
APP_NAME = "threadline"
DEFAULT_FILENAME = "threadline.db"

# scheme -> (module, class, extra that provides its driver)
_BACKENDS: dict[str, tuple[str, str, str | None]] = {
    "sqlite": ("threadline.store.sqlite", "SQLiteStore", None),
    "memory": ("threadline.store.memory", "MemoryStore", None),
    "jsonl": ("threadline.store.jsonl", "JSONLStore", None),
    "postgresql": ("threadline.store.postgres", "PostgresStore", "postgres"),
    "postgres": ("threadline.store.postgres", "PostgresStore", "postgres"),
    "redis": ("threadline.store.redis", "RedisStore", "redis"),
    "rediss": ("threadline.store.redis", "RedisStore", "redis"),
}


def default_store_path() -> Path:
    """The platform's user data directory, e.g. ``~/.local/share/threadline/threadline.db``."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / DEFAULT_FILENAME


def default_store_url() -> str:
    return os.environ.get(STORE_ENV) or f"sqlite://{default_store_path()}"


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open the store at ``url`` (default: ``$THREADLINE_STORE`` or the user data dir).

    Only ``None`` means the default: an empty string is refused rather than quietly
    opening the user's own store (``--store "$UNSET"`` must not reach it).

    With ``create=False`` nothing is created (no file, directory or schema): a store
    that is not there raises ``StoreNotFound``, and one that cannot be written is opened
    for reading. Commands that only read open stores this way, so a mistyped URL
    leaves nothing behind and a read-only copy can still be inspected.
    """
    if url is None:
        url = default_store_url()
    if not isinstance(url, str):
        raise UsageError(f"a store URL must be a string, got {type(url).__name__}")
    if not url.strip():
        raise UsageError("the store URL is empty; use sqlite:///path.db, memory://, ...")
    scheme, sep, _ = url.partition("://")
    if not sep:
        if url.endswith((".db", ".sqlite", ".sqlite3")):
            scheme, url = "sqlite", f"sqlite://{url}"
        else:
            raise UsageError(
                f"store URL {url!r} has no scheme; use sqlite:///path.db, memory://, "
                "jsonl:///dir, postgresql://... or redis://..."
            )
    try:
        module_name, class_name, extra = _BACKENDS[scheme.lower()]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise UsageError(f"unknown store scheme {scheme!r} (known: {known})") from None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if extra is None or (exc.name or "").startswith("threadline"):
            raise
        raise UsageError(
            f"the {scheme} backend needs {exc.name}: pip install 'threadline[{extra}]'"
        ) from exc
    store: Store = getattr(module, class_name).from_url(url, create=create)
    return store


__all__ = [
    "Checkpoint",
    "LockHolder",
    "ScratchpadEntry",
    "SearchHit",
    "Session",
    "SessionInfo",
    "SessionPage",
    "Store",
    "default_store_path",
    "default_store_url",
    "open_store",
]
