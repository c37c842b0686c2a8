"""A page of top-level sessions in a large store: the parent link as a store field with
an index (issue 22) beside the same page found through the link kept in metadata.

A store of ``--sessions`` sessions (default 100,000), nine in ten of them listed under
one of the others (subagents), each with a little metadata. Rows are written straight
into the store's tables (the bench times listing, not creating). Timed, per backend:

* threadline: ``list_sessions(top_level=True, limit=20)`` (the page and the total of
  top-level sessions) and ``count_children`` of the page (what ``sessions list``
  does), at the first page and halfway down the top-level sessions.
* metadata filter: the same listing (the page, the total of top-level sessions, the
  page's child counts) by SQL filters on the link kept in the metadata
  (``parent_session``, as imports stored it before), which must read sessions'
  metadata: SQLite's ``json_extract``, PostgreSQL's ``->>``.
* every session: the unfiltered page (``list_sessions(limit=20)``), for scale.

    python bench/listing.py [--sessions 100000] [--rounds 5] [--postgres URL]

PostgreSQL runs when ``--postgres`` or ``$THREADLINE_TEST_POSTGRES`` names a server
(a schema of its own, dropped after).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from threadline import open_store
from threadline.store.checks import format_ts
from threadline.store.protocol import Store
from timing import median_ms

PAGE = 20
CHILD_SHARE = 10
"""One session in this many is top-level; the rest are children of those."""


def rows(n: int) -> list[tuple[str, str, str, str | None]]:
    """``(id, updated_at, metadata, parent)``: newest first by position, children spread
    over the top-level sessions."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    out: list[tuple[str, str, str, str | None]] = []
    tops: list[str] = []
    for i in range(n):
        sid = f"s{i:07d}"
        when = format_ts(start - timedelta(seconds=i))
        if i % CHILD_SHARE == 0 or not tops:
            tops.append(sid)
            parent = None
        else:
            parent = tops[(i * 7919) % len(tops)]
        meta = {"source_format": "claude-code", "cwd": "/home/user/project", "n": i}
        if parent is not None:
            meta["parent_session"] = parent
        out.append((sid, when, json.dumps(meta), parent))
    return out


def timed(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm
    return median_ms(fn, rounds)


def threadline_page(store: Store, offset: int) -> Callable[[], Any]:
    def run() -> Any:
        page = store.list_sessions(top_level=True, limit=PAGE, offset=offset)
        assert len(page.items) == PAGE and all(i.parent_id is None for i in page.items)
        return store.count_children([i.id for i in page.items])

    return run


def metadata_page(
    execute: Callable[..., Any], link: str, mark: str, offset: int
) -> Callable[[], Any]:
    """The same listing through the link in metadata: the page, the total of top-level
    sessions and the page's child counts (``link`` reads the link, ``mark`` is the
    driver's parameter mark)."""

    def run() -> Any:
        page = execute(
            f"SELECT id, metadata FROM sessions WHERE {link} IS NULL "
            f"ORDER BY updated_at DESC, id LIMIT {mark} OFFSET {mark}",
            (PAGE, offset),
        ).fetchall()
        execute(f"SELECT count(*) FROM sessions WHERE {link} IS NULL").fetchone()
        ids = [r[0] for r in page]
        marks = ", ".join([mark] * len(ids))
        return execute(
            f"SELECT {link}, count(*) FROM sessions WHERE {link} IN ({marks}) GROUP BY 1", ids
        ).fetchall()

    return run


def compare(
    store: Store, execute: Callable[..., Any], link: str, mark: str, n: int, rounds: int
) -> dict[str, float]:
    deep = (n // CHILD_SHARE) // 2
    return {
        "threadline, first page": timed(threadline_page(store, 0), rounds),
        f"threadline, offset {deep:,}": timed(threadline_page(store, deep), rounds),
        "metadata filter, first page": timed(metadata_page(execute, link, mark, 0), rounds),
        f"metadata filter, offset {deep:,}": timed(
            metadata_page(execute, link, mark, deep), rounds
        ),
        "every session, first page": timed(lambda: store.list_sessions(), rounds),
    }


def sqlite_bench(n: int, rounds: int, data: list[Any]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        open_store(f"sqlite://{path}").close()
        con = sqlite3.connect(path)
        with con:
            con.executemany(
                "INSERT INTO sessions (id, agent, created_at, updated_at, metadata, parent_id) "
                "VALUES (?, 'claude-code', ?, ?, ?, ?)",
                [(sid, when, when, meta, parent) for sid, when, meta, parent in data],
            )
        con.execute("ANALYZE")
        store = open_store(f"sqlite://{path}")
        try:
            link = "json_extract(metadata, '$.parent_session')"
            return compare(store, con.execute, link, "?", n, rounds)
        finally:
            store.close()
            con.close()


def postgres_bench(url: str, n: int, rounds: int, data: list[Any]) -> dict[str, float]:
    import psycopg

    schema = "bench" + uuid.uuid4().hex[:10]
    dsn = url.split("?", 1)[0]
    store = open_store(f"{dsn}?schema={schema}")
    try:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'SET search_path TO "{schema}"')
            with admin.cursor().copy(
                "COPY sessions (id, agent, created_at, updated_at, metadata, parent_id) FROM STDIN"
            ) as copy:
                for sid, when, meta, parent in data:
                    copy.write_row((sid, "claude-code", when, when, meta, parent))
            admin.execute("ANALYZE sessions")
            link = "(metadata ->> 'parent_session')"
            return compare(store, admin.execute, link, "%s", n, rounds)
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("THREADLINE_TEST_POSTGRES"))
    args = parser.parse_args()
    data = rows(args.sessions)
    results = {"sqlite": sqlite_bench(args.sessions, args.rounds, data)}
    if args.postgres:
        results["postgres"] = postgres_bench(args.postgres, args.sessions, args.rounds, data)
    console = Console()
    table = Table(
        title=f"A page of {PAGE} top-level sessions among {args.sessions:,} "
        f"({100 // CHILD_SHARE}% top-level), median of {args.rounds}"
    )
    table.add_column("backend")
    table.add_column("query")
    table.add_column("ms", justify="right")
    table.add_column("x threadline", justify="right")
    for backend, timings in results.items():
        ours = {k.split(", ")[1]: v for k, v in timings.items() if k.startswith("threadline")}
        for name, ms in timings.items():
            where = name.split(", ")[1]
            ratio = f"{ms / ours[where]:.1f}" if where in ours else "-"
            table.add_row(backend, name, f"{ms:.2f}", ratio)
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
