"""Per-session event logs and their Server-Sent Events stream.

A turn runs in a worker thread and publishes events (``turn_started``,
``text_delta``, ``tool_call``, ``tool_result``, ``context_compacted``,
``error``, ``turn_finished``); SSE clients read them from an async handler.
Every event of a session gets the next integer id, and the last ``EVENT_BUFFER``
are kept in memory, so a client that reconnects with ``Last-Event-ID: N``
receives exactly the events after N. Events older than the buffer (or from
before a restart) are gone: the client then gets an ``events_lost`` event and
reloads the session with ``session.get``, which the store answers durably.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

KEEPALIVE_SECONDS = 15.0


ENDS_STREAM = "session_deleted"
"""Published when the session is deleted: every follower's stream ends with it."""


def frame(name: str, data: dict[str, Any], id: int | None = None) -> str:
    """One SSE frame; without an id for a notice that is not in the log."""
    body = json.dumps(data, default=str, separators=(",", ":"))
    head = "" if id is None else f"id: {id}\n"
    return f"{head}event: {name}\ndata: {body}\n\n"


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    name: str
    data: dict[str, Any]

    def sse(self) -> str:
        return frame(self.name, self.data, self.id)


class EventLog:
    """One session's recent events; thread-safe to publish, async to follow."""

    def __init__(self, capacity: int) -> None:
        self._events: deque[Event] = deque(maxlen=capacity)
        self._next_id = 1
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @property
    def last_id(self) -> int:
        with self._lock:
            return self._next_id - 1

    def publish(self, name: str, data: dict[str, Any]) -> Event:
        with self._lock:
            event = Event(self._next_id, name, data)
            self._next_id += 1
            self._events.append(event)
            waiters = list(self._waiters)
        for loop, flag in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: its client is gone
                loop.call_soon_threadsafe(flag.set)
        return event

    def after(self, last_id: int) -> tuple[list[Event], bool]:
        """Events with id > ``last_id``, and whether some events were lost to the client.

        Lost: dropped from the full buffer, or ``last_id`` is ahead of this log (it
        was given by an earlier run of the server): then every buffered event is
        new to the client and all of them are returned."""
        with self._lock:
            if last_id >= self._next_id:
                return list(self._events), True
            events = [e for e in self._events if e.id > last_id]
            first = self._events[0].id if self._events else self._next_id
            lost = last_id < first - 1
        return events, lost

    async def follow(self, last_id: int, *, until: str | None = None) -> AsyncIterator[str]:
        """SSE frames after ``last_id``, forever (or through the first ``until`` event)."""
        loop = asyncio.get_running_loop()
        flag = asyncio.Event()
        waiter = (loop, flag)
        with self._lock:
            self._waiters.add(waiter)
        try:
            events, lost = self.after(last_id)
            if lost:
                yield frame("events_lost", {"after": last_id})
                last_id = 0
            while True:
                for event in events:
                    yield event.sse()
                    last_id = event.id
                    if event.name == ENDS_STREAM or (until is not None and event.name == until):
                        return
                flag.clear()
                events, _ = self.after(last_id)
                if events:
                    continue
                try:
                    await asyncio.wait_for(flag.wait(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                events, _ = self.after(last_id)
        finally:
            with self._lock:
                self._waiters.discard(waiter)


class EventHub:
    """The event logs of all sessions, made on first use."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._logs: dict[str, EventLog] = {}
        self._lock = threading.Lock()

    def log(self, session_id: str) -> EventLog:
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                log = self._logs[session_id] = EventLog(self.capacity)
            return log

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._logs.pop(session_id, None)
