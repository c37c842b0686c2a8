"""Damaging an SQLite store the way a disk or a stray write does, for the fault tests.

``three_sessions`` writes sessions whose messages are large and distinct, one session
after another, so their rows land on pages of their own; ``overwrite_page_of`` then
finds a table page holding rows of one session only and overwrites its cell pointers,
which SQLite reports as "database disk image is malformed" when a read reaches it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from threadline import Message, open_store

NAMES = ("alpha", "bravo", "charlie")
MESSAGES = 60


def marker(name: str) -> bytes:
    return f"{name.upper()}MARK".encode()


def three_sessions(path: Path) -> dict[str, list[str]]:
    """Sessions ``sess-alpha``, ``sess-bravo``, ``sess-charlie`` (with a checkpoint each),
    their message texts by id; the store is closed and its WAL checkpointed into the file."""
    store = open_store(f"sqlite://{path}")
    texts: dict[str, list[str]] = {}
    for name in NAMES:
        session = store.create_session(id=f"sess-{name}", title=name)
        batch = [
            Message.user(f"{name.upper()}MARK{i:04d} " + f"{name} " * 250) for i in range(MESSAGES)
        ]
        session.append(batch)
        session.add_checkpoint(covers_up_to=10, summary=f"summary of {name}")
        texts[session.id] = [m.text for m in batch]
    store.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return texts


def overwrite_page_of(path: Path, name: str) -> int:
    """Overwrite the cell pointers of a message-table page that holds only ``name``'s
    rows; returns the page number (0-based)."""
    con = sqlite3.connect(path)
    page_size = int(con.execute("PRAGMA page_size").fetchone()[0])
    con.close()
    data = bytearray(path.read_bytes())
    others = [marker(n) for n in NAMES if n != name]
    for number in range(1, len(data) // page_size):
        page = data[number * page_size : (number + 1) * page_size]
        is_table_leaf = page[0] == 0x0D and b'"role":"user"' in page
        if is_table_leaf and marker(name) in page and not any(m in page for m in others):
            start = number * page_size + 8
            data[start : start + 64] = b"\xff" * 64
            path.write_bytes(bytes(data))
            return number
    raise AssertionError(f"no page holds only {name}'s rows")
