"""An in-process store, for tests and for embedding threadline without a file.

It keeps the same contract as the durable backends (validation, seqs,
idempotent appends, locks, search) so code tested against it behaves the same
on SQLite or PostgreSQL. Nothing survives the process.
"""

from __future__ import annotations

import bisect
import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Unpack

from threadline.errors import (
    SessionExists,
    SessionNotFound,
    UsageError,
)
from threadline.messages import Message
from threadline.stamps import utcnow
from threadline.store import core
from threadline.store.checkpoints import Checkpoint, ExpectPrevious, check_checkpoint
from threadline.store.encoding import Appending, encode_message, later, primary_tokens
from threadline.store.listing import ListRequest, SessionPage, children_counts
from threadline.store.locks import LockHolder
from threadline.store.retraction import own_index
from threadline.store.search_query import (
    SearchOptions,
    SearchPage,
    scan_search,
    search_request,
)
from threadline.store.session_info import NewSession, ScratchpadEntry, SessionChange, SessionInfo


@dataclass
class _Entry:
    info: SessionInfo
    messages: list[Message] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    scratchpad: dict[str, ScratchpadEntry] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    """The scratchpad's names, sorted: pages and prefixes are ranges of it (bisect)."""
    memo: dict[str, Any] = field(default_factory=dict)
    lock: LockHolder | None = None
    fork_seq: int = 0
    """``messages[seq - 1 - fork_seq]``: a fork's own messages start after its fork seq."""


def _put_entry(e: _Entry, name: str, content: str, now: datetime) -> ScratchpadEntry:
    """Store one scratchpad entry (its ``created_at`` kept when it exists)."""
    old = e.scratchpad.get(name)
    if old is None:
        bisect.insort(e.names, name)
    entry = ScratchpadEntry(
        name=name, content=content, created_at=old.created_at if old else now, updated_at=now
    )
    e.scratchpad[name] = entry
    return entry


def _names(e: _Entry, prefix: str, before: str | None) -> list[str]:
    """The scratchpad's names that start with ``prefix`` and sort below ``before``."""
    low, high = core.page_range(prefix, before)
    start = bisect.bisect_left(e.names, low)
    end = len(e.names) if high is None else bisect.bisect_left(e.names, high)
    return e.names[start:end]


