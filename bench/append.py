"""Durable append rate: threadline's SQLite store beside raw sqlite3 and a peer.

Every writer runs on a fresh file with WAL and ``synchronous=FULL`` and
commits each append (single: one message per commit; batched: 100 per
commit), so each number is an fsync-bound durable rate. Rows are the same
messages for every writer. What each writer does inside its timed loop:

* threadline (``Session.append``): validates each message, counts its tokens
  (the count stored at append: for gpt-4o the o200k estimator, which errs high,
  since a build counts exactly what it sends; for claude the estimator, which is
  its count), encodes it, inserts the row and updates the session's counters in
  one transaction. The full-text index is not written by appends: it catches up
  in one statement before a search answers; the catch-up is timed separately
  below the table, after the appends, and a search then finds every message.
* raw sqlite3 inserts: the very rows threadline stores (its message table's
  columns: rowid, session id, seq, id, role, time, token count and JSON body),
  made before the clock starts, inserted with ``executemany`` into a table with
  the same two unique indexes; no validation, no token counting, no encoding, no
  session row, no full-text index. A floor below any real design.
* raw sqlite3 + FTS5: the raw inserts plus a contentless FTS5 table fed the
  same search text (made before the clock starts) in each append's transaction:
  the floor for a store that indexes row by row on the durable path.
* Agents SDK ``SQLiteSession.add_items``: its own settings, no index.

Below the table: the threadline index catch-up after the batched appends (per
message, paid once before the first search), and what exact token counting
(tiktoken, this run's texts) would add per message if appends paid it.

    python bench/append.py [--single 1000] [--batched 20000] [--rounds 3] [--real DIR [--repeat K]]

``--real DIR`` appends the messages of the agent transcripts under DIR (any
format ``threadline sessions import`` reads) instead of generated ones, each once
(``--repeat K``: K times over, with new ids, up to ``--batched`` messages). The
ratio depends on the store's size: SQLite's cost a row grows as its trees deepen,
threadline's does not, so a small store is the hard case.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table

from histories import batches
from threadline import Message
from threadline.errors import InvalidMessage
from threadline.stamps import new_id
from threadline.store.checks import format_ts
from threadline.store.encoding import check_message, prepare_messages, primary_tokens
from threadline.store.search_query import fts_text, message_pieces
from threadline.store.sqlite import FTS_OPTIONS, SQLiteStore

BATCH = 100


def real_messages(root: Path, n: int, repeat: int = 1) -> list[Message]:
    """Up to ``n`` messages of the agent transcripts under ``root`` (read with threadline's
    importers), conversation after conversation, as fresh messages: new ids, no counts;
    ``repeat`` times over (each time with new ids), for a store larger than the
    transcripts. What ``Session.append`` refuses is left out: a tool result whose call is
    not earlier in the stream, a message that breaks ``check_message``'s rules."""
    from real_transcripts import conversations

    out: list[Message] = []
    called: set[str] = set()
    found = [conversation for _name, conversation in conversations(root)]
    for conversation in found * repeat:
        for m in conversation:
            fresh = m.model_copy(update={"id": new_id(), "token_counts": {}, "seq": None})
            if m.role == "tool" and m.tool_call_id not in called:
                continue
            try:
                check_message(fresh)
            except InvalidMessage:
                continue
            called.update(c.id for c in m.tool_calls)
            out.append(fresh)
            if len(out) == n:
                return out
    return out


def messages(n: int) -> list[Message]:
    """Fresh messages, as a caller appends them: without the counts the histories
    module stores with them."""
    return [m.model_copy(update={"token_counts": {}}) for b in batches(n, 1000) for m in b]


CATCH_UP: dict[str, float] = {}
"""Seconds the search index took to catch up after each threadline run, by model."""


def ours(path: Path, msgs: list[Message], batch: int, model: str = "gpt-4o") -> float:
    store = SQLiteStore(path)
    session = store.create_session(model=model)
    t0 = time.perf_counter()
    for i in range(0, len(msgs), batch):
        # the full public path: validation, token counting, encoding, one transaction
        session.append(msgs[i : i + batch])
    elapsed = time.perf_counter() - t0
    t1 = time.perf_counter()
    indexed = store.update_search_index()  # what the first search would do
    CATCH_UP[model] = time.perf_counter() - t1
    assert session.count() == len(msgs) == indexed and store.index_backlog() == 0
    store.close()
    return elapsed


def ours_estimated(path: Path, msgs: list[Message], batch: int) -> float:
    return ours(path, msgs, batch, model="claude-sonnet-4-5")


