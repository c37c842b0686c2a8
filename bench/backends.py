"""Every backend side by side: appends, tail reads and context builds, in one run.

For each backend (SQLite, JSONL, PostgreSQL, Redis, and the in-memory store as
a reference) this measures, through ``open_store(url)`` and the Store protocol:

* durable append rate with one writer: one message per append, and 100;
* the same with 8 writer processes appending into 8 distinct sessions at once
  (aggregate messages per second from the first writer's start to the last one's end;
  the memory store has no sharing, so there each process has a store of its own);
* a tail read of the last 200 messages and a ``build_context`` (128k window)
  on a session of 100,000 messages, each from a freshly opened store, median
  of several runs.

Every number is printed with its ratio to SQLite, the embedded default, as
measured in the same run ("x sqlite": higher is faster). Messages come from
``histories.py`` (a coding-agent mix with tool results of 0.3-6 KB, token
counts prepared once), so the store's own work is what is timed. A backend
whose server is unreachable is skipped with a note. ``--quick`` shrinks every
size for a smoke run.

    python bench/backends.py [--quick] [--only sqlite,postgres] [--messages 100000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table

from histories import MODEL, batches
from threadline import ContextPolicy, Message, build_context, open_store
from threadline.errors import ThreadlineError
from threadline.messages import new_id

POSTGRES_URL = os.environ.get(
    "THREADLINE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("THREADLINE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
STORE_URLS: dict[str, Callable[[Path, str], str]] = {
    "sqlite": lambda workdir, tag: f"sqlite://{workdir / 'bench.db'}",
    "jsonl": lambda workdir, tag: f"jsonl://{workdir / 'jsonl'}",
    "postgres": lambda workdir, tag: f"{POSTGRES_URL}?schema=bench_{tag}",
    "redis": lambda workdir, tag: f"{REDIS_URL}?prefix=threadline-bench:{tag}:",
    "memory": lambda workdir, tag: "memory://",
}
"""Backend -> (work directory, run tag) -> the URL of its store, in the table's order."""
BACKENDS = list(STORE_URLS)
BASELINE = "sqlite"
BATCH = 100
"""Messages per append in the batched runs."""
FILL_BATCH = 2_000
"""Messages per append while filling the big session (speed, not measured)."""
TAIL = 200
CONTEXT_LIMIT = 128_000
WRITERS = 8
CONNECT_TIMEOUT = 1.0
WRITER_TIMEOUT = 3600.0
"""Seconds to wait for a writer process's result before giving up on the run."""
TABLE_WIDTH = 150
"""The table is printed at least this wide, so each number sits on one line with its ratio."""


@dataclass(frozen=True)
class Sizes:
    single: int = 1_000
    """Messages appended one per append, one writer."""
    batched: int = 20_000
    """Messages appended 100 per append, one writer."""
    history: int = 100_000
    """Messages in the session read by the tail and context runs."""
    writer_single: int = 250
    """Per writer process, one per append."""
    writer_batched: int = 2_000
    """Per writer process, 100 per append."""
    repeats: int = 9


QUICK = Sizes(
    single=100, batched=1_000, history=5_000, writer_single=30, writer_batched=300, repeats=3
)


@dataclass
class Result:
    backend: str
    values: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None
    note: str | None = None


# (key, column title, unit, higher is better)
METRICS: list[tuple[str, str, str, bool]] = [
    ("single", "append 1/op", "msg/s", True),
    ("batched", f"append {BATCH}/op", "msg/s", True),
    ("single8", f"{WRITERS} writers 1/op", "msg/s", True),
    ("batched8", f"{WRITERS} writers {BATCH}/op", "msg/s", True),
    ("tail", f"tail {TAIL}", "ms", False),
    ("build", "build_context", "ms", False),
]


# -- stores ------------------------------------------------------------------------------


def _port_open(url: str, default_port: int) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), timeout=CONNECT_TIMEOUT
        ):
            return True
    except OSError:
        return False


def backend_url(backend: str, workdir: Path, tag: str) -> str:
    """The URL of a fresh store for one run: a file under ``workdir``, or a server's
    schema / key prefix named by ``tag``."""
    return STORE_URLS[backend](workdir, tag)


def unreachable(backend: str, url: str) -> str | None:
    """Why a backend cannot be benchmarked here, or None."""
    if backend == "postgres" and not _port_open(url, 5432):
        return f"PostgreSQL is not reachable at {url.split('?')[0]}"
    if backend == "redis" and not _port_open(url, 6379):
        return f"Redis is not reachable at {url.split('?')[0]}"
    try:
        open_store(url).close()
    except (ThreadlineError, OSError, ImportError) as exc:
        return f"cannot open {backend}: {type(exc).__name__}: {exc}"
    return None


