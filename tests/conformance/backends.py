"""The backends the conformance suite runs against, and how each gets a clean store.

Each factory returns a fresh, empty store for one test. PostgreSQL tests use a
schema of their own (``?schema=``) and Redis tests a key prefix of their own
(``?prefix=``), so tests never see each other's data and can run in parallel;
``cleanup_url`` drops them afterwards.

This module is also the one place where the suite declares what a backend does
not do: ``SEARCH_UNSUPPORTED`` (search raises ``NotSupported``) and
``KNOWN_GAPS`` (applied as strict expected failures by ``conftest.py``, never
as skips, so a gap that gets fixed turns the run red until it is removed here).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import require_postgres, require_redis
from threadline import Message, Store, open_store
from threadline.store.encoding import prepare_messages

BACKENDS = ["memory", "sqlite", "jsonl", "postgres", "redis"]

SEARCH_UNSUPPORTED: frozenset[str] = frozenset()
"""Backends whose ``search`` raises ``NotSupported`` (none: Redis scans with the shared matcher)."""

KNOWN_GAPS: dict[tuple[str, str], str] = {
    (backend, "test_no_message_stays_when_the_entries_fail"): (
        "append_and_write is one transaction on the SQL backends only; here the messages "
        "are written first, the entries last (store/core.py)"
    )
    for backend in ("memory", "jsonl", "redis")
}
"""(backend, test function name) -> why that backend is expected to fail that test."""

IN_PROCESS = frozenset({"memory"})
"""Backends whose data lives in one process: concurrency tests use threads for them."""


def make_url(backend: str, tmp_path: Path) -> str:
    tag = "t" + uuid.uuid4().hex[:12]
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite://{tmp_path / 'store.db'}"
    if backend == "jsonl":
        return f"jsonl://{tmp_path / 'jsonl-store'}"
    if backend == "postgres":
        return f"{require_postgres()}?schema={tag}"
    if backend == "redis":
        return f"{require_redis()}?prefix=threadline-test:{tag}:"
    raise ValueError(backend)


def open_backend(backend: str, tmp_path: Path) -> Store:
    return open_store(make_url(backend, tmp_path))


def clean_store(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A fresh store for one test, closed and dropped afterwards (for fixtures to yield from)."""
    url = make_url(backend, tmp_path)
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()
        cleanup_url(backend, url)


@contextlib.contextmanager
def shared_store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A store on PostgreSQL or Redis for several server processes to share, migrated
    here once (before they race to) and dropped afterwards."""
    pytest.importorskip("psycopg" if backend == "postgres" else "redis")
    url = make_url(backend, tmp_path)
    open_store(url).close()
    try:
        yield url
    finally:
        cleanup_url(backend, url)


def cleanup_url(backend: str, url: str) -> None:
    """Drop what a test left on a shared server (files go with pytest's tmp_path)."""
    options = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
    if backend == "postgres" and options.get("schema", "").startswith("t"):
        import psycopg
        from psycopg import sql

        dsn = url.split("?", 1)[0]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(options["schema"])
                )
            )
    elif backend == "redis" and options.get("prefix", "").startswith("threadline-test:"):
        import redis

        client = redis.Redis.from_url(url.split("?", 1)[0])
        try:
            keys = list(client.scan_iter(match=options["prefix"] + "*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
        finally:
            client.close()


Factory = Callable[[str, Path], Store]


# -- the concurrency workers: module level, so spawned processes can import them -----


class _Start(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


def append_loop(
    store: Store, own: str, shared: str, worker: int, count: int, start: _Start
) -> None:
    """Append ``count`` one-message batches to ``own`` and as many to ``shared``, alternating.

    Each batch is prepared as ``Session.append`` prepares it (the handle's refresh
    after each append is left out: it is a read, not a write). ``start`` is a barrier
    shared by all writers, so their appends overlap.
    """
    models = {sid: store.session_info(sid).model for sid in (own, shared)}
    start.wait()
    for i in range(count):
        for sid in (own, shared):
            message = Message.user(f"worker {worker} message {i}", metadata={"w": worker, "i": i})
            store.append_messages(sid, prepare_messages(models[sid], [message]))


def append_worker(url: str, own: str, shared: str, worker: int, count: int, start: _Start) -> None:
    """A writer process: it gets the URL as a string and opens a store of its own."""
    store = open_store(url)
    try:
        append_loop(store, own, shared, worker, count, start)
    finally:
        store.close()


def thread_workers(store: Store, own: list[str], shared: str, count: int) -> list[BaseException]:
    """The in-process version: one thread per own session, all sharing one store."""
    barrier = threading.Barrier(len(own))
    errors: list[BaseException] = []

    def run(worker: int, sid: str) -> None:
        try:
            append_loop(store, sid, shared, worker, count, barrier)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w, s)) for w, s in enumerate(own)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
