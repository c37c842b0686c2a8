"""The backends the conformance suite runs against, and how each gets a clean store.

Each factory returns a fresh, empty store for one test. PostgreSQL tests use a
schema of their own (``?schema=``) and Redis tests a key prefix of their own
(``?prefix=``), so tests never see each other's data and can run in parallel.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from tests.conftest import require_postgres, require_redis
from threadline import Store, open_store

BACKENDS = ["memory", "sqlite", "jsonl", "postgres", "redis"]


def make_url(backend: str, tmp_path: Path) -> str:
    tag = "t" + uuid.uuid4().hex[:12]
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite://{tmp_path / 'store.db'}"
    if backend == "jsonl":
        return f"jsonl://{tmp_path / 'sessions'}"
    if backend == "postgres":
        return f"{require_postgres()}?schema={tag}"
    if backend == "redis":
        return f"{require_redis()}?prefix=threadline-test:{tag}:"
    raise ValueError(backend)


def open_backend(backend: str, tmp_path: Path) -> Store:
    return open_store(make_url(backend, tmp_path))


Factory = Callable[[str, Path], Store]