def drop(backend: str, url: str) -> None:
    """Remove what the run left on a shared server (files go with the temporary directory)."""
    base, _, query = url.partition("?")
    value = query.partition("=")[2]
    if backend == "postgres":
        import psycopg
        from psycopg import sql

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(value)))
    elif backend == "redis":
        import redis

        client = redis.Redis.from_url(base)
        try:
            keys = list(client.scan_iter(match=value + "*", count=1000))
            for start in range(0, len(keys), 1000):
                client.delete(*keys[start : start + 1000])
        finally:
            client.close()


def durability_note(backend: str, url: str) -> str | None:
    """What "durable" means on a server backend in this run: its own settings decide."""
    base = url.partition("?")[0]
    try:
        if backend == "redis":
            import redis

            client = redis.Redis.from_url(base)
            try:
                aof = client.config_get("appendonly").get("appendonly")
                fsync = client.config_get("appendfsync").get("appendfsync")
                save = client.config_get("save").get("save")
            finally:
                client.close()
            return f"redis server: appendonly={aof}, appendfsync={fsync}, save={save!r}"
        if backend == "postgres":
            import psycopg

            with psycopg.connect(base) as conn:
                row = conn.execute("SHOW synchronous_commit").fetchone()
            return f"postgres server: synchronous_commit={row[0] if row else '?'}"
    except Exception as exc:  # a note only; the numbers stand without it
        return f"{backend} server settings unknown ({type(exc).__name__})"
    return None


def messages(n: int, seed: int = 0) -> list[Message]:
    return [m for b in batches(n, 1000, seed=seed) for m in b]


# -- one writer ------------------------------------------------------------------------------


def append_rate(url: str, msgs: list[Message], per_append: int) -> float:
    store = open_store(url)
    try:
        sid = store.create_session(agent="bench", model=MODEL).id
        t0 = time.perf_counter()
        for i in range(0, len(msgs), per_append):
            store.append_messages(sid, msgs[i : i + per_append])
        elapsed = time.perf_counter() - t0
        assert store.count_messages(sid) == len(msgs)
    finally:
        store.close()
    return len(msgs) / elapsed


def fill(url: str, size: int) -> str:
    store = open_store(url)
    try:
        sid = store.create_session(agent="bench", model=MODEL).id
        for batch in batches(size, FILL_BATCH, seed=1):
            store.append_messages(sid, batch)
    finally:
        store.close()
    return sid


def read_times(url: str, sid: str, repeats: int) -> tuple[float, float]:
    """Median seconds of a tail read and of a context build, from a freshly opened store."""
    tails, builds = [], []
    policy = ContextPolicy(context_limit=CONTEXT_LIMIT)
    store = open_store(url)
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            got = store.tail(sid, TAIL)
            tails.append(time.perf_counter() - t0)
            assert len(got) == TAIL
            t0 = time.perf_counter()
            window = build_context(
                store.get_session(sid), system_prompt="You are a coding agent.", policy=policy
            )
            builds.append(time.perf_counter() - t0)
            assert window.tokens <= CONTEXT_LIMIT - policy.response_reserve
    finally:
        store.close()
    return statistics.median(tails), statistics.median(builds)


# -- eight writers -------------------------------------------------------------------------


def writer(
    url: str, worker: int, one: list[Message], many: list[Message], barrier: Any, out: Any
) -> None:  # pragma: no cover - runs in a child process
    """One writer process: its own store and session; two phases started together."""
    try:
        store = open_store(url)
        try:
            sid = store.create_session(agent=f"writer-{worker}", model=MODEL).id
            barrier.wait()
            t0 = time.monotonic()
            for m in one:
                store.append_messages(sid, [m])
            t1 = time.monotonic()
            barrier.wait()
            t2 = time.monotonic()
            for i in range(0, len(many), BATCH):
                store.append_messages(sid, many[i : i + BATCH])
            t3 = time.monotonic()
            assert store.count_messages(sid) == len(one) + len(many)
        finally:
            store.close()
        out.put((worker, t0, t1, t2, t3, None))
    except BaseException as exc:
        barrier.abort()
        out.put((worker, 0.0, 0.0, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))


def fresh_ids(msgs: list[Message]) -> list[Message]:
    return [m.model_copy(update={"id": new_id()}) for m in msgs]


def concurrent_rates(url: str, single: int, batched: int) -> tuple[float, float]:
    """Aggregate msg/s of ``WRITERS`` processes, one per append and ``BATCH`` per append.

    Messages are prepared here, before the processes fork, so the children
    start at once and spend their time in the store. Times come from the
    system-wide monotonic clock, comparable across processes.
    """
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    one, many = messages(single, seed=2), messages(batched, seed=3)
    barrier = ctx.Barrier(WRITERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=writer, args=(url, w, fresh_ids(one), fresh_ids(many), barrier, out))
        for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    rows = [out.get(timeout=WRITER_TIMEOUT) for _ in procs]
    for p in procs:
        p.join()
    errors = [r[5] for r in rows if r[5]]
    if errors:
        raise RuntimeError(f"a writer failed: {errors[0]}")
    single_span = max(r[2] for r in rows) - min(r[1] for r in rows)
    batched_span = max(r[4] for r in rows) - min(r[3] for r in rows)
    return WRITERS * single / single_span, WRITERS * batched / batched_span


