"""A session's records: ``SessionInfo`` as stored, what creating one takes
(``SessionFields``, checked and stamped by ``new_session``; a fork's ``SessionStart``),
what changing one takes (``SessionChange``), its dates, and its scratchpad entries."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypedDict

from threadline.errors import SessionChanged, UsageError
from threadline.stamps import new_id, utcnow
from threadline.store.checks import (
    DEFAULT_AGENT,
    MAX_MODEL_LENGTH,
    check_json_object,
    check_title,
    format_ts,
    validate_agent,
    validate_session_id,
)
from threadline.store.records import Record


@dataclass(kw_only=True)
class SessionInfo(Record):
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
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    """The session this one is listed under (a subagent's, a compaction summariser's or a
    fork's parent); ``None`` for a top-level session. Set at creation or once later
    (``update_session(parent=...)``), and cleared when the parent is deleted."""


@dataclass(frozen=True)
class Mark:
    """A session as a writer last read it: a write made on it
    (``Store.append_messages(expect=...)``) happens only if the session still is so."""

    created_at: datetime
    last_seq: int

    @classmethod
    def of(cls, info: SessionInfo) -> Mark:
        return cls(info.created_at, info.last_seq)

    def holds(self, session_id: str, created_at: datetime, last_seq: int) -> None:
        """Nothing when session ``session_id`` as stored now is this; else ``SessionChanged``."""
        if (created_at, last_seq) != (self.created_at, self.last_seq):
            raise SessionChanged(session_id)


FORK_KEY: Final = "forked_from"
"""The session metadata key that makes a session a fork: ``{"session": <parent id>,
"seq": <last shared seq>}``. Set once at creation (``store/fork.py``), never changed."""


CHILD_KIND_KEY: Final = "child_kind"
"""Session metadata saying what kind of child a session is where its parent link alone
does not (``COMPACTION_CHILD``); an import sets it (``interop/lineage.py``)."""


COMPACTION_CHILD: Final = "compaction"
"""A compaction summariser's run, listed under the session it summarised."""


SUBAGENT_CHILD: Final = "subagent"
"""A subagent's run (``agent/subagents.py``), listed under the session that delegated."""


@dataclass(kw_only=True)
class SessionStart(Record):
    """Where a new session starts instead of from nothing: a fork of ``parent`` starts
    where the shared prefix ends, so its own messages get seqs after ``last_seq`` and
    its counters cover the whole view. Backends store the counters and ``stamp`` the
    metadata at create time (the one primitive forks need from them); only
    ``store/fork.py`` makes one."""

    parent: str
    last_seq: int
    message_count: int
    total_tokens: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("last_seq", "message_count", "total_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"SessionStart.{name} must be >= 0, got {getattr(self, name)}")

    def stamp(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        """The metadata to store: the caller's (checked by ``check_session_fields``)
        and the fork point."""
        fork = {"session": self.parent, "seq": self.last_seq}
        return {**copy.deepcopy(metadata or {}), FORK_KEY: fork}


def start_counters(start: SessionStart | None) -> tuple[int, int, int]:
    """``(last_seq, message_count, total_tokens)`` a created session starts with."""
    return (start.last_seq, start.message_count, start.total_tokens) if start else (0, 0, 0)


def stamped(metadata: dict[str, Any] | None, start: SessionStart | None) -> dict[str, Any]:
    """A created session's metadata: ``start.stamp`` for a fork, a copy otherwise."""
    return start.stamp(metadata) if start is not None else copy.deepcopy(metadata or {})


EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest time a session or a batch may be dated (Redis scores count from it)."""


def source_time(value: object, what: str, now: datetime | None = None) -> datetime:
    """A time a caller dates a session or a batch with, by the clock of where the
    conversation happened (a transcript, another store): an aware ``datetime`` from 1970
    on, in UTC. A time after ``now`` is taken as now: a source clock running ahead must
    not keep a session at the top of every listing for good."""
    if not isinstance(value, datetime):
        raise UsageError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.utcoffset() is None:
        raise UsageError(f"{what} {value.isoformat()} has no timezone; give an aware datetime")
    value = value.astimezone(UTC)
    if value < EPOCH:
        raise UsageError(f"{what} {value.isoformat()} is before 1970")
    now = now or utcnow()
    return value if value <= now else now


def session_times(
    created_at: datetime | None, updated_at: datetime | None
) -> tuple[datetime, datetime]:
    """A new session's ``(created_at, updated_at)``: now for both when neither is given
    (a session made through the library), else the source's, the one given standing for
    the other. Refuses a session updated before it was created."""
    now = utcnow()
    if created_at is None and updated_at is None:
        return now, now
    created = source_time(created_at, "created_at", now) if created_at is not None else None
    updated = source_time(updated_at, "updated_at", now) if updated_at is not None else None
    created, updated = created or updated, updated or created
    assert created is not None and updated is not None
    if created > updated:
        raise UsageError(
            f"created_at {format_ts(created)} is after updated_at {format_ts(updated)}"
        )
    return created, updated


class SessionFields(TypedDict, total=False):
    """The keyword arguments of ``Store.create_session`` but ``lock``: what the new
    session is (checked once, by ``new_session``)."""

    agent: str
    model: str | None
    title: str | None
    id: str | None
    metadata: dict[str, Any] | None
    start: SessionStart | None
    """Where a fork starts (``store/fork.py``); it is listed under the fork's parent."""
    created_at: datetime | None
    updated_at: datetime | None
    """Its dates by its source's clock (an imported transcript, a copied session);
    default now (``session_times``)."""
    parent: str | None
    """The session it is listed under, which must exist."""


@dataclass(frozen=True)
class NewSession:
    """A session to create, checked once here for every backend (``new_session``); a
    backend stores these fields in its own atomic step, after checking that ``parent``
    exists there (``SessionNotFound`` naming it otherwise)."""

    id: str
    agent: str
    model: str | None
    title: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    parent: str | None
    start: SessionStart | None = None
    last_seq: int = 0
    message_count: int = 0
    total_tokens: int = 0

    @property
    def created(self) -> str:
        return format_ts(self.created_at)

    @property
    def updated(self) -> str:
        return format_ts(self.updated_at)

    def info(self) -> SessionInfo:
        """The session as created."""
        return SessionInfo(
            id=self.id,
            agent=self.agent,
            model=self.model,
            title=self.title,
            created_at=self.created_at,
            updated_at=self.updated_at,
            message_count=self.message_count,
            total_tokens=self.total_tokens,
            last_seq=self.last_seq,
            parent_id=self.parent,
            metadata=copy.deepcopy(self.metadata),
        )


def new_session(fields: SessionFields) -> NewSession:
    """What ``create_session`` stores, by one rule for every backend: a checked id
    (a new UUID when none is given), agent, model, title and metadata (a fork's point
    stamped in); the dates (``session_times``); the parent, which a fork has from its
    start and any other session only when asked."""
    refuse_unknown("create_session", fields, SessionFields)
    given_id, start = fields.get("id"), fields.get("start")
    model, metadata, parent = fields.get("model"), fields.get("metadata"), fields.get("parent")
    sid = validate_session_id(given_id) if given_id is not None else new_id()
    check_session_fields(model, metadata)
    if start is not None:
        if parent is not None and parent != start.parent:
            raise UsageError(f"a fork of {start.parent} is listed under it, not under {parent}")
        parent = start.parent
    elif parent is not None:
        parent = checked_parent_id(sid, parent)
    created, updated = session_times(fields.get("created_at"), fields.get("updated_at"))
    last_seq, message_count, total_tokens = start_counters(start)
    return NewSession(
        id=sid,
        agent=validate_agent(fields.get("agent", DEFAULT_AGENT)),
        model=model,
        title=check_title(fields.get("title")),
        metadata=stamped(metadata, start),
        created_at=created,
        updated_at=updated,
        parent=parent,
        start=start,
        last_seq=last_seq,
        message_count=message_count,
        total_tokens=total_tokens,
    )


def refuse_unknown(method: str, given: Mapping[str, object], known: type) -> None:
    """A keyword a method does not take is an error, as in a plain signature."""
    unknown = sorted(set(given) - set(known.__annotations__))
    if unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {unknown[0]!r}")


def checked_parent_id(session_id: str, parent: object) -> str:
    parent = validate_session_id(parent, what="parent session id")
    if parent == session_id:
        raise UsageError(f"session {session_id} cannot be listed under itself")
    return parent


@dataclass(frozen=True)
class SessionChange:
    """What ``update_session`` changes, checked once here for every backend
    (``session_change``). ``None`` leaves a field as it is; none of them moves
    ``updated_at`` (a rename by a person does, see ``rename_session``)."""

    model: str | None
    metadata: dict[str, Any] | None
    title: str | None
    parent: str | None

    def merged(self, stored: dict[str, Any]) -> dict[str, Any]:
        """The metadata to store: ``stored`` with this change's keys over it."""
        return {**stored, **copy.deepcopy(self.metadata or {})}

    def new_parent(self, session_id: str, current: str | None) -> str | None:
        """Inside the backend's atomic step, with the stored parent: the parent to write,
        or ``None`` when there is nothing to write. A session is put under a parent once;
        moving it elsewhere is refused."""
        if self.parent is None or current == self.parent:
            return None
        if current is not None:
            raise UsageError(
                f"session {session_id} is already listed under {current}; "
                f"it cannot move under {self.parent}"
            )
        return self.parent


class SessionChangeFields(TypedDict, total=False):
    """The keyword arguments of ``Store.update_session``: what to change (``None``, or
    left out, keeps a field as it is)."""

    model: str | None
    metadata: dict[str, Any] | None
    """Keys merged into the stored metadata."""
    title: str | None
    parent: str | None
    """Puts a session that has no parent under this one (once)."""


@dataclass(kw_only=True)
class ScratchpadEntry(Record):
    name: str
    content: str
    created_at: datetime
    updated_at: datetime


def check_session_fields(model: str | None, metadata: dict[str, Any] | None) -> None:
    """The ``model`` and ``metadata`` a session is created or updated with: a model name
    and a JSON object that reads back as written (no NaN, bounded nesting)."""
    if model is not None and (not isinstance(model, str) or len(model) > MAX_MODEL_LENGTH):
        raise UsageError(f"a model name must be text of at most {MAX_MODEL_LENGTH} characters")
    check_json_object(metadata, "session metadata")
    if metadata and FORK_KEY in metadata:
        raise UsageError(
            f"session metadata key {FORK_KEY!r} is reserved: it is set when a session is "
            "forked (threadline sessions fork) and never changed"
        )
