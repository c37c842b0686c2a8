"""JSON documents kept in one threadline session, for the long-term memory faces.

LangGraph's ``BaseStore`` and ADK's ``BaseMemoryService`` both keep small JSON
documents by name and read them back by name prefix. Each face keeps its
documents as scratchpad entries of one session it owns (``integrations/binding.py``):
the scratchpad is a store primitive on every backend (SQLite, PostgreSQL, Redis,
JSONL, memory://), names are indexed and read by prefix, several are written in
one transaction, and each entry keeps when it was created and last updated. No
face needs a table of its own, so what works on one backend works on all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.errors import UsageError
from threadline.integrations.binding import Binding, Face
from threadline.store import Store
from threadline.store.checks import MAX_SCRATCHPAD_NAME
from threadline.store.session_info import ScratchpadEntry


@dataclass(frozen=True, slots=True)
class Document:
    """One stored document: its name, its JSON value and its two dates."""

    name: str
    value: Any
    created_at: datetime
    updated_at: datetime


def _document(entry: ScratchpadEntry) -> Document:
    return Document(entry.name, json.loads(entry.content), entry.created_at, entry.updated_at)


def encode(value: Any, what: str) -> str:
    """JSON text of ``value``, or a clear error naming ``what`` (nothing is written)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} must hold only JSON values: {exc}") from None


def check_name(name: str, what: str) -> str:
    """``name`` when it fits a scratchpad name (a document's name is one), else an
    error that names ``what`` rather than the store's generic one."""
    if len(name) > MAX_SCRATCHPAD_NAME:
        raise UsageError(
            f"{what} is too long: its stored name has {len(name):,} characters, "
            f"the limit is {MAX_SCRATCHPAD_NAME} (use shorter namespace labels or keys)"
        )
    return name


class Documents:
    """The documents ``face`` keeps for ``key`` in ``store`` (its session is created
    on the first write; reads before it find nothing)."""

    def __init__(self, face: Face, key: str, store: str | Store | None) -> None:
        self._binding = Binding(face, key, store)

    @property
    def store(self) -> Store:
        return self._binding.store

    def _session_id(self) -> str | None:
        session = self._binding.find()
        return None if session is None else session.id

    def get(self, name: str) -> Document | None:
        sid = self._session_id()
        if sid is None:
            return None
        entry = self.store.scratchpad_read(sid, name)
        return None if entry is None else _document(entry)

    def under(self, prefix: str) -> list[Document]:
        """Every document whose name starts with ``prefix``, in name order."""
        sid = self._session_id()
        if sid is None:
            return []
        return [_document(e) for e in self.store.scratchpad_list(sid, prefix=prefix)]

    def texts_under(self, prefix: str) -> dict[str, str]:
        """name -> JSON text of every document under ``prefix``, unparsed, in one read:
        for a reader that parses only some of them."""
        sid = self._session_id()
        if sid is None:
            return {}
        return self.store.scratchpad_contents(sid, prefixes=[prefix])

    def put_many(self, values: Mapping[str, str], *, keep_existing: bool = False) -> None:
        """Write encoded documents (name -> JSON text) in one step; with ``keep_existing``
        a name already stored keeps its document."""
        if values:
            sid = self._binding.for_write().id
            self.store.scratchpad_write_many(sid, dict(values), keep_existing=keep_existing)

    def delete_many(self, names: Iterable[str]) -> None:
        sid = self._session_id()
        if sid is None:
            return
        for name in names:
            self.store.scratchpad_delete(sid, name)

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        self._binding.close()
