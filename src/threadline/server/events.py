"""Per-session event logs and their Server-Sent Events stream.

A turn runs in a worker thread and publishes events (``turn_started``,
``text_delta``, ``tool_call``, ``tool_result``, ``context_compacted``,
``error``, ``turn_finished``); SSE clients read them from an async handler.
Every event of a session gets the next integer id, and recent events are kept
in memory, so a client that reconnects with ``Last-Event-ID: N`` receives
exactly the events after N. Events no longer kept (or from before a restart)
are gone: the client then gets an ``events_lost`` event and reloads the session
with ``session.get``, which the store answers durably.

What is kept is bounded three ways, so memory does not grow with the number of
sessions a server has seen: each session keeps its last ``capacity`` events; an
event is stored as its SSE frame, and one over ``max_event_bytes`` has its long
strings cut (and says ``"truncated": true``); and all logs together hold at most
``max_bytes``, the least recently used giving up their oldest events first.
``EventHub.sweep`` forgets the logs of sessions no agent is cached for (evicted
or never prompted here) that nobody follows and nobody touched since the sweep
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from typing import Any

KEEPALIVE_SECONDS = 15.0
DEFAULT_MAX_EVENT_BYTES = 64 * 1024
"""An event's frame is cut to this (a tool call's arguments, a long reply's text)."""
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
"""All sessions' kept events together, in bytes."""
EVENT_OVERHEAD = 120
"""Bytes an event costs beyond its frame's text (the object, its id), for the budget."""
LOG_OVERHEAD = 1024
"""Bytes an empty log costs (its deque, lock and waiters), for the budget."""
CUT_SHARE = 4
"""An oversized event's strings are cut to ``max_event_bytes // CUT_SHARE`` characters."""
KEPT_STRING = 200
"""Strings an event keeps when even cut strings do not fit (ids, names)."""


ENDS_STREAM = "session_deleted"
"""Published when the session is deleted: every follower's stream ends with it."""
INTERRUPTED = "interrupted"
"""Published when the server running a turn died: its ``turn_finished`` will never come,
so a stream waiting for that (``until=turn_finished``) ends with this instead."""


def frame(name: str, data: dict[str, Any], id: int | None = None) -> str:
    """One SSE frame; without an id for a notice that is not in the log."""
    return body_frame(name, json.dumps(data, default=str, separators=(",", ":")), id)


def body_frame(name: str, body: str, id: int | None) -> str:
    head = "" if id is None else f"id: {id}\n"
    return f"{head}event: {name}\ndata: {body}\n\n"


