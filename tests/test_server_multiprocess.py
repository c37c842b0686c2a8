"""Several ``threadline serve`` processes over one PostgreSQL store (issue 11, point 5).

Two live servers (the real command, uvicorn in subprocesses) share a fresh schema.
Both serve every session, and a session's lock means a turn is running (issue 34):
an idle session's next prompt runs on whichever server gets it, the other's cached
agent being rebuilt from the store when it gets the session back; of prompts racing
on one session from both servers exactly one runs at a time, the others refused with
409 before anything is stored; a server that stops, or dies, leaves its sessions to
the other. Every history is checked for lost or duplicated messages. A turn that is
running while another server is asked (busy, cancel, delete, kill -9) is in
``test_server_workers.py``.
"""

from __future__ import annotations

import contextlib
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
    store_url: str

    @property
    def holder(self) -> str:
        return f"{socket.gethostname()}:{self.proc.pid}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop(self.proc, 20, sig)
        self.client.close()


def start_server(url: str, home: Path, **env_vars: str) -> Server:
    """``python -m threadline.cli.app --store URL serve`` on a free port, once it answers."""
    port = free_port()
    env = dict(os.environ, THREADLINE_CONFIG_DIR=str(home), **env_vars)
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
    return Server(proc, client, url)


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
    with two_servers(store_url, tmp_path_factory.mktemp("home")) as pair:
        yield pair


@contextlib.contextmanager
def two_servers(url: str, home: Path, **env_vars: str) -> Iterator[tuple[Server, Server]]:
    """Two servers on ``url``, both stopped at the end."""
    a = start_server(url, home, **env_vars)
    try:
        b = start_server(url, home, **env_vars)
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


@contextlib.contextmanager
def open_store_of(server: Server) -> Iterator[Any]:
    """The store ``server`` serves, opened in this process."""
    store = open_store(server.store_url)
    try:
        yield store
    finally:
        store.close()


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


def test_an_idle_session_runs_its_next_turn_on_either_server(
    pair: tuple[Server, Server],
) -> None:
    """Before issue 34 the server that ran a turn kept the session's lock for as long
    as it cached the agent (30 idle minutes), and the other answered 409."""
    a, b = pair
    sid = create(a, "ws-idle")
    assert run_turn(a, sid, TURNS[0].user)["text"] == TURNS[0].final
    before = history(b, sid)  # b reads everything a wrote

    assert run_turn(b, sid, TURNS[1].user)["text"] == TURNS[1].final  # no 409
    # a cached the agent of turn 0: it sees that b wrote since and rebuilds it
    assert run_turn(a, sid, TURNS[2].user)["text"] == TURNS[2].final
    after = history(b, sid)
    assert after[: len(before)] == before
    assert user_texts(after) == [TURNS[0].user, TURNS[1].user, TURNS[2].user]
    # nothing runs: no lock, no held_elsewhere, and deleting works from either server
    with open_store_of(a) as store:
        assert store.lock_holder(sid) is None
    assert b.client.delete(f"/v1/sessions/{sid}").status_code == 200
    error(trpc_query(a.client, "session.get", {"sessionId": sid}), 404, "NOT_FOUND")


def test_prompts_racing_on_one_session_from_both_servers_never_overlap(
    pair: tuple[Server, Server],
) -> None:
    """Turns run one at a time, on whichever server reserved the session first (a prompt
    that arrives after a turn ended may start the next one, on either server), and every
    refused prompt stored nothing."""
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
    for _, _, r in responses:
        if r.status_code != 200:
            error(r, 409, "CONFLICT")  # busy elsewhere, or a turn already running here
    for server, _, r in won:
        events = read_sse(server.client, sid, r.json()["result"]["data"]["lastEventId"])
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

        graceful.stop()
        killed.stop(signal.SIGKILL)  # their cached agents go with them; no lock was held
        for sid in (kept, lost):
            run_turn(b, sid, TURNS[1].user)
            assert user_texts(history(b, sid)) == [TURNS[0].user, TURNS[1].user]
    finally:
        graceful.stop()
        killed.stop()
