"""Retention: which sessions a user's rules delete, and deleting them safely.

Two rules, as in the agent-shell reference (``retention_days``,
``max_storage_bytes``): a session not updated for longer than a cut-off goes,
and when the sessions together hold more than a cap, the least recently
updated go until the rest fit. Planning and applying are separate steps, so a
dry run shows exactly what a real run would delete, and a person can confirm
in between.

History is append-only (invariant 1) except for an explicit delete or a rule
the user configured; these rules are that exception, so they are careful:

* a session some live process is attached to is never deleted; it is reported
  as skipped (and, for the storage cap, still counts towards the total);
* ``apply_cleanup`` takes the session's attach lock itself before deleting, and
  skips a session that changed after it was planned, so an agent that resumes a
  session between the plan and the delete keeps it.

A session's size is the bytes of its messages as stored (the serialised JSON
of each message). The protocol has no size method, so ``session_bytes`` asks
the backend for one when it has it (``session_bytes(session_id)``) and
otherwise reads the session's messages once.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from threadline.errors import SessionLocked, SessionNotFound, ThreadlineError, UsageError
from threadline.messages import Message
from threadline.stamps import utcnow
from threadline.store.checks import MAX_PAGE_SIZE, TAIL_BATCH, validate_agent
from threadline.store.fork import children_of, descendants
from threadline.store.locks import LockHolder
from threadline.store.protocol import Store
from threadline.store.session_info import SessionInfo

SIZE_METHOD = "session_bytes"
"""The optional backend method ``session_bytes(session_id) -> int`` used when present."""

DURATION_UNITS: dict[str, timedelta] = {
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}
"""``--older-than`` units; ``m`` is minutes (months vary in length, so there is none)."""

SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
"""``--max-storage`` units: SI (``MB`` = 10^6 bytes) and IEC (``MiB`` = 2^20 bytes)."""

_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)([a-z]+)")
_DURATION_RE = re.compile(r"(?:\d+(?:\.\d+)?[a-z]+)+")
CHANGED = "changed since it was planned"
GONE = "already deleted"
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


# -- parsing the rules --------------------------------------------------------------


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``2w``, ``45s``, or a sum such as ``1d12h``."""
    raw = "".join(text.lower().split())
    units = ", ".join(DURATION_UNITS)
    if not raw:
        raise UsageError("empty duration; use a number and a unit, e.g. 90d")
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        raise UsageError(
            f"duration {text!r} has no unit; use e.g. {raw}d (units: {units}; m is minutes)"
        )
    if not _DURATION_RE.fullmatch(raw):
        raise UsageError(f"cannot read duration {text!r}; use e.g. 90d, 12h, 30m or 2w")
    total = timedelta()
    for number, unit in _DURATION_PART_RE.findall(raw):
        if unit not in DURATION_UNITS:
            raise UsageError(
                f"unknown unit {unit!r} in duration {text!r} (units: {units}; m is minutes)"
            )
        try:
            total += DURATION_UNITS[unit] * float(number)
        except OverflowError:
            raise UsageError(
                f"duration {text!r} is too long (the most is {timedelta.max.days:,}d)"
            ) from None
    if total <= timedelta():
        raise UsageError(f"duration {text!r} must be longer than zero")
    return total


def parse_size(text: str) -> int:
    """``50MB`` (10^6), ``10MiB`` (2^20), ``500KB``, ``1.5GB`` or plain bytes, in bytes."""
    raw = text.strip().lower()
    match = _SIZE_RE.fullmatch(raw)
    if match is None:
        raise UsageError(f"cannot read size {text!r}; use e.g. 50MB, 10MiB, 500KB or 1048576")
    number, unit = match.groups()
    if unit not in SIZE_UNITS:
        raise UsageError(
            f"unknown unit {unit!r} in size {text!r} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    value = float(number) * SIZE_UNITS[unit]
    if not math.isfinite(value):
        raise UsageError(f"size {text!r} is too large")
    size = int(value)
    if size <= 0:
        raise UsageError(f"size {text!r} must be more than zero bytes")
    return size


def format_size(n: int) -> str:
    """Bytes as people read them, in the SI units ``parse_size`` reads back."""
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}"
    return f"{n} B"  # pragma: no cover - the loop always returns


