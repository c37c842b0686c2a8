"""Copying sessions between stores: how a user moves up from SQLite to PostgreSQL.

``copy_sessions(src, dst)`` copies each session whole (every message with its
id, time, token counts and order; checkpoints; scratchpad entries; the memo;
title, agent, model and metadata) through the ``Store`` protocol only, so it
works between any two backends.

The ideas behind it:

* **Locked before visible.** A new destination session is created with the
  copier's attach lock already on it (``create_session(lock=...)``), and an
  existing one is locked before anything is written, so no agent can attach
  to a half-copied session or interleave messages into it. The lock is
  renewed while a long session copies and released when the session is done.
  If the copy is interrupted the lock stays until it goes stale (the process
  died, or its lease ran out), which is exactly what an agent should see.
* **Resumable by construction.** Messages go in batches, each one atomic at
  the destination. Running the copy again reads what the destination already
  has, checks that it is the start of the source (same ids, position by
  position), and appends the rest. Checkpoints, scratchpad and memo are
  re-synced each run. A destination session that is *not* a prefix of the
  source (different ids, or more messages) is reported as a failure for that
  session and left untouched, never merged.
* **Verified.** At the end each session's message, checkpoint and scratchpad
  counts, token total and memo are compared, and any difference is a failure
  in the report.

A fork (``store/fork.py``) is materialized: the destination gets a plain session
holding its whole view (the shared history, the inherited checkpoints, then its own
tail), and the lineage is kept as information in ``metadata["materialized_fork_of"]``.
Its memo carries the retraction index of the whole view (``retraction.view_memo``:
the ancestors' records up to the fork point too), so the copy hides what the fork did.
Forks then no longer depend on their parent being copied, or copied first.

Positions, not seqs, identify the overlap: a source with a gap in its seqs
(a corrupt JSONL line set aside) is renumbered densely at the destination, and
checkpoints are mapped to the same messages. A new destination session keeps the
source's ``created_at`` / ``updated_at`` (its batches are dated at the source's
``updated_at``), and its parent link when the parent is at the destination: parents
are copied before their children. What the protocol cannot carry is noted, not faked:
checkpoint and scratchpad times are the destination's own.
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from threadline.errors import (
    SessionExists,
    SessionLocked,
    SessionNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.messages import Message
from threadline.store import retraction
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import MAX_PAGE_SIZE
from threadline.store.encoding import check_message, dated
from threadline.store.fork import materialized_metadata
from threadline.store.locks import DEFAULT_LOCK_LEASE, LockHolder
from threadline.store.protocol import Session, Store
from threadline.store.session_info import SessionInfo

DEFAULT_BATCH = 500
"""Messages per append at the destination (one transaction each)."""
LOCK_RENEW_FRACTION = 0.25
"""Renew the destination lock after this share of its lease has passed."""


class CopyStatus(StrEnum):
    COPIED = "copied"
    """Created at the destination and copied whole."""
    RESUMED = "resumed"
    """Was partly there; the rest was appended."""
    UP_TO_DATE = "up to date"
    """Already complete; only checkpoints, scratchpad and memo were re-synced."""
    FAILED = "failed"


@dataclass(slots=True)
class SessionCopy:
    """What happened to one session."""

    session_id: str
    status: CopyStatus = CopyStatus.FAILED
    source_messages: int = 0
    dest_messages: int = 0
    appended: int = 0
    """Messages appended by this run."""
    source_checkpoints: int = 0
    dest_checkpoints: int = 0
    source_scratchpad: int = 0
    dest_scratchpad: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status is not CopyStatus.FAILED


@dataclass(slots=True)
class CopyReport:
    sessions: list[SessionCopy] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.sessions)

    @property
    def failed(self) -> list[SessionCopy]:
        return [s for s in self.sessions if not s.ok]

    @property
    def appended(self) -> int:
        return sum(s.appended for s in self.sessions)


@dataclass(frozen=True, slots=True)
class CopyProgress:
    """Reported after each batch appended and when each session is done."""

    session_id: str
    session_index: int
    """0-based position of this session among ``session_count``."""
    session_count: int
    messages_done: int
    """Messages of this session present at the destination so far."""
    messages_total: int
    """Messages of this session at the source (as first read)."""
    finished: bool = False


ProgressFn = Callable[[CopyProgress], None]


class _SessionFailed(Exception):
    """One session cannot be copied; the others go on."""


def source_session_ids(src: Store, session_ids: Sequence[str] | None = None) -> list[str]:
    """Full ids to copy: the given ids or prefixes (all must resolve), else every session;
    a parent before the sessions listed under it, so the copy can link them."""
    if session_ids is not None:
        wanted = list(dict.fromkeys(src.resolve_id(s) for s in session_ids))
        parents = {sid: src.session_info(sid).parent_id for sid in wanted}
    else:
        parents = {}
        offset = 0
        while True:
            page = src.list_sessions(limit=MAX_PAGE_SIZE, offset=offset)
            parents.update((i.id, i.parent_id) for i in page.items)
            offset += len(page.items)
            if not page.items or offset >= page.total:
                break
    return parents_first(parents)


def parents_first(parents: dict[str, str | None]) -> list[str]:
    """The ids of ``parents`` (id -> parent id) in their order, each one moved after its
    parent when that is among them."""
    out: list[str] = []
    placed: set[str] = set()

    def place(sid: str, seen: set[str]) -> None:
        parent = parents.get(sid)
        if parent in parents and parent not in placed and parent not in seen:
            place(parent, seen | {sid})
        if sid not in placed:
            placed.add(sid)
            out.append(sid)

    for sid in parents:
        place(sid, set())
    return out


def copy_sessions(
    src: Store,
    dst: Store,
    *,
    session_ids: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
    batch: int = DEFAULT_BATCH,
) -> CopyReport:
    """Copy sessions from ``src`` to ``dst``, resuming any earlier partial copy.

    ``session_ids`` (ids or unique prefixes) all must exist before anything is
    copied; without them, every session is copied. A session that cannot be
    copied is reported in the ``CopyReport`` and the others go on; an
    unreachable store, or an exception from ``progress``, stops the run (run
    it again to resume).
    """
    if batch < 1:
        raise UsageError(f"batch must be at least 1, got {batch}")
    if src is dst:
        raise UsageError(f"source and destination are the same store ({src.url})")
    ids = source_session_ids(src, session_ids)
    report = CopyReport()
    for index, sid in enumerate(ids):
        copier = _Copier(src, dst, sid, index=index, count=len(ids), progress=progress)
        report.sessions.append(copier.run(batch))
    return report


class _Copier:
    """Copies one session; the steps share the state below."""

    def __init__(
        self,
        src: Store,
        dst: Store,
        session_id: str,
        *,
        index: int,
        count: int,
        progress: ProgressFn | None,
    ) -> None:
        self.src, self.dst, self.sid = src, dst, session_id
        self.index, self.count, self.progress = index, count, progress
        self.result = SessionCopy(session_id)
        self.holder = LockHolder.current()
        self.renewed = time.monotonic()
        self.src_seqs: list[int] = []
        """Source seq of each copied message, by position (for checkpoint mapping)."""
        self.dst_seqs: list[int] = []
        self.total = 0
        self.view: Session | None = None
        """The source session's view (a fork's shared history included)."""

    def run(self, batch: int) -> SessionCopy:
        try:
            info = self.src.session_info(self.sid)
        except SessionNotFound as exc:
            self.result.error = str(exc)  # deleted since it was listed
            return self.result
        self.view = Session(self.src, info)
        self.total = info.message_count
        self.result.source_messages = info.message_count
        locked = False
        try:
            self._note_source_lock()
            existed = self._open_destination(info)
            locked = True
            status = self._copy_messages(batch, existed)
            self._sync_metadata(info, existed)
            self._sync_checkpoints()
            self._sync_scratchpad()
            self._sync_memo()
            self._verify()
            self.result.status = status
        except _SessionFailed as exc:
            self.result.error = str(exc)
            self._count_destination()
        except StoreUnavailable:
            raise
        except ThreadlineError as exc:
            self.result.error = f"{type(exc).__name__}: {exc}"
            self._count_destination()
        if locked:
            self.dst.release_lock(self.sid, self.holder)
        self._report(len(self.src_seqs), finished=True)
        return self.result

    # -- steps ----------------------------------------------------------------------

    def _note_source_lock(self) -> None:
        holder = self.src.lock_holder(self.sid)
        if holder is not None and not holder.is_stale():
            self.result.notes.append(
                f"the source session is in use ({holder}); messages it gets after this "
                "copy read it need another run"
            )

    def _open_destination(self, info: SessionInfo) -> bool:
        """Create the destination session locked, or lock the existing one; True if it existed."""
        try:
            self.dst.create_session(
                id=self.sid,
                agent=info.agent,
                model=info.model,
                title=info.title,
                metadata=materialized_metadata(info.metadata) or None,
                lock=self.holder,
                created_at=min(info.created_at, info.updated_at),  # a hand-edited source
                updated_at=info.updated_at,
                parent=self._copied_parent(info),
            )
            return False
        except SessionExists:
            pass
        try:
            self.dst.acquire_lock(self.sid, self.holder)
        except SessionLocked as exc:
            raise _SessionFailed(f"the destination session is locked by {exc.holder}") from exc
        theirs = self.dst.session_info(self.sid)
        if theirs.agent != info.agent:
            self.dst.release_lock(self.sid, self.holder)
            raise _SessionFailed(
                f"the destination already has a session {self.sid} of agent {theirs.agent!r} "
                f"(the source's is {info.agent!r})"
            )
        return True

    def _copied_parent(self, info: SessionInfo) -> str | None:
        """The source session's parent, when it is at the destination too."""
        if info.parent_id is None:
            return None
        try:
            self.dst.session_info(info.parent_id)
        except SessionNotFound:
            self.result.notes.append(
                f"its parent {info.parent_id} is not at the destination; copied as top-level"
            )
            return None
        return info.parent_id

    def _copy_messages(self, batch: int, existed: bool) -> CopyStatus:
        have = self.dst.count_messages(self.sid) if existed else 0
        after = self._check_overlap(have, batch) if have else 0
        appended = 0
        while True:
            page = self._source().read_messages(
                after_seq=after, limit=batch, include_retracted=True
            )
            if not page:
                break
            # the rules an append checks: a source written before them may break them
            fresh = [check_message(m).model_copy(update={"seq": None}) for m in page]
            stored = self.dst.append_messages(
                self.sid, dated(fresh, self._source().info.updated_at)
            )
            if [m.id for m in stored] != [m.id for m in page]:
                raise _SessionFailed(
                    f"the destination stored a different batch after seq {after} "
                    "(a message id of the source is already used elsewhere in the session)"
                )
            self._record(page, stored)
            appended += len(page)
            after = page[-1].seq or after
            self.result.appended = appended
            self._renew_lock()
            self._report(len(self.src_seqs))
            if len(page) < batch:
                break
        if any(s != d for s, d in zip(self.src_seqs, self.dst_seqs, strict=True)):
            self.result.notes.append(
                "the source's seqs have gaps; the destination numbers the same messages "
                "densely and checkpoints were mapped to them"
            )
        if not existed:
            return CopyStatus.COPIED
        return CopyStatus.RESUMED if appended else CopyStatus.UP_TO_DATE

    def _check_overlap(self, have: int, batch: int) -> int:
        """Check the destination's ``have`` messages are the source's first ``have``;
        return the source seq to continue after."""
        mine_all = self._source().iter_messages(batch=batch, include_retracted=True)
        theirs_all = _pages(self.dst, self.sid, batch)
        pairs = zip(mine_all, theirs_all, strict=False)  # the source may be longer
        position = 0
        last_src_seq = 0
        for mine, theirs in pairs:
            if mine.id != theirs.id:
                raise _SessionFailed(
                    f"the destination session differs from the source at message {position + 1} "
                    f"(seq {theirs.seq}): source id {mine.id}, destination id {theirs.id}; "
                    "not merging: delete it at the destination to copy again"
                )
            self.src_seqs.append(mine.seq or 0)
            self.dst_seqs.append(theirs.seq or 0)
            last_src_seq = mine.seq or last_src_seq
            position += 1
            if position == have:
                return last_src_seq
        raise _SessionFailed(
            f"the destination session has {have} messages, more than the source's {position}; "
            "not merging: delete it at the destination to copy again"
        )

    def _record(self, page: list[Message], stored: list[Message]) -> None:
        self.src_seqs.extend(m.seq or 0 for m in page)
        self.dst_seqs.extend(m.seq or 0 for m in stored)

    def _sync_metadata(self, info: SessionInfo, existed: bool) -> None:
        if not existed:
            return
        theirs = self.dst.session_info(self.sid)
        if theirs.title != info.title:
            self.dst.rename_session(self.sid, info.title)
        if theirs.model != info.model and info.model is not None:
            self.dst.update_session(self.sid, model=info.model)
        wanted = materialized_metadata(info.metadata)
        changed = {k: v for k, v in wanted.items() if theirs.metadata.get(k) != v}
        if changed:
            self.dst.update_session(self.sid, metadata=changed)
        extra = sorted(set(theirs.metadata) - set(wanted))
        if extra:
            self.result.notes.append(
                f"destination metadata keys not in the source were kept: {', '.join(extra)}"
            )

    def _map_seq(self, covers_up_to: int) -> int:
        """The destination seq of the last copied message at or before a source seq."""
        at = bisect.bisect_right(self.src_seqs, covers_up_to)
        return self.dst_seqs[at - 1] if at else 0

    def _sync_checkpoints(self) -> None:
        copied_up_to = self.src_seqs[-1] if self.src_seqs else 0
        wanted = []
        for c in self._source().checkpoints():
            if c.covers_up_to > copied_up_to:
                self.result.notes.append(
                    "the source got a checkpoint over messages newer than this copy read; "
                    "run the copy again to bring it over"
                )
                break
            wanted.append((self._map_seq(c.covers_up_to), c.summary, c.metadata))
        present = [_checkpoint_key(c) for c in self.dst.list_checkpoints(self.sid)]
        if present != wanted[: len(present)]:
            raise _SessionFailed(
                "the destination's checkpoints are not the source's first ones; not merging"
            )
        for covers_up_to, summary, metadata in wanted[len(present) :]:
            self.dst.add_checkpoint(
                self.sid, covers_up_to=covers_up_to, summary=summary, metadata=metadata
            )

    def _sync_scratchpad(self) -> None:
        wanted = {e.name: e.content for e in self.src.scratchpad_list(self.sid)}
        present = {e.name: e.content for e in self.dst.scratchpad_list(self.sid)}
        for name, content in wanted.items():
            if present.get(name) != content:
                self.dst.scratchpad_write(self.sid, name, content)
        for name in present.keys() - wanted.keys():
            self.dst.scratchpad_delete(self.sid, name)

    def _sync_memo(self) -> None:
        memo = retraction.view_memo(self._source())
        if self.dst.get_memo(self.sid) != memo:
            self.dst.set_memo(self.sid, memo)

    def _verify(self) -> None:
        """Compare what the source counts now with what the destination holds."""
        r = self.result
        r.source_messages = self.src.count_messages(self.sid)
        r.dest_messages = self.dst.count_messages(self.sid)
        r.source_checkpoints = len(self._source().checkpoints())
        r.dest_checkpoints = len(self.dst.list_checkpoints(self.sid))
        r.source_scratchpad = len(self.src.scratchpad_list(self.sid))
        r.dest_scratchpad = len(self.dst.scratchpad_list(self.sid))
        problems = []
        if r.dest_messages != len(self.src_seqs):
            problems.append(f"the destination holds {r.dest_messages} of {len(self.src_seqs)}")
        if r.source_messages != r.dest_messages:
            problems.append(
                f"messages: source {r.source_messages}, destination {r.dest_messages} "
                "(unreadable records at the source, or messages that arrived during the copy: "
                "run it again to bring new ones over)"
            )
        for what, mine, theirs in (
            ("checkpoints", r.source_checkpoints, r.dest_checkpoints),
            ("scratchpad entries", r.source_scratchpad, r.dest_scratchpad),
        ):
            if mine != theirs:
                problems.append(f"{what}: source {mine}, destination {theirs}")
        src_tokens = self.src.session_info(self.sid).total_tokens
        dst_tokens = self.dst.session_info(self.sid).total_tokens
        if src_tokens != dst_tokens and r.source_messages == r.dest_messages:
            problems.append(f"total tokens: source {src_tokens}, destination {dst_tokens}")
        if retraction.view_memo(self._source()) != self.dst.get_memo(self.sid):
            problems.append("memo differs")
        if problems:
            raise _SessionFailed("verification failed: " + "; ".join(problems))

    def _count_destination(self) -> None:
        """For the report of a failed session: what the destination holds, if it can say."""
        with contextlib.suppress(ThreadlineError):
            self.result.dest_messages = self.dst.count_messages(self.sid)

    # -- helpers --------------------------------------------------------------------

    def _source(self) -> Session:
        assert self.view is not None, "run() reads the source session first"
        return self.view

    def _renew_lock(self) -> None:
        lease = self.holder.lease_seconds or DEFAULT_LOCK_LEASE.total_seconds()
        if time.monotonic() - self.renewed >= lease * LOCK_RENEW_FRACTION:
            self.dst.acquire_lock(self.sid, self.holder)
            self.renewed = time.monotonic()

    def _report(self, done: int, *, finished: bool = False) -> None:
        if self.progress is not None:
            self.progress(
                CopyProgress(
                    session_id=self.sid,
                    session_index=self.index,
                    session_count=self.count,
                    messages_done=done,
                    messages_total=max(self.total, done),
                    finished=finished,
                )
            )


def _pages(store: Store, session_id: str, batch: int) -> Iterator[Message]:
    after = 0
    while True:
        page = store.read_messages(session_id, after_seq=after, limit=batch)
        yield from page
        if len(page) < batch:
            return
        after = page[-1].seq or after


def _checkpoint_key(c: Checkpoint) -> tuple[int, str, dict[str, Any]]:
    return (c.covers_up_to, c.summary, c.metadata)


__all__ = [
    "DEFAULT_BATCH",
    "CopyProgress",
    "CopyReport",
    "CopyStatus",
    "ProgressFn",
    "SessionCopy",
    "copy_sessions",
    "source_session_ids",
]
