"""Memory for the PostgreSQL store: its own tables in the store's schema, tsvector-indexed.

The memory opens one connection of its own with the store's connection string
and schema (``search_path``), so sessions and memories share a database and a
URL while the store's tables stay untouched; the memory tables carry their own
version in ``memory_meta``. Lexical search is PostgreSQL's English text search
(a generated ``tsvector`` column with a GIN index, ranked by ``ts_rank_cd``).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from threadline.errors import UsageError
from threadline.memory.records import (
    ANYWHERE,
    Row,
    SQLDialect,
    Where,
    schema_version,
    translating,
)
from threadline.memory.rules import STOPWORDS, words

MIGRATION_LOCK_KEY = 0x6D656D  # "mem"
_SAFE_WORD = re.compile(r"^[a-z0-9]+$")

DIALECT = SQLDialect(mark="%s", body_type="JSONB")
SCHEMA = [
    *DIALECT.schema(
        "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
        "PRIMARY KEY (kind, id)",
    ),
    "CREATE INDEX IF NOT EXISTS memory_records_tsv ON memory_records USING GIN (tsv)",
]


def tsquery(query_words: Sequence[str]) -> str:
    """Any of the words; only ``[a-z0-9]`` words reach the query, so none is syntax."""
    kept = [w for q in query_words for w in words(q) if w not in STOPWORDS]
    return " | ".join(dict.fromkeys(w for w in kept if _SAFE_WORD.match(w)))


class PostgresRecords:
    """``Records`` in ``memory_records`` of the store's schema."""

    def __init__(self, conninfo: str, schema: str, *, where: str) -> None:
        self.schema = schema
        self.where = where
        self._conninfo = conninfo
        self._lock = threading.RLock()
        self._depth = 0
        self._conn: psycopg.Connection[Any] | None = None
        with self._translate():
            self._migrate()

    @classmethod
    def for_store(cls, store: object) -> PostgresRecords:
        """Same server, database and schema as a ``PostgresStore``."""
        from threadline.store.postgres import PostgresStore

        if not isinstance(store, PostgresStore):
            raise UsageError("this PostgreSQL store does not say how to connect to it")
        return cls(store.connection_string(), store.schema, where=store.url)

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            conn = psycopg.connect(self._conninfo, autocommit=True)
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            self._conn = conn
        return self._conn

    def _translate(self) -> contextlib.AbstractContextManager[None]:
        return translating(psycopg.Error, self.where)

    def _migrate(self) -> None:
        conn = self._connection()
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (MIGRATION_LOCK_KEY, self.schema)
            )
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            for statement in SCHEMA:
                conn.execute(statement)
            row = conn.execute("SELECT value FROM memory_meta WHERE key = 'version'").fetchone()
            schema_version(row, self.where)
            conn.execute(*DIALECT.set_version())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._translate(), self._lock:
            if self._depth:
                yield
                return
            conn = self._connection()
            self._depth = 1
            try:
                with conn.transaction():
                    yield
            finally:
                self._depth = 0

    def put(self, rows: Sequence[Row]) -> None:
        if not rows:
            return
        with self.transaction(), self._connection().cursor() as cur:
            cur.executemany(DIALECT.upsert, [r.values(Jsonb(r.body)) for r in rows])

    def _select(self, query: str, params: Sequence[Any]) -> list[Any]:
        with self._translate(), self._lock:
            return self._connection().execute(query, params).fetchall()

    def get(self, kind: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        rows = self._select(
            "SELECT body FROM memory_records WHERE kind = %s AND id = ANY(%s)", (kind, list(ids))
        )
        return [r[0] for r in rows]

    def find(self, kind: str, where: Where = ANYWHERE) -> list[dict[str, Any]]:
        clauses, params = ["kind = %s"], list[Any]([kind])
        for column, values in (("scope", where.scopes), ("key", where.keys), ("key2", where.key2)):
            if values is not None:
                clauses.append(f"{column} = ANY(%s)")
                params.append(list(values))
        query = f"SELECT body FROM memory_records WHERE {' AND '.join(clauses)}"
        rows = self._select(query, params)
        return [r[0] for r in rows]

    def lexical(
        self, query_words: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        expression = tsquery(query_words)
        if not expression:
            return []
        rows = self._select(
            "SELECT kind, id, ts_rank_cd(tsv, q) AS rank "
            "FROM memory_records, to_tsquery('english', %s) q "
            "WHERE tsv @@ q AND scope = ANY(%s) ORDER BY rank DESC LIMIT %s",
            (expression, list(scopes), limit),
        )
        return [(kind, rid, float(rank)) for kind, rid, rank in rows]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