def format_duration(delta: timedelta) -> str:
    """The largest whole unit that fits: ``90d``, ``12h``, ``2w``."""
    seconds = delta.total_seconds()
    for unit in ("w", "d", "h", "m", "s"):
        size = DURATION_UNITS[unit].total_seconds()
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


# -- sizes ----------------------------------------------------------------------------


def message_bytes(m: Message) -> int:
    """A message's stored size: its JSON without the seq, UTF-8 (as backends store it)."""
    return len(m.model_dump_json(exclude={"seq"}).encode("utf-8"))


def session_bytes(store: Store, session_id: str) -> int:
    """The bytes a session's messages take: the backend's own answer when it has one."""
    method: Any = getattr(store, SIZE_METHOD, None)
    if callable(method):
        return int(method(session_id))
    total = 0
    after = 0
    while True:
        page = store.read_messages(session_id, after_seq=after, limit=TAIL_BATCH)
        total += sum(message_bytes(m) for m in page)
        if len(page) < TAIL_BATCH:
            return total
        after = page[-1].seq or after


def iter_sessions(store: Store, *, agent: str | None = None) -> Iterator[SessionInfo]:
    """Every session, newest updated first, page by page; each id once."""
    seen: set[str] = set()
    offset = 0
    while True:
        page = store.list_sessions(agent=agent, limit=MAX_PAGE_SIZE, offset=offset)
        for info in page.items:
            if info.id not in seen:
                seen.add(info.id)
                yield info
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return


# -- planning -------------------------------------------------------------------------


class Reason(StrEnum):
    """Which rule selected a session."""

    AGE = "age"
    STORAGE = "storage"


@dataclass(frozen=True, slots=True)
class Victim:
    """A session a rule selected, with what deleting it frees."""

    info: SessionInfo
    bytes: int
    reason: Reason


@dataclass(frozen=True, slots=True)
class Skipped:
    """A session a rule selected but that was left alone, and why."""

    info: SessionInfo
    why: str
    holder: LockHolder | None = None


@dataclass(slots=True)
class CleanupPlan:
    """What a cleanup would delete. ``freed_bytes`` counts the victims only."""

    victims: list[Victim] = field(default_factory=list)
    skipped_locked: list[Skipped] = field(default_factory=list)
    total_bytes: int | None = None
    """All candidate sessions' bytes before cleanup; measured only for the storage rule."""
    older_than: timedelta | None = None
    max_storage_bytes: int | None = None
    sessions_seen: int = 0

    @property
    def freed_bytes(self) -> int:
        return sum(v.bytes for v in self.victims)

    @property
    def empty(self) -> bool:
        return not self.victims


@dataclass(slots=True)
class CleanupResult:
    """What a cleanup did."""

    deleted: list[Victim] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def freed_bytes(self) -> int:
        return sum(v.bytes for v in self.deleted)


ScanProgress = Callable[[int, int], None]
"""``(sessions measured so far, sessions to measure)`` while planning."""
ApplyProgress = Callable[[Victim], None]
"""Called once per planned victim, after it was deleted or skipped."""


def _live_holder(store: Store, session_id: str, now: datetime) -> LockHolder | None:
    holder = store.lock_holder(session_id)
    return holder if holder is not None and not holder.is_stale(now) else None


def _age_cut(now: datetime, older_than: timedelta | None) -> datetime | None:
    """``now - older_than``; an age reaching back before year 1 cuts nothing (no overflow)."""
    if older_than is None:
        return None
    try:
        return now - older_than
    except OverflowError:
        return datetime.min.replace(tzinfo=now.tzinfo)


