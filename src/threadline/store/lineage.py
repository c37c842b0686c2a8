"""Lineage: where a fork leaves its parent (``fork_point``), the chain a fork's view
reads through (``fork_segments``; each ancestor's share ends at the smallest fork seq
below it), and the order sessions with forks are deleted in (forks first). The model-based
test (``tests/conformance/test_model_based.py``) holds every view to it.

A ``Session`` (``store/protocol.py``) reads through these; what they need of a store is
``LineageStore``, named here so the handle builds on this module, not the reverse."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Unpack

from threadline.errors import CorruptRecord, SessionHasForks, SessionNotFound
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import MAX_PAGE_SIZE, CorruptRecordWarning
from threadline.store.listing import ListOptions, SessionPage
from threadline.store.session_info import FORK_KEY, SessionInfo

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import Message


class LineageStore(Protocol):
    """What the fork chain and the deletion order use of a ``Store`` (``store/protocol.py``
    names them all)."""

    def session_info(self, session_id: str) -> SessionInfo: ...
    def list_sessions(self, **options: Unpack[ListOptions]) -> SessionPage: ...
    def count_children(self, session_ids: Sequence[str]) -> dict[str, int]: ...
    def delete_sessions(self, session_ids: Sequence[str], *, force: bool = False) -> int: ...
    def list_checkpoints(self, session_id: str) -> list[Checkpoint]: ...
    def tail(
        self, session_id: str, limit: int, *, before_seq: int | None = None
    ) -> list[Message]: ...
    def read_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]: ...


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork leaves its parent: it shares the parent's messages up to ``seq``."""

    parent: str
    seq: int


def fork_point(info: SessionInfo) -> ForkPoint | None:
    """The fork point recorded in a session's metadata, or ``None`` for a root session."""
    raw = info.metadata.get(FORK_KEY)
    if not isinstance(raw, dict):
        return None
    parent, seq = raw.get("session"), raw.get("seq")
    if not isinstance(parent, str) or isinstance(seq, bool) or not isinstance(seq, int):
        return None
    return ForkPoint(parent, seq) if 0 <= seq <= info.last_seq else None


def all_sessions(store: LineageStore) -> list[SessionInfo]:
    """Every session of the store, page by page."""
    out: list[SessionInfo] = []
    while True:
        page = store.list_sessions(limit=MAX_PAGE_SIZE, offset=len(out))
        out.extend(page.items)
        if not page.items or len(out) >= page.total:
            return out


def children_of(infos: Sequence[SessionInfo]) -> dict[str, list[SessionInfo]]:
    """Forks by parent id, oldest first."""
    kids: dict[str, list[SessionInfo]] = {}
    for info in sorted(infos, key=lambda i: (i.created_at, i.id)):
        fork = fork_point(info)
        if fork is not None:
            kids.setdefault(fork.parent, []).append(info)
    return kids


def descendants(kids: dict[str, list[SessionInfo]], session_id: str) -> list[str]:
    """Ids of every fork of ``session_id``, of its forks' forks and so on (``kids`` from
    ``children_of``), each listed after its own forks: the order they can be deleted in."""
    out: list[str] = []
    seen = {session_id}

    def visit(sid: str) -> None:
        for child in kids.get(sid, []):
            if child.id not in seen:
                seen.add(child.id)
                visit(child.id)
                out.append(child.id)

    visit(session_id)
    return out


def deletion_order(store: LineageStore, session_ids: Sequence[str], *, force: bool) -> list[str]:
    """The sessions to delete for ``session_ids``, every fork before its parent.

    A session with forks that are not being deleted too is refused
    (``SessionHasForks``) unless ``force``, which adds those forks. Reads the session
    list once: lineage is recorded on the child only.
    """
    wanted = list(dict.fromkeys(session_ids))
    kids = children_of(all_sessions(store))
    if not kids:
        return wanted
    chosen = set(wanted)
    order: list[str] = []
    for sid in wanted:
        forks = descendants(kids, sid)
        outside = [f for f in forks if f not in chosen]
        if outside and not force:
            raise SessionHasForks(sid, outside)
        order.extend(f for f in [*forks, sid] if f not in order)
    return sorted(order, key=lambda sid: _height(kids, sid))  # forks before parents


