"""SQLite rows back into records: a table's columns are its record's fields, so the
SELECT and the decoding are both built from the dataclass and cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import parse_ts
from threadline.store.locks import LockHolder
from threadline.store.session_info import ScratchpadEntry, SessionInfo

R = TypeVar("R")

_DECODE: dict[str, Callable[[Any], Any]] = {
    "created_at": parse_ts,
    "updated_at": parse_ts,
    "metadata": json.loads,
}
"""Columns stored as text that the records hold decoded; the rest are taken as they are."""


def columns(kind: type[Any]) -> tuple[str, ...]:
    """A record's columns: its table's columns are named and ordered as its fields."""
    return tuple(f.name for f in fields(kind))


_DECODERS: dict[type[Any], tuple[tuple[str, Callable[[Any], Any]], ...]] = {}
"""Each record's columns with their decoders, worked out on its first row."""


def _decoders(kind: type[Any]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    found = _DECODERS.get(kind)
    if found is None:
        found = _DECODERS[kind] = tuple((n, _DECODE.get(n, _same)) for n in columns(kind))
    return found


def select(kind: type[Any], table: str) -> str:
    return f"SELECT {', '.join(columns(kind))} FROM {table}"


SESSION_SELECT = select(SessionInfo, "sessions")
CHECKPOINT_SELECT = select(Checkpoint, "checkpoints")
ENTRY_SELECT = select(ScratchpadEntry, "scratchpad")


def record(kind: type[R], row: Sequence[Any]) -> R:
    """``kind`` built from a row read with ``select(kind, ...)``."""
    named = zip(_decoders(kind), row, strict=True)
    return kind(**{name: decode(value) for (name, decode), value in named})


def _same(value: Any) -> Any:
    return value


def session_from_row(row: Sequence[Any]) -> SessionInfo:
    return record(SessionInfo, row)


def checkpoint_from_row(row: Sequence[Any]) -> Checkpoint:
    return record(Checkpoint, row)


def entry_from_row(row: Sequence[Any]) -> ScratchpadEntry:
    """``record(ScratchpadEntry, row)`` spelled out: a page of entries is read often
    (a LangGraph saver's every ``get_tuple``), and the generic mapping cost as much as
    the query. ``ENTRY_COLUMNS`` keeps the row in this order."""
    name, content, created_at, updated_at = row
    return ScratchpadEntry(
        name=name,
        content=content,
        created_at=parse_ts(created_at),
        updated_at=parse_ts(updated_at),
    )


ENTRY_COLUMNS = ("name", "content", "created_at", "updated_at")
assert columns(ScratchpadEntry) == ENTRY_COLUMNS, "entry_from_row reads the columns in order"


def holder(session_id: str, lock_json: str | None) -> LockHolder | None:
    """The session's attach lock from its ``lock`` column."""
    return LockHolder.stored(lock_json, where=f"session {session_id}")
