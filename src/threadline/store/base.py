"""The Store protocol, its records, shared validation, and the Session handle.

A backend implements ``Store``: a flat set of methods keyed by session id.
Callers mostly hold a ``Session``, a small handle that binds a store to one
session and does the store-independent work of an append once, for every
backend: validate, stamp ids and times, count tokens (keyed by tokenizer
family, so views never recount stored history), check size.

Optional abilities (full-text search, TTL) raise ``NotSupported`` on backends
that lack them; everything else every backend must do, and the conformance
suite checks it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from threadline.errors import (
    AmbiguousSessionId,
    InvalidMessage,
    InvalidSessionId,
    MessageTooLarge,
    SessionLocked,
    SessionNotFound,
    UsageError,
)
from threadline.messages import Message, utcnow
from threadline.tokens import counter_for

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A single message larger than this (serialised) is refused."""
MIN_PREFIX_LENGTH = 4
"""Shortest id prefix accepted in place of a full id."""
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 20
DEFAULT_AGENT = "default"
DEFAULT_LOCK_LEASE = timedelta(minutes=10)
"""A lock not renewed for this long is stale even when its holder is on another host."""
TAIL_BATCH = 1000
RESULT_LOOKBACK = (8, 256)
"""How far back a tool result's call is looked for at append."""


class CorruptRecordWarning(UserWarning):
    """A stored record could not be decoded; it was left in place, skipped, and
    the good records around it were still returned. One class for every backend,
    so callers can filter or escalate it with one ``warnings`` rule."""


# -- validation ------------------------------------------------------------------


