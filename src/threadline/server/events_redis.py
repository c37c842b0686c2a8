"""Events in Redis: one stream per session (``XADD`` trimmed to ``capacity``, ``XREAD
BLOCK`` to wait), its entry ids ``N-0`` with ``N`` from a per-session counter, so an
event's id is the same integer on every worker. Both keys expire ``expire_seconds``
after the session's last event."""

from __future__ import annotations

from typing import Any

import redis

from threadline.server.shared_events import FOLLOW_THREADS, Bounds

APPENDERS = 64
"""Connections beyond one per follower thread, for the turns publishing at once."""
APPEND = """
local n = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], n .. '-0', 'name', ARGV[2], 'body', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return n
"""


POOL_WAIT_SECONDS = 30.0
"""How long an event call waits for a connection of the pool when all are in use."""


class RedisEvents:
    """``EventEngine`` under the Redis store's key prefix, on a pool of its own to the
    store's server (the store's client's connection settings): every follower holds a
    connection while it waits in ``XREAD BLOCK``, which would exhaust the store's pool
    (100 connections, and then an error) under a few dozen followers. This pool has a
    connection for each follower thread and makes a call wait for one, not fail."""

    def __init__(self, client: redis.Redis, prefix: str, bounds: Bounds) -> None:
        shared = client.connection_pool
        pool = redis.BlockingConnectionPool(  # type: ignore[no-untyped-call]
            connection_class=shared.connection_class,
            max_connections=FOLLOW_THREADS + APPENDERS,
            timeout=POOL_WAIT_SECONDS,
            **shared.connection_kwargs,
        )
        self._r = redis.Redis(connection_pool=pool)
        self._prefix = prefix
        self._bounds = bounds
        self._append = self._r.register_script(APPEND)

    def _keys(self, session_id: str) -> tuple[str, str]:
        stream = f"{self._prefix}events:{session_id}"
        return stream, stream + ":n"

    def append(self, session_id: str, name: str, body: str) -> int:
        ttl = max(int(self._bounds.expire_seconds * 1000), 1)
        args: list[str | int] = [self._bounds.capacity, name, body, ttl]
        return int(self._append(keys=list(self._keys(session_id)), args=args))

    def read(self, session_id: str, after: int) -> tuple[list[tuple[int, str, str]], int, int]:
        stream, counter = self._keys(session_id)
        pipe = self._r.pipeline(transaction=True)
        pipe.xrange(stream, f"({after}-0", "+")
        pipe.xrange(stream, "-", "+", count=1)
        pipe.get(counter)
        entries, first, last = pipe.execute()
        rows = [_row(id, fields) for id, fields in entries]
        first_id = _id(first[0][0]) if first else 0
        return rows, first_id, int(last or 0)

    def wait(self, session_id: str, after: int, timeout: float) -> None:
        stream, _ = self._keys(session_id)
        self._r.xread({stream: f"{after}-0"}, count=1, block=max(int(timeout * 1000), 1))

    def expire(self) -> int:
        """Keys expire by their TTL and streams are capped at each ``XADD``."""
        return 0

    def close(self) -> None:
        self._r.close()
        self._r.connection_pool.disconnect()


def _id(raw: bytes | str) -> int:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return int(text.partition("-")[0])


def _row(raw_id: bytes | str, fields: dict[Any, Any]) -> tuple[int, str, str]:
    name = fields.get(b"name", fields.get("name", b""))
    body = fields.get(b"body", fields.get("body", b"{}"))
    as_text = [v.decode() if isinstance(v, bytes) else str(v) for v in (name, body)]
    return _id(raw_id), as_text[0], as_text[1]


def survey(client: Any, prefix: str) -> tuple[int, int, int, float, int] | None:
    """Events and sessions (streams) kept, read only; bytes, age and room are not
    counted (each stream has its own cap and TTL, and Redis frees what it trims),
    except that a stream without a TTL, which would never expire, counts as
    infinitely old."""
    events = sessions = 0
    age = 0.0
    for key in client.scan_iter(match=f"{prefix}events:*", count=500):
        name = key.decode() if isinstance(key, bytes) else key
        if name.endswith(":n"):
            continue
        sessions += 1
        events += int(client.xlen(key))
        if int(client.ttl(key)) == -1:
            age = float("inf")
    return (events, sessions, 0, age, 0) if sessions else None
