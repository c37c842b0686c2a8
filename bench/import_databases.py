"""Reading agsh and Agents SDK session databases: time against the number of sessions.

A database of N sessions (four messages each: a question, a tool call, its result,
an answer) is made in agsh's documented schema and in the Agents SDK's
``SQLiteSession`` schema (neither has an index on ``session_id``, as the originals
have none), then read as ``threadline sessions import`` reads it: the snapshot, the
hash, and every session mapped to messages (``read_source`` + ``sessions_from_source``;
storing is the store's cost, measured in ``bench/append.py``). A reader that looks each
session's messages up by scanning the table is quadratic: the time per session grows
with N. Printed: seconds and microseconds per session at each N.

    python bench/import_databases.py [--sessions 4000,20000] [--formats agsh,agents-sdk] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from threadline.interop.importers import read_source, sessions_from_source

AGSH_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
                       locked_by TEXT, metadata TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                       role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE tool_outputs (session_id TEXT NOT NULL, name TEXT NOT NULL, content TEXT NOT NULL,
                           created_at TEXT NOT NULL, PRIMARY KEY (session_id, name));
"""
SDK_SCHEMA = """
CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY, created_at TIMESTAMP,
                             updated_at TIMESTAMP);
CREATE TABLE agent_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                             message_data TEXT NOT NULL, created_at TIMESTAMP);
"""
AT = "2026-03-14T11:00:00Z"


def agsh_rows(sid: str, i: int) -> list[tuple[str, str, str, str]]:
    call = {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": "a.py"}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"line {i}"}
    return [
        (sid, "user", f"What does a.py do, question {i}?", AT),
        (sid, "assistant", json.dumps([{"type": "text", "text": "Let me look."}, call]), AT),
        (sid, "tool_results", json.dumps([result]), AT),
        (sid, "assistant", f"It prints line {i}.", AT),
    ]


def sdk_rows(sid: str, i: int) -> list[tuple[str, str, str]]:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": f"What does a.py do, question {i}?"},
        {
            "type": "function_call",
            "call_id": f"call_{i}",
            "name": "read_file",
            "arguments": '{"path": "a.py"}',
        },
        {"type": "function_call_output", "call_id": f"call_{i}", "output": f"line {i}"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"It prints line {i}."}],
        },
    ]
    return [(sid, json.dumps(item), AT) for item in items]


FORMATS: dict[str, tuple[str, str, str, Callable[[str, int], list[Any]]]] = {
    "agsh": (
        AGSH_SCHEMA,
        "INSERT INTO sessions VALUES (?, ?, ?, NULL, NULL)",
        "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
        agsh_rows,
    ),
    "agents-sdk": (
        SDK_SCHEMA,
        "INSERT INTO agent_sessions VALUES (?, ?, ?)",
        "INSERT INTO agent_messages (session_id, message_data, created_at) VALUES (?, ?, ?)",
        sdk_rows,
    ),
}
"""Per format: its schema, how a session and how a message row are inserted, and a
session's rows."""


def make(path: Path, kind: str, sessions: int) -> None:
    """Sessions interleaved, as several agents writing at once leave them."""
    schema, add_session, add_row, rows_of = FORMATS[kind]
    ids = [str(uuid.UUID(int=i + 1)) for i in range(sessions)]
    rows = [rows_of(s, i) for i, s in enumerate(ids)]
    with sqlite3.connect(path) as db:
        db.executescript(schema)
        db.executemany(add_session, [(s, AT, AT) for s in ids])
        db.executemany(add_row, [rs[turn] for turn in range(4) for rs in rows])


def measure(path: Path) -> tuple[float, int]:
    started = time.perf_counter()
    imported = sessions_from_source(read_source(path))
    return time.perf_counter() - started, len(imported)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="4000,20000", help="comma-separated session counts")
    ap.add_argument("--formats", default="agsh,agents-sdk", help="comma-separated formats")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="threadline-dbimport-") as tmp:
        for kind in args.formats.split(","):
            for n in (int(x) for x in args.sessions.split(",")):
                path = Path(tmp) / f"{kind}-{n}.db"
                make(path, kind, n)
                seconds, found = measure(path)
                assert found == n, (kind, n, found)
                rows.append({"format": kind, "sessions": n, "seconds": seconds})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="read a session database (snapshot, hash, every session mapped)")
    for col in ("format", "sessions", "s", "us a session"):
        table.add_column(col, justify="right")
    for r in rows:
        per = r["seconds"] / r["sessions"] * 1e6
        table.add_row(r["format"], f"{r['sessions']:,}", f"{r['seconds']:.2f}", f"{per:.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
