"""Durable append rate: threadline's SQLite store beside raw sqlite3 and a peer.

Every writer runs on a fresh file with WAL and ``synchronous=FULL`` and
commits each append (single: one message per commit; batched: 100 per
commit), so each number is an fsync-bound durable rate. Rows are the same
messages for every writer. Peers: raw ``sqlite3`` inserts of the same JSON
bodies into a two-index table, and the OpenAI Agents SDK's
``SQLiteSession.add_items`` (its own settings).

The raw peer is a floor below any real design: it validates nothing, counts no
tokens, keeps no full-text index and no session row, and writes only the body
(threadline also writes the search text). threadline's time includes all of
that, and the full-text indexing of every row: its index catches up in batches
(every 1,000 rows, and before any search), and the bench times the last
catch-up too. Two threadline rows: a gpt-4o session (exact tiktoken counts,
about 40 us a message here, which alone exceed half the raw batched time per
message) and a Claude session (estimated counts), which shows the store path.

    python bench/append.py [--single 1000] [--batched 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table

from histories import batches
from threadline import Message
from threadline.store.sqlite import SQLiteStore

BATCH = 100


def messages(n: int) -> list[Message]:
    return [m for b in batches(n, 1000) for m in b]


def ours(path: Path, msgs: list[Message], batch: int, model: str = "gpt-4o") -> float:
    store = SQLiteStore(path)
    session = store.create_session(model=model)
    t0 = time.perf_counter()
    for i in range(0, len(msgs), batch):
        # the full public path: validation, token counting, encoding, one transaction
        session.append(msgs[i : i + batch])
    store.update_search_index()  # the rows still waiting for the full-text index
    elapsed = time.perf_counter() - t0
    assert session.count() == len(msgs) and store.index_backlog() == 0
    store.close()
    return elapsed


def ours_estimated(path: Path, msgs: list[Message], batch: int) -> float:
    return ours(path, msgs, batch, model="claude-sonnet-4-5")


def raw(path: Path, msgs: list[Message], batch: int) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute(
        "CREATE TABLE messages (session_id TEXT, seq INTEGER, id TEXT, body TEXT, "
        "UNIQUE (session_id, seq), UNIQUE (session_id, id))"
    )
    rows = [("s", i + 1, m.id, m.model_dump_json()) for i, m in enumerate(msgs)]
    t0 = time.perf_counter()
    for i in range(0, len(rows), batch):
        con.execute("BEGIN IMMEDIATE")
        con.executemany("INSERT INTO messages VALUES (?, ?, ?, ?)", rows[i : i + batch])
        con.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    con.close()
    return elapsed


def peer(path: Path, msgs: list[Message], batch: int) -> float:
    from agents import SQLiteSession

    items = [{"role": m.role if m.role != "tool" else "user", "content": m.text} for m in msgs]

    async def go() -> float:
        session = SQLiteSession("bench", db_path=path)
        t0 = time.perf_counter()
        for i in range(0, len(items), batch):
            await session.add_items(items[i : i + batch])  # type: ignore[arg-type]
        return time.perf_counter() - t0

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--single", type=int, default=1000, help="messages appended one by one")
    ap.add_argument("--batched", type=int, default=20000, help="messages appended 100 at a time")
    args = ap.parse_args()
    writers: dict[str, Callable[[Path, list[Message], int], float]] = {
        "threadline (Session.append, gpt-4o)": ours,
        "threadline (Session.append, claude)": ours_estimated,
        "raw sqlite3 inserts": raw,
        "Agents SDK SQLiteSession.add_items": peer,
    }
    results: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, n, batch in [("single", args.single, 1), ("batched", args.batched, BATCH)]:
            msgs = messages(n)
            for name, fn in writers.items():
                path = Path(tmp) / f"{mode}-{len(results)}.db"
                results[(name, mode)] = n / fn(path, msgs, batch)
    table = Table(title="Durable appends (WAL, synchronous=FULL, commit per append)")
    for col in ["writer", "single msg/s", "vs raw", f"batched ({BATCH}) msg/s", "vs raw"]:
        table.add_column(col, justify="right")
    for name in writers:
        s, b = results[(name, "single")], results[(name, "batched")]
        rs, rb = (
            results[("raw sqlite3 inserts", "single")],
            results[("raw sqlite3 inserts", "batched")],
        )
        table.add_row(name, f"{s:,.0f}", f"{s / rs:.2f}x", f"{b:,.0f}", f"{b / rb:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
