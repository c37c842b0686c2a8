"""``threadline doctor`` on a store several servers share (issue 34, point 6).

On PostgreSQL and Redis it names stale attach locks (a worker killed on this host, a
lease that ran out on another), cancel requests left behind by a turn that is over
(the asker or the running worker died before taking them away), and an event table
that grows: events no server trims (``test_server_shared_events.py``) and, on
PostgreSQL, dead rows nothing reclaims. A lock or a request of a turn that is
running is not named.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conformance.backends import clean_store
from tests.processes import dead_pid
from threadline import Message
from threadline.cli.app import app
from threadline.server import event_hubs
from threadline.server.config import ServerConfig
from threadline.server.turn_signals import request_cancel
from threadline.store.locks import LockHolder, this_host
from threadline.store.protocol import Store


@pytest.fixture(params=["postgres", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend = request.param
    pytest.importorskip("psycopg" if backend == "postgres" else "redis")
    pytest.importorskip("fastapi")
    yield from clean_store(backend, tmp_path)


def doctor(url: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, ["--store", url, "doctor", "--json"])
    assert result.exit_code == 0, result.output  # leftovers are warnings, not damage
    return list(json.loads(result.stdout)["findings"])


def session(store: Store, sid: str) -> str:
    store.create_session(id=sid).append(Message.user("hi"))
    return sid


def test_stale_locks_and_cancel_requests_left_behind_are_named(store: Store) -> None:
    killed = LockHolder(pid=dead_pid(), host=this_host())
    lapsed = LockHolder(pid=1, host="another-worker", lease_seconds=0.0)
    running = LockHolder.current()
    for sid, holder in (("killed-0001", killed), ("lapsed-0001", lapsed), ("live-0001", running)):
        store.acquire_lock(session(store, sid), holder)
    # the asker of a cancel died, then its turn ended (the lock let go, the request kept)
    ended = LockHolder(pid=dead_pid(), host=this_host())
    store.acquire_lock(session(store, "ended-0001"), ended)
    request_cancel(store, "ended-0001", ended)
    store.release_lock("ended-0001", ended)
    request_cancel(store, "live-0001", running)  # a cancel in flight: not stale
    request_cancel(store, "killed-0001", killed)  # its worker died with the turn

    found = {(f["kind"], f["session_id"]): f for f in doctor(store.url)}
    assert {k for k in found if k[0].startswith("stale")} == {
        ("stale-lock", "killed-0001"),
        ("stale-lock", "lapsed-0001"),
        ("stale-cancel", "ended-0001"),
        ("stale-cancel", "killed-0001"),
    }
    assert all(found[k]["severity"] == "warning" for k in found if k[0].startswith("stale"))
    assert "that turn is over" in found[("stale-cancel", "ended-0001")]["message"]


def test_an_event_table_growing_with_dead_rows_is_named(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store.url.startswith("postgres"):
        pytest.skip("Redis frees what a stream trims: it has no dead rows")
    import psycopg
    from psycopg import sql

    from threadline.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    monkeypatch.setattr(event_hubs, "BLOAT_BYTES", SMALL_TABLE)
    hub = event_hubs.hub_for(store, ServerConfig(token="t" * 32, event_buffer=5))
    try:
        for n in range(5):
            hub.log("busy").publish("text_delta", {"text": f"part {n} " + "x" * 200})
    finally:
        hub.close()
    assert not warnings(store.url)  # 5 events: the table's first pages and indexes
    with psycopg.connect(store.connection_string(), autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        conn.execute("ALTER TABLE threadline_events SET (autovacuum_enabled = false)")
        conn.execute(  # what a server's trims and expiry leave when nothing vacuums
            "INSERT INTO threadline_events (session_id, id, name, body) "
            "SELECT 'gone', n, 'text_delta', repeat('x', 200) FROM generate_series(1, 2000) n"
        )
        conn.execute("DELETE FROM threadline_events WHERE session_id = 'gone'")
    (grows,) = warnings(store.url)  # still 5 events, and 2,000 dead rows
    assert grows["kind"] == "events" and "dead rows are not reclaimed" in grows["message"]


SMALL_TABLE = 96 * 1024
"""More than an event table of a few events takes on disk, less than one that held
hundreds and kept them as dead rows."""


def warnings(url: str) -> list[dict[str, Any]]:
    return [f for f in doctor(url) if f["severity"] == "warning"]
