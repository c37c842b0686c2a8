"""Several ``threadline serve`` processes over one PostgreSQL store (issue 11, point 5).

Two live servers (the real command, uvicorn in subprocesses) share a fresh schema.
Both serve every session; a prompt for a session whose agent one server caches
(holding the session's attach lock) is refused by the other with 409 "busy, held
by host:pid" before anything is stored; of prompts racing on one session from
both servers exactly one runs; a server that stops, or dies, hands its sessions
over. Every history is checked for lost or duplicated messages.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("psycopg")

import httpx

from tests.conformance.backends import cleanup_url, make_url
from tests.live_server import free_port, stop, wait_until_serving
from tests.test_server import TURNS, data, error, read_sse, trpc_call, trpc_query
from threadline import open_store

TOKEN = "multi-process-token-0123456789"
START_SECONDS = 60.0
SERVE = (sys.executable, "-m", "threadline.cli.app")


@dataclass
class Server:
    """One ``threadline serve`` subprocess and a client for it."""

    proc: subprocess.Popen[bytes]
    client: httpx.Client

    @property
    def holder(self) -> str:
        return f"{socket.gethostname()}:{self.proc.pid}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop(self.proc, 20, sig)
        self.client.close()


def start_server(url: str, home: Path) -> Server:
    """``python -m threadline.cli.app --store URL serve`` on a free port, once it answers."""
    port = free_port()
    env = dict(os.environ, THREADLINE_CONFIG_DIR=str(home))
    log_path = home / f"server-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - the process writes it
    proc = subprocess.Popen(
        [*SERVE, "--store", url, "serve", "--port", str(port), "--token", TOKEN],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(proc, base, START_SECONDS, lambda: log_path.read_text(errors="replace"))
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    return Server(proc, client)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = make_url("postgres", tmp_path_factory.mktemp("pg"))
    open_store(url).close()  # migrate once, before the servers race to
    try:
        yield url
    finally:
        cleanup_url("postgres", url)


@pytest.fixture(scope="module")
def pair(
    store_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Server]]:
    home = tmp_path_factory.mktemp("home")
    a = start_server(store_url, home)
    try:
        b = start_server(store_url, home)
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


# -- helpers ----------------------------------------------------------------------------------


def create(server: Server, workspace: str) -> str:
    inp = {"workerId": "worker-1", "workspaceId": workspace}
    return str(data(trpc_call(server.client, "session.create", inp))["sessionId"])


def prompt(server: Server, sid: str, text: str) -> httpx.Response:
    return trpc_call(server.client, "agent.prompt", {"sessionId": sid, "text": text})


def run_turn(server: Server, sid: str, text: str) -> dict[str, Any]:
    """Prompt and follow the turn to its end on the same server; its ``turn_finished``."""
    out = data(prompt(server, sid, text))
    events = read_sse(server.client, sid, out["lastEventId"])
    name, finished = events[-1][1], events[-1][2]
    assert name == "turn_finished" and finished["ok"] is True, events[-3:]
    return dict(finished)


def history(server: Server, sid: str) -> list[dict[str, Any]]:
    """Every stored message of ``sid``, oldest first, checked for gaps and duplicates."""
    got = data(trpc_query(server.client, "session.get", {"sessionId": sid, "limit": 200}))
    messages: list[dict[str, Any]] = got["messages"]
    assert not got["hasMore"]
    assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
    assert len({m["id"] for m in messages}) == len(messages)
    assert got["session"]["messageCount"] == len(messages)
    return messages


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    texts = []
    for m in messages:
        if m["role"] == "user":
            content = m["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def first_event(server: Server, sid: str) -> tuple[str, dict[str, Any]]:
    """The first event of the session's stream on ``server`` (then the stream is closed)."""
    with server.client.stream("GET", f"/v1/sessions/{sid}/events") as response:
        assert response.status_code == 200
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if not line and "event" in fields:
                return fields["event"], json.loads(fields["data"])
            key, _, value = line.partition(": ")
            fields[key] = value
    raise AssertionError("the stream ended without an event")


def assert_busy(response: httpx.Response, holder: Server) -> None:
    message = error(response, 409, "CONFLICT")
    assert f"busy, held by {holder.holder}" in message
    assert response.json()["error"]["data"]["holder"] == holder.holder


# -- the tests ----------------------------------------------------------------------------------