class MemoryStore(core.StoreCore):
    """Sessions in a dict, guarded by one lock."""

    def __init__(self) -> None:
        self.url = "memory://"
        self._lock = threading.RLock()
        self._sessions: dict[str, _Entry] = {}
        self._next_checkpoint = 1

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> MemoryStore:
        """``memory://``: a new, empty store (``create`` changes nothing: there is no
        place a memory store could be missing from)."""
        if url.rstrip("/") not in ("memory:", "memory:/"):
            raise UsageError(f"the memory store takes no path: use memory://, not {url!r}")
        return cls()

    def close(self) -> None:
        """Nothing to release; the data lives as long as this object."""

    def _get(self, session_id: str) -> _Entry:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    # -- sessions ---------------------------------------------------------------

    def _insert_session(self, new: NewSession, lock: LockHolder | None) -> SessionInfo:
        info = new.info()
        with self._lock:
            if new.id in self._sessions:
                raise SessionExists(new.id)
            if new.parent is not None:
                self._get(new.parent)
            self._sessions[new.id] = _Entry(info=info, lock=lock, fork_seq=info.last_seq)
        return copy.copy(info)

    def _matching_ids(self, id_or_prefix: str, *, prefix: bool) -> list[str]:
        with self._lock:
            if id_or_prefix in self._sessions:
                return [id_or_prefix]
            return sorted(s for s in self._sessions if prefix and s.startswith(id_or_prefix))

    def session_info(self, session_id: str) -> SessionInfo:
        with self._lock:
            return copy.copy(self._get(session_id).info)

    def _list_page(self, request: ListRequest) -> SessionPage:
        with self._lock:
            infos = [copy.copy(e.info) for e in self._sessions.values() if request.admits(e.info)]
        return request.page(infos)

    def _count_children(self, parent_ids: list[str]) -> dict[str, int]:
        with self._lock:
            infos = [e.info for e in self._sessions.values()]
        return children_counts(parent_ids, infos)

    def _set_title(self, session_id: str, title: str | None, now: datetime) -> SessionInfo:
        with self._lock:
            e = self._get(session_id)
            e.info.title = title
            e.info.updated_at = now
            return copy.copy(e.info)

    def _update_session(self, session_id: str, change: SessionChange) -> SessionInfo:
        with self._lock:
            e = self._get(session_id)
            new_parent = change.new_parent(session_id, e.info.parent_id)
            if new_parent is not None:
                self._get(new_parent)
                e.info.parent_id = new_parent
            if change.model is not None:
                e.info.model = change.model
            if change.title is not None:
                e.info.title = change.title
            e.info.metadata = change.merged(e.info.metadata)
            return copy.copy(e.info)

    def _delete(self, session_ids: list[str], check: Callable[[str, object], None]) -> int:
        with self._lock:
            present = [sid for sid in session_ids if sid in self._sessions]
            for sid in present:  # all or nothing: check every lock before deleting any
                check(sid, self._sessions[sid].lock)
            for sid in present:
                del self._sessions[sid]
            for e in self._sessions.values():  # a deleted session's children: top-level
                if e.info.parent_id in present:
                    e.info.parent_id = None
        return len(present)

    def _session_ids(self, agent: str | None) -> list[str]:
        with self._lock:
            return [s for s, e in self._sessions.items() if agent is None or e.info.agent == agent]

    # -- messages ---------------------------------------------------------------

    def _append(self, session_id: str, batch: Appending) -> int | list[Message]:
        with self._lock:
            e = self._get(session_id)
            extra = batch.alongside
            if extra.expect is not None:
                extra.expect.holds(session_id, e.info.created_at, e.info.last_seq)
            pad = e if extra.pad_of is None else self._get(extra.pad_of)
            if batch.ids and batch.ids[0] in e.ids:
                out = []
                for mid in batch.ids:
                    if mid not in e.ids:
                        raise batch.partly_stored(mid)
                    out.append(e.messages[e.ids[mid] - 1 - e.fork_seq].model_copy(deep=True))
                return out
            if len(set(batch.ids)) != len(batch.ids) or any(i in e.ids for i in batch.ids):
                raise batch.already_stored()
            seq = e.info.last_seq
            stored = []
            for m in batch.messages:
                seq += 1
                sm = m.model_copy(deep=True, update={"seq": seq})
                encode_message(sm)
                stored.append(sm)
            if extra:  # before the batch is kept: a failure leaves the sessions as they were
                kept = (dict(pad.scratchpad), list(pad.names), e.info.metadata)
                try:
                    now = utcnow()
                    for name, content in extra.scratchpad.items():
                        _put_entry(pad, name, content, now)
                    if extra.metadata:
                        e.info.metadata = extra.merged(e.info.metadata)
                except BaseException:
                    pad.scratchpad, pad.names, e.info.metadata = kept
                    raise
            for sm in stored:
                assert sm.seq is not None
                e.ids[sm.id] = sm.seq
                e.messages.append(sm)
                e.info.total_tokens += primary_tokens(sm)
            if not stored:  # companions alone (written on a mark): no time moves
                return seq + 1
            e.info.last_seq = seq
            e.info.message_count += len(stored)
            e.info.updated_at = later(e.info.updated_at, batch.at)
            return [m.model_copy(deep=True) for m in stored]

    def _tail_range(self, session_id: str, limit: int, before_seq: int | None) -> list[Message]:
        with self._lock:
            e = self._get(session_id)
            end = (
                len(e.messages)
                if before_seq is None
                else max(0, min(before_seq - 1 - e.fork_seq, len(e.messages)))
            )
            start = max(0, end - limit)
            return [m.model_copy(deep=True) for m in reversed(e.messages[start:end])]

    def _read_range(self, session_id: str, after_seq: int, limit: int | None) -> list[Message]:
        with self._lock:
            e = self._get(session_id)
            start = max(0, after_seq - e.fork_seq)
            end = len(e.messages) if limit is None else start + limit
            return [m.model_copy(deep=True) for m in e.messages[start:end]]

    # -- checkpoints ------------------------------------------------------------

    def _add_checkpoint(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        session_id = new.session_id
        with self._lock:  # the atomic step: the store's lock
            e = self._get(session_id)
            latest = e.checkpoints[-1] if e.checkpoints else None
            stored = check_checkpoint(
                new, last_seq=e.info.last_seq, latest=latest, expect_previous=expect_previous
            )
            if stored is not None:
                return copy.deepcopy(stored)
            cp = new.replace(id=self._next_checkpoint)
            self._next_checkpoint += 1
            e.checkpoints.append(cp)
            return copy.deepcopy(cp)

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        with self._lock:
            cps = self._get(session_id).checkpoints
            return copy.deepcopy(cps[-1]) if cps else None

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        with self._lock:
            return copy.deepcopy(self._get(session_id).checkpoints)

    # -- scratchpad and memo ----------------------------------------------------

    def _scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        with self._lock:
            return copy.copy(_put_entry(self._get(session_id), name, content, utcnow()))

    def _scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], keep_existing: bool
    ) -> None:
        with self._lock:  # one step: no reader sees a part of it
            e, now = self._get(session_id), utcnow()
            for name, content in entries.items():
                if not (keep_existing and name in e.scratchpad):
                    _put_entry(e, name, content, now)

    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None:
        with self._lock:
            entry = self._get(session_id).scratchpad.get(name)
            return copy.copy(entry) if entry else None

    def _scratchpad_list(self, session_id: str, prefix: str) -> list[ScratchpadEntry]:
        with self._lock:
            e = self._get(session_id)
            return [copy.copy(e.scratchpad[n]) for n in _names(e, prefix, None)]

    def _scratchpad_page(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> list[ScratchpadEntry]:
        with self._lock:
            e = self._get(session_id)
            return [copy.copy(e.scratchpad[n]) for n in _names(e, prefix, before)[::-1][:limit]]

    def _scratchpad_contents(
        self, session_id: str, names: list[str], prefixes: list[str]
    ) -> dict[str, str]:
        with self._lock:
            e = self._get(session_id)
            found = {n: e.scratchpad[n].content for n in names if n in e.scratchpad}
            for prefix in prefixes:
                found.update((n, e.scratchpad[n].content) for n in _names(e, prefix, None))
            return found

    def scratchpad_delete(self, session_id: str, name: str) -> bool:
        with self._lock:
            e = self._get(session_id)
            if e.scratchpad.pop(name, None) is None:
                return False
            del e.names[bisect.bisect_left(e.names, name)]
            return True

    def get_memo(self, session_id: str) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._get(session_id).memo)

    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None:
        with self._lock:
            self._get(session_id).memo = copy.deepcopy(memo)

    def _swap_memo(
        self, session_id: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> bool:
        with self._lock:
            e = self._get(session_id)
            memo = decide(e.memo)
            if memo is None:
                return False
            e.memo = copy.deepcopy(memo)
            return True

    # -- locks ------------------------------------------------------------------

    def _swap_lock(
        self, session_id: str, decide: Callable[[LockHolder | None], LockHolder | None]
    ) -> LockHolder | None:
        with self._lock:
            e = self._get(session_id)
            new = decide(e.lock)
            if new is not e.lock:
                e.lock = copy.copy(new)
            return new

    def lock_holder(self, session_id: str) -> LockHolder | None:
        with self._lock:
            lock = self._get(session_id).lock
            return copy.copy(lock) if lock else None

    # -- search -----------------------------------------------------------------

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """A scan with the shared matcher (``search_query.scan_search``)."""
        request = search_request(query, **options)
        with self._lock:  # a snapshot of each session's own messages
            snapshot = {
                e.info.id: (copy.copy(e.info), list(e.messages), own_index(e.memo))
                for e in self._sessions.values()
            }
        return scan_search(
            request,
            [info for info, _, _ in snapshot.values()],
            lambda info: snapshot[info.id][1],
            lambda info: snapshot[info.id][2],
        )
