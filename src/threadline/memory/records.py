"""What a memory backend supplies: a table of JSON records with keys and a text index.

Every record is a row ``(kind, id, scope, key, key2, body, text)``: ``body`` is the
record's JSON form, ``key``/``key2`` are the lookups the shared layer needs (an
entity's name key; a fact's chain key and subject key; an episode's
``session:seq`` and session id), and ``text`` is what lexical search indexes.
Backends implement ``Records`` (a transaction, upsert, reads by id and key, and a
lexical ranking); everything else lives in ``core.py`` and ``ranking.py``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from threadline.errors import SchemaTooNew, StoreUnavailable, ThreadlineError

KINDS = ("entity", "alias", "fact", "relation", "episode", "pending")
NO_SCOPE = "-"
"""The scope column of records that belong to a session, not a scope (pending state)."""
_NAMESPACE = uuid.UUID("6f1d2a3e-9a53-4c0b-8a53-1d6f0b7f5c21")


def stable_id(*parts: str) -> str:
    """An id derived from what a record is, so re-extracting or re-importing it is a no-op."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


@dataclass(frozen=True, slots=True)
class Where:
    """Which rows of a kind ``find`` returns: each filter given must match (None: any)."""

    scopes: Sequence[str] | None = None
    keys: Sequence[str] | None = None
    key2: Sequence[str] | None = None


ANYWHERE = Where()


@contextlib.contextmanager
def translating(
    errors: type[Exception] | tuple[type[Exception], ...], where: str
) -> Iterator[None]:
    """A driver's error becomes ``StoreUnavailable`` naming the memory's place."""
    try:
        yield
    except ThreadlineError:
        raise
    except errors as exc:
        raise StoreUnavailable(f"memory in {where}: {exc}") from exc


SCHEMA_VERSION = 1
"""The version of the memory tables (``memory_meta``) that SQLite and PostgreSQL keep."""


COLUMNS = "kind, id, scope, key, key2, body, text"


def schema_version(row: Sequence[Any] | None, where: str) -> int:
    """The stored version (0: none yet); newer than this threadline is ``SchemaTooNew``."""
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the memory tables in {where} have version {version}, newer than this "
            f"threadline understands ({SCHEMA_VERSION}); upgrade threadline"
        )
    return version


@dataclass(frozen=True, slots=True)
class SQLDialect:
    """What SQLite's and PostgreSQL's statements differ in: the driver's placeholder and
    the JSON column type. The statements are written once, here."""

    mark: str
    body_type: str

    def schema(self, *extra: str) -> list[str]:
        """``memory_records`` (then ``extra`` columns and constraints), its indexes, and
        ``memory_meta``."""
        columns = [
            *(f"{name} TEXT NOT NULL" for name in ("kind", "id", "scope", "key", "key2")),
            f"body {self.body_type} NOT NULL",
            "text TEXT NOT NULL DEFAULT ''",
            *extra,
        ]
        return [
            f"CREATE TABLE IF NOT EXISTS memory_records ({', '.join(columns)})",
            "CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            *(
                f"CREATE INDEX IF NOT EXISTS memory_records_{c} ON memory_records (kind, {c})"
                for c in ("key", "key2", "scope")
            ),
        ]

    @property
    def upsert(self) -> str:
        """Insert or replace rows (``Row.values``) by ``(kind, id)``."""
        return (
            f"INSERT INTO memory_records ({COLUMNS}) VALUES ({', '.join([self.mark] * 7)}) "
            "ON CONFLICT (kind, id) DO UPDATE SET scope = excluded.scope, key = excluded.key, "
            "key2 = excluded.key2, body = excluded.body, text = excluded.text"
        )

    def set_version(self) -> tuple[str, tuple[str]]:
        """The statement and parameters that record ``SCHEMA_VERSION`` in ``memory_meta``."""
        statement = (
            f"INSERT INTO memory_meta (key, value) VALUES ('version', {self.mark}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        return statement, (str(SCHEMA_VERSION),)


@dataclass(slots=True)
class Row:
    kind: str
    id: str
    scope: str
    key: str
    key2: str
    body: dict[str, Any]
    text: str = ""

    def values(self, body: Any) -> tuple[Any, ...]:
        """The row in ``COLUMNS`` order, with ``body`` as the database stores it."""
        return (self.kind, self.id, self.scope, self.key, self.key2, body, self.text)


class Records(Protocol):
    """The primitives a memory backend supplies (see the module docstring)."""

    def transaction(self) -> AbstractContextManager[None]:
        """Writes inside are all-or-nothing and serialised with other writers."""
        ...

    def put(self, rows: Sequence[Row]) -> None:
        """Insert or replace each row by ``(kind, id)``."""
        ...

    def get(self, kind: str, ids: Sequence[str]) -> list[dict[str, Any]]: ...

    def find(self, kind: str, where: Where = ANYWHERE) -> list[dict[str, Any]]:
        """Bodies of the ``kind`` rows that ``where`` selects."""
        ...

    def lexical(
        self, words: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        """``(kind, id, score)`` of the best text matches for any of ``words`` (higher is
        better), at most ``limit``."""
        ...

    def close(self) -> None: ...
