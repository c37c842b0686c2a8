"""tRPC v11's wire format, in process (issue 20, points 2 and 6): the error shape on every
route and refusal, batches as ``httpBatchLink`` sends them, and bad input (JSON nested
1,000 deep, bytes that are not UTF-8) answered 400 instead of 500 with a traceback.
``tests/test_trpc_client.py`` checks the same against the real ``@trpc/client``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from threadline import open_store
from threadline.server import create_app
from threadline.server.config import ServerConfig
from threadline.server.procedures import ERRORS, TRPC_ERROR_CODES, TRPC_HTTP_STATUS
from threadline.server.trpc import MAX_BATCH

TOKEN = "wire-token-0123456789abcdef"
DEEP = "[" * 1000 + "]" * 1000


@pytest.fixture
def client() -> Iterator[TestClient]:
    config = ServerConfig(token=TOKEN, allowed_hosts=("testserver",))
    app = create_app(open_store("memory://"), config)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def trpc_error(r: httpx.Response, code: str, path: str | None = None) -> str:
    """Assert ``r`` is one tRPC-shaped error; returns its message."""
    status = TRPC_HTTP_STATUS[code]
    assert r.status_code == status, r.text
    return shaped(r.json(), code, path)


def shaped(answer: dict[str, Any], code: str, path: str | None) -> str:
    error = answer["error"]
    assert error["code"] == TRPC_ERROR_CODES[code]
    data = error["data"]
    assert (data["code"], data["httpStatus"]) == (code, TRPC_HTTP_STATUS[code])
    assert data.get("path") == path
    assert isinstance(error["message"], str) and error["message"]
    return str(error["message"])


def create(client: TestClient) -> str:
    r = client.post("/trpc/session.create", json={"workerId": "w", "workspaceId": "ws"})
    return str(r.json()["result"]["data"]["sessionId"])


def test_every_library_error_has_a_trpc_code() -> None:
    for kind, code in ERRORS:
        assert code in TRPC_HTTP_STATUS, kind
    assert set(TRPC_ERROR_CODES) == set(TRPC_HTTP_STATUS)


def test_input_nested_1000_deep_or_not_utf8_is_a_400(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        r = client.post("/trpc/session.create", content=DEEP)
        assert "100 levels" in trpc_error(r, "BAD_REQUEST", "session.create")
        r = client.get("/trpc/session.list", params={"input": DEEP})
        trpc_error(r, "BAD_REQUEST", "session.list")
        r = client.post("/trpc/session.create", content=b'{"workerId": "\xff\xfe"}')
        assert "not UTF-8" in trpc_error(r, "BAD_REQUEST", "session.create")
        r = client.get("/trpc/session.list?input=%7B%22agent%22%3A%22%FF%22%7D")
        assert "not UTF-8" in trpc_error(r, "BAD_REQUEST", "session.list")
        r = client.post("/trpc/session.create", content=b"{not json")
        assert "not JSON" in trpc_error(r, "BAD_REQUEST", "session.create")
    assert not caplog.records  # an expected error logs no "internal error" traceback


def test_batches_answer_one_entry_per_call(client: TestClient) -> None:
    sid = create(client)
    inputs = {"0": {}, "1": {"sessionId": sid}}
    r = client.get(
        "/trpc/session.list,session.get", params={"batch": "1", "input": json.dumps(inputs)}
    )
    assert r.status_code == 200, r.text
    listed, got = r.json()
    assert listed["result"]["data"]["total"] == 1
    assert got["result"]["data"]["session"]["id"] == sid

    inputs = {"0": {"sessionId": "no-such-session"}, "1": {"sessionId": sid}}
    r = client.get(
        "/trpc/session.get,session.get", params={"batch": "1", "input": json.dumps(inputs)}
    )
    assert r.status_code == 207  # the calls' statuses differ
    missing, found = r.json()
    shaped(missing, "NOT_FOUND", "session.get")
    assert found["result"]["data"]["session"]["id"] == sid

    body = {"0": {"sessionId": sid, "title": "one"}, "1": {"sessionId": sid, "title": "two"}}
    r = client.post("/trpc/session.rename,session.rename?batch=1", json=body)
    assert r.status_code == 200
    assert [a["result"]["data"]["title"] for a in r.json()] == ["one", "two"]

    # every call of a batch fails alike on an input that is not an object, or not JSON
    r = client.post("/trpc/session.rename,session.rename?batch=1", json=[1, 2])
    assert r.status_code == 400
    for answer in r.json():
        shaped(answer, "BAD_REQUEST", "session.rename")
    # an unknown procedure or a wrong method is its own call's error
    r = client.get("/trpc/session.list,session.nope", params={"batch": "1"})
    assert r.status_code == 207
    ok, nope = r.json()
    assert "result" in ok
    shaped(nope, "NOT_FOUND", "session.nope")
    r = client.get("/trpc/session.create,session.delete", params={"batch": "1"})
    assert r.status_code == 405
    shaped(r.json()[0], "METHOD_NOT_SUPPORTED", "session.create")
    shaped(r.json()[1], "METHOD_NOT_SUPPORTED", "session.delete")


def test_batches_refused_whole(client: TestClient) -> None:
    r = client.post("/trpc/session.list,session.create?batch=1", json={})
    assert "mix" in trpc_error(r, "BAD_REQUEST")
    names = ",".join(["session.list"] * (MAX_BATCH + 1))
    r = client.get(f"/trpc/{names}", params={"batch": "1"})
    assert f"at most {MAX_BATCH}" in trpc_error(r, "BAD_REQUEST")
    r = client.get(
        "/trpc/session.list", params={"batch": "1"}, headers={"trpc-accept": "application/jsonl"}
    )
    assert "httpBatchLink" in trpc_error(r, "BAD_REQUEST")


def test_other_methods_and_routes_answer_in_trpcs_shape(client: TestClient) -> None:
    r = client.put("/trpc/session.list", json={})
    trpc_error(r, "METHOD_NOT_SUPPORTED", "session.list")
    assert r.headers["allow"] == "GET, POST"
    assert client.head("/trpc/session.list").status_code == 204
    trpc_error(client.get("/trpc/a/b"), "NOT_FOUND", "a/b")
    trpc_error(client.get("/v1/no-such-route"), "NOT_FOUND")
    trpc_error(client.put("/v1/sessions"), "METHOD_NOT_SUPPORTED")
    trpc_error(client.post("/v1/sessions", json={"workerId": "w"}), "BAD_REQUEST")
    r = client.get("/trpc/session.list", headers={"Authorization": "Bearer wrong-000000000000"})
    trpc_error(r, "UNAUTHORIZED", "session.list")
    r = client.get("/trpc/session.list,session.get?batch=1", headers={"Authorization": ""})
    trpc_error(r, "UNAUTHORIZED")  # a batch's refusal names no single procedure


def test_a_failed_turn_logs_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.test_server import BlockingModel, blocking_runner, wait_for

    model = BlockingModel(fail=True)
    runner, store = blocking_runner(model)
    sid = store.create_session(model="simulated/gpt-4o").id
    model.go.set()
    with caplog.at_level(logging.WARNING, logger="threadline.server.runner"):
        runner.run_turn(sid, "hello", "simulated/gpt-4o")
        assert wait_for(lambda: not runner.is_running(sid))
    runner.close()
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert "the provider is down" in record.getMessage()
    assert record.exc_info is None
