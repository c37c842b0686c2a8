"""At scale (issue 26): 100,000 sessions and 1,000,000 messages on SQLite and PostgreSQL.

The store: ``--sessions`` sessions of a few messages each (the messages not in the big
session spread evenly), plus one session of ``--big`` messages, ``--messages`` in all
(by default 100,000 sessions of 9 messages and one of 100,000).
Messages are sentences over a vocabulary of 5,000 words drawn by Zipf's law, so a word
of middling rank is in about one message in a hundred.

Generated fast and kept: a template of 1,000 sessions goes in through the store's own
API (``create_session``, ``append_messages``: real token counts, bodies and index
text), then its rows are copied into the other 99 hundredths with new ids and earlier
dates in one transaction each (SQLite ``executemany``, PostgreSQL ``COPY``; the search
index catches up or is computed as the store does it), and the big session goes in
through ``append_messages`` in batches of 1,000. The store is kept between runs: a
SQLite file under ``--dir`` (default ``$TMPDIR/threadline_scale``) and a PostgreSQL
database ``threadline_scale`` created on the server of ``--postgres`` (default
``$THREADLINE_TEST_POSTGRES``); ``--rebuild`` makes them again.

Timed, each over ``--runs`` runs (p50 and p95, after one warm-up), through the CLI in
process (Typer's runner: argument parsing, opening the store, the JSON output): the
first page of ``sessions list``, a page at offset ``--sessions / 2``, ``sessions show``
of a session, ``sessions search WORD`` across all sessions, and ``sessions show`` and
``sessions history`` of the big session. Then through the server (``create_app`` under
Starlette's test client, guard and token included): ``GET /v1/sessions`` at both
offsets, ``GET /v1/sessions/{id}``, ``GET /v1/search?q=WORD`` and the web search page
``/?q=WORD``. Targets: list and show p95 under 50 ms, search under 300 ms.

    python bench/scale.py [--backends sqlite,postgres] [--runs 50] [--rebuild]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from threadline import open_store
from threadline.messages import Message
from threadline.store.checks import format_ts, parse_ts
from threadline.store.protocol import Store

TEMPLATE = 1_000
"""Sessions made through the API; the rest are copies of their rows."""
VOCABULARY = 5_000
WORDS_PER_MESSAGE = 20
QUERY_RANK = 200
"""The searched word's rank: in about 1% of the messages."""
BATCH = 1_000
PG_DATABASE = "threadline_scale"
START = datetime(2026, 1, 1, tzinfo=UTC)
TARGETS = {"list": 50.0, "show": 50.0, "search": 300.0, "open": 50.0}


def word(rank: int) -> str:
    """The vocabulary's word of this rank: letters only, never an English word clash."""
    letters = []
    n = rank + 1
    while n:
        n, r = divmod(n, 26)
        letters.append("abcdefghijklmnopqrstuvwxyz"[r])
    return "zq" + "".join(letters)


QUERY = word(QUERY_RANK)


def sentences(rng: random.Random) -> Iterator[str]:
    weights = list(itertools.accumulate(1 / (r + 1) for r in range(VOCABULARY)))
    ranks = range(VOCABULARY)
    while True:
        chosen = rng.choices(ranks, cum_weights=weights, k=WORDS_PER_MESSAGE)
        yield " ".join(word(r) for r in chosen)


def messages(text: Iterator[str], n: int, at: datetime) -> list[Message]:
    return [
        Message(
            role="user" if i % 2 == 0 else "assistant",
            content=next(text),
            created_at=at + timedelta(milliseconds=i),
        )
        for i in range(n)
    ]


@dataclass(frozen=True)
class Plan:
    sessions: int
    total: int
    big: int

    @property
    def per_session(self) -> int:
        return (self.total - self.big) // self.sessions

    @property
    def copies(self) -> int:
        return self.sessions // TEMPLATE

    @property
    def big_id(self) -> str:
        return "big-session"

    @property
    def middle_id(self) -> str:
        """A session halfway down the list: copy ``copies // 2`` of template session 500."""
        i = TEMPLATE // 2
        return f"{self.copies // 2:03d}-{i:05d}-{random.Random(i).getrandbits(64):016x}"


def fill_template(store: Store, plan: Plan, text: Iterator[str]) -> None:
    """The first hundredth, through the API (newest of all: copies are dated earlier)."""
    for i in range(TEMPLATE):
        at = START - timedelta(seconds=i)
        sid = f"000-{i:05d}-{random.Random(i).getrandbits(64):016x}"
        store.create_session(id=sid, agent="bench", model="gpt-4o", created_at=at, updated_at=at)
        store.append_messages(sid, messages(text, plan.per_session, at))


