"""Event logs kept in the store's engine, so every worker over one store sees every turn.

``SharedHub`` answers what ``EventHub`` answers (``log(sid)`` with ``publish``,
``last_id`` and ``follow``; ``sweep``; ``drop``) over an ``EventEngine``: a
PostgreSQL table (``events_postgres``) or one Redis stream per session
(``events_redis``). The engine gives each of a session's events the next integer id,
in one atomic step, so ids are the same on every worker and ``Last-Event-ID``
resumes on any of them. A follower waits on the engine's wake-up (``LISTEN/NOTIFY``,
``XREAD BLOCK``) in a thread of its own, and reads again at least every
``POLL_SECONDS`` so a wake-up lost to a reconnect costs at most that.

Bounds are the in-process hub's: ``capacity`` events per session (trimmed at each
publish), ``max_event_bytes`` per event (``bounded_body``), ``expire_seconds`` after
a session's last event, and ``max_bytes`` for all sessions (enforced by ``sweep``
where the engine can count bytes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from threadline.server.events import (
    KEEPALIVE_SECONDS,
    Event,
    body_frame,
    bounded_body,
    closes,
    frame,
)

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
"""A follower reads again this often even without a wake-up."""
FOLLOW_THREADS = 256
"""Followers reading and waiting at once, in threads of their own: not the loop's small
default executor, which a few dozen waiting followers would fill."""
_POOL = ThreadPoolExecutor(FOLLOW_THREADS, thread_name_prefix="threadline-follow")


@dataclass(frozen=True, slots=True)
class Bounds:
    capacity: int
    max_event_bytes: int
    max_bytes: int
    expire_seconds: float


class EventEngine(Protocol):
    """What a store's engine does for ``SharedHub``; every call may block."""

    def append(self, session_id: str, name: str, body: str) -> int:
        """Store one event, trim the session to ``capacity``; its id (1 the first)."""
        ...

    def read(self, session_id: str, after: int) -> tuple[list[tuple[int, str, str]], int, int]:
        """Events with id > ``after`` as (id, name, body), oldest first; the first kept
        id (0: none kept) and the last id given (0: none)."""
        ...

    def wait(self, session_id: str, after: int, timeout: float) -> None:
        """Return when the session may have an event after ``after``, or on ``timeout``."""
        ...

    def expire(self) -> int:
        """Drop what is past its age or over the byte budget; the events dropped."""
        ...

    def close(self) -> None: ...


class SharedLog:
    """One session's events in the engine; the ``EventLog`` face the runner uses."""

    def __init__(self, engine: EventEngine, session_id: str, bounds: Bounds) -> None:
        self._engine = engine
        self.session_id = session_id
        self._bounds = bounds

    @property
    def last_id(self) -> int:
        return self._engine.read(self.session_id, 2**62)[2]

    def publish(self, name: str, data: dict[str, Any]) -> Event:
        """Append the event; an engine that is away costs the event (id 0), not the turn
        that publishes it (the store keeps the turn itself)."""
        body = bounded_body(data, self._bounds.max_event_bytes)
        try:
            id = self._engine.append(self.session_id, name, body)
        except Exception as exc:
            logger.warning("event %s of %s not published: %s", name, self.session_id, exc)
            id = 0
        return Event(id, name, body_frame(name, body, id))

    def after(self, last_id: int) -> tuple[list[Event], bool]:
        """As ``EventLog.after``: the events after ``last_id``, and whether some were lost."""
        rows, first, last = self._engine.read(self.session_id, last_id)
        if last_id > last:
            rows, first, last = self._engine.read(self.session_id, 0)
            return [_event(*row) for row in rows], True
        lost = bool(first) and last_id < first - 1
        return [_event(*row) for row in rows], lost

    async def follow(self, last_id: int, *, until: str | None = None) -> AsyncIterator[str]:
        """SSE frames after ``last_id``, forever (or through the first ``until`` event)."""
        loop = asyncio.get_running_loop()
        events, lost = await loop.run_in_executor(_POOL, self.after, last_id)
        if lost:
            yield frame("events_lost", {"after": last_id})
            last_id = 0
        quiet = 0.0
        while True:
            quiet = 0.0 if events else quiet + POLL_SECONDS
            for event in events:
                yield event.sse()
                last_id = event.id
                if closes(event, until):
                    return
            if quiet >= KEEPALIVE_SECONDS:
                quiet = 0.0
                yield ": keep-alive\n\n"
            if not events:  # the engine's wake-up, or POLL_SECONDS
                wait = self._engine.wait
                await loop.run_in_executor(_POOL, wait, self.session_id, last_id, POLL_SECONDS)
            events, _ = await loop.run_in_executor(_POOL, self.after, last_id)


def _event(id: int, name: str, body: str) -> Event:
    return Event(id, name, body_frame(name, body, id))


class SharedHub:
    """Every session's ``SharedLog`` over one engine; see the module docstring."""

    shared = True

    def __init__(self, engine: EventEngine, bounds: Bounds) -> None:
        self.engine = engine
        self.bounds = bounds
        self.capacity = bounds.capacity

    def log(self, session_id: str) -> SharedLog:
        return SharedLog(self.engine, session_id, self.bounds)

    def sweep(self, keep: Collection[str]) -> list[str]:
        """Expire old events (by age and bytes); no session is forgotten by name: the
        engine's expiry forgets them, for every worker at once."""
        self.engine.expire()
        return []

    def drop(self, session_id: str) -> None:
        """Kept: followers on other workers still have to read its ``session_deleted``."""

    def close(self) -> None:
        self.engine.close()
