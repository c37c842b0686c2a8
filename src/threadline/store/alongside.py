"""What an append writes with its batch, in the same atomic step (issue 35).

A framework face stores a message and the record that goes with it: the ADK event's
state delta (session metadata), a LangGraph checkpoint (scratchpad entries). Written
as two commits, a crash between them leaves one without the other (and the first
costs a sync of its own). ``Store.append_messages(..., scratchpad=, metadata=)`` hands
them to the backend with the batch (``Appending.alongside``): each backend stores
batch, entries and metadata in its one transaction, script or lock, or, for a batch
stored already (a resend), none of them again. Checked here, once, for every backend.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from threadline.store.checks import check_scratchpad_entry
from threadline.store.session_info import check_session_fields


@dataclass(frozen=True)
class Alongside:
    """Scratchpad entries (each replaces the entry of its name, as ``scratchpad_write``
    does) and session metadata keys (merged over the stored ones, as
    ``update_session(metadata=...)`` merges them), written with a batch."""

    scratchpad: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.scratchpad or self.metadata)

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


def alongside(fields: AlongsideFields) -> Alongside:
    """The checked companions of an append (``UsageError`` for a bad name or value)."""
    scratchpad, metadata = fields.get("scratchpad"), fields.get("metadata")
    entries = dict(scratchpad or {})
    for name, content in entries.items():
        check_scratchpad_entry(name, content)
    check_session_fields(None, metadata)
    if not entries and not metadata:
        return NOTHING
    return Alongside(entries, copy.deepcopy(metadata or {}))