def _scratchpad_written_since(store: Store, session_id: str, cut: datetime) -> bool:
    """Framework faces (LangGraph checkpoints and stores, ADK state and memory) keep
    their state in the scratchpad, which does not move ``updated_at``: a write there
    since ``cut`` makes the session recent, or age-based cleanup would delete a thread
    in daily use."""
    try:
        entries = store.scratchpad_list(session_id)
    except SessionNotFound:
        return False
    return any(e.updated_at >= cut for e in entries)


def plan_cleanup(
    store: Store,
    *,
    older_than: timedelta | None,
    max_storage_bytes: int | None,
    now: datetime | None = None,
    agent: str | None = None,
    progress: ScanProgress | None = None,
) -> CleanupPlan:
    """The sessions the rules select, oldest updated first; reads, never writes.

    Age: every session whose ``updated_at`` is before ``now - older_than`` and whose
    scratchpad was not written since.
    Storage: if the sessions left after the age rule hold more than
    ``max_storage_bytes``, the least recently updated go until the rest fit;
    a locked session cannot go, so it stays in the total and the next one goes.
    With ``agent``, only that agent's sessions are considered, and the cap
    applies to them alone. ``now`` moves the age cut (for tests and previews);
    whether a lock is live is always judged at the real time.
    """
    if older_than is not None and older_than <= timedelta():
        raise UsageError("older_than must be longer than zero")
    if max_storage_bytes is not None and max_storage_bytes <= 0:
        raise UsageError("max_storage_bytes must be more than zero")
    if agent is not None:
        validate_agent(agent)
    now = now or utcnow()
    plan = CleanupPlan(older_than=older_than, max_storage_bytes=max_storage_bytes)
    if older_than is None and max_storage_bytes is None:
        return plan
    sessions = list(iter_sessions(store, agent=agent))
    sessions.sort(key=lambda i: (i.updated_at, i.id))  # oldest first
    plan.sessions_seen = len(sessions)
    cut = _age_cut(now, older_than)
    by_age = [i for i in sessions if cut is not None and i.updated_at < cut]
    if cut is not None:  # a stale-looking session may be live through its scratchpad
        live = {i.id for i in by_age if _scratchpad_written_since(store, i.id, cut)}
        by_age = [i for i in by_age if i.id not in live]
    by_age_ids = {i.id for i in by_age}
    rest = [i for i in sessions if i.id not in by_age_ids]

    measure = sessions if max_storage_bytes is not None else by_age
    sizes: dict[str, int] = {}
    for done, info in enumerate(measure, start=1):
        try:
            sizes[info.id] = session_bytes(store, info.id)
        except SessionNotFound:
            sizes[info.id] = 0  # deleted meanwhile; nothing to free
        if progress is not None:
            progress(done, len(measure))

    for info in by_age:
        holder = _safe_holder(store, info.id)
        if holder is not None:
            plan.skipped_locked.append(Skipped(info, f"locked by {holder}", holder))
        else:
            plan.victims.append(Victim(info, sizes[info.id], Reason.AGE))

    if max_storage_bytes is not None:
        plan.total_bytes = sum(sizes.values())
        remaining = plan.total_bytes - plan.freed_bytes
        for info in rest:
            if remaining <= max_storage_bytes:
                break
            holder = _safe_holder(store, info.id)
            if holder is not None:
                plan.skipped_locked.append(Skipped(info, f"locked by {holder}", holder))
                continue
            plan.victims.append(Victim(info, sizes[info.id], Reason.STORAGE))
            remaining -= sizes[info.id]
    _keep_shared_history(plan, sessions)
    return plan


