"""A turn running on one of two ``threadline serve`` workers, asked of the other (issue 34).

Two live workers (the real command, in subprocesses) share one PostgreSQL schema or
one Redis prefix; their model is a fake OpenAI server that accepts each request and
never answers, so a turn runs until it is cancelled. While it runs, the other worker
refuses a prompt with 409 naming the worker running it; a cancel sent to the other
worker stops it (its followers get ``turn_finished`` with ``stopped: cancelled``, and
the model request is closed) and answers ``{"cancelled": true}``; a delete sent there
stops it and deletes the session; a cancel with no turn running answers false. When
the worker running a turn is killed (-9), the other runs the session's next prompt
at once and its history is valid.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx

from tests.conformance.backends import shared_store_url
from tests.fakes import FakeOpenAI
from tests.test_server import error, wait_for
from tests.test_server_multiprocess import (
    Server,
    assert_busy,
    create,
    history,
    open_store_of,
    start_server,
    two_servers,
    user_texts,
)

MODEL = "openai/gpt-4o"
REACHED = 5.0
"""A generous bound on "at once" for a shared host; the figures printed are far below."""


@pytest.fixture(scope="module", params=["postgres", "redis"])
def pair(
    request: pytest.FixtureRequest,
    silent_model: FakeOpenAI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Server, Server]]:
    backend = request.param
    with (
        shared_store_url(backend, tmp_path_factory.mktemp(backend)) as url,
        two_servers(url, tmp_path_factory.mktemp("home"), **silent_model.env) as pair,
    ):
        yield pair


def prompt(server: Server, sid: str, text: str) -> httpx.Response:
    return server.client.post(f"/v1/sessions/{sid}/prompt", json={"text": text, "model": MODEL})


def start_turn(server: Server, silent_model: FakeOpenAI, sid: str, text: str) -> int:
    """Prompt ``server`` and wait until its model request hangs; the last event id."""
    hanging = silent_model.silent_open
    answer = prompt(server, sid, text)
    assert answer.status_code == 202, answer.text
    assert wait_for(lambda: silent_model.silent_open > hanging, 20), "the model request never came"
    return int(answer.json()["lastEventId"])


def follow(server: Server, sid: str, after: int | None) -> tuple[threading.Thread, list[Any]]:
    """Follow the session's events on ``server`` through its next ``turn_finished`` (or
    ``interrupted``), each appended as it arrives."""
    events: list[Any] = []
    headers = {} if after is None else {"Last-Event-ID": str(after)}

    def read() -> None:
        url = f"/v1/sessions/{sid}/events"
        params = {"until": "turn_finished"}
        with server.client.stream("GET", url, params=params, headers=headers) as response:
            assert response.status_code == 200
            fields: dict[str, str] = {}
            for line in response.iter_lines():
                if line == "" and "event" in fields:
                    events.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
                    fields = {}
                elif line and not line.startswith(":"):
                    key, _, value = line.partition(": ")
                    fields[key] = value

    thread = threading.Thread(target=read)
    thread.start()
    return thread, events


def cancel_from(asker: Server, sid: str, follower: threading.Thread, events: list[Any]) -> None:
    """``asker`` cancels the turn ``follower`` follows: the answer says it did, and the
    stream ends with ``turn_finished``, ``stopped: cancelled``."""
    assert asker.client.post(f"/v1/sessions/{sid}/cancel").json()["cancelled"] is True
    follower.join(REACHED)
    assert not follower.is_alive() and events[-1][2]["stopped"] == "cancelled"


def test_cancel_from_the_other_worker_stops_the_turn(
    pair: tuple[Server, Server], silent_model: FakeOpenAI
) -> None:
    a, b = pair
    sid = create(a, "ws-cancel")
    assert b.client.post(f"/v1/sessions/{sid}/cancel").json()["cancelled"] is False  # idle
    before = start_turn(a, silent_model, sid, "first")
    follower, events = follow(a, sid, before)
    remote, seen_on_b = follow(b, sid, None)  # b does not run the turn

    assert_busy(prompt(b, sid, "too soon"), a)  # a turn really runs: 409, nothing stored
    hung_up = len(silent_model.hung_up)
    asked = time.monotonic()
    answer = b.client.post(f"/v1/sessions/{sid}/cancel")
    took = time.monotonic() - asked
    assert answer.status_code == 200 and answer.json()["cancelled"] is True, answer.text
    follower.join(REACHED)
    print(f"\ncancel on the other worker -> answered in {took * 1000:.0f} ms")
    assert not follower.is_alive() and events[-1][1] == "turn_finished"
    assert events[-1][2]["stopped"] == "cancelled"
    assert wait_for(lambda: len(silent_model.hung_up) > hung_up, REACHED), "the request stayed open"
    remote.join(REACHED)  # b's follower hears the turn end, though a ran it
    assert not remote.is_alive(), "a follower on the other worker waited on silence"
    assert [name for _, name, _ in seen_on_b] == ["held_elsewhere", "turn_finished"]
    assert seen_on_b[-1] == events[-1]  # the turn's own end, through the store's engine

    # the session is free at once: b runs the next turn, and a cancels it from there
    before = start_turn(b, silent_model, sid, "second")
    cancel_from(a, sid, *follow(b, sid, before))
    messages = history(a, sid)
    assert user_texts(messages) == ["first", "second"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2  # each interrupted
    with open_store_of(a) as store:
        assert store.lock_holder(sid) is None
        assert not any(k.endswith("cancel") for k in store.get_memo(sid))  # nothing left


def test_delete_from_the_other_worker_stops_the_turn_and_deletes(
    pair: tuple[Server, Server], silent_model: FakeOpenAI
) -> None:
    a, b = pair
    sid = create(a, "ws-delete")
    before = start_turn(a, silent_model, sid, "doomed")
    follower, events = follow(a, sid, before)
    hung_up = len(silent_model.hung_up)
    answer = b.client.delete(f"/v1/sessions/{sid}")
    assert answer.status_code == 200, answer.text
    follower.join(REACHED)
    assert not follower.is_alive() and events[-1][2]["stopped"] == "cancelled"
    assert wait_for(lambda: len(silent_model.hung_up) > hung_up, REACHED)
    error(a.client.get(f"/v1/sessions/{sid}"), 404, "NOT_FOUND")


def test_kill_9_of_the_worker_running_a_turn_leaves_the_session_to_the_other(
    pair: tuple[Server, Server], silent_model: FakeOpenAI, tmp_path: Path
) -> None:
    _, b = pair
    doomed = start_server(b.store_url, tmp_path, **silent_model.env)
    try:
        sid = create(doomed, "ws-kill")
        start_turn(doomed, silent_model, sid, "cut short")
        follower, events = follow(b, sid, None)
        assert wait_for(lambda: events, 20)  # held_elsewhere: b's follower is waiting
        doomed.stop(signal.SIGKILL)
        follower.join(REACHED)  # interrupted, not silence
        assert not follower.is_alive(), "the follower of a killed worker's turn heard nothing"
        assert [name for _, name, _ in events] == ["held_elsewhere", "interrupted"]
        assert events[-1][2]["holder"] == doomed.holder
        before = start_turn(b, silent_model, sid, "after the kill")  # no 409 naming the dead pid
        cancel_from(b, sid, *follow(b, sid, before))
        messages = history(b, sid)
        assert user_texts(messages) == ["cut short", "after the kill"]
    finally:
        doomed.stop()