def copy_rows(
    rows: list[tuple[Any, ...]],
    columns: Sequence[str],
    k: int,
    moved: Callable[[Any, timedelta], Any],
) -> list[tuple[Any, ...]]:
    """Template rows as copy ``k``: new session ids, dated ``k`` template spans earlier."""
    shift = timedelta(seconds=k * TEMPLATE)
    ids = {c for c in columns if c in ("id", "session_id")}
    times = {c for c in columns if c in ("created_at", "updated_at")}
    out = []
    for row in rows:
        values = []
        for column, value in zip(columns, row, strict=True):
            if column in ids and isinstance(value, str) and value.startswith("000-"):
                value = f"{k:03d}" + value[3:]
            elif column in times:
                value = moved(value, shift)
            values.append(value)
        out.append(tuple(values))
    return out


def build_sqlite(path: Path, plan: Plan, text: Iterator[str]) -> None:
    url = f"sqlite://{path}"
    store = open_store(url)
    try:
        fill_template(store, plan, text)
    finally:
        store.close()
    con = sqlite3.connect(path)
    try:
        for table in ("sessions", "messages"):
            columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            columns = [c for c in columns if c != "rowid"]
            rows = con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            marks = ", ".join("?" * len(columns))
            for k in range(1, plan.copies):
                with con:
                    con.executemany(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                        copy_rows(rows, columns, k, lambda v, d: format_ts(parse_ts(v) - d)),
                    )
    finally:
        con.close()
    add_big(url, plan, text)
    con = sqlite3.connect(path)
    con.execute("ANALYZE")
    con.close()


def build_postgres(url: str, plan: Plan, text: Iterator[str]) -> None:
    import psycopg
    from psycopg.types.json import Json

    store = open_store(url)
    try:
        fill_template(store, plan, text)
    finally:
        store.close()
    with psycopg.connect(url) as con:
        con.execute("SET search_path TO threadline")  # the store's default schema
        for table in ("sessions", "messages"):
            columns = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema() AND is_generated = 'NEVER' "
                    "ORDER BY ordinal_position",
                    (table,),
                )
            ]
            rows = con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            for k in range(1, plan.copies):
                with con.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
                    for row in copy_rows(rows, columns, k, lambda v, d: v - d):
                        cp.write_row([Json(v) if isinstance(v, dict) else v for v in row])
                con.commit()
    add_big(url, plan, text)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("SET search_path TO threadline")
        con.execute("VACUUM ANALYZE")


def add_big(url: str, plan: Plan, text: Iterator[str]) -> None:
    """The big session, last: its presence, complete, marks a finished store."""
    store = open_store(url)
    try:
        at = START - timedelta(seconds=plan.sessions // 2)
        store.create_session(id=plan.big_id, agent="bench", model="gpt-4o", created_at=at)
        for start in range(0, plan.big, BATCH):
            store.append_messages(plan.big_id, messages(text, min(BATCH, plan.big - start), at))
        store.search(QUERY, limit=1)  # SQLite's index catches up on the first search
    finally:
        store.close()


def complete(url: str, plan: Plan) -> bool:
    try:
        store = open_store(url)
    except Exception:
        return False
    try:
        total = store.list_sessions(limit=1).total
        if total != plan.sessions + 1:
            return False
        return store.session_info(plan.big_id).message_count == plan.big
    except Exception:
        return False
    finally:
        store.close()


def postgres_url(server: str, rebuild: bool) -> str:
    """The URL of the ``threadline_scale`` database, created (again) when asked."""
    import psycopg
    from psycopg import sql

    base = server.split("?", 1)[0]
    with psycopg.connect(base, autocommit=True) as admin:
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (PG_DATABASE,)
        ).fetchone()
        if exists and rebuild:
            admin.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(PG_DATABASE)))
            exists = None
        if not exists:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(PG_DATABASE)))
    return base.rsplit("/", 1)[0] + "/" + PG_DATABASE


def prepare(backend: str, args: argparse.Namespace, plan: Plan) -> tuple[str, float | None]:
    """The store's URL, made first when missing (with how long that took)."""
    if backend == "sqlite":
        path = Path(args.dir) / f"scale-{plan.sessions}-{plan.total}-{plan.big}.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite://{path}"
        if not args.rebuild and complete(url, plan):
            return url, None
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()
        t0 = time.perf_counter()
        build_sqlite(path, plan, sentences(random.Random(1)))
        return url, time.perf_counter() - t0
    url = postgres_url(args.postgres, args.rebuild)
    if complete(url, plan):
        return url, None
    url = postgres_url(args.postgres, True)
    t0 = time.perf_counter()
    build_postgres(url, plan, sentences(random.Random(1)))
    return url, time.perf_counter() - t0


