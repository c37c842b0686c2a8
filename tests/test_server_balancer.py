"""Three ``threadline serve`` workers behind a real round-robin proxy (issue 34, point 5).

The proxy is HAProxy or nginx from the distribution's packages, started here with the
configuration ``bench/balancer.py`` generates (the one the documentation gives: no
sticky routing, SSE unbuffered). Three live workers share one PostgreSQL schema or
one Redis prefix; every call goes through the proxy, which says in a header which
worker served it, and a call is steered onto a chosen worker only by the proxy's own
rotation (cheap calls first), never by addressing the worker. Through the proxy: an
idle session's next prompt runs on another worker (no 409); a follower on a worker
that does not run the turn gets every event in order, live, and resumes with
``Last-Event-ID`` on a third; a cancel or a delete reaching another worker stops the
turn; kill -9 of the worker running a turn gives its followers ``interrupted`` and
the session's next prompt runs. The model of the turns that must keep running is a
fake OpenAI server that never answers; the others use the offline model.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx

from tests.bench_scripts import load_bench
from tests.conformance.backends import shared_store_url
from tests.conftest import require
from tests.fakes import FakeOpenAI
from tests.test_server import TURNS, data, error, trpc_call, wait_for
from tests.test_server_multiprocess import (
    TOKEN,
    Server,
    assert_busy,
    history,
    start_server,
    user_texts,
)

balancer = load_bench("balancer")

HANGING_MODEL = "openai/gpt-4o"
REACHED = 10.0
"""A generous bound on "at once" for a shared host (the turn stops within a second)."""
STEER_TRIES = 12


@dataclass
class Balanced:
    """Workers behind a proxy, and a client of the proxy."""

    kind: str
    workers: list[Server]
    proxy: Any
    client: httpx.Client
    order: list[str] = field(default_factory=list)
    """The workers' addresses in the proxy's rotation."""

    def address(self, server: Server) -> str:
        return str(server.client.base_url).removeprefix("http://").rstrip("/")

    def served(self, response: httpx.Response) -> str:
        tried = response.headers.get(balancer.WORKER_HEADER, "")
        worker = tried.rpartition(", ")[2]  # nginx names each worker it tried, the last served
        assert worker in self.order, (worker, self.order)
        return str(worker)

    def steer(self, avoid: set[str]) -> None:
        """Send cheap calls until the proxy's next pick is none of ``avoid``."""
        for _ in range(STEER_TRIES):
            last = self.served(self.client.get("/openapi.json"))
            if self.order[(self.order.index(last) + 1) % len(self.order)] not in avoid:
                return
        raise AssertionError(f"the proxy never rotated away from {avoid}")

    def call(self, avoid: set[str], method: str, url: str, **kw: Any) -> httpx.Response:
        """``method url`` through the proxy, landing on none of ``avoid``."""
        self.steer(avoid)
        response = self.client.request(method, url, **kw)
        assert self.served(response) not in avoid, (response.headers, avoid)
        return response


def proxied(kind: str, workers: list[Server], home: Path) -> Balanced:
    require(balancer.available(kind) is not None, f"{kind} is not installed")
    order = [str(w.client.base_url).removeprefix("http://").rstrip("/") for w in workers]
    proxy = balancer.start_proxy(kind, order, home)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    client = httpx.Client(base_url=proxy.base, headers=auth, timeout=30)
    return Balanced(kind, workers, proxy, client, order)


@pytest.fixture(scope="module", params=["postgres", "redis"])
def workers(
    request: pytest.FixtureRequest,
    silent_model: FakeOpenAI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[Server]]:
    backend = request.param
    with shared_store_url(backend, tmp_path_factory.mktemp(backend)) as url:
        home = tmp_path_factory.mktemp("home")
        started: list[Server] = []
        try:
            for _ in range(3):
                started.append(start_server(url, home, **silent_model.env))
            yield started
        finally:
            for server in started:
                server.stop()


@pytest.fixture(scope="module", params=balancer.PROXIES)
def lb(
    request: pytest.FixtureRequest,
    workers: list[Server],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Balanced]:
    balanced = proxied(request.param, workers, tmp_path_factory.mktemp("proxy"))
    try:
        yield balanced
    finally:
        balanced.client.close()
        balanced.proxy.stop()


# -- helpers ----------------------------------------------------------------------------


