"""Session databases other agents keep in SQLite: found by their tables, read from a
snapshot.

agsh (``sessions.db``) and the OpenAI Agents SDK (``SQLiteSession``) keep every
session in one SQLite file. Such a file is read through SQLite's backup API into
memory, in one read transaction: the snapshot is consistent while the agent keeps
writing, includes what is still in a write-ahead log, and is what gets hashed, so
"unchanged" means the same content. The live file is opened read-only and never
written. Each session inside becomes one conversation (``agsh`` and ``agents_sdk``
say how).
"""

from __future__ import annotations

import contextlib
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from threadline.errors import ImportFormatError
from threadline.store import sqlite_files

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def is_database(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts like a SQLite database (a pipe or
    a device is never peeked at: what is read from it would be lost to the reader). A
    database this process holds open is not peeked at either (closing the descriptor
    would drop its connections' locks): it is SQLite's, and SQLite reads it."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return False
        magic = sqlite_files.read_unheld(path, _magic)
    except OSError:
        return False
    if magic is None:  # held here: the database itself, or its -wal / -shm
        return not path.name.endswith(sqlite_files.COMPANION_SUFFIXES)
    return magic == SQLITE_MAGIC


def _magic(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(len(SQLITE_MAGIC))


def snapshot(path: Path) -> bytes:
    """The database at ``path`` as one consistent image (see the module docstring)."""
    uri = "file:" + quote(str(path.resolve())) + "?mode=ro"
    try:
        with (
            contextlib.closing(sqlite3.connect(uri, uri=True)) as live,
            contextlib.closing(sqlite3.connect(":memory:")) as copy,
        ):
            live.backup(copy)
            image = bytearray(copy.serialize())
    except sqlite3.Error as exc:
        raise ImportFormatError(f"cannot read the SQLite database: {exc}", path=str(path)) from exc
    # a WAL database's header says so (bytes 18-19 = 2), and an in-memory copy has no
    # log to open: mark the snapshot as the rollback-journal format it now is
    image[18:20] = b"\x01\x01"
    return bytes(image)


@contextlib.contextmanager
def opened(image: bytes, name: str) -> Iterator[sqlite3.Connection]:
    """A private in-memory connection on a snapshot (never the live file)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(image)
        yield conn
    except sqlite3.Error as exc:
        raise ImportFormatError(f"cannot read the SQLite database: {exc}", path=name) from exc
    finally:
        conn.close()


def columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Each table's column names."""
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        table: {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
        for table in tables
    }


def index_sessions(conn: sqlite3.Connection, table: str) -> None:
    """Index ``table`` by ``session_id`` in this private in-memory copy (the live file is
    only read, through the backup API): each session's rows are then found by a search,
    not by scanning the whole table, and reading N sessions is linear in N. Neither
    agsh nor the Agents SDK keeps such an index; without it 4,000 sessions took 12 s and
    20,000 over 120 s. ``table`` is one of the readers' own names, never the file's."""
    conn.execute(
        f'CREATE INDEX IF NOT EXISTS "threadline_{table}_session" ON "{table}" (session_id)'
    )
