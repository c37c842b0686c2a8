"""A turn's events through the store's engine, seen from every worker (issue 34, point 2).

Two live ``threadline serve`` workers share one PostgreSQL schema or one Redis prefix.
A follower on the worker that does not run the turn receives every event of it, in
order, with the same ids as a follower on the worker that runs it, and a stream
resumed with ``Last-Event-ID`` on either worker continues exactly after that id. The
engines themselves hold the in-process hub's bounds: events per session, bytes per
event, and expiry (and, on PostgreSQL, the byte budget of all sessions).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


from typer.testing import CliRunner

from tests.conformance.backends import clean_store, shared_store_url
from tests.test_server import TURNS, data, read_sse, trpc_call
from tests.test_server_multiprocess import Server, create, two_servers
from threadline import open_store
from threadline.cli.app import app
from threadline.errors import StoreUnavailable
from threadline.server.config import ServerConfig
from threadline.server.event_hubs import hub_for
from threadline.server.events import EventHub, EventLog
from threadline.server.shared_events import Bounds, EventEngine, SharedHub
from threadline.store.protocol import Store

BACKENDS = ["postgres", "redis"]


@pytest.fixture(scope="module", params=BACKENDS)
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Server]]:
    backend = request.param
    with (
        shared_store_url(backend, tmp_path_factory.mktemp(backend)) as url,
        two_servers(url, tmp_path_factory.mktemp("home")) as pair,
    ):
        yield pair


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend = request.param
    pytest.importorskip("psycopg" if backend == "postgres" else "redis")
    yield from clean_store(backend, tmp_path)


def shared_hub(store: Store, **config: Any) -> SharedHub:
    hub = hub_for(store, ServerConfig(token="t" * 32, **config))
    assert isinstance(hub, SharedHub)
    return hub


# -- two live workers ------------------------------------------------------------------


def test_the_other_worker_streams_every_event_in_order_and_resumes(
    pair: tuple[Server, Server],
) -> None:
    a, b = pair
    sid = create(a, "ws-events")
    turn = TURNS[0]  # the offline model's scripted turn: text, tool calls and results
    out = data(trpc_call(a.client, "agent.prompt", {"sessionId": sid, "text": turn.user}))
    before = out["lastEventId"]
    on_a = read_sse(a.client, sid, before)
    on_b = read_sse(b.client, sid, before)  # b never ran it

    names = [name for _, name, _ in on_b]
    assert names[0] == "turn_started" and names[-1] == "turn_finished", names
    assert {"text_delta", "tool_call", "tool_result"} <= set(names), names
    assert on_b == on_a  # the same events, ids and data on both workers
    ids = [id for id, _, _ in on_b]
    assert ids == list(range(before + 1, before + 1 + len(ids)))  # in order, none missing
    assert on_b[-1][2]["text"] == turn.final

    middle = ids[len(ids) // 2]
    assert read_sse(b.client, sid, middle) == [e for e in on_a if e[0] > middle]
    assert read_sse(a.client, sid, middle) == [e for e in on_b if e[0] > middle]

    # the next turn, run by b, continues the ids; a follows it
    out = data(trpc_call(b.client, "agent.prompt", {"sessionId": sid, "text": TURNS[1].user}))
    assert out["lastEventId"] == ids[-1]
    second = [e for e in read_sse(a.client, sid, ids[-1]) if e[1] != "held_elsewhere"]
    assert second[0][0] == ids[-1] + 1 and second[-1][2]["text"] == TURNS[1].final


def test_an_event_published_by_one_worker_reaches_a_follower_on_another(
    pair: tuple[Server, Server],
) -> None:
    """The engine's wake-up, not its polling, carries an event across processes: this
    process appends as a worker would; the follower is the live server ``b``."""
    _, b = pair
    sid = create(b, "ws-latency")
    with open_store(b.store_url) as store:
        hub = shared_hub(store)
        try:
            log = hub.log(sid)
            arrived: dict[int, float] = {}
            ready = threading.Event()
            got = threading.Condition()

            def follow() -> None:
                url = f"/v1/sessions/{sid}/events"
                with b.client.stream("GET", url, params={"until": "turn_finished"}) as response:
                    ready.set()
                    for line in response.iter_lines():
                        if line.startswith("id: "):
                            with got:
                                arrived[int(line[4:])] = time.monotonic()
                                got.notify_all()

            reader = threading.Thread(target=follow)
            reader.start()
            assert ready.wait(10)
            latencies = []
            for n in range(41):  # the first one only shows the follower is there
                name = "turn_finished" if n == 40 else "text_delta"
                sent = time.monotonic()
                event = log.publish(name, {"text": f"part {n}"})
                with got:
                    assert got.wait_for(lambda id=event.id: id in arrived, 10)
                if n:
                    latencies.append(arrived[event.id] - sent)
            reader.join(10)
            assert not reader.is_alive()
            assert sorted(arrived) == list(range(1, 42))
        finally:
            hub.close()
    p50 = statistics.median(latencies) * 1000
    p90 = statistics.quantiles(latencies, n=10)[-1] * 1000
    print(
        f"\nevent latency across workers ({store.url.partition(':')[0]}): "
        f"p50 {p50:.1f} ms, p90 {p90:.1f} ms over {len(latencies)} events"
    )


# -- the engines' bounds -----------------------------------------------------------------


def test_single_process_stores_keep_the_in_process_hub(tmp_path: Path) -> None:
    for url in ("memory://", f"sqlite://{tmp_path / 's.db'}", f"jsonl://{tmp_path / 'j'}"):
        with open_store(url) as store:
            assert isinstance(hub_for(store, ServerConfig(token="t" * 32)), EventHub)


def test_ids_are_shared_and_each_session_keeps_its_last_events(store: Store) -> None:
    one, two = shared_hub(store, event_buffer=5), shared_hub(store, event_buffer=5)
    try:
        ids = [(one if n % 2 else two).log("s1").publish("e", {"n": n}).id for n in range(12)]
        assert ids == list(range(1, 13))  # two "workers", one sequence
        assert two.log("s2").publish("e", {}).id == 1  # per session
        events, lost = one.log("s1").after(0)
        assert [e.id for e in events] == [8, 9, 10, 11, 12] and lost
        assert [e.data["n"] for e in events] == [7, 8, 9, 10, 11]
        events, lost = two.log("s1").after(9)
        assert [e.id for e in events] == [10, 11, 12] and not lost
        assert one.log("s1").last_id == 12
        events, lost = one.log("s1").after(99)  # an id from a log that expired since
        assert lost and [e.id for e in events] == [8, 9, 10, 11, 12]
    finally:
        one.close()
        two.close()


def test_an_oversized_event_is_cut(store: Store) -> None:
    hub = shared_hub(store, max_event_bytes=1000, event_buffer_bytes=10_000)
    try:
        hub.log("s").publish("tool_call", {"name": "read", "arguments": "x" * 50_000})
        (event,), _ = hub.log("s").after(0)
        assert len(event.text) < 1100 and event.data["truncated"] is True
    finally:
        hub.close()


def test_events_expire(store: Store) -> None:
    hub = shared_hub(store, idle_seconds=0.3)
    try:
        hub.log("s").publish("e", {})
        assert hub.log("s").after(0)[0]
        deadline = time.monotonic() + 10
        while hub.log("s").after(0)[0] and time.monotonic() < deadline:
            time.sleep(0.2)
            hub.sweep([])
        assert hub.log("s").after(0)[0] == []
    finally:
        hub.close()


def test_postgres_holds_all_sessions_to_the_byte_budget(store: Store) -> None:
    if not store.url.startswith("postgres"):
        pytest.skip("Redis bounds each session (MAXLEN, TTL), not all sessions' bytes")
    hub = shared_hub(store, max_event_bytes=1000, event_buffer_bytes=5000)
    try:
        for n in range(20):
            hub.log(f"s{n % 4}").publish("e", {"text": "y" * 800})
        hub.sweep([])
        kept = [e for n in range(4) for e in hub.log(f"s{n}").after(0)[0]]
        assert 0 < len(kept) <= 5000 // 900
        newest = hub.log("s3").after(0)[0]
        assert newest and newest[-1].id == 5  # the newest event of all is kept
    finally:
        hub.close()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    capacity=st.integers(1, 6),
    count=st.integers(0, 14),
    asked=st.lists(st.integers(0, 20), max_size=4),
)
def test_the_engine_answers_as_the_in_process_log_does(
    store: Store, capacity: int, count: int, asked: list[int]
) -> None:
    """Same ids, same events kept, same ``lost`` for any resume point."""
    hub = shared_hub(store, event_buffer=capacity)
    sid = f"p{uuid.uuid4().hex[:8]}"
    here = EventLog(capacity)
    try:
        for n in range(count):
            assert hub.log(sid).publish("e", {"n": n}).id == here.publish("e", {"n": n}).id
        assert hub.log(sid).last_id == here.last_id
        for last_id in asked:
            theirs, lost = hub.log(sid).after(last_id)
            ours, our_lost = here.after(last_id)
            assert [(e.id, e.text) for e in theirs] == [(e.id, e.text) for e in ours]
            assert lost == our_lost
    finally:
        hub.close()


class AwayEngine:
    """An engine whose connections are gone."""

    def append(self, session_id: str, name: str, body: str) -> int:
        raise StoreUnavailable("the engine is away")


def test_an_engine_that_is_away_costs_the_event_not_the_turn() -> None:
    bounds = Bounds(capacity=10, max_event_bytes=1000, max_bytes=10_000, expire_seconds=60)
    hub = SharedHub(cast(EventEngine, AwayEngine()), bounds)
    assert hub.log("s").publish("text_delta", {"text": "hi"}).id == 0


def test_doctor_reports_event_streams_nobody_trims(store: Store) -> None:
    hub = shared_hub(store)
    try:
        for n in range(3):
            hub.log(f"s{n}").publish("e", {})
    finally:
        hub.close()
    kept = doctor_events(store.url)
    assert kept == [("note", "3 events of 3 sessions kept for event streams")]
    if store.url.startswith("postgres"):  # no server swept them for a day
        with psycopg_connection(store) as conn:
            conn.execute("UPDATE threadline_events SET at = now() - interval '1 day'")
    else:  # a stream that lost its TTL never expires
        from threadline.store.redis import RedisStore

        assert isinstance(store, RedisStore)
        store.client().persist(f"{store.prefix}events:s0")
    (finding,) = doctor_events(store.url)
    assert finding[0] == "warning" and "no server trims them, so they grow" in finding[1]


def doctor_events(url: str) -> list[tuple[str, str]]:
    result = CliRunner().invoke(app, ["--store", url, "doctor", "--json"])
    assert result.exit_code == 0, result.output  # a warning, not damage
    found = json.loads(result.stdout)["findings"]
    return [(f["severity"], f["message"]) for f in found if f["kind"] == "events"]


def psycopg_connection(store: Store) -> Any:
    import psycopg
    from psycopg import sql

    from threadline.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    conn = psycopg.connect(store.connection_string(), autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
    return conn
