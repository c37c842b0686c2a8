"""The token throttle never locks out the token's holder (issue 33, points 1 and 2).

Before: after ``limit`` wrong tokens from an address, every token check from it got
429, the right one too, so a wrong-token flood from 127.0.0.1 (every local process) or
a load balancer locked every client out; uvicorn believed ``X-Forwarded-For`` from
127.0.0.1, so any local process chose the address it was counted as; each IPv6
address counted alone; and many addresses together were never slowed. The flood
itself, with the right client's calls counted, is ``bench/auth_flood.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.serve_cli import run_serve, start_serve
from tests.test_server import wait_for
from threadline import open_store
from threadline.errors import UsageError
from threadline.server import create_app
from threadline.server.auth import make_session_cookie
from threadline.server.config import ServerConfig
from threadline.server.listen import bind, server, trusted_proxies
from threadline.server.throttle import GLOBAL_LIMIT, Throttle, client_key

TOKEN = "throttle-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer wrong-token-0123456789"}
SAME_ORIGIN = {"Origin": "http://testserver"}


def app_on(now: list[float], **settings: object) -> FastAPI:
    config = ServerConfig(
        token=TOKEN, clock=lambda: now[0], allowed_hosts=("testserver",), **settings
    )
    return create_app(open_store("memory://"), config)


@pytest.fixture
def throttled() -> Iterator[tuple[TestClient, list[float]]]:
    now = [1000.0]
    with TestClient(app_on(now, auth_failures=5, auth_window=60)) as c:
        yield c, now


def test_the_right_bearer_token_passes_while_wrong_ones_wait(
    throttled: tuple[TestClient, list[float]],
) -> None:
    c, now = throttled
    for _ in range(5):
        assert c.get("/v1/sessions", headers=WRONG).status_code == 401
    r = c.get("/trpc/session.list", headers=WRONG)
    assert r.status_code == 429 and int(r.headers["retry-after"]) == 60
    error = r.json()["error"]
    assert (error["code"], error["data"]["code"]) == (-32029, "TOO_MANY_REQUESTS")
    assert error["data"]["path"] == "session.list"
    for _ in range(3):  # the holder is never locked out, however the flood goes on
        assert c.get("/trpc/session.list", headers=BEARER).status_code == 200
        assert c.get("/v1/sessions", headers=WRONG).status_code == 429
    c.cookies.set("threadline_session", make_session_cookie(TOKEN))  # logged in: no token
    assert c.get("/v1/sessions").status_code == 200
    c.cookies.clear()
    assert c.get("/v1/sessions").status_code == 401  # no token: nothing to throttle
    now[0] += 61
    assert c.get("/v1/sessions", headers=WRONG).status_code == 401


def test_the_right_login_form_and_link_pass_while_wrong_ones_wait(
    throttled: tuple[TestClient, list[float]],
) -> None:
    c, _ = throttled
    for i in range(5):
        if i % 2:
            r = c.get("/login", params={"code": "made-up-code"}, follow_redirects=False)
        else:
            r = c.post("/login", data={"token": "a-wrong-guess-000"}, headers=SAME_ORIGIN)
        assert r.status_code == 401
    r = c.post("/login", data={"token": "a-wrong-guess-000"}, headers=SAME_ORIGIN)
    assert r.status_code == 429 and r.json()["error"]["data"]["code"] == "TOO_MANY_REQUESTS"
    assert c.get("/login", params={"code": "made-up-code"}).status_code == 429
    assert c.get("/login").status_code == 200  # the form itself still shows
    r = c.post("/login", data={"token": TOKEN}, headers=SAME_ORIGIN, follow_redirects=False)
    assert r.status_code == 303 and "threadline_session" in r.cookies
    c.cookies.clear()
    code = c.post("/v1/login-links", headers=BEARER).json()["path"]
    assert c.get(code, follow_redirects=False).status_code == 303  # a real link works too


def test_wrong_tokens_from_many_addresses_meet_a_global_cap() -> None:
    now = [1000.0]
    app = app_on(now, auth_failures=100, auth_global_failures=5)
    clients = [TestClient(app, client=(f"198.51.100.{i}", 1)) for i in range(1, 8)]
    for c in clients[:5]:
        assert c.get("/v1/sessions", headers=WRONG).status_code == 401
    r = clients[5].get("/v1/sessions", headers=WRONG)  # an address that never failed
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert clients[6].get("/v1/sessions", headers=BEARER).status_code == 200
    now[0] += 1.01
    assert clients[6].get("/v1/sessions", headers=WRONG).status_code == 401


def test_ipv6_clients_are_throttled_by_their_64_block() -> None:
    now = [1000.0]
    app = app_on(now, auth_failures=3)
    for i in range(3):  # three addresses of one block
        c = TestClient(app, client=(f"2001:db8:1:2::{i + 1:x}", 1))
        assert c.get("/v1/sessions", headers=WRONG).status_code == 401
    same_block = TestClient(app, client=("2001:db8:1:2:ffff:ffff:ffff:ffff", 1))
    assert same_block.get("/v1/sessions", headers=WRONG).status_code == 429
    assert same_block.get("/v1/sessions", headers=BEARER).status_code == 200
    next_block = TestClient(app, client=("2001:db8:1:3::1", 1))
    assert next_block.get("/v1/sessions", headers=WRONG).status_code == 401


def test_client_keys() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64"
    assert client_key("2001:DB8:1:2::ffff%eth0") == "2001:db8:1:2::/64"
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"  # IPv4 mapped: the IPv4 address
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("testclient") == "testclient" and client_key(None) == "unknown"


failures = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(min_value=0, max_value=3)),
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(failures)
def test_a_throttle_waits_exactly_when_a_limit_is_reached(steps: list[tuple[str, float]]) -> None:
    """Against a plain count of the failures in each window: a client waits iff it has
    ``limit`` failures in the last ``window`` or all clients ``global_limit`` in the last
    second, and the wait ends when the oldest of those leaves its window."""
    now = [0.0]
    throttle = Throttle(limit=3, window=5.0, global_limit=4, clock=lambda: now[0])
    counted: list[tuple[str, float]] = []
    for client, step in steps:
        now[0] += step
        t = now[0]
        own = [at for c, at in counted if c == client and at > t - 5.0]
        everyone = [at for _, at in counted if at > t - 1.0]
        due = max(
            own[-3] + 5.0 - t if len(own) >= 3 else 0.0,
            everyone[-4] + 1.0 - t if len(everyone) >= 4 else 0.0,
        )
        wait = throttle.wait(client)
        assert wait == pytest.approx(max(due, 0.001) if due > 0 else 0.0, abs=1e-9)
        if wait == 0:  # a guess answered 401 counts; one answered 429 does not
            throttle.failed(client)
            counted.append((client, t))


def test_forwarded_allow_ips_is_checked() -> None:
    assert trusted_proxies(" 10.0.0.5, 10.1.2.3/16 ,::1") == "10.0.0.5,10.1.0.0/16,::1"
    assert trusted_proxies("*") == "*"
    with pytest.raises(UsageError, match=r"'proxy\.lan' is not an IP address"):
        trusted_proxies("10.0.0.5,proxy.lan")


# -- forwarded headers, on uvicorn ----------------------------------------------------------


def serving(forwarded_allow_ips: str | None) -> tuple[str, object, threading.Thread]:
    config = ServerConfig(token=TOKEN, auth_failures=3)
    app = create_app(open_store("memory://"), config)
    sockets = bind("127.0.0.1", 0)
    base = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
    uv = server(
        app,
        sockets,
        "127.0.0.1",
        header_timeout=5,
        log_level="warning",
        forwarded_allow_ips=forwarded_allow_ips,
    )
    thread = threading.Thread(target=uv.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    assert wait_for(lambda: uv.started, timeout=20)
    return base, uv, thread


@pytest.fixture(params=[None, "127.0.0.1"], ids=["default", "trusting-loopback"])
def live(request: pytest.FixtureRequest) -> Iterator[tuple[str, str | None]]:
    base, uv, thread = serving(request.param)
    try:
        yield base, request.param
    finally:
        uv.should_exit = True  # type: ignore[attr-defined]
        thread.join(10)


def test_forwarded_for_is_believed_only_from_named_proxies(live: tuple[str, str | None]) -> None:
    base, trusted = live

    def wrong(forwarded: str) -> int:
        headers = {**WRONG, "X-Forwarded-For": forwarded}
        return httpx.get(base + "/v1/sessions", headers=headers, timeout=10).status_code

    statuses = [wrong(f"203.0.113.{i}") for i in range(1, 5)]  # four "different" clients
    if trusted is None:  # forged: all four are 127.0.0.1, which waits after three
        assert statuses == [401, 401, 401, 429]
    else:  # a named proxy: each reported client counts alone
        assert statuses == [401, 401, 401, 401]
        assert [wrong("203.0.113.9") for _ in range(4)] == [401, 401, 401, 429]
        assert wrong("203.0.113.10") == 401
    right = httpx.get(base + "/v1/sessions", headers=BEARER, timeout=10)
    assert right.status_code == 200


def test_serve_takes_forwarded_allow_ips(tmp_path: Path) -> None:
    """The command itself: a misspelt proxy is refused at start (exit 2, one line); a
    named one is believed, the default believes no one (the command runs uvicorn)."""
    store = f"sqlite://{tmp_path}/s.db"
    code, output = run_serve(
        tmp_path, "--store", store, "--token", TOKEN, "--forwarded-allow-ips", "10.0.0.5,proxy.lan"
    )
    assert code == 2 and "'proxy.lan' is not an IP address" in output
    assert "Traceback" not in output and "login?code=" not in output
    for trusted in (False, True):
        extra = ("--forwarded-allow-ips", "127.0.0.1") if trusted else ()
        with start_serve(
            tmp_path, "--store", store, "--port", "0", "--token", TOKEN, *extra
        ) as live:
            statuses = []
            for i in range(31):  # the default limit is 30 a minute
                statuses.append(
                    httpx.get(
                        live.base + "/v1/sessions",
                        headers={**WRONG, "X-Forwarded-For": f"203.0.113.{i}"},
                        timeout=10,
                    ).status_code
                )
                # under the global cap (20 wrong tokens a second from everyone), which
                # this test is not about: a quiet machine sends 31 in well under a second
                time.sleep(1.5 / GLOBAL_LIMIT)
            assert statuses[-1] == (401 if trusted else 429), statuses
            assert (
                httpx.get(live.base + "/v1/sessions", headers=BEARER, timeout=10).status_code == 200
            )
