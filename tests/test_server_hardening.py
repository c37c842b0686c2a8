"""The server under attack (issue 20, point 6), each finding with the test that failed
before its fix: the event hub's memory, connections that never finish their headers or
bodies, DNS rebinding (the ``Host`` header) and login
codes that cost time in their number. Guessing the token (a throttle) is
``tests/test_server_throttle.py``. A non-ASCII token is refused at start
(``tests/test_serve_startup.py``). Sizes and counts are checked here; what they cost in
memory and time is measured by ``bench/server_hardening.py``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_server import wait_for
from threadline import open_store
from threadline.server import create_app
from threadline.server.auth import MAX_LOGIN_CODES, LoginCodes
from threadline.server.config import ServerConfig
from threadline.server.events import LOG_OVERHEAD, EventHub
from threadline.server.hosts import HostRule
from threadline.server.listen import bind, server

TOKEN = "hardening-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer wrong-token-0123456789"}
CLOSE_SECONDS = 20
"""How long a test waits for the server to close a connection it should close."""


# -- the event hub ---------------------------------------------------------------------------


def clocked(now: list[float], **settings: Any) -> ServerConfig:
    """A config for ``TestClient`` (its ``Host`` is ``testserver``) on the clock ``now[0]``."""
    return ServerConfig(
        token=TOKEN, clock=lambda: now[0], allowed_hosts=("testserver",), **settings
    )


def test_an_evicted_sessions_events_are_dropped() -> None:
    now = [0.0]
    config = clocked(now, idle_seconds=60, sweep_seconds=0.02)
    app = create_app(open_store("memory://"), config)
    hub: EventHub = app.state.hub
    with TestClient(app, headers=BEARER) as c:
        sid = c.post("/v1/sessions", json={"workerId": "w", "workspaceId": "ws"}).json()[
            "sessionId"
        ]
        assert c.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"}).status_code == 202
        assert wait_for(lambda: not app.state.runner.is_running(sid))
        time.sleep(0.1)  # several sweeps: the cached agent keeps its events
        assert sid in hub and hub.log(sid).count > 0
        now[0] += 61
        assert wait_for(lambda: sid not in hub), "the evicted session's events are still kept"
        assert hub.count == 0 and hub.bytes == 0


def test_a_log_that_is_followed_or_just_looked_up_is_kept() -> None:
    hub = EventHub(10)

    async def follow() -> str:
        log = hub.log("followed")
        stream = log.follow(0)
        first = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.01)  # the stream waits on the log now
        hub.log("looked-up")
        assert hub.sweep(keep=()) == []  # both touched since the last sweep
        assert hub.sweep(keep=()) == ["looked-up"]  # untouched for a sweep, unfollowed
        assert "followed" in hub
        log.publish("text_delta", {"text": "still heard"})
        frame = await first
        await stream.aclose()
        return frame

    assert "still heard" in asyncio.run(follow())
    assert hub.sweep(keep={"followed"}) == []
    assert hub.sweep(keep=()) == ["followed"]


def test_an_oversized_event_is_cut() -> None:
    hub = EventHub(10, max_bytes=1024 * 1024, max_event_bytes=64 * 1024)
    huge = {"step": 1, "id": "call-1", "name": "write_file", "arguments": {"text": "x" * 10**7}}
    event = hub.log("s").publish("tool_call", huge)
    assert len(event.text) < 64 * 1024 + 100
    data = event.data
    assert data["truncated"] is True and (data["id"], data["name"]) == ("call-1", "write_file")
    assert data["arguments"]["text"].startswith("xxxx")
    many = {f"k{i}": "y" * 100 for i in range(5000)}  # cut strings still too many
    data = hub.log("s").publish("notice", many).data
    assert data["truncated"] is True and len(json.dumps(data)) < 64 * 1024


publishes = st.lists(
    st.tuples(st.sampled_from("abcdef"), st.integers(min_value=0, max_value=3000)),
    max_size=300,
)


@settings(max_examples=60, deadline=None)
@given(publishes)
def test_all_logs_stay_within_one_budget(events: list[tuple[str, int]]) -> None:
    """However events land on sessions, the hub's size is the sum of what it keeps, stays
    within its budget (beyond empty logs and the one newest event), and each log keeps a
    contiguous run of its newest events."""
    budget, largest = 16 * 1024, 4 * 1024
    hub = EventHub(50, max_bytes=budget, max_event_bytes=largest)
    published: dict[str, list[int]] = {}
    for sid, size in events:
        event = hub.log(sid).publish("text_delta", {"text": "z" * size})
        published.setdefault(sid, []).append(event.id)
        kept = {s: hub.log(s).after(0)[0] for s in published}
        assert kept[sid][-1].id == event.id  # the newest event is always there
        total = sum(e.size for es in kept.values() for e in es) + LOG_OVERHEAD * len(kept)
        assert hub.bytes == total
        assert total <= max(budget, LOG_OVERHEAD * len(kept) + event.size)
        for s, es in kept.items():
            ids = [e.id for e in es]
            assert ids == published[s][len(published[s]) - len(ids) :]
            assert len(ids) <= 50


# -- connections that never finish --------------------------------------------------------


@pytest.fixture
def live_app() -> Iterator[tuple[str, int]]:
    """The app on uvicorn in a thread, with short header and body deadlines."""
    config = ServerConfig(token=TOKEN, body_timeout=0.5, header_timeout=0.5)
    app = create_app(open_store("memory://"), config)
    sockets = bind("127.0.0.1", 0)
    port = sockets[0].getsockname()[1]
    uv = server(app, sockets, "127.0.0.1", header_timeout=0.5, log_level="warning")
    thread = threading.Thread(target=uv.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    assert wait_for(lambda: uv.started, timeout=20)
    try:
        yield "127.0.0.1", port
    finally:
        uv.should_exit = True
        thread.join(10)


def closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (fails if it does not)."""
    sock.settimeout(CLOSE_SECONDS)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        pytest.fail(f"the server held the connection for {CLOSE_SECONDS} s")
    return received


