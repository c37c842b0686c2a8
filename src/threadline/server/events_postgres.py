"""Events in PostgreSQL: a table ``threadline_events`` in the store's schema, made on
first use by the server (the store does not know events), and ``NOTIFY`` on one
channel per schema after each event, which a listener thread per worker turns into
wake-ups. A session's next id is its largest plus one, taken in the insert itself (a
racing insert of the same id fails its primary key and is retried), so ids are the
same on every worker."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg_pool import ConnectionPool

from threadline.server.events import EVENT_OVERHEAD
from threadline.server.shared_events import Bounds

logger = logging.getLogger(__name__)

TABLE = """
CREATE TABLE IF NOT EXISTS threadline_events (
    session_id text NOT NULL,
    id bigint NOT NULL,
    name text NOT NULL,
    body text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, id)
);
CREATE INDEX IF NOT EXISTS threadline_events_at ON threadline_events (at)
"""
RETRIES = 5


class PostgresEvents:
    """``EventEngine`` over a small pool of its own to the store's database and schema."""

    def __init__(self, conninfo: str, schema: str, bounds: Bounds) -> None:
        self._conninfo = conninfo
        self._schema = schema
        self._bounds = bounds
        self.channel = f"threadline_events_{schema}"[:63]
        self._pool: ConnectionPool[Any] = ConnectionPool(
            conninfo,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=4,
            configure=self._configure,
            name=f"threadline-events-{schema}",
            open=True,
        )
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('threadline_events'))")
            for statement in TABLE.split(";"):
                conn.execute(statement)
        self._heard: dict[str, int] = {}
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._listener = threading.Thread(
            target=self._listen, name="threadline-events-listen", daemon=True
        )
        self._listener.start()

    def _configure(self, conn: Any) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema)))

    def append(self, session_id: str, name: str, body: str) -> int:
        for attempt in range(RETRIES):
            try:
                with self._pool.connection() as conn, conn.transaction():
                    row = conn.execute(
                        "INSERT INTO threadline_events (session_id, id, name, body) "
                        "SELECT %s, coalesce(max(id), 0) + 1, %s, %s FROM threadline_events "
                        "WHERE session_id = %s RETURNING id",
                        (session_id, name, body, session_id),
                    ).fetchone()
                    assert row is not None
                    id = int(row[0])
                    conn.execute(
                        "DELETE FROM threadline_events WHERE session_id = %s AND id <= %s",
                        (session_id, id - self._bounds.capacity),
                    )
                    conn.execute("SELECT pg_notify(%s, %s)", (self.channel, session_id))
                    return id
            except psycopg.errors.UniqueViolation:
                if attempt == RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def read(self, session_id: str, after: int) -> tuple[list[tuple[int, str, str]], int, int]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, name, body FROM threadline_events WHERE session_id = %s AND id > %s "
                "ORDER BY id",
                (session_id, after),
            ).fetchall()
            first, last = conn.execute(
                "SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM threadline_events "
                "WHERE session_id = %s",
                (session_id,),
            ).fetchone() or (0, 0)
        return [(int(i), str(n), str(b)) for i, n, b in rows], int(first), int(last)

    def wait(self, session_id: str, after: int, timeout: float) -> None:
        with self._changed:
            seen = self._heard.get(session_id, 0)
            self._changed.wait_for(lambda: self._heard.get(session_id, 0) != seen, timeout)

    def expire(self) -> int:
        """Drop events older than ``expire_seconds``, then the oldest of all sessions
        while all together cost more than ``max_bytes``."""
        with self._pool.connection() as conn:
            aged = conn.execute(
                "DELETE FROM threadline_events WHERE at < now() - make_interval(secs => %s)",
                (self._bounds.expire_seconds,),
            ).rowcount
            over = conn.execute(
                "DELETE FROM threadline_events WHERE (session_id, id) IN (SELECT session_id, id "
                "FROM (SELECT session_id, id, sum(octet_length(body) + %s) OVER (ORDER BY at "
                "DESC, id DESC) AS running FROM threadline_events) newest WHERE running > %s)",
                (EVENT_OVERHEAD, self._bounds.max_bytes),
            ).rowcount
        with self._changed:
            self._heard.clear()  # a waiter that saw a count wakes once, and reads again
            self._changed.notify_all()
        return int(aged + over)

    def _listen(self) -> None:
        while not self._closing.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._wake_all()  # whatever was said while we were not listening
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=1.0, stop_after=64):
                            with self._changed:
                                self._heard[note.payload] = self._heard.get(note.payload, 0) + 1
                                self._changed.notify_all()
            except psycopg.Error as exc:
                logger.info("event listener reconnects: %s", exc)
                time.sleep(1.0)

    def _wake_all(self) -> None:
        with self._changed:
            for sid in list(self._heard):
                self._heard[sid] += 1
            self._changed.notify_all()

    def close(self) -> None:
        self._closing.set()
        self._pool.close()


def survey(conninfo: str, schema: str) -> tuple[int, int, int, float, int] | None:
    """Events, sessions, bytes, the oldest event's age in seconds and the table's size
    on disk (indexes and dead rows included), read only; None when no server made the
    table."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        row = conn.execute("SELECT to_regclass('threadline_events')").fetchone()
        if row is None or row[0] is None:
            return None
        events, sessions, size, age = conn.execute(
            "SELECT count(*), count(DISTINCT session_id), "
            "coalesce(sum(octet_length(body) + %s), 0), "
            "coalesce(extract(epoch FROM now() - min(at)), 0) FROM threadline_events",
            (EVENT_OVERHEAD,),
        ).fetchone() or (0, 0, 0, 0)
        disk = conn.execute("SELECT pg_total_relation_size('threadline_events')").fetchone()
    return int(events), int(sessions), int(size), float(age), int(disk[0] if disk else 0)