class Follower:
    """The session's events through the proxy, read in a thread of its own through the
    next ``turn_finished`` (or ``interrupted``); ``start`` returns once the proxy has
    answered, with the worker that serves the stream."""

    def __init__(self, lb: Balanced, sid: str, after: int | None, avoid: set[str]) -> None:
        self.events: list[tuple[int | None, str, dict[str, Any]]] = []
        self.worker = ""
        self._changed = threading.Condition()
        self._answered = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(lb, sid, after))
        lb.steer(avoid)
        self._thread.start()
        assert self._answered.wait(REACHED), "the proxy never answered the event stream"
        assert self.worker not in avoid, (self.worker, avoid)

    def _read(self, lb: Balanced, sid: str, after: int | None) -> None:
        headers = {} if after is None else {"Last-Event-ID": str(after)}
        url, params = f"/v1/sessions/{sid}/events", {"until": "turn_finished"}
        with lb.client.stream("GET", url, params=params, headers=headers) as response:
            self.worker = lb.served(response)
            self._answered.set()
            assert response.status_code == 200
            fields: dict[str, str] = {}
            for line in response.iter_lines():
                if line == "" and "event" in fields:
                    id = int(fields["id"]) if "id" in fields else None
                    with self._changed:
                        self.events.append((id, fields["event"], json.loads(fields["data"])))
                        self._changed.notify_all()
                    fields = {}
                elif line and not line.startswith(":"):
                    key, _, value = line.partition(": ")
                    fields[key] = value

    def wait_for(self, name: str) -> None:
        with self._changed:
            heard = self._changed.wait_for(lambda: name in self.names, REACHED)
        assert heard, f"no {name} through the proxy: {self.names}"

    def done(self) -> list[tuple[int | None, str, dict[str, Any]]]:
        self._thread.join(REACHED)
        assert not self._thread.is_alive(), f"the stream did not end: {self.names}"
        return self.events

    @property
    def names(self) -> list[str]:
        return [name for _, name, _ in self.events]


def create(lb: Balanced, workspace: str) -> str:
    inp = {"workerId": "worker-1", "workspaceId": workspace}
    return str(data(trpc_call(lb.client, "session.create", inp))["sessionId"])


def offline_prompt(lb: Balanced, sid: str, text: str, avoid: set[str]) -> tuple[str, int]:
    """The offline model's turn, started on none of ``avoid``: (its worker, the last
    event id before it)."""
    lb.steer(avoid)
    answer = trpc_call(lb.client, "agent.prompt", {"sessionId": sid, "text": text})
    worker = lb.served(answer)
    assert answer.status_code == 200 and worker not in avoid, (answer.text, worker, avoid)
    return worker, int(data(answer)["lastEventId"])


def hanging_turn(
    lb: Balanced, silent_model: FakeOpenAI, sid: str, text: str, avoid: set[str]
) -> tuple[str, int]:
    """A turn that runs until it is stopped, started on none of ``avoid``, once its model
    request hangs: (its worker, the last event id before it)."""
    hanging = silent_model.silent_open
    body = {"text": text, "model": HANGING_MODEL}
    answer = lb.call(avoid, "POST", f"/v1/sessions/{sid}/prompt", json=body)
    assert answer.status_code == 202, answer.text
    assert wait(lambda: silent_model.silent_open > hanging), "the model request never came"
    return lb.served(answer), int(answer.json()["lastEventId"])


def wait(check: Any, timeout: float = REACHED) -> bool:
    return bool(wait_for(check, timeout))


def turn_ids(events: list[tuple[int | None, str, dict[str, Any]]]) -> list[int]:
    """The ids of the turn's own events (``held_elsewhere`` is said, not logged)."""
    return [id for id, name, _ in events if name != "held_elsewhere" and id is not None]


# -- the tests --------------------------------------------------------------------------


def test_an_idle_sessions_next_prompt_runs_on_another_worker(lb: Balanced) -> None:
    sid = create(lb, "lb-idle")
    ran: list[str] = []
    for turn in TURNS[:3]:
        worker, before = offline_prompt(lb, sid, turn.user, avoid=set(ran))
        ran.append(worker)
        events = Follower(lb, sid, before, avoid=set()).done()
        assert events[-1][1] == "turn_finished" and events[-1][2]["text"] == turn.final
    assert len(set(ran)) == 3, ran  # each turn on a worker that had not run the session
    assert user_texts(history(lb.workers[0], sid)) == [t.user for t in TURNS[:3]]


