"""Where a LangGraph chat turn's writes go on SQLite: the WAL frames (pages) a turn adds,
counted by the table or index each page belongs to, threadline's saver beside
``SqliteSaver`` in one run (issue 35: a turn wrote about twice the pages).

A WAL frame is one page a commit wrote; a page a turn writes in several transactions
counts once per transaction. Pages are named through SQLite's ``dbstat`` table;
``sqlite_schema`` is page 1, rewritten whenever the file grows (its header holds the
size).

    python bench/wal_frames.py [--turns 20]
"""

from __future__ import annotations

import argparse
import sqlite3
import struct
import tempfile
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from frameworks import chat_graph, langgraph_savers

WAL_HEADER = 32
FRAME_HEADER = 24
WARM_TURNS = 5
"""Turns before counting, so the thread's first checkpoint is not in the count."""


def wal_pages(db: Path) -> list[int]:
    """The page number of every frame in ``db``'s WAL file, in order."""
    wal = Path(f"{db}-wal").read_bytes()
    page_size = struct.unpack(">I", wal[8:12])[0]
    return [
        struct.unpack(">I", wal[at : at + 4])[0]
        for at in range(WAL_HEADER, len(wal) - FRAME_HEADER + 1, FRAME_HEADER + page_size)
    ]


def owners(db: Path) -> dict[int, str]:
    """Page number to the table or index holding it."""
    with sqlite3.connect(db) as con:
        return {page: name for name, page in con.execute("SELECT name, pageno FROM dbstat")}


def frames_by_owner(saver: Any, db: Path, turns: int) -> Counter[str]:
    """The WAL frames ``turns`` chat turns add, by owner (the WAL emptied before)."""
    from langchain_core.messages import HumanMessage

    graph = chat_graph(saver)
    config = {"configurable": {"thread_id": "t1"}}
    for i in range(WARM_TURNS):
        graph.invoke({"messages": [HumanMessage(content=f"warm up {i}")]}, config)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(turns):
        graph.invoke({"messages": [HumanMessage(content=f"turn {i}")]}, config)
    pages, names = wal_pages(db), owners(db)
    return Counter(names.get(page, "(freed)") for page in pages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="turns counted (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        ours_db, native_db = Path(tmp) / "threadline.db", Path(tmp) / "native.db"
        ours, theirs = langgraph_savers("sqlite", f"sqlite://{ours_db}", str(native_db), stack)
        for label, saver, db in (("threadline", ours, ours_db), ("SqliteSaver", theirs, native_db)):
            counts = frames_by_owner(saver, db, args.turns)
            print(f"{label}: {counts.total() / args.turns:.1f} WAL frames a turn")
            for name, count in counts.most_common():
                print(f"  {count / args.turns:6.1f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
