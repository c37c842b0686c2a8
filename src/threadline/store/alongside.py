"""What an append writes with its batch, in the same atomic step (issue 35).

A framework face stores a message and the record that goes with it: the ADK event's
state delta (session metadata), a LangGraph checkpoint (scratchpad entries). Written
as two commits, a crash between them leaves one without the other (and the first
costs a sync of its own). ``Store.append_messages(..., scratchpad=, metadata=)`` hands
them to the backend with the batch (``Appending.alongside``): each backend stores
batch, entries and metadata in its one transaction, script or lock, or, for a batch
stored already (a resend), none of them again. Checked here, once, for every backend.

The same step carries the writer's ``Mark`` (``expect``: the batch's session as it
last read it; anything else and nothing is written, ``SessionChanged``) and may name
another session for the entries (``pad_of``: a LangGraph thread keeps its checkpoint
records in its root session while a forked branch takes the messages). This is the
one backend primitive for all of it (``StoreCore._append``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from threadline.store.checks import check_scratchpad_entry
from threadline.store.session_info import Mark, check_session_fields


@dataclass(frozen=True)
class Alongside:
    """Scratchpad entries (each replaces the entry of its name, as ``scratchpad_write``
    does) and session metadata keys (merged over the stored ones, as
    ``update_session(metadata=...)`` merges them), written with a batch."""

    scratchpad: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    expect: Mark | None = None
    """The batch's session as the writer last read it: the step happens only if it is so."""
    pad_of: str | None = None
    """The session whose scratchpad takes the entries (None: the batch's own)."""

    def __bool__(self) -> bool:
        return bool(self.scratchpad or self.metadata)

    def pad(self, session_id: str) -> str:
        """The session whose scratchpad takes the entries of a batch of ``session_id``."""
        return session_id if self.pad_of is None else self.pad_of

    def merged(self, stored: dict[str, Any]) -> dict[str, Any]:
        """The session metadata to store: ``stored`` with these keys over it."""
        return {**stored, **copy.deepcopy(self.metadata)}


NOTHING = Alongside()


class AlongsideFields(TypedDict, total=False):
    """The keyword arguments of ``Store.append_messages`` beside the batch."""

    scratchpad: Mapping[str, str] | None
    """Entries written (each replacing its name's) with the batch."""
    metadata: dict[str, Any] | None
    """Keys merged into the session's metadata with the batch."""
    expect: Mark | None
    """The session as the writer last read it; anything else writes nothing (``SessionChanged``)."""
    scratchpad_of: str | None
    """The session whose scratchpad takes ``scratchpad`` (default: the batch's own)."""


def alongside(session_id: str, fields: AlongsideFields) -> Alongside:
    """The checked companions of an append to ``session_id`` (``UsageError`` for a bad
    name or value)."""
    scratchpad, metadata = fields.get("scratchpad"), fields.get("metadata")
    expect, pad_of = fields.get("expect"), fields.get("scratchpad_of")
    if pad_of == session_id:
        pad_of = None
    entries = dict(scratchpad or {})
    for name, content in entries.items():
        check_scratchpad_entry(name, content)
    check_session_fields(None, metadata)
    if not entries and not metadata and expect is None and pad_of is None:
        return NOTHING
    return Alongside(entries, copy.deepcopy(metadata) if metadata else {}, expect, pad_of)