def test_both_servers_serve_the_same_sessions(pair: tuple[Server, Server]) -> None:
    a, b = pair
    sid = create(a, "ws-shared")
    listed = data(trpc_query(b.client, "session.list", {"workspaceId": "ws-shared"}))
    assert [s["id"] for s in listed["items"]] == [sid] and listed["total"] == 1
    renamed = b.client.patch(f"/v1/sessions/{sid}", json={"title": "named on b"})
    assert renamed.status_code == 200, renamed.text
    got = data(trpc_query(a.client, "session.get", {"sessionId": sid}))
    assert got["session"]["title"] == "named on b"


def test_a_session_cached_in_one_server_is_busy_in_the_other(
    pair: tuple[Server, Server],
) -> None:
    a, b = pair
    sid = create(a, "ws-busy")
    finished = run_turn(a, sid, TURNS[0].user)
    assert finished["text"] == TURNS[0].final
    before = history(b, sid)  # b reads everything a wrote

    # a caches the session's agent and holds its lock: b refuses, storing nothing
    assert_busy(prompt(b, sid, TURNS[1].user), a)
    assert_busy(b.client.post(f"/v1/sessions/{sid}/prompt", json={"text": "x"}), a)
    assert_busy(b.client.delete(f"/v1/sessions/{sid}"), a)
    assert history(b, sid) == before
    # b's event stream cannot see a's turns, and says so first
    assert first_event(b, sid) == ("held_elsewhere", {"sessionId": sid, "holder": a.holder})

    # the holder itself carries on
    run_turn(a, sid, TURNS[1].user)
    after = history(b, sid)
    assert after[: len(before)] == before
    assert user_texts(after) == [TURNS[0].user, TURNS[1].user]


def test_prompts_racing_on_one_session_from_both_servers_never_overlap(
    pair: tuple[Server, Server],
) -> None:
    """One server wins the session and keeps it; its turns run one at a time (a prompt
    that arrives after a turn ended may start the next one), and every refused prompt
    stored nothing."""
    a, b = pair
    sid = create(b, "ws-race")
    servers = [a, b] * 4
    barrier = threading.Barrier(len(servers))
    responses: list[tuple[Server, str, httpx.Response]] = []

    def send(server: Server, i: int) -> None:
        text = f"racing prompt {i}"
        barrier.wait()
        responses.append((server, text, prompt(server, sid, text)))

    threads = [threading.Thread(target=send, args=(s, i)) for i, s in enumerate(servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = sorted(
        ((s, text, r) for s, text, r in responses if r.status_code == 200),
        key=lambda w: int(w[2].json()["result"]["data"]["seq"]),
    )
    assert won, [(r.status_code, r.text) for _, _, r in responses]
    assert len({s.holder for s, _, _ in won}) == 1  # the session stayed on one server
    for _, _, r in responses:
        if r.status_code != 200:
            error(r, 409, "CONFLICT")  # busy elsewhere, or a turn already running here
    winner = won[0][0]
    for _, _, r in won:
        events = read_sse(winner.client, sid, r.json()["result"]["data"]["lastEventId"])
        assert events[-1][1] == "turn_finished"
    messages = history(a, sid)
    assert user_texts(messages) == [text for _, text, _ in won]
    assert [m["role"] for m in messages] == ["user", "assistant"] * len(won)  # no overlap


def test_a_server_that_stops_or_dies_hands_its_sessions_over(
    pair: tuple[Server, Server], store_url: str, tmp_path: Path
) -> None:
    _, b = pair
    graceful, killed = start_server(store_url, tmp_path), start_server(store_url, tmp_path)
    try:
        kept = create(graceful, "ws-handover")
        lost = create(killed, "ws-handover")
        run_turn(graceful, kept, TURNS[0].user)
        run_turn(killed, lost, TURNS[0].user)
        assert_busy(prompt(b, kept, TURNS[1].user), graceful)
        assert_busy(prompt(b, lost, TURNS[1].user), killed)

        graceful.stop()  # shutting down releases every lock it holds
        killed.stop(signal.SIGKILL)  # a dead holder on this host is taken over at once
        for sid in (kept, lost):
            run_turn(b, sid, TURNS[1].user)
            assert user_texts(history(b, sid)) == [TURNS[0].user, TURNS[1].user]
    finally:
        graceful.stop()
        killed.stop()
