"""Events in Redis: one stream per session (``XADD`` trimmed to ``capacity``, ``XREAD
BLOCK`` to wait), its entry ids ``N-0`` with ``N`` from a per-session counter, so an
event's id is the same integer on every worker. Both keys expire ``expire_seconds``
after the session's last event."""

from __future__ import annotations

from typing import Any

from threadline.server.shared_events import Bounds

APPEND = """
local n = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], n .. '-0', 'name', ARGV[2], 'body', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return n
"""


class RedisEvents:
    """``EventEngine`` over the Redis store's client and key prefix."""

    def __init__(self, client: Any, prefix: str, bounds: Bounds) -> None:
        self._r = client
        self._prefix = prefix
        self._bounds = bounds
        self._append = client.register_script(APPEND)

    def _keys(self, session_id: str) -> tuple[str, str]:
        stream = f"{self._prefix}events:{session_id}"
        return stream, stream + ":n"

    def append(self, session_id: str, name: str, body: str) -> int:
        ttl = max(int(self._bounds.expire_seconds * 1000), 1)
        args = [self._bounds.capacity, name, body, ttl]
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
        """The client is the store's, closed with it."""


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
