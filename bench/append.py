"""Durable append rate: threadline's SQLite store beside raw sqlite3 and a peer.

Every writer runs on a fresh file with WAL and ``synchronous=FULL`` and
commits each append (single: one message per commit; batched: 100 per
commit), so each number is an fsync-bound durable rate. Rows are the same
messages for every writer. What each writer does inside its timed loop:

* threadline (``Session.append``): validates each message, counts its tokens
  (gpt-4o: exact tiktoken counts; claude: the estimator), encodes it, inserts
  the row and updates the session's counters in one transaction, and keeps the
  full-text index current: the index catches up in one statement every 1,000
  rows and before any search, and the bench times the last catch-up too, so
  every appended message is indexed when the clock stops.
* raw sqlite3 inserts: the same JSON bodies, encoded before the clock starts,
  into a table with the same two unique indexes; no validation, no token
  counts, no session row, no full-text index. A floor below any real design.
* raw sqlite3 + FTS5: the raw inserts plus a contentless FTS5 table fed the
  same search text (made before the clock starts), caught up every 1,000 rows
  as threadline does: the floor for a store whose search finds every message.
* Agents SDK ``SQLiteSession.add_items``: its own settings, no index.

Below the table: what exact token counting (tiktoken, this run's texts) and
the FTS5 index (raw+FTS5 minus raw) cost per message, measured in this run.

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
from threadline.store.search_query import fts_text, message_pieces
from threadline.store.sqlite import FTS_OPTIONS, INDEX_BACKLOG_ROWS, SQLiteStore

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


def raw(path: Path, msgs: list[Message], batch: int, *, fts: bool = False) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute(
        "CREATE TABLE messages (session_id TEXT, seq INTEGER, id TEXT, body TEXT, "
        "UNIQUE (session_id, seq), UNIQUE (session_id, id))"
    )
    con.execute(f"CREATE VIRTUAL TABLE fts USING fts5 (text, {FTS_OPTIONS})")
    rows = [("s", i + 1, m.id, m.model_dump_json()) for i, m in enumerate(msgs)]
    texts = [(i + 1, fts_text(message_pieces(m))) for i, m in enumerate(msgs)] if fts else []
    indexed = 0
    t0 = time.perf_counter()
    for i in range(0, len(rows), batch):
        con.execute("BEGIN IMMEDIATE")
        con.executemany("INSERT INTO messages VALUES (?, ?, ?, ?)", rows[i : i + batch])
        top = min(i + batch, len(rows))
        if fts and (top - indexed >= INDEX_BACKLOG_ROWS or top == len(rows)):
            con.executemany("INSERT INTO fts (rowid, text) VALUES (?, ?)", texts[indexed:top])
            indexed = top
        con.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    con.close()
    return elapsed


def raw_fts(path: Path, msgs: list[Message], batch: int) -> float:
    return raw(path, msgs, batch, fts=True)


def tiktoken_us(msgs: list[Message]) -> float:
    """Microseconds a message for exact o200k counts of its texts (what gpt-4o pays)."""
    from threadline.tokens import counter_for

    counter = counter_for("gpt-4o")
    t0 = time.perf_counter()
    for m in msgs:
        counter.count_message(m)
    return (time.perf_counter() - t0) / len(msgs) * 1e6


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
        "raw sqlite3 + FTS5": raw_fts,
        "Agents SDK SQLiteSession.add_items": peer,
    }
    results: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, n, batch in [("single", args.single, 1), ("batched", args.batched, BATCH)]:
            msgs = messages(n)
            for name, fn in writers.items():
                path = Path(tmp) / f"{mode}-{len(results)}.db"
                results[(name, mode)] = n / fn(path, msgs, batch)
        counting = tiktoken_us(messages(min(args.batched, 5000)))
    table = Table(title="Durable appends (WAL, synchronous=FULL, commit per append)")
    for col in ["writer", "single msg/s", "vs raw", f"batched ({BATCH}) msg/s", "vs raw"]:
        table.add_column(col, justify="right")
    rs, rb = results[("raw sqlite3 inserts", "single")], results[("raw sqlite3 inserts", "batched")]
    for name in writers:
        s, b = results[(name, "single")], results[(name, "batched")]
        table.add_row(name, f"{s:,.0f}", f"{s / rs:.2f}x", f"{b:,.0f}", f"{b / rb:.2f}x")
    Console().print(table)
    fb = results[("raw sqlite3 + FTS5", "batched")]
    per_raw = 1e6 / rb
    print(
        f"per message, batched: raw insert {per_raw:.1f} us; FTS5 index "
        f"{1e6 / fb - per_raw:.1f} us; exact tiktoken count {counting:.1f} us; "
        f"0.5x raw allows {2 * per_raw:.1f} us in all"
    )


if __name__ == "__main__":
    main()
