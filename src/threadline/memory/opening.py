"""``open_memory``: the memory kept beside a store, chosen by the store's URL scheme."""

from __future__ import annotations

from pathlib import Path

from threadline.errors import NotSupported, UsageError
from threadline.memory.core import Memory
from threadline.store.protocol import Store


def open_memory(store: Store) -> Memory:
    """The memory of ``store``: same file, database or directory as its sessions.

    SQLite and PostgreSQL keep it in tables of their own, JSONL in its own files under
    the store's directory, ``memory://`` in process for as long as the store object
    lives. Redis has no full-text index: it raises ``NotSupported``."""
    url = getattr(store, "url", None)
    if not isinstance(url, str) or "://" not in url:
        raise UsageError(f"cannot tell which backend {type(store).__name__} is (it has no url)")
    scheme = url.split("://", 1)[0].lower()
    read_only = bool(getattr(store, "read_only", False))
    if scheme == "sqlite":
        from threadline.memory.sqlite import SQLiteRecords

        path = Path(getattr(store, "path"))  # noqa: B009 - every SQLite store has one
        return Memory(SQLiteRecords(path, read_only=read_only), where=url)
    if scheme == "memory":
        from threadline.memory.inmemory import records_for

        return Memory(records_for(store), where=url)
    if scheme == "jsonl":
        from threadline.memory.jsonl import JSONLRecords

        root = Path(getattr(store, "root"))  # noqa: B009
        return Memory(JSONLRecords(root, read_only=read_only), where=url)
    if scheme in ("postgres", "postgresql"):
        from threadline.memory.postgres import PostgresRecords

        return Memory(PostgresRecords.for_store(store), where=url)
    if scheme in ("redis", "rediss"):
        raise NotSupported(
            "long-term memory is not available on the Redis store: Redis core has no "
            "full-text index to search memories with; use a SQLite, PostgreSQL, JSONL "
            "or memory:// store for agents with memory enabled"
        )
    raise UsageError(f"no memory backend for store scheme {scheme!r}")