def test_a_follower_on_another_worker_gets_every_event_and_resumes(lb: Balanced) -> None:
    sid = create(lb, "lb-events")
    ran, before = offline_prompt(lb, sid, TURNS[0].user, avoid=set())
    elsewhere = Follower(lb, sid, before, avoid={ran})
    events = [e for e in elsewhere.done() if e[1] != "held_elsewhere"]
    names = [name for _, name, _ in events]
    assert names[0] == "turn_started" and names[-1] == "turn_finished", names
    assert {"text_delta", "tool_call", "tool_result"} <= set(names), names
    ids = turn_ids(events)
    assert ids == list(range(before + 1, before + 1 + len(events)))  # in order, none missing
    assert events[-1][2]["text"] == TURNS[0].final

    middle = ids[len(ids) // 2]
    resumed = Follower(lb, sid, middle, avoid={ran, elsewhere.worker}).done()
    assert [e for e in resumed if e[1] != "held_elsewhere"] == [e for e in events if e[0] > middle]


def followed_turn(
    lb: Balanced, silent_model: FakeOpenAI, name: str, text: str
) -> tuple[str, str, int, Follower]:
    """A new session's turn that runs until it is stopped, and a follower on another
    worker that has seen it start (the proxy buffers nothing): (session id, the turn's
    worker, the last event id before it, the follower)."""
    sid = create(lb, name)
    ran, before = hanging_turn(lb, silent_model, sid, text, avoid=set())
    follower = Follower(lb, sid, before, avoid={ran})
    follower.wait_for("turn_started")
    return sid, ran, before, follower


def test_a_turn_streams_live_and_stops_when_another_worker_cancels_it(
    lb: Balanced, silent_model: FakeOpenAI
) -> None:
    sid, ran, before, follower = followed_turn(lb, silent_model, "lb-cancel", "first")

    refused = lb.call({ran}, "POST", f"/v1/sessions/{sid}/prompt", json={"text": "too soon"})
    holder = next(w for w in lb.workers if lb.address(w) == ran)
    assert_busy(refused, holder)  # a turn truly runs: the only 409

    hung_up = len(silent_model.hung_up)
    answer = lb.call({ran}, "POST", f"/v1/sessions/{sid}/cancel")
    assert answer.status_code == 200 and answer.json()["cancelled"] is True, answer.text
    events = [e for e in follower.done() if e[1] != "held_elsewhere"]
    assert events[-1][1] == "turn_finished" and events[-1][2]["stopped"] == "cancelled"
    assert turn_ids(events) == list(range(before + 1, before + 1 + len(events)))
    assert wait(lambda: len(silent_model.hung_up) > hung_up), "the model request stayed open"
    messages = history(lb.workers[0], sid)
    assert user_texts(messages) == ["first"] and [m["role"] for m in messages] == [
        "user",
        "assistant",
    ]


def test_a_delete_reaching_another_worker_stops_the_turn(
    lb: Balanced, silent_model: FakeOpenAI
) -> None:
    sid, ran, _, follower = followed_turn(lb, silent_model, "lb-delete", "doomed")
    hung_up = len(silent_model.hung_up)
    assert lb.call({ran}, "DELETE", f"/v1/sessions/{sid}").status_code == 200
    assert follower.done()[-1][2]["stopped"] == "cancelled"
    assert wait(lambda: len(silent_model.hung_up) > hung_up), "the model request stayed open"
    for _ in lb.order:  # gone on every worker
        error(lb.client.get(f"/v1/sessions/{sid}"), 404, "NOT_FOUND")


def test_kill_9_of_the_worker_running_a_turn_interrupts_its_followers(
    lb: Balanced, silent_model: FakeOpenAI, tmp_path: Path
) -> None:
    """Its own proxy, over two of the workers and one that dies."""
    url = lb.workers[0].store_url
    doomed = start_server(url, tmp_path, **silent_model.env)
    three = proxied(lb.kind, [*lb.workers[:2], doomed], tmp_path)
    try:
        dying = three.address(doomed)
        sid = create(three, "lb-kill")
        ran, before = hanging_turn(
            three, silent_model, sid, "cut short", avoid=set(three.order) - {dying}
        )
        assert ran == dying
        follower = Follower(three, sid, before, avoid={dying})
        follower.wait_for("turn_started")
        doomed.stop(signal.SIGKILL)
        events = follower.done()  # interrupted, not silence
        assert events[-1][1] == "interrupted", events
        assert events[-1][2]["holder"] == doomed.holder

        # no 409 naming the dead worker: the next prompt runs at once on a live one
        hanging_turn(three, silent_model, sid, "after the kill", avoid={dying})
        cancelled = three.client.post(f"/v1/sessions/{sid}/cancel")
        assert cancelled.json()["cancelled"] is True, cancelled.text
        messages = history(lb.workers[0], sid)
        assert user_texts(messages) == ["cut short", "after the kill"]
    finally:
        three.client.close()
        three.proxy.stop()
        doomed.stop()