# -- the run ---------------------------------------------------------------------------------


def bench_backend(backend: str, sizes: Sizes, workdir: Path, say: Callable[[str], None]) -> Result:
    result = Result(backend)
    tag = uuid.uuid4().hex[:10]
    url = backend_url(backend, workdir, tag)
    why = unreachable(backend, url)
    if why is not None:
        result.skipped = why
        return result
    result.note = durability_note(backend, url)
    try:
        say(f"{backend}: one writer")
        result.values["single"] = append_rate(url, messages(sizes.single), 1)
        result.values["batched"] = append_rate(url, messages(sizes.batched), BATCH)
        say(f"{backend}: {WRITERS} writer processes")
        result.values["single8"], result.values["batched8"] = concurrent_rates(
            url, sizes.writer_single, sizes.writer_batched
        )
        say(f"{backend}: writers done")
        if backend == "memory":
            # the data lives in this process only: fill and read in the same store
            result.values["tail"], result.values["build"] = _memory_reads(sizes)
        else:
            say(f"{backend}: filling a session of {sizes.history:,} messages")
            sid = fill(url, sizes.history)
            say(f"{backend}: tail reads and context builds")
            result.values["tail"], result.values["build"] = read_times(url, sid, sizes.repeats)
    finally:
        if backend in ("postgres", "redis"):
            drop(backend, url)
    return result


def _memory_reads(sizes: Sizes) -> tuple[float, float]:
    from threadline.store.memory import MemoryStore

    store = MemoryStore()
    sid = store.create_session(agent="bench", model=MODEL).id
    for batch in batches(sizes.history, FILL_BATCH, seed=1):
        store.append_messages(sid, batch)
    tails, builds = [], []
    policy = ContextPolicy(context_limit=CONTEXT_LIMIT)
    for _ in range(sizes.repeats):
        t0 = time.perf_counter()
        store.tail(sid, TAIL)
        tails.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        build_context(
            store.get_session(sid), system_prompt="You are a coding agent.", policy=policy
        )
        builds.append(time.perf_counter() - t0)
    return statistics.median(tails), statistics.median(builds)


def cell(value: float | None, base: float | None, *, unit: str, higher: bool) -> str:
    if value is None:
        return "-"
    shown = f"{value * 1000:,.1f}" if unit == "ms" else f"{value:,.0f}"
    if not base or not value:
        return shown
    ratio = value / base if higher else base / value
    return f"{shown} ({ratio:.2f}x)"


def render(results: list[Result], sizes: Sizes) -> Table:
    table = Table(
        title=f"Backends: appends, and reads on a {sizes.history:,}-message session",
        caption=f"(Nx) = speed relative to {BASELINE} in this run; higher is faster. "
        f"1/op and {BATCH}/op: messages per append, each one committed "
        "(as durable as the backend and its server are set to be: see the notes). "
        f"{WRITERS} writers: processes appending into distinct sessions, aggregate. "
        "Reads: median, fresh store.",
    )
    table.add_column("backend")
    for _, title, unit, _ in METRICS:
        table.add_column(f"{title} ({unit})", justify="right")
    base = next((r for r in results if r.backend == BASELINE and not r.skipped), None)
    for r in results:
        if r.skipped:
            continue
        name = f"{r.backend} (reference)" if r.backend == "memory" else r.backend
        row = [name]
        for key, _, unit, higher in METRICS:
            ref = base.values.get(key) if base else None
            row.append(cell(r.values.get(key), ref, unit=unit, higher=higher))
        table.add_row(*row)
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--only", help="comma-separated backends (default: all)")
    ap.add_argument("--messages", type=int, help="messages in the read session")
    args = ap.parse_args()
    sizes = QUICK if args.quick else Sizes()
    if args.messages:
        sizes = Sizes(**{**sizes.__dict__, "history": args.messages})
    chosen = args.only.split(",") if args.only else BACKENDS
    unknown = set(chosen) - set(BACKENDS)
    if unknown:
        ap.error(f"unknown backend(s): {', '.join(sorted(unknown))}")
    console = Console()
    results = []
    started = time.perf_counter()

    def say(text: str) -> None:
        console.print(f"[dim]{time.perf_counter() - started:6.1f}s  {text}[/dim]")

    for backend in chosen:
        with tempfile.TemporaryDirectory(prefix=f"threadline-bench-{backend}-") as tmp:
            try:
                results.append(bench_backend(backend, sizes, Path(tmp), say))
            except Exception as exc:  # one broken backend must not lose the others' numbers
                results.append(Result(backend, skipped=f"failed: {type(exc).__name__}: {exc}"))
    Console(width=max(console.width, TABLE_WIDTH)).print(render(results, sizes))
    for r in results:
        if r.note:
            console.print(r.note)
        if r.skipped:
            console.print(f"skipped {r.backend}: {r.skipped}")
    console.print(f"[dim]total time {time.perf_counter() - started:,.0f} s[/dim]")


if __name__ == "__main__":
    main()