def _height(kids: dict[str, list[SessionInfo]], sid: str) -> int:
    """Generations of forks below ``sid`` (0 for a session without forks)."""
    return max((1 + _height(kids, c.id) for c in kids.get(sid, [])), default=0)


def delete_session(store: LineageStore, session_id: str, *, force: bool = False) -> list[str]:
    """Delete a session by the fork rule above (``force`` also overrides attach locks,
    as ``LineageStore.delete_session`` does); returns the ids deleted, forks first."""
    store.session_info(session_id)  # SessionNotFound, as LineageStore.delete_session
    if not store.count_children([session_id])[session_id]:
        # a fork is listed under its parent: nothing listed under this one, no fork reads
        # from it, and the session list need not be read (a service deleting one session
        # of 10,000 reads one index entry, not 10,000 sessions)
        store.delete_sessions([session_id], force=force)
        return [session_id]
    order = deletion_order(store, [session_id], force=force)
    store.delete_sessions(order, force=force)
    return order


@dataclass(frozen=True)
class Segment:
    """One session's part of a view: its own messages with ``lower < seq <= upper``."""

    session_id: str
    lower: int
    """Its own fork seq (0 for a root): its own messages all come after it."""
    upper: int | None
    """The last seq of the view it gives (the smallest fork seq of the sessions above);
    ``None`` for the session itself."""


def fork_segments(store: LineageStore, info: SessionInfo) -> list[Segment]:
    """The chain from a session up through its ancestors, newest first. Each ancestor's
    share ends at the smallest fork seq below it: a fork of a fork at 20 of a fork at 40
    shares 20 messages of the root, not 40. An ancestor that is gone ends the chain with
    a ``CorruptRecordWarning`` (its share of the history is missing; the fork's own
    messages still read)."""
    segments: list[Segment] = []
    upper: int | None = None
    seen: set[str] = set()
    current: SessionInfo | None = info
    while current is not None:
        fork = fork_point(current)
        segments.append(Segment(current.id, fork.seq if fork else 0, upper))
        seen.add(current.id)
        if fork is None:
            break
        if fork.parent in seen:
            raise CorruptRecord(f"session {info.id}: its fork chain loops through {fork.parent}")
        upper = fork.seq if upper is None else min(upper, fork.seq)
        try:
            current = store.session_info(fork.parent)
        except SessionNotFound:
            warnings.warn(
                f"session {info.id}: fork parent {fork.parent} is gone; the history shared "
                f"with it (up to seq {fork.seq}) is missing",
                CorruptRecordWarning,
                stacklevel=3,
            )
            current = None
    return segments


def chain_tail(
    store: LineageStore, segments: list[Segment], limit: int, before_seq: int | None
) -> list[Message]:
    if len(segments) == 1:
        return store.tail(segments[0].session_id, limit, before_seq=before_seq)
    out: list[Message] = []
    for seg in segments:
        if len(out) >= limit:
            break
        before = before_seq
        if seg.upper is not None:
            before = seg.upper + 1 if before is None else min(before, seg.upper + 1)
        if before is not None and before <= seg.lower + 1:
            continue
        out.extend(store.tail(seg.session_id, limit - len(out), before_seq=before))
    return out


def chain_read(
    store: LineageStore, segments: list[Segment], limit: int | None, after_seq: int
) -> list[Message]:
    if len(segments) == 1:
        return store.read_messages(segments[0].session_id, after_seq=after_seq, limit=limit)
    out: list[Message] = []
    for seg in reversed(segments):
        want = None if limit is None else limit - len(out)
        if want is not None and want <= 0:
            break
        if seg.upper is not None:
            if after_seq >= seg.upper:
                continue
            span = seg.upper - max(after_seq, seg.lower)
            want = span if want is None else min(want, span)
        page = store.read_messages(seg.session_id, after_seq=max(after_seq, seg.lower), limit=want)
        upper = seg.upper
        out.extend(m for m in page if upper is None or (m.seq or 0) <= upper)
    return out


def inherited_checkpoints(store: LineageStore, segments: list[Segment]) -> list[Checkpoint]:
    """The checkpoints a fork's view inherits: each ancestor's, oldest first, as far as
    they cover only history shared with the fork."""
    found: list[Checkpoint] = []
    for seg in reversed(segments[1:]):
        assert seg.upper is not None
        found.extend(store.list_checkpoints(seg.session_id))
        found = [c for c in found if c.covers_up_to <= seg.upper]
    return found