def _keep_shared_history(plan: CleanupPlan, sessions: list[SessionInfo]) -> None:
    """A session whose forks stay is left alone: they read their shared history from it
    (``store/fork.py``). A session goes with its forks only when they all go too."""
    kids = children_of(sessions)
    if not kids:
        return
    while True:
        going = {v.info.id for v in plan.victims}
        kept = [v for v in plan.victims if all(f in going for f in descendants(kids, v.info.id))]
        if len(kept) == len(plan.victims):
            return
        for v in plan.victims:
            if v not in kept:
                staying = [f for f in descendants(kids, v.info.id) if f not in going]
                plan.skipped_locked.append(
                    Skipped(v.info, f"forks that stay share its history: {', '.join(staying)}")
                )
        plan.victims = kept


def _safe_holder(store: Store, session_id: str) -> LockHolder | None:
    """A live lock holder, judged at the real time (``now`` only moves the age cut)."""
    try:
        return _live_holder(store, session_id, utcnow())
    except SessionNotFound:
        return None


# -- applying -------------------------------------------------------------------------


def apply_cleanup(
    store: Store, plan: CleanupPlan, *, progress: ApplyProgress | None = None
) -> CleanupResult:
    """Delete the plan's victims; never one a live process is attached to.

    For each victim: skip it if someone holds its lock; take the lock (so no
    agent attaches while it goes); skip it if it changed since it was planned
    (new messages, a rename); then delete it. Sessions already gone are
    skipped quietly. Store failures other than these propagate.
    """
    result = CleanupResult()
    me = LockHolder.current()
    for victim in plan.victims:
        skipped = _delete_one(store, victim, me)
        if skipped is None:
            result.deleted.append(victim)
        else:
            result.skipped.append(skipped)
        if progress is not None:
            progress(victim)
    return result


def _delete_one(store: Store, victim: Victim, me: LockHolder) -> Skipped | None:
    """Delete one victim, or say why not (``None`` means deleted)."""
    sid = victim.info.id
    try:
        holder = _live_holder(store, sid, utcnow())
        if holder is not None:
            return Skipped(victim.info, f"locked by {holder}", holder)
        if _changed(store.session_info(sid), victim.info):
            return Skipped(victim.info, CHANGED)
        store.acquire_lock(sid, me)
        deleted = False
        try:
            if _changed(store.session_info(sid), victim.info):
                return Skipped(victim.info, CHANGED)
            store.delete_session(sid, force=True)  # the lock we hold is the only one
            deleted = True
        finally:
            if not deleted:
                _release_quietly(store, sid, me)
    except SessionNotFound:
        return Skipped(victim.info, GONE)
    except SessionLocked as exc:
        holder = exc.holder if isinstance(exc.holder, LockHolder) else None
        return Skipped(victim.info, f"locked by {exc.holder}", holder)
    return None


def _changed(now: SessionInfo, planned: SessionInfo) -> bool:
    return now.last_seq != planned.last_seq or now.updated_at > planned.updated_at


def _release_quietly(store: Store, session_id: str, holder: LockHolder) -> None:
    with contextlib.suppress(ThreadlineError):  # the first error is the one worth reporting
        store.release_lock(session_id, holder)


def describe(result: CleanupResult) -> str:
    """One line for a start-up notice: ``deleted 3 sessions (1.2 MB) by retention``."""
    n = len(result.deleted)
    line = f"deleted {n} session{'s' if n != 1 else ''} ({format_size(result.freed_bytes)})"
    reasons = sorted({v.reason.value for v in result.deleted})
    if reasons:
        line += " by the " + " and ".join(reasons) + " rule" + ("s" if len(reasons) > 1 else "")
    if result.skipped:
        line += f"; {len(result.skipped)} skipped"
    return line


__all__ = [
    "ApplyProgress",
    "CleanupPlan",
    "CleanupResult",
    "Reason",
    "ScanProgress",
    "Skipped",
    "Victim",
    "apply_cleanup",
    "describe",
    "format_duration",
    "format_size",
    "iter_sessions",
    "message_bytes",
    "parse_duration",
    "parse_size",
    "plan_cleanup",
    "session_bytes",
]
