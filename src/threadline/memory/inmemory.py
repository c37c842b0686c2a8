"""Memory for the in-memory store: records in dicts, held as long as the store object.

Opening memory twice on one ``memory://`` store gives the same records (they are
kept per store object), and nothing survives the process, like the store itself.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from threadline.memory.records import ANYWHERE, Row, Where
from threadline.memory.textindex import TextIndex


class DictRecords:
    """``Records`` in process: one dict per kind, a key index, a BM25 text index, one lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._rows: dict[str, dict[str, Row]] = {}
        self._by_key: dict[tuple[str, str], set[str]] = {}
        self._index = TextIndex()
        self._undo: list[tuple[str, str, Row | None]] | None = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Serialised by the lock; a failure inside puts back every row it replaced."""
        with self._lock:
            if self._undo is not None:  # nested: the outer transaction decides
                yield
                return
            self._undo = []
            try:
                yield
            except BaseException:
                for kind, rid, old in reversed(self._undo):
                    if old is None:
                        self._drop(kind, rid)
                    else:
                        self.load(old)
                raise
            finally:
                self._undo = None

    def _drop(self, kind: str, rid: str) -> None:
        old = self._rows.get(kind, {}).pop(rid, None)
        if old is not None:
            self._by_key.get((kind, old.key), set()).discard(rid)
        self._index.remove(kind, rid)

    def load(self, row: Row) -> None:
        """Take one row as stored (no copy): for backends that read records from files."""
        table = self._rows.setdefault(row.kind, {})
        old = table.get(row.id)
        if self._undo is not None:
            self._undo.append((row.kind, row.id, old))
        if old is not None:
            self._by_key.get((row.kind, old.key), set()).discard(row.id)
        table[row.id] = row
        self._by_key.setdefault((row.kind, row.key), set()).add(row.id)
        if row.text:
            self._index.put(row.kind, row.id, row.scope, row.text)
        else:
            self._index.remove(row.kind, row.id)

    def put(self, rows: Sequence[Row]) -> None:
        with self._lock:
            for row in rows:
                body = copy.deepcopy(row.body)
                self.load(Row(row.kind, row.id, row.scope, row.key, row.key2, body, row.text))

    def get(self, kind: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        with self._lock:
            table = self._rows.get(kind, {})
            return [copy.deepcopy(table[i].body) for i in ids if i in table]

    def find(self, kind: str, where: Where = ANYWHERE) -> list[dict[str, Any]]:
        scopes = set(where.scopes) if where.scopes is not None else None
        key2 = set(where.key2) if where.key2 is not None else None
        with self._lock:
            table = self._rows.get(kind, {})
            if where.keys is not None:
                ids = set().union(*(self._by_key.get((kind, k), set()) for k in where.keys))
                rows = [table[i] for i in sorted(ids) if i in table]
            else:
                rows = list(table.values())
            return [
                copy.deepcopy(row.body)
                for row in rows
                if (scopes is None or row.scope in scopes) and (key2 is None or row.key2 in key2)
            ]

    def lexical(
        self, words: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        with self._lock:
            return self._index.search(words, scopes, limit)

    def close(self) -> None:
        """Nothing to release: the records live as long as their store."""


_BY_STORE: weakref.WeakKeyDictionary[object, DictRecords] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def records_for(store: object) -> DictRecords:
    """The records kept for one in-memory store object (made on first use)."""
    with _REGISTRY_LOCK:
        records = _BY_STORE.get(store)
        if records is None:
            records = _BY_STORE[store] = DictRecords()
        return records
