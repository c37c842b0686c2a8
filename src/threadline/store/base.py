"""The Store protocol, its records, shared validation, and the Session handle.

A backend implements ``Store``: a flat set of methods keyed by session id.
Callers mostly hold a ``Session``, a small handle that binds a store to one
session and does the store-independent work of an append once, for every
backend: validate, stamp ids and times, count tokens (keyed by tokenizer
family, so views never recount stored history), check size.

Optional abilities (full-text search, TTL) raise ``NotSupported`` on backends
that lack them; everything else every backend must do, and the conformance
suite checks it.

The rules themselves, applied on each backend's primitives, are ``StoreCore``
(``store/core.py``); the pieces it decides with live here: ``LockHolder.claim`` for
attach locks, ``check_checkpoint`` for a checkpoint on an expected predecessor
(called inside the backend's transaction, lock or script), and ``update_memo`` on
top of each backend's ``replace_memo`` compare-and-set. ``CONNECTION_RETRY`` is the
one resend policy of the server backends.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import functools
import json
import os
import re
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Protocol,
    TypedDict,
    TypeGuard,
    TypeVar,
    Unpack,
    runtime_checkable,
)
from urllib.parse import parse_qsl

from threadline.errors import (
    AmbiguousSessionId,
    CheckpointConflict,
    CorruptRecord,
    InvalidMessage,
    InvalidSessionId,
    MessageTooLarge,
    SessionHasForks,
    SessionLocked,
    SessionNotFound,
    StoreUnavailable,
    UsageError,
)
from threadline.json_limits import value_problem
from threadline.stamps import new_id, utcnow
from threadline.store import retraction
from threadline.store.records import Record

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from typing import Unpack

    from pydantic_core import SchemaSerializer

    from threadline.messages import Message

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"
"""Session ids, agent names and message ids: they name files, keys and rows. ``\\Z``,
not ``$``, which also matches before a trailing newline."""
_SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
MAX_ID_LENGTH = 128
MAX_CALL_ID_LENGTH = 256
"""Tool-call ids are the provider's (``call_...``, ``toolu_...``); they reach no path or
key, so any printable text up to this length is kept as the provider sent it."""
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PLAIN_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_MEDIA_REF_RE = re.compile(rf"{_PLAIN_NAME}(?:/{_PLAIN_NAME}){{0,3}}")
"""A stored media reference: a relative path of up to four plain names (``<id>_media/1-0.png``)."""
MAX_MODEL_LENGTH = 256
"""Longer is not a model name (those are ``provider/name``, a few dozen characters)."""
MAX_SHOWN_VALUE = 60
"""Characters of a refused value quoted in an error message."""
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A single message larger than this (serialised) is refused."""
MIN_PREFIX_LENGTH = 4
"""Shortest id prefix accepted in place of a full id."""
MAX_PAGE_SIZE = 200
MAX_SEARCH_QUERY_LENGTH = 1000
"""Characters of a search query; see ``search_words``."""
MAX_SEARCH_WORDS = 32
"""Different words in a search query; see ``search_words``."""
MAX_INT = 2**63 - 1
"""The largest integer every backend stores and compares (SQLite, PostgreSQL and Redis
use signed 64 bits); the CLI refuses larger numbers."""
MAX_BOUND = 2**46
"""Library limits, offsets and seqs are clamped to this (see ``bounded``): about 7e13, far
past any real count, and small enough for every backend's arithmetic (Redis scripts
compute in Lua doubles and print them with 14 significant digits)."""
DEFAULT_PAGE_SIZE = 20
DEFAULT_AGENT = "default"
DEFAULT_LOCK_LEASE = timedelta(minutes=10)
"""A lock not renewed for this long is stale even when its holder is on another host."""
TAIL_BATCH = 1000
RESULT_LOOKBACK = (8, 256)
"""How far back a tool result's call is looked for at append."""
MEMO_CAS_ATTEMPTS = 100
"""Compare-and-set rounds ``update_memo`` tries before giving up: each lost round means
another writer changed the memo in between, so this is only reached under a storm."""

T = TypeVar("T")


class CorruptRecordWarning(UserWarning):
    """A stored record could not be decoded; it was left in place, skipped, and
    the good records around it were still returned. One class for every backend,
    so callers can filter or escalate it with one ``warnings`` rule."""


# -- validation ------------------------------------------------------------------


def shown(value: str) -> str:
    """A caller's value quoted in an error message: escaped, and cut when long."""
    if len(value) <= MAX_SHOWN_VALUE:
        return repr(value)
    return f"{value[:MAX_SHOWN_VALUE]!r}... ({len(value):,} characters)"