def raw(path: Path, msgs: list[Message], batch: int, *, fts: bool = False) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute(
        "CREATE TABLE messages (rowid INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER, "
        "id TEXT, role TEXT, created_at TEXT, tokens INTEGER, body TEXT, "
        "UNIQUE (session_id, seq), UNIQUE (session_id, id))"
    )
    con.execute(f"CREATE VIRTUAL TABLE fts USING fts5 (text, {FTS_OPTIONS})")
    # the very rows threadline stores (its message table's columns, its JSON bodies and
    # counts), made before the clock starts
    sid = uuid.uuid4().hex
    prepared = prepare_messages("gpt-4o", msgs)
    rows = [
        (i, sid, i, m.id, m.role, format_ts(m.created_at), primary_tokens(m), body.decode())
        for i, (m, body) in enumerate(zip(prepared, prepared.bodies, strict=True), 1)
    ]
    texts = [(i + 1, fts_text(message_pieces(m))) for i, m in enumerate(msgs)] if fts else []
    t0 = time.perf_counter()
    for i in range(0, len(rows), batch):
        con.execute("BEGIN IMMEDIATE")
        con.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows[i : i + batch])
        if fts:
            con.executemany("INSERT INTO fts (rowid, text) VALUES (?, ?)", texts[i : i + batch])
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
    ap.add_argument("--rounds", type=int, default=3, help="runs of every writer, interleaved")
    ap.add_argument(
        "--real",
        type=Path,
        metavar="DIR",
        help="append the messages of the agent transcripts under DIR (e.g. ~/.claude/projects) "
        "instead of generated ones",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="with --real: go through the transcripts K times (new ids each time), so the "
        "batched run can fill a larger store (up to --batched messages)",
    )
    args = ap.parse_args()
    source = "generated sessions" if args.real is None else f"transcripts under {args.real}"
    stream = (
        real_messages(args.real, max(args.single, args.batched), args.repeat) if args.real else None
    )
    writers: dict[str, Callable[[Path, list[Message], int], float]] = {
        "threadline (Session.append, gpt-4o)": ours,
        "threadline (Session.append, claude)": ours_estimated,
        "raw sqlite3 inserts": raw,
        "raw sqlite3 + FTS5": raw_fts,
        "Agents SDK SQLiteSession.add_items": peer,
    }
    names = list(writers)
    # load what a running agent has loaded already (tiktoken's data, the catalog), so no
    # round times a one-off start-up
    for model in ("gpt-4o", "claude-sonnet-4-5"):
        prepare_messages(model, messages(1))
    rates: dict[tuple[str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    catch_ups: list[float] = []
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, n, batch in [("single", args.single, 1), ("batched", args.batched, BATCH)]:
            msgs = messages(n) if stream is None else stream[:n]
            n = len(msgs)
            sizes[mode] = n
            for r in range(args.rounds):
                # each round runs every writer, in an order that rotates, so a slow
                # spell of the disk falls on different writers; ratios are per round
                order = names[r % len(names) :] + names[: r % len(names)]
                got = {}
                for name in order:
                    path = Path(tmp) / f"{mode}-{r}-{names.index(name)}.db"
                    got[name] = n / writers[name](path, msgs, batch)
                    path.unlink()
                if mode == "batched":
                    catch_ups.append(CATCH_UP["gpt-4o"] / n * 1e6)
                for name in names:
                    rates.setdefault((name, mode), []).append(got[name])
                    ratios.setdefault((name, mode), []).append(
                        got[name] / got["raw sqlite3 inserts"]
                    )
        counting = tiktoken_us(messages(5000) if stream is None else stream[:5000])
    med = statistics.median
    table = Table(
        title="Durable appends (WAL, synchronous=FULL, commit per append) of "
        f"{source}: medians of {args.rounds} interleaved rounds"
    )
    single, batched = f"single ({sizes['single']:,})", f"batched ({sizes['batched']:,})"
    for col in ["writer", f"{single} msg/s", "vs raw", f"{batched} by {BATCH} msg/s", "vs raw"]:
        table.add_column(col, justify="right")
    for name in names:
        s, b = med(rates[(name, "single")]), med(rates[(name, "batched")])
        sr, br = med(ratios[(name, "single")]), med(ratios[(name, "batched")])
        table.add_row(name, f"{s:,.0f}", f"{sr:.2f}x", f"{b:,.0f}", f"{br:.2f}x")
    Console().print(table)
    if stream is not None:
        kb = sum(len(m.model_dump_json()) for m in stream[: sizes["batched"]]) / sizes["batched"]
        tools = sum(m.role == "tool" or bool(m.tool_calls) for m in stream) / len(stream)
        print(f"{len(stream):,} messages, {kb / 1024:.1f} KB on average, {tools:.0%} tool steps")
    per_raw = 1e6 / med(rates[("raw sqlite3 inserts", "batched")])
    print(
        f"per message, batched: raw insert {per_raw:.1f} us (0.5x raw allows "
        f"{2 * per_raw:.1f} us in all); threadline's index catch-up after the batched "
        f"appends {med(catch_ups):.1f} us, once, before the first search; exact tiktoken "
        f"count {counting:.1f} us (a build pays it for the window's messages only)"
    )
    print(
        "ratios per round, threadline gpt-4o: single "
        + ", ".join(f"{x:.2f}" for x in ratios[(names[0], "single")])
        + "; batched "
        + ", ".join(f"{x:.2f}" for x in ratios[(names[0], "batched")])
    )


if __name__ == "__main__":
    main()
