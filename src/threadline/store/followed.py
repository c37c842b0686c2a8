"""A session's view kept in memory and brought up to date by reading only what was
appended since (issue 35): a framework that reads the whole conversation every turn
(the Agents SDK's ``get_items()``) pays for the new tail, not the thread.

Each message in view is kept converted (``convert``: whatever the face gives back for
it), with its seq. ``current`` reads the session's mark (``Store.session_mark``: one
narrow read); when its last seq moved, it reads the messages after the one it holds,
through the view. What it holds is read again whole when the session is another one
at the same id (another ``created_at``), when its last seq went back, or when the
retraction index the read used is not the one it holds (a retraction record came: it
may hide held messages).
History is append-only (invariant 1) and a retraction always comes with a record, so
between those events the held messages are exactly what a fresh read gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Generic, TypeVar

from threadline.store.retraction import Retractions

if TYPE_CHECKING:
    from threadline.messages import Message
    from threadline.store.protocol import Session

T = TypeVar("T")


class FollowedView(Generic[T]):
    """The view of one session, converted message by message and followed (see the
    module docstring). Not thread-safe: its owner serialises calls."""

    def __init__(self, convert: Callable[[Message], T]) -> None:
        self._convert = convert
        self._held: list[tuple[int, T]] = []
        self._created: datetime | None = None
        self._upto = 0
        self._index: Retractions | None = None

    @property
    def following(self) -> bool:
        """Whether it holds the view already (``current`` then reads only what is new)."""
        return self._index is not None

    def current(self, session: Session) -> list[tuple[int, T]]:
        """``(seq, converted)`` of every message in view, oldest first, as stored now.
        The list is the view's own: read it, do not change it."""
        created, last_seq = session.store.session_mark(session.id)
        if self._created != created or last_seq < self._upto or self._index is None:
            self._reread(session, created, last_seq)
        elif last_seq > self._upto:
            page = session.read_messages(after_seq=self._upto)
            if session.view_index() != self._index:
                self._reread(session, created, last_seq)
            else:
                self._take(page)
                self._upto = max(self._upto, last_seq)
        return self._held

    def appended(self, stored: Sequence[Message]) -> None:
        """What its owner appended through ``session.append`` (the stored copies): held
        at once when they follow the held messages directly (nothing came between, so
        nothing was retracted), else left to the next ``current`` to read."""
        if not stored or self._index is None or stored[0].seq != self._upto + 1:
            return
        self._take(stored)
        self._upto = stored[-1].seq or self._upto

    def _reread(self, session: Session, created: datetime, last_seq: int) -> None:
        self._held = []
        self._upto = 0
        self._created = created
        before = session.retractions()
        self._take(session.messages())  # in pages, each with the index as it is then
        index = session.view_index()
        # another writer retracting between the pages leaves a mixed read: read it all
        # again on the next call (the index only grows, so equal ends mean equal pages)
        self._index = index if index == before else None
        self._upto = max(self._upto, last_seq)

    def _take(self, messages: Sequence[Message]) -> None:
        for m in messages:
            assert m.seq is not None
            self._held.append((m.seq, self._convert(m)))
            self._upto = max(self._upto, m.seq)