def validate_session_id(
    value: object, *, what: str = "session id", error: type[UsageError] = InvalidSessionId
) -> str:
    """Refuse anything that could reach a path or a query unchecked (invariant 6).

    The one rule for session ids, agent names and message ids: a full match of
    ``SESSION_ID_PATTERN``, so neither a trailing newline nor a 1 MiB id gets through.
    """
    if _good_id(value):
        return value  # as on every append: the checks below say what is wrong
    if not isinstance(value, str):
        raise error(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > MAX_ID_LENGTH:
        raise error(f"{what} {shown(value)} is too long: the limit is {MAX_ID_LENGTH} characters")
    if "\x00" in value:
        raise error(f"{what} contains a NUL byte")
    if "/" in value or "\\" in value:
        raise error(f"{what} {shown(value)} contains a path separator")
    if ".." in value:
        raise error(f"{what} {shown(value)} contains '..'")
    if not _SESSION_ID_RE.fullmatch(value):
        raise error(
            f"{what} {shown(value)} is invalid: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def _good_id(value: object) -> TypeGuard[str]:
    return type(value) is str and ".." not in value and bool(_SESSION_ID_RE.fullmatch(value))


def _good_call_id(value: object) -> TypeGuard[str]:
    """Printable ASCII of a good length: no control character, so no regex needed."""
    return (
        type(value) is str
        and 0 < len(value) <= MAX_CALL_ID_LENGTH
        and value.isascii()
        and value.isprintable()
    )


def validate_agent(value: object) -> str:
    return validate_session_id(value, what="agent name")


def validate_message_id(value: object) -> str:
    return validate_session_id(value, what="message id", error=InvalidMessage)


def validate_call_id(value: object, *, what: str = "tool call id") -> str:
    """A provider's tool-call id: kept as sent, but never empty, huge or with control characters."""
    if _good_call_id(value):
        return value
    if not isinstance(value, str):
        raise InvalidMessage(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_CALL_ID_LENGTH:
        raise InvalidMessage(
            f"{what} {shown(value)} must be 1-{MAX_CALL_ID_LENGTH} characters long"
        )
    if _CONTROL_RE.search(value):
        raise InvalidMessage(f"{what} {shown(value)} contains a control character")
    return value


def validate_media_ref(value: str) -> str:
    """A media reference names a file under the store: no absolute path, no '..'."""
    if not _MEDIA_REF_RE.fullmatch(value) or ".." in value:
        raise InvalidMessage(
            f"media reference {shown(value)} is invalid: use a relative path of plain names "
            "such as <session>_media/<name> (no '..', no leading '/')"
        )
    return value


def validate_page_size(limit: int) -> int:
    if not 1 <= bounded(limit, "page size") <= MAX_PAGE_SIZE:
        raise UsageError(f"page size must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    return limit


def validate_offset(offset: int) -> int:
    if bounded(offset, "offset") < 0:
        raise UsageError("offset must be >= 0")
    return min(offset, MAX_BOUND)


def search_words(query: object) -> list[str]:
    """The words of a search query, by one rule for every backend: text of at most
    ``MAX_SEARCH_QUERY_LENGTH`` characters holding 1 to ``MAX_SEARCH_WORDS`` different
    words (NUL counts as a space; a word repeated, in any case, counts once).

    The limits bound the work one call can start: PostgreSQL's ranking and
    ``ts_headline`` grow faster than linearly with the words of the query (a 100 KB
    query ran on the server for minutes after its client was gone; 100 words over
    long messages take a minute).
    """
    if not isinstance(query, str):
        raise UsageError(f"a search query must be text, got {type(query).__name__}")
    if len(query) > MAX_SEARCH_QUERY_LENGTH:
        raise UsageError(
            f"the search query is {len(query):,} characters; the limit is "
            f"{MAX_SEARCH_QUERY_LENGTH:,} (search for a few distinctive words instead)"
        )
    firsts: dict[str, str] = {}
    for word in query.replace("\x00", " ").split():
        firsts.setdefault(word.casefold(), word)
    words = list(firsts.values())
    if not words:
        raise UsageError("the search query is empty")
    if len(words) > MAX_SEARCH_WORDS:
        raise UsageError(
            f"the search query has {len(words)} different words; the limit is "
            f"{MAX_SEARCH_WORDS} (search for a few distinctive words instead)"
        )
    return words


def split_url_options(
    query: str, ours: Collection[str], *, store: str
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """A store URL's ``?key=value`` options: the store's own (``ours``), and the rest in
    order, for a driver that judges its own. An option given twice is refused rather
    than one of the two silently winning."""
    mine: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in seen:
            raise UsageError(f"the {store} store URL gives option {shown(key)} twice")
        seen.add(key)
        if key in ours:
            mine[key] = value
        else:
            rest.append((key, value))
    return mine, rest


def refuse_unknown_options(
    rest: Sequence[tuple[str, str]], known: Collection[str], *, store: str
) -> None:
    """Options a store does not know are a usage error naming them: ignored, a typo such
    as ``?synchronus=off`` would leave the store quietly doing something else."""
    if rest:
        names = ", ".join(shown(key) for key, _ in rest)
        takes = ", ".join(known) if known else "no options"
        raise UsageError(f"unknown option {names} in the {store} store URL (it takes: {takes})")


def bounded(value: int, what: str) -> int:
    """An integer argument (a limit, an offset, a seq) as every backend can take it.

    A bool, float, string or None is refused; a value past ``MAX_BOUND`` is clamped to
    it, far beyond any count or seq a store holds, so ``tail(sid, 10**30)`` means "all"
    everywhere instead of overflowing in SQLite.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what} must be an integer, got {type(value).__name__}")
    return max(-MAX_BOUND, min(value, MAX_BOUND))


def bounded_or_none(value: int | None, what: str) -> int | None:
    """``bounded`` for an argument where ``None`` means "no limit"."""
    return None if value is None else bounded(value, what)


_NO_OFFSET: Final = timedelta(0)


def format_ts(dt: datetime) -> str:
    """RFC 3339 UTC with microseconds: sorts lexicographically in every backend."""
    if dt.tzinfo is not UTC and dt.utcoffset() != _NO_OFFSET:
        dt = dt.astimezone(UTC)
    # strftime's "%Y-%m-%dT%H:%M:%S.%fZ" at two thirds of isoformat's cost (every append)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031
        dt.year,
        dt.month,
        dt.day,
        dt.hour,
        dt.minute,
        dt.second,
        dt.microsecond,
    )


def parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def this_host() -> str:
    import socket

    return socket.gethostname()


PROC_ROOT = "/proc"
"""Where Linux publishes each process's state (``<pid>/stat``); elsewhere ``ps`` says."""
PS_TIMEOUT_SECONDS = 5.0


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` on this host still runs. A zombie (killed, not yet reaped
    by its parent) answers ``os.kill(pid, 0)`` but will never renew a lock: it is dead."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return process_state(pid) != "Z"


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``Z``...), from ``/proc/<pid>/stat``
    where there is a ``/proc``, else from ``ps``; None when neither can tell (gone, or no
    ``ps``)."""
    if os.path.isdir(os.path.join(PROC_ROOT, "self")):
        try:
            with open(os.path.join(PROC_ROOT, str(pid), "stat"), "rb") as f:
                stat_line = f.read()
        except OSError:
            return None
        # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")"
        fields = stat_line[stat_line.rfind(b")") + 1 :].split()
        return fields[0].decode("ascii", "replace") if fields else None
    import subprocess

    try:
        found = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=PS_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    state = found.stdout.strip()
    return state[:1] or None


# -- records ---------------------------------------------------------------------


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


# -- a session's dates and parent: the rules, once for every backend ------------------

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
    _refuse_unknown("create_session", fields, SessionFields)
    given_id, start = fields.get("id"), fields.get("start")
    model, metadata, parent = fields.get("model"), fields.get("metadata"), fields.get("parent")
    sid = validate_session_id(given_id) if given_id is not None else new_id()
    check_session_fields(model, metadata)
    if start is not None:
        if parent is not None and parent != start.parent:
            raise UsageError(f"a fork of {start.parent} is listed under it, not under {parent}")
        parent = start.parent
    elif parent is not None:
        parent = _parent_id(sid, parent)
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


def _refuse_unknown(method: str, given: Mapping[str, object], known: type) -> None:
    """A keyword a method does not take is an error, as in a plain signature."""
    unknown = sorted(set(given) - set(known.__annotations__))
    if unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {unknown[0]!r}")


def _parent_id(session_id: str, parent: object) -> str:
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


def session_change(store: Store, session_id: str, fields: SessionChangeFields) -> SessionChange:
    """``update_session``'s arguments checked: the fields as ``check_session_fields`` and
    ``check_title`` have them, and a parent that exists and would not put the session
    under its own descendant (a loop would take both out of every listing)."""
    _refuse_unknown("update_session", fields, SessionChangeFields)
    model, metadata = fields.get("model"), fields.get("metadata")
    title, parent = fields.get("title"), fields.get("parent")
    check_session_fields(model, metadata)
    if title is not None:
        title = check_title(title)
    if parent is not None:
        parent = _parent_id(session_id, parent)
        seen = {session_id}
        up: str | None = parent
        while up is not None:
            if up in seen:
                raise UsageError(
                    f"session {session_id} cannot be listed under {parent}: {parent} is "
                    f"listed under {session_id}"
                )
            seen.add(up)
            up = store.session_info(up).parent_id
    return SessionChange(model=model, metadata=metadata, title=title, parent=parent)


@dataclass(frozen=True)
class ListRequest:
    """A checked ``list_sessions`` call: which sessions (every one, the top-level ones,
    or one session's children; of one agent or all) and which page of them."""

    agent: str | None
    limit: int
    offset: int
    top_level: bool
    parent: str | None

    def where(self, mark: str) -> tuple[str, dict[str, Any]]:
        """For an SQL backend: the WHERE clause and its named parameters, each written
        as ``mark`` formats its name (``:{}``, ``%({})s``). ``parent_id IS NULL`` is
        written out, so the indexes of top-level sessions serve it."""
        clauses: list[str] = []
        args: dict[str, Any] = {}
        if self.agent is not None:
            clauses.append(f"agent = {mark.format('agent')}")
            args["agent"] = self.agent
        if self.top_level:
            clauses.append("parent_id IS NULL")
        if self.parent is not None:
            clauses.append(f"parent_id = {mark.format('parent')}")
            args["parent"] = self.parent
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args

    def admits(self, info: SessionInfo) -> bool:
        """For a backend that scans: whether ``info`` is listed."""
        if self.agent is not None and info.agent != self.agent:
            return False
        if self.top_level and info.parent_id is not None:
            return False
        return self.parent is None or info.parent_id == self.parent

    def page(self, infos: list[SessionInfo]) -> SessionPage:
        """The page of ``infos`` (every session admitted), newest updated first."""
        infos.sort(key=lambda i: i.id)
        infos.sort(key=lambda i: i.updated_at, reverse=True)
        return SessionPage(
            items=infos[self.offset : self.offset + self.limit],
            total=len(infos),
            offset=self.offset,
            limit=self.limit,
        )


class ListOptions(TypedDict, total=False):
    """The keyword arguments of ``Store.list_sessions`` (checked by ``list_request``)."""

    agent: str | None
    limit: int
    offset: int
    top_level: bool
    """Only the sessions listed under no other."""
    parent: str | None
    """Only the sessions listed directly under this one."""


def list_request(options: ListOptions) -> ListRequest:
    _refuse_unknown("list_sessions", options, ListOptions)
    agent, parent = options.get("agent"), options.get("parent")
    top_level = bool(options.get("top_level", False))
    limit = validate_page_size(options.get("limit", DEFAULT_PAGE_SIZE))
    offset = validate_offset(options.get("offset", 0))
    if agent is not None:
        validate_agent(agent)
    if parent is not None:
        validate_session_id(parent, what="parent session id")
        if top_level:
            raise UsageError("list the top-level sessions or one session's children, not both")
    return ListRequest(agent, limit, offset, top_level, parent)


def children_request(session_ids: Sequence[str]) -> list[str]:
    """The ids ``count_children`` counts for: checked, each once, at most a page."""
    if isinstance(session_ids, str):
        raise UsageError("count_children takes a list of session ids, not one id")
    ids = list(dict.fromkeys(validate_session_id(s) for s in session_ids))
    if len(ids) > MAX_PAGE_SIZE:
        raise UsageError(f"count_children takes at most {MAX_PAGE_SIZE} ids at a time")
    return ids


def memo_request(session_ids: Sequence[str]) -> list[str]:
    """The ids ``get_memos`` reads: checked, each once, in order."""
    if isinstance(session_ids, str):
        raise UsageError("get_memos takes a list of session ids, not one id")
    return list(dict.fromkeys(validate_session_id(s) for s in session_ids))


def children_counts(parent_ids: list[str], infos: Iterable[SessionInfo]) -> dict[str, int]:
    """For a backend that scans: ``count_children`` counted over ``infos``."""
    counts = dict.fromkeys(parent_ids, 0)
    for info in infos:
        if info.parent_id in counts:
            counts[info.parent_id] += 1
    return counts


@dataclass(kw_only=True)
class SessionPage(Record):
    items: list[SessionInfo]
    total: int
    """How many sessions match, across all pages."""
    offset: int = 0
    limit: int = DEFAULT_PAGE_SIZE

    def __iter__(self) -> Iterator[SessionInfo]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(kw_only=True)
class Checkpoint(Record):
    """A compaction result: a summary of everything up to ``covers_up_to``."""

    id: int = 0
    """Assigned by the store, increasing per session."""
    session_id: str
    covers_up_to: int
    """The last seq the summary covers; the view resumes after it."""
    summary: str
    created_at: datetime = field(default_factory=utcnow)
    metadata: dict[str, Any] = field(default_factory=dict)


class _AnyPrevious:
    """The type of ``ANY_PREVIOUS``."""

    def __repr__(self) -> str:
        return "ANY_PREVIOUS"


ANY_PREVIOUS: Final = _AnyPrevious()
"""``add_checkpoint``'s default: add after whatever checkpoint is latest (imports, copies)."""
ExpectPrevious = int | None | _AnyPrevious
"""A checkpoint id, ``None`` for "no checkpoint yet", or ``ANY_PREVIOUS``."""


def new_checkpoint(
    session_id: str, *, covers_up_to: int, summary: str, metadata: dict[str, Any] | None
) -> Checkpoint:
    """The checkpoint to add, stamped once before the first attempt, so that a resend
    after a lost reply is recognised as the checkpoint it already stored."""
    check_checkpoint_fields(summary, metadata)
    return Checkpoint(
        session_id=session_id,
        covers_up_to=covers_up_to,
        summary=summary,
        metadata=copy.deepcopy(metadata or {}),
    )


def check_checkpoint(
    new: Checkpoint,
    *,
    last_seq: int,
    latest: Checkpoint | None,
    expect_previous: ExpectPrevious,
) -> Checkpoint | None:
    """The rule for adding a checkpoint, applied by every backend inside the atomic step
    that writes it, with ``last_seq`` and ``latest`` read in that same step.

    Returns ``latest`` when ``new`` is a resend of it (nothing to write). Otherwise
    ``covers_up_to`` must lie within the session (``UsageError``), and with an
    ``expect_previous`` the latest checkpoint must still be that one and ``new`` must
    cover more than it (``CheckpointConflict``): two compactions that built on the same
    checkpoint write one successor between them, and checkpoints only move forward.
    """
    if latest is not None and (latest.covers_up_to, latest.summary, latest.created_at) == (
        new.covers_up_to,
        new.summary,
        new.created_at,
    ):
        return latest
    if not 0 <= new.covers_up_to <= last_seq:
        raise UsageError(
            f"checkpoint covers_up_to={new.covers_up_to} is outside the session "
            f"(last seq {last_seq})"
        )
    if isinstance(expect_previous, _AnyPrevious):
        return None
    latest_id = latest.id if latest is not None else None
    if latest_id != expect_previous:
        raise CheckpointConflict(
            f"session {new.session_id}: checkpoint {latest_id} appeared after checkpoint "
            f"{expect_previous}, which this one was to follow; not written",
            expected=expect_previous,
            latest=latest_id,
        )
    if latest is not None and new.covers_up_to <= latest.covers_up_to:
        raise CheckpointConflict(
            f"session {new.session_id}: a checkpoint covering up to {new.covers_up_to} "
            f"cannot follow checkpoint {latest_id}, which covers up to {latest.covers_up_to}",
            expected=expect_previous,
            latest=latest_id,
        )
    return None


@dataclass(kw_only=True)
class ScratchpadEntry(Record):
    name: str
    content: str
    created_at: datetime
    updated_at: datetime


@dataclass(kw_only=True)
class LockHolder(Record):
    """Who holds a session's attach lock."""

    pid: int
    host: str
    started_at: datetime = field(default_factory=utcnow)
    renewed_at: datetime = field(default_factory=utcnow)
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

    @classmethod
    def stored(cls, raw: object, *, where: str) -> LockHolder | None:
        """The lock a backend keeps (JSON text or bytes, an object, or the holder itself;
        empty: no lock); unreadable is ``CorruptRecord`` naming ``where``, on every
        backend alike."""
        if not raw:
            return None
        if isinstance(raw, LockHolder):
            return raw
        try:
            return cls.from_json(raw) if isinstance(raw, str | bytes) else cls.from_dict(raw)
        except ValueError as exc:
            raise CorruptRecord(f"unreadable lock record: {exc}", where=where) from exc

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
        return self.replace(**update)


def numbered_checkpoints(checkpoints: Iterable[Checkpoint]) -> list[dict[str, Any]]:
    """A session's checkpoints (oldest first) as JSON records, each with its ``number``
    within the session (#1 its first, as reports and pages show it) beside its store id."""
    return [{"number": n, **c.to_dict()} for n, c in enumerate(checkpoints, start=1)]


@dataclass(kw_only=True)
class Mark(Record):
    """Where a snippet's bracketed match is: ``snippet[start:end]`` is ``[word]``."""

    start: int
    end: int


@dataclass(kw_only=True)
class SearchHit(Record):
    session_id: str
    seq: int
    role: str
    snippet: str
    """Around the first match, each match in brackets (as the CLI shows it)."""
    agent: str | None = None
    marks: list[Mark] = field(default_factory=list)
    """The bracketed matches of ``snippet``, so a page highlights them (``<mark>``)
    without mistaking brackets the text itself holds for a match."""
    parent_id: str | None = None
    """The session the hit's session is listed under (a subagent's parent), if any."""


class SearchOptions(TypedDict, total=False):
    """The keyword arguments of ``Store.search``: which messages, and which page."""

    agent: str | None
    session_id: str | None
    model: str | None
    role: str | None
    since: datetime | None
    until: datetime | None
    limit: int
    offset: int


class SearchPage(list[SearchHit]):
    """One page of hits (a list, newest first) that also knows how many there are in
    all (``total``) and where the page starts (``offset``)."""

    def __init__(self, hits: Iterable[SearchHit] = (), *, total: int = 0, offset: int = 0):
        super().__init__(hits)
        self.total = total
        self.offset = offset


# -- the protocol ----------------------------------------------------------------


@runtime_checkable
class Store(Protocol):
    """What every backend does. All methods take full session ids except
    ``resolve_id`` / ``get_session``, which also accept a unique prefix."""

    url: str

    # sessions
    def create_session(
        self, *, lock: LockHolder | None = None, **fields: Unpack[SessionFields]
    ) -> Session:
        """Create a session (``SessionFields``, checked by ``new_session``); with ``lock``,
        it is locked before it becomes visible. With ``start``, its counters begin there
        (a fork's shared prefix, see ``store/fork.py``) and it is listed under the fork's
        parent. ``created_at`` / ``updated_at`` date it by its source's clock (an
        imported transcript, a copied session; default now); ``parent`` lists it under
        another session, which must exist (``SessionNotFound`` otherwise)."""
        ...

    def get_session(self, id_or_prefix: str) -> Session: ...
    def resolve_id(self, id_or_prefix: str) -> str: ...
    def session_info(self, session_id: str) -> SessionInfo: ...
    def list_sessions(self, **options: Unpack[ListOptions]) -> SessionPage:
        """Newest updated first (ties by id): a page (``limit``, ``offset``) of every
        session, of one ``agent``'s, of the ``top_level`` ones (listed under no other) or
        of one ``parent``'s children (``ListOptions``, checked by ``list_request``).
        Served by an index on the SQL backends and Redis: a page of top-level sessions
        reads the page, not every session."""
        ...

    def count_children(self, session_ids: Sequence[str]) -> dict[str, int]:
        """How many sessions are listed directly under each of ``session_ids`` (up to
        ``MAX_PAGE_SIZE`` ids; every id is a key, 0 for none or an unknown id)."""
        ...

    def rename_session(self, session_id: str, title: str | None) -> SessionInfo: ...
    def update_session(self, session_id: str, **fields: Unpack[SessionChangeFields]) -> SessionInfo:
        """Change what is given (``session_change``) without moving ``updated_at``:
        ``metadata`` keys are merged in, ``title`` set, and ``parent`` puts a session
        that has none under an existing one (once; a loop is refused)."""
        ...

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
        expect_previous: ExpectPrevious = ANY_PREVIOUS,
    ) -> Checkpoint:
        """Append a checkpoint, atomically checked by ``check_checkpoint``: with
        ``expect_previous`` (an id, or ``None`` for none yet) only while that is still the
        latest one, else ``CheckpointConflict``."""
        ...

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None: ...
    def list_checkpoints(self, session_id: str) -> list[Checkpoint]: ...

    # scratchpad
    def scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry: ...
    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None: ...
    def scratchpad_list(self, session_id: str, *, prefix: str = "") -> list[ScratchpadEntry]:
        """Entries by name; with ``prefix``, only those whose name starts with it (a
        range of the name index on the SQL backends: the others' content is not read)."""
        ...

    def scratchpad_delete(self, session_id: str, name: str) -> bool: ...

    # memo: one JSON document per session for strategies and runtime state
    def get_memo(self, session_id: str) -> dict[str, Any]: ...
    def get_memos(self, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The memos of many sessions in one read (the SQL backends: one query), by
        id; an id with no session is left out. A listing reads a page's memos so."""
        ...

    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None: ...
    def replace_memo(self, session_id: str, expected: dict[str, Any], memo: dict[str, Any]) -> bool:
        """Compare-and-set, in one atomic step: store ``memo`` only if the stored memo is
        still ``expected`` (``same_memo``); False when it is not. ``update_memo`` builds
        on it."""
        ...

    # attach locks
    def acquire_lock(self, session_id: str, holder: LockHolder | None = None) -> LockHolder:
        """Take or renew the lock; raises ``SessionLocked`` naming a live holder."""
        ...

    def release_lock(self, session_id: str, holder: LockHolder | None = None) -> bool: ...
    def lock_holder(self, session_id: str) -> LockHolder | None: ...

    # search (optional: raises NotSupported); syntax, order and filters: store/search_query.py
    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """Hits newest first; options: agent, session_id, model, role, since, until,
        limit, offset."""
        ...

    def close(self) -> None: ...


# -- preparing an append -----------------------------------------------------------


def session_family(model: str | None) -> str:
    """The key a session's appends store token counts under (``prepare_messages``): the
    model's tokenizer family, suffixed ``:estimated`` where appends store an estimate."""
    from threadline.tokens import stored_counter_for

    return stored_counter_for(model).family


class Batch(list["Message"]):
    """A batch of messages with the time it happened by its source's clock (``at``): an
    append of it moves the session's ``updated_at`` to ``at`` instead of now (imports,
    copies between stores; see ``dated`` and ``append_time``)."""

    at: datetime | None = None


def dated(messages: Sequence[Message], at: datetime) -> Batch:
    """``messages`` as a batch written at ``at`` (checked by ``source_time``)."""
    batch = messages if isinstance(messages, Batch) else Batch(messages)
    batch.at = source_time(at, "the batch's time")
    return batch


def append_time(messages: Sequence[Message]) -> datetime:
    """The time an append stores as the session's ``updated_at``: the batch's own
    (``Batch.at``), else now. Every backend moves ``updated_at`` there and never back
    (``later``), so an old batch appended late leaves a newer date as it is."""
    at = messages.at if isinstance(messages, Batch) else None
    return at if at is not None else utcnow()


def later(stored: datetime, at: datetime) -> datetime:
    """``updated_at`` after an append at ``at`` (the rule the SQL backends write as
    ``max``/``GREATEST``)."""
    return at if at > stored else stored


class Appending:
    """A batch on its way into a backend (``core.StoreCore._append``): the messages with what
    a backend stores of them, each worked out once and only when a backend asks (a
    prepared batch carries its bodies and counts already)."""

    def __init__(self, session_id: str, messages: Sequence[Message]) -> None:
        self.session_id = session_id
        self.messages = messages
        self.ids = [m.id for m in messages]
        self.at = append_time(messages)
        """The session's ``updated_at`` after the batch, unless it is later already."""

    @functools.cached_property
    def bodies(self) -> list[bytes]:
        return stored_bodies(self.messages)

    @functools.cached_property
    def tokens(self) -> list[int]:
        return stored_tokens(self.messages)

    @functools.cached_property
    def times(self) -> list[str]:
        return stored_times(self.messages)

    def already_stored(self, message_id: str | None = None) -> InvalidMessage:
        """A message id of the batch is stored before it (or appears twice in it)."""
        which = "a message id in this batch" if message_id is None else f"message id {message_id}"
        return InvalidMessage(f"{which} is already stored in session {self.session_id}")

    def partly_stored(self, missing_id: str) -> InvalidMessage:
        """The batch's first message is stored but ``missing_id`` is not: batches are
        atomic, so this is not a resend of it."""
        return InvalidMessage(
            f"batch partly stored already in session {self.session_id}: "
            f"message {self.ids[0]} is stored but {missing_id} is not"
        )


class PreparedBatch(Batch):
    """Messages ``prepare_messages`` checked and stamped, each with its stored JSON
    (``bodies``, made while checking) and stored count (``tokens``, what ``primary_tokens``
    reads), so a backend encodes and looks up a message once, and the messages are the
    batch's own copies, which a backend may number in place. ``calls`` are the ids of the
    batch's tool calls, ``unanswered`` the call ids of its tool results whose call is not
    earlier in the batch (``Session.append`` looks for those in the history)."""

    bodies: list[bytes]
    tokens: list[int]
    calls: set[str]
    unanswered: list[str]


def prepare_messages(
    model: str | None, messages: Sequence[Message], *, at: datetime | None = None
) -> PreparedBatch:
    """Validate and stamp messages for storage; counts tokens once, here. ``at`` dates
    the batch by its source's clock (see ``Batch``); without it, it is written now.

    The first key of ``token_counts`` is what backends add to the session's
    ``total_tokens`` (see ``primary_tokens``): the count of ``tokens.stored_counter_for``, an
    estimate where exact counting is dear (a build counts those exactly). A count the
    message carries for the session's family, exact or estimated, is never trusted (an
    edited message keeps its old count); other families' counts ride along after it.
    """
    from threadline.messages import Message
    from threadline.tokens import ESTIMATED_SUFFIX, stored_counter_for

    if isinstance(messages, Message):
        messages = [messages]
    if not messages:
        raise UsageError("nothing to append: the batch is empty")
    counter = stored_counter_for(model)
    estimated = counter.family
    exact = estimated.removesuffix(ESTIMATED_SUFFIX)  # an exact count it carries: recounted
    prepared = PreparedBatch()
    prepared.bodies = bodies = []
    prepared.tokens = stored_tokens = []
    prepared.calls = calls = set()
    prepared.unanswered = unanswered = []
    if at is not None:
        prepared.at = source_time(at, "the batch's time")
    seen: set[str] = set()
    count = counter.count_message
    for m in messages:
        if not isinstance(m, Message):
            raise InvalidMessage(f"expected a Message, got {type(m).__name__}")
        _checked(m)
        if m.id in seen:
            raise InvalidMessage(f"message id {m.id} appears twice in one batch")
        seen.add(m.id)
        if m.tool_calls:
            calls.update([c.id for c in m.tool_calls])
        if m.role == "tool" and m.tool_call_id not in calls:
            unanswered.append(m.tool_call_id or "")
        tokens = count(m)
        counts = {estimated: tokens}
        if m.token_counts:
            counts.update(
                (k, v) for k, v in m.token_counts.items() if k != exact and k != estimated
            )
        copy = _stamped_copy(m, counts, Message)
        prepared.append(copy)
        bodies.append(encode_message(copy))
        stored_tokens.append(tokens)
    return prepared


_STAMPED: Final = frozenset({"seq", "token_counts"})
_set_attribute = object.__setattr__


def _stamped_copy(m: Message, counts: dict[str, int], message_type: type[Message]) -> Message:
    """``m.model_copy(update={"seq": None, "token_counts": counts})``, made as pydantic's
    ``__copy__`` makes it (a shallow copy of the fields) without its generic path, which was
    a sixth of a prepared message's cost; a subclass, or a message with extra or private
    attributes, takes ``model_copy`` itself. A test holds the two equal."""
    if type(m) is not message_type or m.__pydantic_extra__ or m.__pydantic_private__:
        return m.model_copy(update={"seq": None, "token_counts": counts})
    new = message_type.__new__(message_type)
    fields = m.__dict__.copy()
    fields["seq"] = None
    fields["token_counts"] = counts
    _set_attribute(new, "__dict__", fields)
    _set_attribute(new, "__pydantic_fields_set__", m.__pydantic_fields_set__ | _STAMPED)
    _set_attribute(new, "__pydantic_extra__", None)
    _set_attribute(new, "__pydantic_private__", None)
    return new


def stored_bodies(messages: Sequence[Message]) -> list[bytes]:
    """Each message's stored JSON (``encode_message``): a prepared batch's own."""
    if isinstance(messages, PreparedBatch):
        return messages.bodies
    return [encode_message(m) for m in messages]


def stored_tokens(messages: Sequence[Message]) -> list[int]:
    """Each message's stored count (``primary_tokens``): a prepared batch's own."""
    if isinstance(messages, PreparedBatch):
        return messages.tokens
    return [primary_tokens(m) for m in messages]


def stored_times(messages: Sequence[Message]) -> list[str]:
    """``format_ts`` of each message's ``created_at``. Where pydantic-core's JSON text of
    the time is already that form (UTC, with microseconds) it is taken as it is: two
    thirds of ``format_ts``'s cost, on every appended message (a test holds the two
    equal)."""
    to_text = _time_serializer().to_python
    out = []
    for m in messages:
        dt = m.created_at
        if dt.tzinfo is UTC and dt.microsecond:
            text = to_text(dt, mode="json")
            if len(text) == 27 and text[-1] == "Z":
                out.append(text)
                continue
        out.append(format_ts(dt))
    return out


@functools.cache
def _time_serializer() -> SchemaSerializer:
    from pydantic_core import SchemaSerializer, core_schema

    return SchemaSerializer(core_schema.datetime_schema())


def numbered(messages: Sequence[Message], first_seq: int) -> list[Message]:
    """The stored copies of a batch given seqs from ``first_seq``: a prepared batch's
    own messages, numbered in place (their fields set already names ``seq``, so the
    field is written without pydantic's ``__setattr__``); copies of anyone else's."""
    if isinstance(messages, PreparedBatch):
        for seq, m in enumerate(messages, first_seq):
            m.__dict__["seq"] = seq
        return list(messages)  # not the batch: its bodies are not the caller's to keep
    return [m.model_copy(update={"seq": seq}) for seq, m in enumerate(messages, first_seq)]


def check_message(m: object) -> Message:
    """The rules a message must meet to be stored, on every write path (``prepare_messages``
    for appends and imports, ``copy_sessions`` for messages read from another store).

    Ids must be ids (a message id names rows and keys; a tool-call id is the provider's,
    unique within its message), media references stay under the store, inline data is
    base64 that decodes the same everywhere, and tool arguments and metadata are JSON
    that can be read back (no NaN, no nesting past ``MAX_JSON_DEPTH``).
    """
    from threadline.messages import Message

    if not isinstance(m, Message):
        raise InvalidMessage(f"expected a Message, got {type(m).__name__}")
    return _checked(m)


def _checked(m: Message) -> Message:
    """``check_message``'s rules, for what is known to be a ``Message``. A step of every
    append: the usual message passes the quick tests, and only a failing one builds the
    validators' error texts."""
    if not _good_id(m.id):
        validate_message_id(m.id)
    if m.tool_calls:
        _check_calls(m)
    if m.tool_call_id is not None and not _good_call_id(m.tool_call_id):
        validate_call_id(m.tool_call_id, what=f"message {m.id}: tool_call_id")
    if type(m.content) is not str:  # text alone has nothing more to check
        _check_parts(m)
    if m.metadata:
        problem = value_problem(m.metadata)
        if problem is not None:
            raise InvalidMessage(f"message {m.id}: metadata: {problem}")
    return m


def _check_calls(m: Message) -> None:
    calls: set[str] = set()
    for call in m.tool_calls:
        if not _good_call_id(call.id):
            validate_call_id(call.id, what=f"message {m.id}: tool call id")
        if call.id in calls:
            raise InvalidMessage(f"message {m.id}: tool call id {shown(call.id)} appears twice")
        calls.add(call.id)
        problem = value_problem(call.arguments) if call.arguments else None
        if problem is not None:
            raise InvalidMessage(f"message {m.id}: tool call {call.id} arguments: {problem}")


def _check_parts(m: Message) -> None:
    from threadline.messages import FilePart, ImagePart

    for part in m.content:
        if isinstance(part, ImagePart) and part.media_ref is not None:
            validate_media_ref(part.media_ref)
        if isinstance(part, ImagePart | FilePart) and part.data is not None:
            try:
                base64.b64decode(part.data, validate=True)
            except binascii.Error as exc:
                raise InvalidMessage(
                    f"message {m.id}: {part.type} data is not base64 ({exc}); "
                    "give the bytes base64-encoded, without a data: prefix"
                ) from exc


_SEQ: Final[set[str]] = {"seq"}
"""Not in a stored body: backends keep a message's seq beside it."""


def encode_message(m: Message) -> bytes:
    """The stored JSON form; refuses invalid UTF-8 and oversized messages.

    A plain ``Message`` (not a subclass, no extra fields: what appends almost always
    store) is written from its fields by pydantic-core's ``to_json``, which infers each
    value's type: the same bytes as the model's serializer, which first checks every value
    against the schema; about 1 us less a message on real transcripts, a twenty-fifth of
    an append (a property test holds the two equal). Any other message goes through its
    model's serializer."""
    plain, to_json = _plain_encoder()
    try:
        if type(m) is plain and not m.__pydantic_extra__:
            body = to_json(m.__dict__, exclude=_SEQ)
        else:
            body = type(m).__pydantic_serializer__.to_json(m, exclude=_SEQ)
    except (UnicodeEncodeError, ValueError) as exc:
        raise InvalidMessage(f"message {m.id} is not valid UTF-8 text: {exc}") from exc
    if len(body) > MAX_MESSAGE_BYTES:
        raise MessageTooLarge(
            f"message {m.id} is {len(body):,} bytes; the limit is {MAX_MESSAGE_BYTES:,} "
            "(store large data as a file reference instead)"
        )
    return body


@functools.cache
def _plain_encoder() -> tuple[type[Message], Callable[..., bytes]]:
    from pydantic_core import to_json

    from threadline.messages import Message

    return Message, to_json


def primary_tokens(m: Message) -> int:
    return next(iter(m.token_counts.values()), 0)


# -- compare-and-set on the memo ---------------------------------------------------


RESERVED_MEMO_PREFIX = "threadline."
"""Memo keys the library keeps for itself (compaction mark, retraction index)."""
COMPACTION_MARK_KEY: Final = "threadline.compaction"
"""Memo key of a compaction in progress (written by ``compaction/compactor.py``, read by
``store/doctor.py``): named here, below both."""


def same_memo(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal as stored JSON: key order does not matter, and NaN equals NaN."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def update_memo(
    store: Store,
    session_id: str,
    change: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> dict[str, Any]:
    """Read the memo, let ``change`` decide, and write the result only if nobody wrote in
    between (``Store.replace_memo``), else decide again on what they wrote.

    ``change`` gets a copy and returns the new memo, or ``None`` to leave it as it is;
    whatever it raises propagates. Returns the memo as stored afterwards. This is how
    a decision on one memo key (the compaction mark) is atomic on every backend.
    """
    for _ in range(MEMO_CAS_ATTEMPTS):
        memo = store.get_memo(session_id)
        new = change(copy.deepcopy(memo))
        if new is None:
            return memo
        if store.replace_memo(session_id, memo, new):
            return new
    raise StoreUnavailable(
        f"session {session_id}: the memo changed under {MEMO_CAS_ATTEMPTS} attempts in a "
        "row to update it; too many writers at once"
    )


# -- resending after a dropped connection ----------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How a server backend resends an idempotent call after its connection dropped.

    One policy for every backend that talks to a server: Redis hands it to redis-py
    (``RedisStore``), PostgreSQL runs ``call`` around its idempotent operations.
    """

    retries: int = 4
    """Resends after the first attempt."""
    base: float = 0.05
    cap: float = 0.5

    def delay(self, failures: int) -> float:
        """Seconds before resend number ``failures`` (from 1). The first goes at once: a
        dropped connection is simply replaced, and waiting there halved the throughput
        of a loop whose connections were being terminated. Later ones wait ``base``,
        doubling up to ``cap`` (0, 0.05, 0.1, 0.2 s by default)."""
        if failures <= 1:
            return 0.0
        return float(min(self.cap, self.base * 2 ** (failures - 2)))

    def call(self, fn: Callable[[], T], *, retry_on: type[BaseException]) -> T:
        """``fn()``, resent after ``retry_on`` up to ``retries`` times; the last one raises."""
        failures = 0
        while True:
            try:
                return fn()
            except retry_on:
                failures += 1
                if failures > self.retries:
                    raise
                time.sleep(self.delay(failures))


CONNECTION_RETRY = RetryPolicy()
"""The policy both server backends use."""


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
        self._segments: list[_Segment] | None = None
        """The fork chain, newest first (see ``segments``); fork points never change."""
        self._inherited: retraction.Retractions | None = None
        """Retractions a fork inherits from its ancestors (fixed, like its fork point)."""
        self._read_with: retraction.Retractions | None = None
        """The index the latest view read through this handle used (see ``hidden_after``)."""

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, agent={self.agent!r}, messages={self.message_count})"

    # -- identity
    @property
    def id(self) -> str:
        return self._info.id

    @property
    def info(self) -> SessionInfo:
        """As of this handle's last read or append (``refresh`` reads it again)."""
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

    @property
    def parent_id(self) -> str | None:
        """The session this one is listed under (``SessionInfo.parent_id``)."""
        return self._info.parent_id

    @property
    def fork(self) -> ForkPoint | None:
        """Where this session forked from its parent; ``None`` for a root session."""
        return fork_point(self._info)

    def refresh(self) -> Session:
        self._info = self.store.session_info(self.id)
        return self

    # -- messages
    def append(self, messages: Message | Sequence[Message]) -> list[Message]:
        """Store a batch atomically; returns the stored copies with seq and token counts.

        A tool result must answer a call made in the same batch or in the recent
        history; anything else is refused (``InvalidMessage``) before storing. A batch
        dated by its source (``dated``) moves ``updated_at`` to its time, else to now.
        """
        from threadline.messages import Message

        at = messages.at if isinstance(messages, Batch) else None
        batch = [messages] if isinstance(messages, Message) else list(messages)
        prepared = prepare_messages(self.model, batch, at=at)
        self._check_results_have_calls(prepared)
        stored = self.store.append_messages(self.id, prepared)
        if prepared.calls:
            self._recent_calls = prepared.calls
        info = self._info
        if stored and (stored[0].seq or 0) <= info.last_seq:
            self.refresh()  # a batch stored before: read the counters rather than add twice
        elif stored:  # the counters as this append left them, without reading them back
            self._info = info.replace(
                last_seq=max(info.last_seq, stored[-1].seq or 0),
                message_count=info.message_count + len(stored),
                total_tokens=info.total_tokens + sum(map(primary_tokens, stored)),
                updated_at=later(info.updated_at, append_time(prepared)),
            )
        return stored

    def _check_results_have_calls(self, batch: PreparedBatch) -> None:
        """Refuses a result whose call is neither in the batch nor in the recent history."""
        missing = [x for x in batch.unanswered if x not in self._recent_calls]
        for limit in RESULT_LOOKBACK:
            if not missing:
                return
            recent = self.tail(limit)
            earlier = {c.id for m in recent for c in m.tool_calls}
            missing = [x for x in missing if x not in earlier]
            if len(recent) < limit:
                break
        if missing:
            raise InvalidMessage(
                f"tool result for call {missing[0]!r} has no matching tool call in this batch "
                f"or the last {RESULT_LOOKBACK[-1]} messages of session {self.id}"
            )

    def messages(self, *, after_seq: int = 0, include_retracted: bool = False) -> list[Message]:
        """Every message in view after ``after_seq``, oldest first; with
        ``include_retracted``, the whole history (retracted messages and records too)."""
        return list(self.iter_messages(after_seq=after_seq, include_retracted=include_retracted))

    def iter_messages(
        self, *, after_seq: int = 0, batch: int = TAIL_BATCH, include_retracted: bool = False
    ) -> Iterator[Message]:
        while True:
            page = self.read_messages(
                after_seq=after_seq, limit=batch, include_retracted=include_retracted
            )
            yield from page
            if len(page) < batch:
                return
            after_seq = page[-1].seq or after_seq

    def read_messages(
        self, *, after_seq: int = 0, limit: int | None = None, include_retracted: bool = False
    ) -> list[Message]:
        """Oldest first: messages in view with seq > ``after_seq``, a fork's shared prefix
        included (use this, not ``store.read_messages``, which sees only the session's own
        and what was retracted)."""
        after_seq, limit = bounded(after_seq, "after_seq"), bounded_or_none(limit, "limit")
        return self._view(_chain_read, retraction.visible_read, limit, after_seq, include_retracted)

    def tail(
        self, limit: int, *, before_seq: int | None = None, include_retracted: bool = False
    ) -> list[Message]:
        """Newest first: up to ``limit`` messages in view with seq < ``before_seq``, through
        a fork's shared prefix."""
        limit, before_seq = bounded(limit, "limit"), bounded_or_none(before_seq, "before_seq")
        return self._view(
            _chain_tail, retraction.visible_tail, limit, before_seq, include_retracted
        )

    def _view(
        self,
        chain: Callable[[Store, list[_Segment], Any, Any], list[Message]],
        visible: Callable[[retraction.RawRead, retraction.Retractions, Any, Any], list[Message]],
        limit: int | None,
        bound: int | None,
        include_retracted: bool,
    ) -> list[Message]:
        """One read of the view: ``chain`` reads the history through the fork chain (a
        page of ``limit`` from ``bound``), ``visible`` steps it over what is retracted."""

        def raw(n: Any, at: Any) -> list[Message]:
            return chain(self.store, self.segments(), n, at)

        if include_retracted:
            return raw(limit, bound)
        index = self.retractions()
        while True:
            page = visible(raw, index, limit, bound)
            healed = retraction.with_found_records(self, index, page)
            if healed is None:
                return page
            index = self._read_with = healed

    # -- retraction (store/retraction.py): append-only removal from the view
    def retractions(self) -> retraction.Retractions:
        """What is out of this session's view: its own records (memo index) and, on a
        fork, its ancestors' records up to the fork point."""
        index = retraction.index_of(self)
        if len(self.segments()) > 1:
            if self._inherited is None:
                self._inherited = retraction.Retractions()
                for seg in self.segments()[1:]:
                    assert seg.upper is not None
                    memo = self.store.get_memo(seg.session_id)
                    found = retraction.Retractions.from_memo(memo).up_to(seg.upper)
                    self._inherited = self._inherited.joined(found)
            index = index.joined(self._inherited)
        self._read_with = index
        return index

    def retract(self, seqs: Sequence[int], *, then: Sequence[Message] = ()) -> list[Message]:
        """Take ``seqs`` out of the view by appending a retraction record (and ``then`` in
        the same batch); the history keeps them. Returns the stored record and ``then``."""
        return retraction.retract(self, seqs, then=then)

    def retract_all(self) -> Message | None:
        """Take every message now in view out of it (a "clear"); None when none is."""
        if not self.tail(1):
            return None
        self.refresh()
        return retraction.retract_ranges(self, [(1, self.last_seq)])[0]

    def hidden_after(self, seq: int) -> int:
        """How many seqs after ``seq`` are out of the view (retracted, or records), by the
        index the latest read through this handle used: what it read and this agree."""
        index = self._read_with if self._read_with is not None else self.retractions()
        return index.hidden_between(seq, self.last_seq)

    def shows_checkpoint(self, checkpoint: Checkpoint) -> bool:
        """Whether a window may show this checkpoint's summary (no later retraction
        took back a message it covers)."""
        return self.retractions().shows(checkpoint)

    def segments(self) -> list[_Segment]:
        """Where this session's view comes from, newest first: its own messages, then each
        ancestor's up to the fork point below it. One element for a root session."""
        if self._segments is None:
            self._segments = fork_segments(self.store, self._info)
        return self._segments

    def count(self) -> int:
        return self.store.count_messages(self.id)

    # -- checkpoints
    def add_checkpoint(
        self,
        *,
        covers_up_to: int,
        summary: str,
        metadata: dict[str, Any] | None = None,
        expect_previous: ExpectPrevious = ANY_PREVIOUS,
    ) -> Checkpoint:
        """See ``Store.add_checkpoint``: pass ``expect_previous`` to build on a known one.

        On a fork, building on an inherited checkpoint (one of an ancestor's) means
        "no checkpoint of its own yet", which is what the store checks.
        """
        if isinstance(expect_previous, int) and self.fork is not None:
            latest = self.latest_checkpoint()
            if latest is not None and latest.session_id != self.id and latest.id == expect_previous:
                expect_previous = None
        return self.store.add_checkpoint(
            self.id,
            covers_up_to=covers_up_to,
            summary=summary,
            metadata=metadata,
            expect_previous=expect_previous,
        )

    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint of the view: this session's own, else the newest of an
        ancestor's that covers only shared history (its ``session_id`` names the ancestor)."""
        own = self.store.latest_checkpoint(self.id)
        if own is not None or self.fork is None:
            return own
        inherited = _inherited_checkpoints(self.store, self.segments())
        return inherited[-1] if inherited else None

    def checkpoints(self) -> list[Checkpoint]:
        """Oldest first, a fork's inherited checkpoints before its own."""
        own = self.store.list_checkpoints(self.id)
        if self.fork is None:
            return own
        return _inherited_checkpoints(self.store, self.segments()) + own

    # -- scratchpad and memo
    def scratchpad_write(self, name: str, content: str) -> ScratchpadEntry:
        return self.store.scratchpad_write(self.id, name, content)

    def scratchpad_read(self, name: str) -> ScratchpadEntry | None:
        return self.store.scratchpad_read(self.id, name)

    def scratchpad_list(self, *, prefix: str = "") -> list[ScratchpadEntry]:
        return self.store.scratchpad_list(self.id, prefix=prefix)

    def get_memo(self) -> dict[str, Any]:
        return self.store.get_memo(self.id)

    def set_memo(self, memo: dict[str, Any]) -> None:
        """Replace the memo, keeping the store's own keys (``RESERVED_MEMO_PREFIX``: the
        retraction index, the compaction mark) that ``memo`` does not name, in one
        compare-and-set, so an application's memo never un-retracts anything."""

        def keep_reserved(old: dict[str, Any]) -> dict[str, Any]:
            kept = {k: v for k, v in old.items() if k.startswith(RESERVED_MEMO_PREFIX)}
            return {**kept, **memo}

        self.update_memo(keep_reserved)

    def update_memo(
        self, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Change the memo atomically (see ``update_memo``)."""
        return update_memo(self.store, self.id, change)

    # -- lifecycle
    def rename(self, title: str | None) -> None:
        self._info = self.store.rename_session(self.id, title)

    def delete(self, *, force: bool = False) -> None:
        """Delete the session. One with forks is refused (``SessionHasForks``) unless
        ``force``, which deletes its forks with it and overrides attach locks."""
        delete_session(self.store, self.id, force=force)

    @contextlib.contextmanager
    def attached(self, holder: LockHolder | None = None) -> Iterator[Session]:
        """Hold the attach lock for the block; ``SessionLocked`` if someone else has it."""
        held = self.store.acquire_lock(self.id, holder)
        try:
            yield self
        finally:
            self.store.release_lock(self.id, held)


# -- deleting: forks before their parents (``Session.delete``, ``store/fork.py``) ----


def all_sessions(store: Store) -> list[SessionInfo]:
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


def deletion_order(store: Store, session_ids: Sequence[str], *, force: bool) -> list[str]:
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


def delete_session(store: Store, session_id: str, *, force: bool = False) -> list[str]:
    """Delete a session by the fork rule above (``force`` also overrides attach locks,
    as ``Store.delete_session`` does); returns the ids deleted, forks first."""
    store.session_info(session_id)  # SessionNotFound, as Store.delete_session
    if not store.count_children([session_id])[session_id]:
        # a fork is listed under its parent: nothing listed under this one, no fork reads
        # from it, and the session list need not be read (a service deleting one session
        # of 10,000 reads one index entry, not 10,000 sessions)
        store.delete_sessions([session_id], force=force)
        return [session_id]
    order = deletion_order(store, [session_id], force=force)
    store.delete_sessions(order, force=force)
    return order


# -- forks: reads chain through the shared prefix ------------------------------------


@dataclass(frozen=True)
class _Segment:
    """One session's part of a view: its own messages with ``lower < seq <= upper``."""

    session_id: str
    lower: int
    """Its own fork seq (0 for a root): its own messages all come after it."""
    upper: int | None
    """The last seq of the view it gives (the smallest fork seq of the sessions above);
    ``None`` for the session itself."""


def fork_segments(store: Store, info: SessionInfo) -> list[_Segment]:
    """The chain from a session up through its ancestors, newest first. Each ancestor's
    share ends at the smallest fork seq below it: a fork of a fork at 20 of a fork at 40
    shares 20 messages of the root, not 40. An ancestor that is gone ends the chain with
    a ``CorruptRecordWarning`` (its share of the history is missing; the fork's own
    messages still read)."""
    segments: list[_Segment] = []
    upper: int | None = None
    seen: set[str] = set()
    current: SessionInfo | None = info
    while current is not None:
        fork = fork_point(current)
        segments.append(_Segment(current.id, fork.seq if fork else 0, upper))
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


def _chain_tail(
    store: Store, segments: list[_Segment], limit: int, before_seq: int | None
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


def _chain_read(
    store: Store, segments: list[_Segment], limit: int | None, after_seq: int
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


def _inherited_checkpoints(store: Store, segments: list[_Segment]) -> list[Checkpoint]:
    """The checkpoints a fork's view inherits: each ancestor's, oldest first, as far as
    they cover only history shared with the fork."""
    found: list[Checkpoint] = []
    for seg in reversed(segments[1:]):
        assert seg.upper is not None
        found.extend(store.list_checkpoints(seg.session_id))
        found = [c for c in found if c.covers_up_to <= seg.upper]
    return found


def check_title(title: str | None) -> str | None:
    if title is None:
        return None
    if not isinstance(title, str):
        raise UsageError(f"a title must be a string, got {type(title).__name__}")
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


def check_scratchpad_prefix(prefix: object) -> str:
    """A ``scratchpad_list`` prefix: text a name could start with (no NUL, at most as
    long as a name)."""
    if not isinstance(prefix, str) or len(prefix) > 256 or "\x00" in prefix:
        raise UsageError("a scratchpad name prefix must be text of at most 256 characters")
    return prefix


def prefix_bounds(prefix: str) -> tuple[str, str | None]:
    """``(low, high)`` with ``low <= name < high`` exactly for the names starting with
    ``prefix``, in code point order (UTF-8 byte order: SQLite's and PostgreSQL's "C"
    collation); ``high`` is None when no string is above them all."""
    chars = list(prefix)
    while chars:
        after = ord(chars.pop()) + 1
        if 0xD800 <= after <= 0xDFFF:  # surrogates are not text: the next character is
            after = 0xE000
        if after <= 0x10FFFF:
            return prefix, "".join(chars) + chr(after)
    return prefix, None


def id_prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)``: the session ids starting with ``prefix`` are exactly those with
    ``low <= id < high`` (ids are ASCII, so ``high`` always exists)."""
    low, high = prefix_bounds(prefix)
    assert high is not None
    return low, high


def check_scratchpad_entry(name: str, content: str) -> None:
    """What ``scratchpad_write`` stores: a name as above and text (a number written to a
    JSONL store's file would leave it unreadable)."""
    check_scratchpad_name(name)
    if not isinstance(content, str):
        raise UsageError(f"scratchpad content must be text, got {type(content).__name__}")


def check_checkpoint_fields(summary: str, metadata: dict[str, Any] | None) -> None:
    """A checkpoint's summary is text and its metadata a JSON object that reads back."""
    if not isinstance(summary, str):
        raise UsageError(f"a checkpoint summary must be text, got {type(summary).__name__}")
    check_json_object(metadata, "checkpoint metadata")


def check_json_object(value: dict[str, Any] | None, what: str) -> None:
    """``None``, or a dict with string keys whose values JSON holds as they are."""
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"{what} must be a JSON object (a dict with string keys)")
    problem = value_problem(value)
    if problem is not None:
        raise UsageError(f"{what}: {problem}")


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


def pick_unique(prefix: str, matches: list[str]) -> str:
    """The one session a prefix names, or a clear error."""
    if not matches:
        raise SessionNotFound(prefix)
    if len(matches) > 1:
        raise AmbiguousSessionId(prefix, matches)
    return matches[0]