def bounded_body(data: dict[str, Any], limit: int) -> str:
    """``data`` as JSON of at most ``limit`` characters (ASCII, so bytes): as it is when it
    fits; else with every string cut to ``limit // CUT_SHARE`` characters; else only its
    short top-level fields. Either cut adds ``"truncated": true``."""
    body = json.dumps(data, default=str, separators=(",", ":"))
    if len(body) <= limit:
        return body
    cut = _cut_strings(data, max(limit // CUT_SHARE, 1))
    cut["truncated"] = True
    body = json.dumps(cut, default=str, separators=(",", ":"))
    if len(body) <= limit:
        return body
    small = {
        k: v
        for k, v in data.items()
        if v is None
        or isinstance(v, bool | int | float)
        or (isinstance(v, str) and len(v) <= KEPT_STRING)
    }
    small["truncated"] = True
    body = json.dumps(small, default=str, separators=(",", ":"))
    return body if len(body) <= limit else '{"truncated":true}'


def _cut_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "\u2026"
    if isinstance(value, dict):
        return {str(k): _cut_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut_strings(v, limit) for v in value]
    return value


def closes(event: Event, until: str | None) -> bool:
    """Whether a stream following through ``until`` ends with ``event``."""
    return event.name in (ENDS_STREAM, INTERRUPTED) or event.name == until


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    name: str
    text: str
    """The SSE frame, as sent."""

    @property
    def data(self) -> dict[str, Any]:
        body = self.text.partition("\ndata: ")[2].rstrip("\n")
        value: dict[str, Any] = json.loads(body)
        return value

    @property
    def size(self) -> int:
        return len(self.text) + EVENT_OVERHEAD

    def sse(self) -> str:
        return self.text


class EventLog:
    """One session's recent events; thread-safe to publish, async to follow.

    ``hub`` (the ``EventHub`` it belongs to) is told how its size changes, so the hub
    can hold all logs to one budget."""

    def __init__(
        self,
        capacity: int,
        *,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        hub: EventHub | None = None,
        session_id: str = "",
    ) -> None:
        self.session_id = session_id
        self._events: deque[Event] = deque()
        self.capacity = capacity
        self.max_event_bytes = max_event_bytes
        self.bytes = 0
        """What its events cost (``Event.size``), for the hub's budget."""
        self._hub = hub
        self._next_id = 1
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @property
    def last_id(self) -> int:
        with self._lock:
            return self._next_id - 1

    @property
    def followed(self) -> bool:
        """Whether an SSE stream follows this log now."""
        with self._lock:
            return bool(self._waiters)

    @property
    def count(self) -> int:
        """Events kept now. (No ``__len__``: an empty log must not be falsy.)"""
        with self._lock:
            return len(self._events)

    def publish(self, name: str, data: dict[str, Any]) -> Event:
        body = bounded_body(data, self.max_event_bytes)
        with self._lock:
            event = Event(self._next_id, name, body_frame(name, body, self._next_id))
            self._next_id += 1
            self._events.append(event)
            grown = event.size
            while len(self._events) > self.capacity:
                grown -= self._events.popleft().size
            self.bytes += grown
            waiters = list(self._waiters)
        if self._hub is not None:
            self._hub.resized(self, grown)
        for loop, flag in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: its client is gone
                loop.call_soon_threadsafe(flag.set)
        return event

    def drop_oldest(self) -> int:
        """Forget the oldest event (the hub's budget is spent); the bytes that freed."""
        with self._lock:
            if not self._events:
                return 0
            freed = self._events.popleft().size
            self.bytes -= freed
            return freed

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
                    if closes(event, until):
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
    """The event logs of all sessions, made on first use, within one byte budget
    (see the module docstring)."""

    def __init__(
        self,
        capacity: int,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        if max_event_bytes * 2 > max_bytes:
            raise ValueError("the event hub's budget must hold at least two of its largest events")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.max_event_bytes = max_event_bytes
        self.bytes = 0
        """What all logs cost now: their events plus ``LOG_OVERHEAD`` each."""
        self._logs: dict[str, EventLog] = {}
        self._holding: OrderedDict[str, EventLog] = OrderedDict()
        """The logs that hold events, the least recently published to first."""
        self._touched: dict[str, int] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def log(self, session_id: str) -> EventLog:
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                log = EventLog(
                    self.capacity,
                    max_event_bytes=self.max_event_bytes,
                    hub=self,
                    session_id=session_id,
                )
                self._logs[session_id] = log
                self.bytes += LOG_OVERHEAD
            self._touched[session_id] = self._generation
            return log

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._logs

    @property
    def count(self) -> int:
        """Logs kept now. (No ``__len__``: ``hub or EventHub(...)`` must keep an empty hub.)"""
        with self._lock:
            return len(self._logs)

    def resized(self, log: EventLog, grown: int) -> None:
        """``log`` grew by ``grown`` bytes: while over budget, the logs published to least
        recently give up their oldest events (the log itself keeps its newest). O(1) per
        event dropped. Logs are forgotten only by ``sweep`` and ``drop``: a running turn
        may hold one."""
        with self._lock:
            if self._logs.get(log.session_id) is not log:
                return  # forgotten meanwhile: its bytes left the budget with it
            self.bytes += grown
            self._holding[log.session_id] = log
            self._holding.move_to_end(log.session_id)
            while self.bytes > self.max_bytes:
                session_id, oldest = next(iter(self._holding.items()))
                if oldest is log and oldest.count <= 1:
                    return  # only its newest event is left to keep
                self.bytes -= oldest.drop_oldest()
                if not oldest.count:
                    del self._holding[session_id]

    def sweep(self, keep: Collection[str]) -> list[str]:
        """Forget the logs of sessions not in ``keep`` (the ones with a cached agent) that
        nobody follows and nobody touched since the previous sweep: a stream that has just
        looked its log up keeps it. Returns the ids forgotten."""
        with self._lock:
            self._generation += 1
            stale = [
                sid
                for sid, log in self._logs.items()
                if sid not in keep
                and self._touched.get(sid, -1) < self._generation - 1
                and not log.followed
            ]
            for sid in stale:
                self._forget(sid)
            return stale

    def drop(self, session_id: str) -> None:
        with self._lock:
            if session_id in self._logs:
                self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        log = self._logs.pop(session_id)
        self._holding.pop(session_id, None)
        self._touched.pop(session_id, None)
        self.bytes -= log.bytes + LOG_OVERHEAD