def validate_session_id(value: object, *, what: str = "session id") -> str:
    """Refuse anything that could reach a path or a query unchecked (invariant 6)."""
    if not isinstance(value, str):
        raise InvalidSessionId(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidSessionId(f"{what} contains a NUL byte")
    if "/" in value or "\\" in value:
        raise InvalidSessionId(f"{what} {value!r} contains a path separator")
    if ".." in value:
        raise InvalidSessionId(f"{what} {value!r} contains '..'")
    if not _SESSION_ID_RE.match(value):
        raise InvalidSessionId(
            f"{what} {value!r} is invalid: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def validate_agent(value: object) -> str:
    return validate_session_id(value, what="agent name")


def validate_page_size(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise UsageError(f"page size must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    return limit


def format_ts(dt: datetime) -> str:
    """RFC 3339 UTC with microseconds: sorts lexicographically in every backend."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- records ---------------------------------------------------------------------


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SessionInfo(_Record):
    id: str
    agent: str = DEFAULT_AGENT
    model: str | None = None
    title: str | None = None
    created_at: datetime
    updated_at: datetime
    message_count: int = 0
    total_tokens: int = 0
    """Sum of stored token counts for the session's tokenizer family."""
    last_seq: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionPage(_Record):
    items: list[SessionInfo]
    total: int
    """How many sessions match, across all pages."""
    offset: int = 0
    limit: int = DEFAULT_PAGE_SIZE

    def __iter__(self) -> Iterator[SessionInfo]:  # type: ignore[override]
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class Checkpoint(_Record):
    """A compaction result: a summary of everything up to ``covers_up_to``."""

    id: int = 0
    """Assigned by the store, increasing per session."""
    session_id: str
    covers_up_to: int
    """The last seq the summary covers; the view resumes after it."""
    summary: str
    created_at: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ScratchpadEntry(_Record):
    name: str
    content: str
    created_at: datetime
    updated_at: datetime


class LockHolder(_Record):
    """Who holds a session's attach lock."""

    pid: int
    host: str
    started_at: datetime = Field(default_factory=utcnow)
    renewed_at: datetime = Field(default_factory=utcnow)
    lease_seconds: float = DEFAULT_LOCK_LEASE.total_seconds()

    @classmethod
    def current(cls, *, lease: timedelta = DEFAULT_LOCK_LEASE) -> LockHolder:
        return cls(pid=os.getpid(), host=this_host(), lease_seconds=lease.total_seconds())

    def same_holder(self, other: LockHolder) -> bool:
        return self.pid == other.pid and self.host == other.host

    def is_stale(self, now: datetime | None = None) -> bool:
        """Dead on this host, or a lease not renewed in time anywhere."""
        now = now or utcnow()
        if self.host == this_host() and not pid_alive(self.pid):
            return True
        return now - self.renewed_at > timedelta(seconds=self.lease_seconds)

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host} since {format_ts(self.started_at)}"

    def claim(self, session_id: str, current: LockHolder | None) -> LockHolder:
        """What to store when this holder takes a session whose lock is ``current``.

        Every backend decides the same way, inside its own atomic step: a live lock
        held by someone else is refused (``SessionLocked`` naming it); a stale one is
        taken over; the same holder renews, keeping its start time.
        """
        if current is not None and not current.same_holder(self) and not current.is_stale():
            raise SessionLocked(session_id, current)
        update: dict[str, Any] = {"renewed_at": utcnow()}
        if current is not None and current.same_holder(self):
            update["started_at"] = current.started_at
        return self.model_copy(update=update)


class SearchHit(_Record):
    session_id: str
    seq: int
    role: str
    snippet: str
    agent: str | None = None


# -- the protocol ----------------------------------------------------------------


@runtime_checkable
class Store(Protocol):
    """What every backend does. All methods take full session ids except
    ``resolve_id`` / ``get_session``, which also accept a unique prefix."""

    url: str

    # sessions
    def create_session(
        self,
        *,
        agent: str = DEFAULT_AGENT,
        model: str | None = None,
        title: str | None = None,
        id: str | None = None,
        metadata: dict[str, Any] | None = None,
        lock: LockHolder | None = None,
    ) -> Session:
        """Create a session; with ``lock``, it is locked before it becomes visible."""
        ...

    def get_session(self, id_or_prefix: str) -> Session: ...
    def resolve_id(self, id_or_prefix: str) -> str: ...
    def session_info(self, session_id: str) -> SessionInfo: ...
    def list_sessions(
        self, *, agent: str | None = None, limit: int = DEFAULT_PAGE_SIZE, offset: int = 0
    ) -> SessionPage: ...
    def rename_session(self, session_id: str, title: str | None) -> SessionInfo: ...
    def update_session(
        self, session_id: str, *, model: str | None = None, metadata: dict[str, Any] | None = None
    ) -> SessionInfo: ...
    def delete_session(self, session_id: str, *, force: bool = False) -> None: ...
    def delete_sessions(self, session_ids: Sequence[str], *, force: bool = False) -> int: ...
    def delete_all(self, *, agent: str | None = None, force: bool = False) -> int: ...

    # messages
    def append_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """All-or-nothing; assigns consecutive seqs. Idempotent on message ids: a batch
        whose first id is already stored returns the stored copies instead."""
        ...

    def tail(self, session_id: str, limit: int, *, before_seq: int | None = None) -> list[Message]:
        """Newest first: up to ``limit`` messages with seq < ``before_seq``."""
        ...

    def read_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Oldest first: messages with seq > ``after_seq``."""
        ...

    def count_messages(self, session_id: str) -> int: ...

    # checkpoints
    def add_checkpoint(
        self,
        session_id: str,
        *,
        covers_up_to: int,
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> Checkpoint: ...
    def latest_checkpoint(self, session_id: str) -> Checkpoint | None: ...
    def list_checkpoints(self, session_id: str) -> list[Checkpoint]: ...

    # scratchpad
    def scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry: ...
    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None: ...
    def scratchpad_list(self, session_id: str) -> list[ScratchpadEntry]: ...
    def scratchpad_delete(self, session_id: str, name: str) -> bool: ...

    # memo: one JSON document per session for strategies and runtime state
    def get_memo(self, session_id: str) -> dict[str, Any]: ...
    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None: ...

    # attach locks
    def acquire_lock(self, session_id: str, holder: LockHolder | None = None) -> LockHolder:
        """Take or renew the lock; raises ``SessionLocked`` naming a live holder."""
        ...

    def release_lock(self, session_id: str, holder: LockHolder | None = None) -> bool: ...
    def lock_holder(self, session_id: str) -> LockHolder | None: ...

    # search (optional: raises NotSupported)
    def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> list[SearchHit]: ...

    def close(self) -> None: ...


# -- preparing an append -----------------------------------------------------------


def session_family(model: str | None) -> str:
    return counter_for(model).family


def prepare_messages(model: str | None, messages: Sequence[Message]) -> list[Message]:
    """Validate and stamp messages for storage; counts tokens once, here.

    The first key of ``token_counts`` is the session's tokenizer family; backends
    add that number to the session's ``total_tokens`` (see ``primary_tokens``).
    """
    if isinstance(messages, Message):
        messages = [messages]
    if not messages:
        raise UsageError("nothing to append: the batch is empty")
    counter = counter_for(model)
    family = counter.family
    prepared: list[Message] = []
    seen: set[str] = set()
    for m in messages:
        if not isinstance(m, Message):
            raise InvalidMessage(f"expected a Message, got {type(m).__name__}")
        if m.id in seen:
            raise InvalidMessage(f"message id {m.id} appears twice in one batch")
        seen.add(m.id)
        encode_message(m)  # refuse bad UTF-8 and oversize before spending time counting
        counts = {family: counter.count_message(m)}
        counts.update({k: v for k, v in m.token_counts.items() if k != family})
        prepared.append(m.model_copy(update={"seq": None, "token_counts": counts}))
    return prepared


def encode_message(m: Message) -> bytes:
    """The stored JSON form; refuses invalid UTF-8 and oversized messages."""
    try:
        body = m.model_dump_json(exclude={"seq"}).encode("utf-8")
    except (UnicodeEncodeError, ValueError) as exc:
        raise InvalidMessage(f"message {m.id} is not valid UTF-8 text: {exc}") from exc
    if len(body) > MAX_MESSAGE_BYTES:
        raise MessageTooLarge(
            f"message {m.id} is {len(body):,} bytes; the limit is {MAX_MESSAGE_BYTES:,} "
            "(store large data as a file reference instead)"
        )
    return body


def primary_tokens(m: Message) -> int:
    return next(iter(m.token_counts.values()), 0)


# -- the handle ------------------------------------------------------------------


class Session:
    """One session of one store. Cheap to make; holds no connection of its own."""

    def __init__(self, store: Store, info: SessionInfo) -> None:
        self.store = store
        self._info = info
        self.view_state: dict[str, Any] = {}
        """In-memory state views keep between builds (the stable trim anchor)."""
        self._recent_calls: set[str] = set()
        """Call ids of the latest batch with tool calls this handle appended: the usual
        next batch answers them, and needs no read of the tail to check so."""

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, agent={self.agent!r}, messages={self.message_count})"

    # -- identity
    @property
    def id(self) -> str:
        return self._info.id

    @property
    def info(self) -> SessionInfo:
        return self._info

    @property
    def agent(self) -> str:
        return self._info.agent

    @property
    def model(self) -> str | None:
        return self._info.model

    @property
    def title(self) -> str | None:
        return self._info.title

    @property
    def message_count(self) -> int:
        return self._info.message_count

    @property
    def total_tokens(self) -> int:
        return self._info.total_tokens

    @property
    def last_seq(self) -> int:
        return self._info.last_seq

    @property
    def tokenizer_family(self) -> str:
        return session_family(self._info.model)

    def refresh(self) -> Session:
        self._info = self.store.session_info(self.id)
        return self

    # -- messages
    def append(self, messages: Message | Sequence[Message]) -> list[Message]:
        """Store a batch atomically; returns the stored copies with seq and token counts.

        A tool result must answer a call made in the same batch or in the recent
        history; anything else is refused (``InvalidMessage``) before storing.
        """
        batch = [messages] if isinstance(messages, Message) else list(messages)
        prepared = prepare_messages(self.model, batch)
        self._check_results_have_calls(prepared)
        stored = self.store.append_messages(self.id, prepared)
        calls = {c.id for m in stored for c in m.tool_calls}
        if calls:
            self._recent_calls = calls
        self.refresh()
        return stored

    def _check_results_have_calls(self, batch: list[Message]) -> None:
        called: set[str] = set()
        missing: list[str] = []
        for m in batch:
            called.update(c.id for c in m.tool_calls)
            if m.role == "tool" and m.tool_call_id not in called:
                missing.append(m.tool_call_id or "")
        missing = [x for x in missing if x not in self._recent_calls]
        for limit in RESULT_LOOKBACK:
            if not missing:
                return
            recent = self.store.tail(self.id, limit)
            called = {c.id for m in recent for c in m.tool_calls}
            missing = [x for x in missing if x not in called]
            if len(recent) < limit:
                break
        if missing:
            raise InvalidMessage(
                f"tool result for call {missing[0]!r} has no matching tool call in this batch "
                f"or the last {RESULT_LOOKBACK[-1]} messages of session {self.id}"
            )

    def messages(self, *, after_seq: int = 0) -> list[Message]:
        """Every stored message after ``after_seq``, oldest first."""
        return list(self.iter_messages(after_seq=after_seq))

    def iter_messages(self, *, after_seq: int = 0, batch: int = TAIL_BATCH) -> Iterator[Message]:
        while True:
            page = self.store.read_messages(self.id, after_seq=after_seq, limit=batch)
            yield from page
            if len(page) < batch:
                return
            after_seq = page[-1].seq or after_seq

    def tail(self, limit: int, *, before_seq: int | None = None) -> list[Message]:
        return self.store.tail(self.id, limit, before_seq=before_seq)

    def count(self) -> int:
        return self.store.count_messages(self.id)

    # -- checkpoints
    def add_checkpoint(
        self, *, covers_up_to: int, summary: str, metadata: dict[str, Any] | None = None
    ) -> Checkpoint:
        return self.store.add_checkpoint(
            self.id, covers_up_to=covers_up_to, summary=summary, metadata=metadata
        )

    def latest_checkpoint(self) -> Checkpoint | None:
        return self.store.latest_checkpoint(self.id)

    def checkpoints(self) -> list[Checkpoint]:
        return self.store.list_checkpoints(self.id)

    # -- scratchpad and memo
    def scratchpad_write(self, name: str, content: str) -> ScratchpadEntry:
        return self.store.scratchpad_write(self.id, name, content)

    def scratchpad_read(self, name: str) -> ScratchpadEntry | None:
        return self.store.scratchpad_read(self.id, name)

    def scratchpad_list(self) -> list[ScratchpadEntry]:
        return self.store.scratchpad_list(self.id)

    def get_memo(self) -> dict[str, Any]:
        return self.store.get_memo(self.id)

    def set_memo(self, memo: dict[str, Any]) -> None:
        self.store.set_memo(self.id, memo)

    # -- lifecycle
    def rename(self, title: str | None) -> None:
        self._info = self.store.rename_session(self.id, title)

    def delete(self, *, force: bool = False) -> None:
        self.store.delete_session(self.id, force=force)

    @contextlib.contextmanager
    def attached(self, holder: LockHolder | None = None) -> Iterator[Session]:
        """Hold the attach lock for the block; ``SessionLocked`` if someone else has it."""
        held = self.store.acquire_lock(self.id, holder)
        try:
            yield self
        finally:
            self.store.release_lock(self.id, held)


def check_title(title: str | None) -> str | None:
    if title is None:
        return None
    if "\x00" in title:
        raise UsageError("a title cannot contain a NUL byte")
    title = title.strip()
    if len(title) > 500:
        raise UsageError("a title is limited to 500 characters")
    return title or None


def check_scratchpad_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > 256 or "\x00" in name:
        raise UsageError("a scratchpad name must be 1-256 characters without NUL")
    return name


def pick_unique(prefix: str, matches: list[str]) -> str:
    """The one session a prefix names, or a clear error."""
    if not matches:
        raise SessionNotFound(prefix)
    if len(matches) > 1:
        raise AmbiguousSessionId(prefix, matches)
    return matches[0]