Cases = dict[str, tuple[str, Callable[[], object]]]
"""Operation name -> (its target's kind, one run)."""


def percentiles(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95


def cli_cases(url: str, plan: Plan) -> Cases:
    from typer.testing import CliRunner

    from threadline.cli.app import app

    runner = CliRunner()

    def command(*words: str) -> Callable[[], object]:
        def run() -> object:
            result = runner.invoke(app, ["--store", url, *words])
            if result.exit_code != 0:
                raise SystemExit(f"threadline {' '.join(words)}: {result.output}")
            return result

        return run

    middle = plan.middle_id
    deep = str(plan.sessions // 2)
    return {
        "sessions list (first page)": ("list", command("sessions", "list", "--json")),
        f"sessions list --offset {int(deep):,}": (
            "list",
            command("sessions", "list", "--offset", deep, "--json"),
        ),
        "sessions show": ("show", command("sessions", "show", middle, "--json")),
        f"sessions search {QUERY}": ("search", command("sessions", "search", QUERY, "--json")),
        f"sessions show (big, {plan.big:,} msgs)": (
            "open",
            command("sessions", "show", plan.big_id, "--json"),
        ),
        "sessions history (big)": ("open", command("sessions", "history", plan.big_id, "--json")),
    }


def server_cases(store: Store, plan: Plan) -> tuple[Any, Cases]:
    from fastapi.testclient import TestClient

    from threadline.server.app import create_app
    from threadline.server.config import ServerConfig

    token = "scale-bench-token"
    client = TestClient(create_app(store, ServerConfig(token=token, allowed_hosts=("*",))))
    headers = {"Authorization": f"Bearer {token}"}

    def get(path: str) -> Callable[[], object]:
        def run() -> object:
            response = client.get(path, headers=headers)
            if response.status_code != 200:
                raise SystemExit(f"GET {path}: {response.status_code} {response.text[:300]}")
            return response

        return run

    middle = plan.middle_id
    deep = plan.sessions // 2
    return client, {
        "GET /v1/sessions": ("list", get("/v1/sessions")),
        f"GET /v1/sessions?offset={deep:,}": ("list", get(f"/v1/sessions?offset={deep}")),
        "GET /v1/sessions/{id}": ("show", get(f"/v1/sessions/{middle}")),
        f"GET /v1/search?q={QUERY}": ("search", get(f"/v1/search?q={QUERY}")),
        f"GET /?q={QUERY} (search page)": ("search", get(f"/?q={QUERY}")),
    }


def scale_parser(doc: str, *, big: int, runs: int) -> argparse.ArgumentParser:
    """The arguments of a run over the kept scale store: its size, the runs, and where it
    is kept and whether to make it again (``prepare`` reads ``--dir`` and ``--rebuild``)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=big)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "threadline_scale"))
    parser.add_argument("--rebuild", action="store_true")
    return parser


def main() -> None:
    parser = scale_parser(__doc__, big=100_000, runs=50)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "THREADLINE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    plan = Plan(args.sessions, args.messages, args.big)
    if plan.sessions % TEMPLATE or plan.per_session < 1:
        parser.error(f"--sessions must be a multiple of {TEMPLATE}, with messages to spare")
    console = Console()
    table = Table(
        title=f"{args.sessions:,} sessions and one of {args.big:,} messages, "
        f"{args.messages:,} messages in all; ms over {args.runs} runs"
    )
    for column in ("backend", "path", "operation", "p50", "p95", "target p95", "ok"):
        table.add_column(column, justify="right" if column in ("p50", "p95") else "left")
    for backend in args.backends.split(","):
        url, built = prepare(backend, args, plan)
        if built is not None:
            console.print(f"{backend}: generated in {built:.0f} s ({url})")
        cases = cli_cases(url, plan)
        store = open_store(url)
        try:
            client, served = server_cases(store, plan)
            with client:
                for path, group in (("cli", cases), ("server", served)):
                    for name, (kind, fn) in group.items():
                        p50, p95 = percentiles(fn, args.runs)
                        target = TARGETS[kind]
                        ok = "yes" if p95 < target else "NO"
                        table.add_row(
                            backend, path, name, f"{p50:.1f}", f"{p95:.1f}", f"< {target:.0f}", ok
                        )
        finally:
            store.close()
        hits = open_store(url)
        try:
            total = hits.search(QUERY, limit=1).total
            console.print(f"{backend}: '{QUERY}' is in {total:,} messages")
        finally:
            hits.close()
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
