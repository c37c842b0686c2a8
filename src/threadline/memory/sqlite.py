"""Memory in the SQLite store's own file: its own tables beside the sessions, FTS5-indexed.

The memory opens a connection of its own to the store's file (WAL, the same busy
timeout), so sessions and memories share one file, one backup and one URL, while
the store's schema stays untouched: the memory tables carry their own version in
``memory_meta``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from threadline.errors import StoreUnavailable
from threadline.memory.records import (
    ANYWHERE,
    SCHEMA_VERSION,
    Row,
    SQLDialect,
    Where,
    schema_version,
    translating,
)
from threadline.memory.rules import STOPWORDS, words
from threadline.store import sqlite_files

BUSY_TIMEOUT_MS = 60_000
MAX_PARAMS = 500
"""Keys per ``IN (...)`` list; longer lists are read in chunks."""

DIALECT = SQLDialect(mark="?", body_type="TEXT")
SCHEMA = [
    *DIALECT.schema("UNIQUE (kind, id)"),
    """CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    text, content='memory_records', content_rowid='rowid', tokenize='porter unicode61'
)""",
    """CREATE TRIGGER IF NOT EXISTS memory_records_ai AFTER INSERT ON memory_records BEGIN
    INSERT INTO memory_fts (rowid, text) VALUES (new.rowid, new.text);
END""",
    """CREATE TRIGGER IF NOT EXISTS memory_records_ad AFTER DELETE ON memory_records BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END""",
    """CREATE TRIGGER IF NOT EXISTS memory_records_au AFTER UPDATE ON memory_records BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO memory_fts (rowid, text) VALUES (new.rowid, new.text);
END""",
]


def match_expression(query_words: Sequence[str]) -> str:
    """Any of the words, each quoted: user text never becomes FTS5 syntax."""
    kept = [w for w in query_words if w not in STOPWORDS]
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(kept))


def _chunks(values: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), MAX_PARAMS):
        yield values[start : start + MAX_PARAMS]


class SQLiteRecords:
    """``Records`` in ``memory_records`` of the store's SQLite file."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        mode = "ro" if read_only else "rw"
        # registered before it opens, so no plain read of the file drops its locks
        self._hold, _ = sqlite_files.hold(self, path, lambda _path: None)
        try:
            self._con = sqlite3.connect(
                f"file:{quote(str(path.absolute()))}?mode={mode}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
            self._con.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._present = self._migrate()
        except sqlite3.Error as exc:
            self._hold.release()
            raise StoreUnavailable(f"cannot open the memory tables in {path}: {exc}") from exc

    def _migrate(self) -> bool:
        """Create the tables (or check their version); False: absent in a read-only store."""
        con = self._con
        exists = con.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_meta'"
        ).fetchone()
        if exists:
            row = con.execute("SELECT value FROM memory_meta WHERE key = 'version'").fetchone()
            if schema_version(row, str(self.path)) == SCHEMA_VERSION:
                return True
        if self.read_only:
            return False
        con.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:
                con.execute(statement)
            con.execute(*DIALECT.set_version())
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return True

    def _translate(self) -> contextlib.AbstractContextManager[None]:
        return translating(sqlite3.Error, str(self.path))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self.read_only:
            raise StoreUnavailable(f"store {self.path} is read-only: memory cannot be written")
        with self._translate(), self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._con.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            else:
                self._con.execute("COMMIT")
            finally:
                self._depth = 0

    def put(self, rows: Sequence[Row]) -> None:
        if not rows:
            return
        with self.transaction():
            self._con.executemany(DIALECT.upsert, [r.values(json.dumps(r.body)) for r in rows])

    def _select(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        if not self._present:
            return []
        with self._translate(), self._lock:
            rows = self._con.execute(f"SELECT body FROM memory_records WHERE {where}", params)
            return [json.loads(r[0]) for r in rows.fetchall()]

    def get(self, kind: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for chunk in _chunks(list(ids)):
            marks = ",".join("?" * len(chunk))
            out += self._select(f"kind = ? AND id IN ({marks})", [kind, *chunk])
        return out

    def find(self, kind: str, where: Where = ANYWHERE) -> list[dict[str, Any]]:
        clauses, params = ["kind = ?"], [kind]
        for column, values in (("scope", where.scopes), ("key2", where.key2)):
            if values is not None:
                clauses.append(f"{column} IN ({','.join('?' * len(values))})")
                params += list(values)
        if where.keys is None:
            return self._select(" AND ".join(clauses), params)
        out: list[dict[str, Any]] = []
        for chunk in _chunks(list(where.keys)):
            clause = " AND ".join([*clauses, f"key IN ({','.join('?' * len(chunk))})"])
            out += self._select(clause, [*params, *chunk])
        return out

    def lexical(
        self, query_words: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        expression = match_expression([w for q in query_words for w in words(q)])
        if not expression or not self._present:
            return []
        marks = ",".join("?" * len(scopes))
        with self._translate(), self._lock:
            rows = self._con.execute(
                "SELECT r.kind, r.id, bm25(memory_fts) AS rank FROM memory_fts "
                "JOIN memory_records r ON r.rowid = memory_fts.rowid "
                f"WHERE memory_fts MATCH ? AND r.scope IN ({marks}) ORDER BY rank LIMIT ?",
                [expression, *scopes, limit],
            ).fetchall()
        return [(kind, rid, -float(rank)) for kind, rid, rank in rows]

    def close(self) -> None:
        with self._lock:
            self._con.close()
            self._hold.release()