def test_connections_that_never_finish_their_headers_are_closed(
    live_app: tuple[str, int],
) -> None:
    silent = [socket.create_connection(live_app) for _ in range(10)]
    partial = [socket.create_connection(live_app) for _ in range(10)]
    for sock in partial:
        sock.sendall(b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    kept_alive = socket.create_connection(live_app)
    kept_alive.sendall(
        b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\n\r\n"
    )
    time.sleep(0.2)
    kept_alive.sendall(b"GET /v1/sessions HTTP/1.1\r\n")  # the next request, half sent
    try:
        for sock in [*silent, *partial]:
            assert closed_by_server(sock) == b""
        answered = closed_by_server(kept_alive)
        assert answered.startswith(b"HTTP/1.1 200") and answered.count(b"HTTP/1.1") == 1
    finally:
        for sock in [*silent, *partial, kept_alive]:
            sock.close()


def test_a_request_whose_headers_arrive_in_time_is_served(live_app: tuple[str, int]) -> None:
    with socket.create_connection(live_app) as sock:
        for piece in (b"GET /v1/sessions HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n"):
            sock.sendall(piece)
            time.sleep(0.1)
        sock.sendall(b"Authorization: Bearer " + TOKEN.encode() + b"\r\nConnection: close\r\n\r\n")
        assert closed_by_server(sock).startswith(b"HTTP/1.1 200")


def test_a_stalled_body_is_a_408(live_app: tuple[str, int]) -> None:
    with socket.create_connection(live_app) as sock:
        sock.sendall(
            b"POST /trpc/session.create HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            + b'{"workerId": '
        )
        answer = closed_by_server(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    error = json.loads(body)["error"]
    assert (error["code"], error["data"]["code"]) == (-32008, "TIMEOUT")


# -- DNS rebinding ------------------------------------------------------------------------------


def test_only_the_hosts_the_server_is_bound_to_are_answered() -> None:
    app = create_app(open_store("memory://"), ServerConfig(token=TOKEN))  # on 127.0.0.1
    with TestClient(app, headers=BEARER) as c:
        for host in ("127.0.0.1:8787", "localhost:8787", "[::1]:8787", "LOCALHOST.", "127.0.0.1"):
            assert c.get("/v1/sessions", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example:8787", "127.0.0.1.nip.io", "testserver", "10.0.0.1"):
            r = c.get("/trpc/session.list", headers={"Host": host})
            assert r.status_code == 400, host
            assert "--allow-host" in r.json()["error"]["message"]
    config = ServerConfig(token=TOKEN, host="0.0.0.0", allowed_hosts=("api.example.com",))
    with TestClient(create_app(open_store("memory://"), config), headers=BEARER) as c:
        for host in ("api.example.com", "192.168.1.20:8787", "[fe80::1]:80", "localhost"):
            assert c.get("/v1/sessions", headers={"Host": host}).status_code == 200, host
        assert c.get("/v1/sessions", headers={"Host": "evil.example"}).status_code == 400


def test_host_rules() -> None:
    named = HostRule.for_bind("box.lan")
    assert named.allows("box.lan:8787") and not named.allows("localhost")
    assert HostRule.for_bind("::1").allows("[::1]:1") and HostRule.for_bind("localhost").allows(
        "127.0.0.1"
    )
    assert HostRule.for_bind("127.0.0.1", ["*"]).allows("anything.example")
    assert HostRule.for_bind("127.0.0.1").allows(None)  # HTTP/1.0 without Host


# -- login codes -------------------------------------------------------------------------------


def test_login_codes_are_capped_and_expire() -> None:
    now = [0.0]
    codes = LoginCodes(ttl=60, clock=lambda: now[0])
    issued = [codes.issue() for _ in range(MAX_LOGIN_CODES + 100)]
    assert codes.count == MAX_LOGIN_CODES
    assert not codes.redeem(issued[0])  # the oldest went first
    assert codes.redeem(issued[-1]) and not codes.redeem(issued[-1])
    now[0] += 61
    fresh = codes.issue()
    assert codes.count == 1 and codes.redeem(fresh)


class Visits(OrderedDict[str, float]):
    """A table of codes that counts the entries anyone walks over."""

    visited = 0

    def __iter__(self) -> Iterator[str]:
        for key in super().__iter__():
            Visits.visited += 1
            yield key

    def items(self) -> Any:
        for item in super().items():
            Visits.visited += 1
            yield item


def test_issuing_a_code_does_not_walk_the_others() -> None:
    """``issue`` used to rebuild the whole table each time: time linear in the codes out."""
    codes = LoginCodes()
    for _ in range(500):
        codes.issue()
    codes._codes = Visits(codes._codes)  # the table the codes live in
    Visits.visited = 0
    code = codes.issue()
    assert Visits.visited <= 1
    assert codes.redeem(code) and Visits.visited <= 1
