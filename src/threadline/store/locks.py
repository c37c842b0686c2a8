"""Attach locks: who holds a session (``LockHolder``: host, pid, lease) and whether that
holder still lives (``pid_alive``, ``process_state``); ``LockHolder.claim`` is the rule
every backend applies inside its atomic step."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from threadline.errors import CorruptRecord, SessionLocked
from threadline.stamps import utcnow
from threadline.store.checks import format_ts
from threadline.store.records import Record

DEFAULT_LOCK_LEASE = timedelta(minutes=10)
"""A lock not renewed for this long is stale even when its holder is on another host."""


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
    return process_state(pid) not in DEAD_STATES and not killed(pid)


DEAD_STATES = frozenset({"Z", "X", "x"})
"""Zombie, and dead (``X``, ``x``): gone but for its entry in the process table."""
SIGKILL_BIT = 1 << (9 - 1)
"""SIGKILL in ``/proc/<pid>/status``'s pending-signal masks (signal n is bit n-1)."""
PF_EXITING = 0x4
"""The kernel's per-task flag, in ``/proc/<pid>/stat``, of a process inside ``exit``."""


def killed(pid: int) -> bool:
    """Whether ``pid`` has been sent SIGKILL or is exiting: it still answers ``kill(pid,
    0)`` while the kernel frees its memory (a second or more for a large server on a busy
    host) but will never run again, so its lock must not hold anyone off meanwhile.
    False where there is no ``/proc`` to tell."""
    base = os.path.join(PROC_ROOT, str(pid))
    try:
        with open(os.path.join(base, "status"), encoding="ascii", errors="replace") as f:
            status = f.read()
        with open(os.path.join(base, "stat"), "rb") as f:
            stat_line = f.read()
    except OSError:
        return False
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("SigPnd", "ShdPnd"):
            try:
                if int(value.strip(), 16) & SIGKILL_BIT:
                    return True
            except ValueError:
                continue
    fields = stat_line[stat_line.rfind(b")") + 1 :].split()
    try:
        return len(fields) > 6 and bool(int(fields[6]) & PF_EXITING)
    except ValueError:
        return False


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
