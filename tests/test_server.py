"""The agent server (``threadline.server``): a live uvicorn in a subprocess, httpx as client.

One server serves the whole module (starting it is the slow part); every test makes
its own sessions, in its own workspace where totals matter. The eviction of cached
agents is tested in-process with a controlled clock.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx

from tests.live_server import free_port, stop, wait_until_serving
from threadline import ContextPolicy, Message, open_store
from threadline.demo.coding_run import coding_run
from threadline.errors import ConfigError, SessionNotFound
from threadline.server.auth import TOKEN_ENV, load_or_create_token, resolve_token
from threadline.server.config import SIMULATED_TURNS, ServerConfig
from threadline.server.hooks import SIGNATURE_HEADER, sign
from threadline.server.procedures import TRPC_ERROR_CODES
from threadline.server.runner import AgentRunner, build_agent

TOKEN = "test-token-0123456789abcdef"
SECRET = "webhook-secret"
MAX_BODY = 64 * 1024
TURNS = coding_run(SIMULATED_TURNS)
SIM = "simulated/gpt-4o"
SIM_MINI = "simulated/gpt-4o-mini"
SMALL_POLICY = dict(
    context_limit=32000,
    max_messages_before_summary=8,
    preserve_user_turns=1,
    min_recent_messages=2,
    preserve_fill=False,
)
"""Small enough that the second scripted turn compacts."""

SERVER_CODE = """
import json, sys, uvicorn
from threadline import ContextPolicy, open_store
from threadline.server import ServerConfig, Webhook, create_app

port, db, hook_log, webhook_url, settings = sys.argv[1:6]
settings = json.loads(settings)

def failing(event, payload):
    raise RuntimeError("this hook always fails")

def record(event, payload):
    with open(hook_log, "a") as f:
        f.write(json.dumps({"event": event, "payload": payload}) + "\\n")

config = ServerConfig(
    token=settings["token"],
    max_body_bytes=settings["max_body"],
    workspace_models={"ws-mini": settings["mini"]},
    simulated_policy=ContextPolicy(**settings["policy"]),
)
app = create_app(
    open_store("sqlite://" + db), config, hooks=[failing, record],
    webhooks=[Webhook(webhook_url, settings["secret"])], owns_store=True,
)
uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
"""
SETTINGS = {
    "token": TOKEN,
    "max_body": MAX_BODY,
    "mini": SIM_MINI,
    "policy": SMALL_POLICY,
    "secret": SECRET,
}


class Receiver:
    """A webhook endpoint: records (headers, body) of every POST."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, str], bytes]] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                calls.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.calls]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("server")
    port = free_port()
    hook_log = tmp / "hooks.jsonl"
    env = dict(os.environ, THREADLINE_CONFIG_DIR=str(tmp / "config"))
    env.pop(TOKEN_ENV, None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVER_CODE,
            str(port),
            str(tmp / "t.db"),
            str(hook_log),
            receiver.url,
            json.dumps(SETTINGS),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(proc, base, 20, lambda: proc.stdout.read().decode() if proc.stdout else "")
    try:
        yield {"base": base, "hook_log": hook_log, "proc": proc, "db": tmp / "t.db"}
    finally:
        stop(proc, 10)


@pytest.fixture
def client(live: dict[str, Any]) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=live["base"], headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    ) as c:
        yield c


# -- helpers ----------------------------------------------------------------------------


def trpc_query(client: httpx.Client, name: str, inp: Any) -> httpx.Response:
    return client.get(f"/trpc/{name}", params={"input": json.dumps(inp)})


def trpc_call(client: httpx.Client, name: str, inp: Any) -> httpx.Response:
    return client.post(f"/trpc/{name}", json=inp)


def data(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()["result"]["data"]


def error(response: httpx.Response, status: int, code: str) -> str:
    """The message of a tRPC-shaped error: ``code`` is the JSON-RPC number, ``data`` has
    the name and the status."""
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == TRPC_ERROR_CODES[code], body
    assert (body["data"]["code"], body["data"]["httpStatus"]) == (code, status), body
    return str(body["message"])


def create(client: httpx.Client, workspace: str = "ws-1", **kw: Any) -> str:
    inp = {"workerId": "worker-1", "workspaceId": workspace, **kw}
    sid = data(trpc_call(client, "session.create", inp))["sessionId"]
    return str(sid)


def read_sse(
    client: httpx.Client, session_id: str, last_event_id: int | None
) -> list[tuple[int, str, dict[str, Any]]]:
    """Events through the next ``turn_finished`` (``?until=turn_finished``)."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    events: list[tuple[int, str, dict[str, Any]]] = []
    with client.stream(
        "GET",
        f"/v1/sessions/{session_id}/events",
        params={"until": "turn_finished"},
        headers=headers,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frame: dict[str, str] = {}
        for line in response.iter_lines():
            if line == "":
                if "event" in frame:
                    events.append(
                        (int(frame.get("id", "0")), frame["event"], json.loads(frame["data"]))
                    )
                frame = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(": ")
                frame[key] = value
    return events


def prompt(client: httpx.Client, session_id: str, text: str, **kw: Any) -> dict[str, Any]:
    started = time.monotonic()
    out = data(trpc_call(client, "agent.prompt", {"sessionId": session_id, "text": text, **kw}))
    assert time.monotonic() - started < 5
    return dict(out)


def hook_events(live: dict[str, Any], session_id: str) -> list[str]:
    path: Path = live["hook_log"]
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["event"] for r in rows if r["payload"].get("sessionId") == session_id]


def wait_for(check: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


# -- security ------------------------------------------------------------------------------


def test_every_request_needs_the_bearer_token(live: dict[str, Any]) -> None:
    base = live["base"]
    for method, path in [
        ("GET", "/v1/sessions"),
        ("GET", "/trpc/session.list"),
        ("POST", "/trpc/session.create"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/sessions/x/events"),
    ]:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-000000000"},
            {"Authorization": TOKEN},
        ):
            r = httpx.request(method, base + path, headers=headers, timeout=5)
            assert error(r, 401, "UNAUTHORIZED")
            assert r.headers["www-authenticate"] == "Bearer"
            assert "access-control-allow-origin" not in r.headers


def test_no_cors_and_body_limit(client: httpx.Client) -> None:
    r = client.get("/v1/sessions", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200
    assert not any(h.startswith("access-control-") for h in r.headers)
    r = client.options(
        "/v1/sessions",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
    )
    assert "access-control-allow-origin" not in r.headers
    big = {"workerId": "w", "workspaceId": "ws", "title": "x" * (MAX_BODY + 1)}
    error(client.post("/trpc/session.create", json=big), 413, "PAYLOAD_TOO_LARGE")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"workerId": "w", "workspaceId": "ws", "title": "'
        for _ in range(MAX_BODY // 1024 + 1):
            yield b"x" * 1024
        yield b'"}'

    error(client.post("/trpc/session.create", content=chunks()), 413, "PAYLOAD_TOO_LARGE")


def test_token_file_is_created_once_with_mode_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "conf" / "server-token"
    token = load_or_create_token(path)
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_token(path) == token
    monkeypatch.setenv(TOKEN_ENV, "from-the-environment-123")
    assert resolve_token(None, path=path) == "from-the-environment-123"
    assert resolve_token("given-on-the-command-line", path=path) == "given-on-the-command-line"
    monkeypatch.delenv(TOKEN_ENV)
    assert resolve_token(None, path=path) == token


# -- procedures, both wire formats ------------------------------------------------------------


def test_session_procedures_over_trpc(client: httpx.Client, live: dict[str, Any]) -> None:
    sid = create(client, "ws-trpc", agent="coder", title="first")
    assert len(sid) == 36 and sid.count("-") == 4  # a UUID

    page = data(trpc_query(client, "session.list", {"workspaceId": "ws-trpc"}))
    assert page["total"] == 1
    [item] = page["items"]
    assert item["id"] == sid
    assert (item["workerId"], item["workspaceId"], item["agent"], item["title"]) == (
        "worker-1",
        "ws-trpc",
        "coder",
        "first",
    )

    got = data(trpc_query(client, "session.get", {"sessionId": sid}))
    assert got["session"]["id"] == sid
    assert got["messages"] == [] and got["hasMore"] is False
    assert got["context"]["budget"] > 0 and got["context"]["included_messages"] == 0

    renamed = data(trpc_call(client, "session.rename", {"sessionId": sid, "title": "second"}))
    assert renamed["title"] == "second"
    # superjson-style {"json": input} is accepted too
    got = data(trpc_query(client, "session.get", {"json": {"sessionId": sid, "limit": 1}}))
    assert got["session"]["title"] == "second"

    assert data(trpc_call(client, "session.delete", {"sessionId": sid}))["deleted"] is True
    error(trpc_query(client, "session.get", {"sessionId": sid}), 404, "NOT_FOUND")
    error(trpc_call(client, "session.delete", {"sessionId": sid}), 404, "NOT_FOUND")

    # hooks: the failing one ran first on every event and broke nothing
    assert hook_events(live, sid) == ["session_create", "session_save", "session_delete"]


def test_trpc_errors(client: httpx.Client) -> None:
    r = client.post("/trpc/session.list", json={})
    assert error(r, 405, "METHOD_NOT_SUPPORTED")
    assert r.json()["error"]["data"] == {
        "code": "METHOD_NOT_SUPPORTED",
        "httpStatus": 405,
        "path": "session.list",
    }
    error(client.get("/trpc/session.create"), 405, "METHOD_NOT_SUPPORTED")
    error(client.get("/trpc/session.nope"), 404, "NOT_FOUND")
    error(client.get("/trpc/session.list", params={"input": "{not json"}), 400, "BAD_REQUEST")
    error(trpc_call(client, "session.create", {"workerId": "w"}), 400, "BAD_REQUEST")
    error(
        trpc_call(client, "session.create", {"workerId": "../x", "workspaceId": "ws"}),
        400,
        "BAD_REQUEST",
    )
    error(trpc_query(client, "session.get", {"sessionId": "no-such-session"}), 404, "NOT_FOUND")
    error(trpc_query(client, "session.get", {"sessionId": "a/../b"}), 400, "BAD_REQUEST")
    error(trpc_query(client, "session.list", {"limit": 5, "extra": 1}), 400, "BAD_REQUEST")


def test_session_procedures_over_rest(client: httpx.Client, live: dict[str, Any]) -> None:
    r = client.post("/v1/sessions", json={"workerId": "w-2", "workspaceId": "ws-rest"})
    assert r.status_code == 201, r.text
    sid = r.json()["sessionId"]

    page = client.get("/v1/sessions", params={"workspaceId": "ws-rest"}).json()
    assert [i["id"] for i in page["items"]] == [sid] and page["total"] == 1

    got = client.get(f"/v1/sessions/{sid}", params={"limit": 10}).json()
    assert got["session"]["workerId"] == "w-2" and got["messages"] == []

    r = client.patch(f"/v1/sessions/{sid}", json={"title": "renamed"})
    assert r.status_code == 200 and r.json()["title"] == "renamed"
    r = client.patch(f"/v1/sessions/{sid}", json={"title": ""})
    assert r.json()["title"] is None

    assert client.delete(f"/v1/sessions/{sid}").json() == {"sessionId": sid, "deleted": True}
    error(client.get(f"/v1/sessions/{sid}"), 404, "NOT_FOUND")
    error(client.post("/v1/sessions", json={"workerId": "w"}), 400, "BAD_REQUEST")
    error(client.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"}), 404, "NOT_FOUND")

    spec = client.get("/openapi.json").json()
    assert {
        "/v1/sessions",
        "/v1/sessions/{session_id}",
        "/v1/sessions/{session_id}/prompt",
        "/v1/sessions/{session_id}/events",
    } <= set(spec["paths"])


def test_search_over_rest_and_trpc(client: httpx.Client, live: dict[str, Any]) -> None:
    """``GET /v1/search`` and ``session.search``: hits across sessions, narrowed to one
    session or role, paged with a total; bad input is a 400, an unknown session a 404."""
    one, two = create(client, "ws-search"), create(client, "ws-search")
    store = open_store(f"sqlite:///{live['db']}")
    try:
        store.get_session(one).append(
            [Message.user("the quokka migration failed"), Message.assistant("quokka fixed")]
        )
        store.get_session(two).append([Message.user("a second quokka turned up")])
    finally:
        store.close()

    page = client.get("/v1/search", params={"q": "quokka"}).json()
    assert page["total"] == 3 and page["offset"] == 0
    assert {(h["sessionId"], h["seq"]) for h in page["hits"]} == {(one, 1), (one, 2), (two, 1)}
    assert all("[quokka]" in h["snippet"].lower() for h in page["hits"])

    narrowed = client.get("/v1/search", params={"q": "quokka", "sessionId": one}).json()
    assert [h["seq"] for h in narrowed["hits"]] == [2, 1]  # newest first
    by_role = data(trpc_query(client, "session.search", {"q": "quokka", "role": "assistant"}))
    assert [(h["sessionId"], h["role"]) for h in by_role["hits"]] == [(one, "assistant")]
    paged = data(trpc_query(client, "session.search", {"q": "quokka", "limit": 2, "offset": 2}))
    assert len(paged["hits"]) == 1 and paged["total"] == 3

    error(client.get("/v1/search", params={"q": ""}), 400, "BAD_REQUEST")
    error(client.get("/v1/search", params={"q": "x", "role": "robot"}), 400, "BAD_REQUEST")
    error(client.get("/v1/search", params={"q": "x", "sessionId": "nope-nope"}), 404, "NOT_FOUND")
    many = " ".join(f"w{i}" for i in range(100))
    error(trpc_query(client, "session.search", {"q": many}), 400, "BAD_REQUEST")


def test_list_pages_are_1_to_200_with_totals(client: httpx.Client) -> None:
    ids = {create(client, "ws-paging") for _ in range(5)}
    create(client, "ws-paging", agent="other")
    seen: set[str] = set()
    for offset in (0, 2, 4):
        for page in (
            data(
                trpc_query(
                    client,
                    "session.list",
                    {"workspaceId": "ws-paging", "agent": "default", "limit": 2, "offset": offset},
                )
            ),
            client.get(
                "/v1/sessions",
                params={
                    "workspaceId": "ws-paging",
                    "agent": "default",
                    "limit": 2,
                    "offset": offset,
                },
            ).json(),
        ):
            assert page["total"] == 5 and page["limit"] == 2 and page["offset"] == offset
            assert len(page["items"]) == (1 if offset == 4 else 2)
            seen |= {i["id"] for i in page["items"]}
    assert seen == ids
    all_ws = data(trpc_query(client, "session.list", {"workspaceId": "ws-paging", "limit": 200}))
    assert all_ws["total"] == 6 and len(all_ws["items"]) == 6
    assert data(trpc_query(client, "session.list", {"limit": 1}))["total"] >= 6
    for bad in (0, 201, -1):
        error(trpc_query(client, "session.list", {"limit": bad}), 400, "BAD_REQUEST")
        error(client.get("/v1/sessions", params={"limit": bad}), 400, "BAD_REQUEST")
    error(trpc_query(client, "session.list", {"offset": -1}), 400, "BAD_REQUEST")
    error(client.get("/v1/sessions/x", params={"limit": 201}), 400, "BAD_REQUEST")


# -- agent.prompt and its events ------------------------------------------------------------


def test_prompt_streams_the_turn_over_sse_and_resumes(
    client: httpx.Client, live: dict[str, Any], receiver: Receiver
) -> None:
    sid = create(client, "ws-turns")
    turn = TURNS[0]
    out = prompt(client, sid, turn.user)
    assert out["model"] == SIM and out["seq"] == 1

    events = read_sse(client, sid, out["lastEventId"])
    names = [name for _, name, _ in events]
    assert names[0] == "turn_started" and names[-1] == "turn_finished"
    assert "text_delta" in names
    calls = [d for _, n, d in events if n == "tool_call"]
    results = [d for _, n, d in events if n == "tool_result"]
    assert [c["id"] for c in calls] == [c.id for s in turn.steps for c in s.calls]
    assert [r["toolCallId"] for r in results] == [c["id"] for c in calls]
    finished = events[-1][2]
    assert finished["ok"] is True and finished["text"] == turn.final
    text = "".join(d["text"] for _, n, d in events if n == "text_delta")
    assert turn.final in text
    ids = [i for i, _, _ in events]
    assert ids == list(range(out["lastEventId"] + 1, out["lastEventId"] + 1 + len(ids)))

    # resume: Last-Event-ID from the middle gets exactly the rest
    middle = ids[len(ids) // 2]
    resumed = read_sse(client, sid, middle)
    assert resumed == [e for e in events if e[0] > middle]

    # the stored history holds the turn, newest page first
    got = client.get(f"/v1/sessions/{sid}", params={"limit": 2}).json()
    assert [m["role"] for m in got["messages"]] == ["tool", "assistant"]
    assert got["hasMore"] is True
    older = client.get(
        f"/v1/sessions/{sid}", params={"limit": 200, "beforeSeq": got["nextBeforeSeq"]}
    ).json()
    assert older["messages"][0]["seq"] == 1 and older["messages"][0]["content"] == turn.user
    assert got["context"]["history_messages"] == got["session"]["messageCount"]

    # a second turn compacts (the test server's small policy): event and hook
    out = prompt(client, sid, TURNS[1].user)
    events = read_sse(client, sid, out["lastEventId"])
    compacted = [d for _, n, d in events if n == "context_compacted"]
    assert compacted and compacted[0]["coversUpTo"] >= 1
    assert events[-1][1] == "turn_finished" and events[-1][2]["ok"] is True
    hooks = hook_events(live, sid)  # Python hooks run before turn_finished is sent
    assert hooks.count("session_save") == 2  # one per finished turn
    assert "context_compacted" in hooks

    # webhooks: signed with HMAC-SHA256 of the body
    def mine() -> list[tuple[dict[str, str], bytes]]:
        return [c for c in receiver.calls if json.loads(c[1])["payload"]["sessionId"] == sid]

    assert wait_for(lambda: len(mine()) >= 4)  # create, save x2, compacted
    assert {json.loads(body)["event"] for _, body in mine()} >= {
        "session_create",
        "session_save",
        "context_compacted",
    }
    for headers, body in mine():
        assert headers[SIGNATURE_HEADER.lower()] == sign(SECRET, body)

    # a cached agent (holding the attach lock) does not stop a delete, and the delete
    # ends the streams of everyone following the session
    followed: list[str] = []

    def follow() -> None:
        with client.stream("GET", f"/v1/sessions/{sid}/events") as response:
            followed.extend(line for line in response.iter_lines() if line.startswith("event:"))

    follower = threading.Thread(target=follow)
    follower.start()
    time.sleep(0.3)
    assert client.delete(f"/v1/sessions/{sid}").status_code == 200
    follower.join(5)
    assert not follower.is_alive() and followed == ["event: session_deleted"]
    error(client.get(f"/v1/sessions/{sid}/events"), 404, "NOT_FOUND")


def test_prompt_model_resolution_and_validation(client: httpx.Client) -> None:
    plain = create(client, "ws-plain")
    mini = create(client, "ws-mini")
    assert (
        data(trpc_query(client, "session.get", {"sessionId": mini}))["session"]["model"] == SIM_MINI
    )

    unknown = prompt(client, plain, "not a scripted turn")
    assert unknown["model"] == SIM
    events = read_sse(client, plain, unknown["lastEventId"])
    assert events[-1][2]["ok"] is True and "simulated model" in events[-1][2]["text"]

    out = prompt(client, mini, "hello")
    assert out["model"] == SIM_MINI
    read_sse(client, mini, out["lastEventId"])
    out = prompt(client, mini, "hello again", model="simulated/gpt-4.1", files=["src/a.py"])
    assert out["model"] == "simulated/gpt-4.1"
    read_sse(client, mini, out["lastEventId"])
    stored = client.get(f"/v1/sessions/{mini}", params={"limit": 200}).json()["messages"]
    user = [m for m in stored if m["role"] == "user"][-1]
    assert {"type": "file", "uri": "src/a.py"}.items() <= user["content"][1].items()

    r = client.post(f"/v1/sessions/{plain}/prompt", json={"text": "via rest"})
    assert r.status_code == 202 and r.json()["model"] == SIM
    read_sse(client, plain, r.json()["lastEventId"])

    files = [f"f{i}.py" for i in range(11)]
    error(
        trpc_call(client, "agent.prompt", {"sessionId": plain, "text": "x", "files": files}),
        400,
        "BAD_REQUEST",
    )
    error(trpc_call(client, "agent.prompt", {"sessionId": plain, "text": ""}), 400, "BAD_REQUEST")
    error(
        trpc_call(client, "agent.prompt", {"sessionId": plain, "text": "x", "model": "nomodel"}),
        400,
        "BAD_REQUEST",
    )
    error(
        trpc_call(client, "agent.prompt", {"sessionId": "missing-id", "text": "x"}),
        404,
        "NOT_FOUND",
    )


# -- in-process ------------------------------------------------------------------------------


def test_idle_agents_are_evicted_and_hold_no_lock_between_turns() -> None:
    now = [1000.0]
    store = open_store("memory://")
    config = ServerConfig(
        token=TOKEN, idle_seconds=30 * 60, simulated_policy=ContextPolicy(**SMALL_POLICY)
    )
    runner = AgentRunner(store, config, clock=lambda: now[0])
    a = store.create_session(model=SIM)
    b = store.create_session(model=SIM)
    runner.run_turn(a.id, TURNS[0].user, SIM)
    runner.run_turn(b.id, TURNS[0].user, SIM)
    assert wait_for(lambda: not runner.is_running(a.id) and not runner.is_running(b.id))
    assert store.lock_holder(a.id) is None and store.lock_holder(b.id) is None  # a cache
    assert sorted(runner.cached()) == sorted([a.id, b.id])

    now[0] += 20 * 60
    runner.run_turn(b.id, TURNS[1].user, SIM)  # b is used again: its idle time starts over
    assert wait_for(lambda: not runner.is_running(b.id))
    now[0] += 10 * 60 + 1
    assert runner.evict_idle() == [a.id]
    now[0] += 20 * 60
    assert runner.evict_idle() == [b.id]
    assert runner.cached() == []
    runner.close()


def test_a_cached_agent_is_rebuilt_when_someone_else_wrote_the_session() -> None:
    """The lock means a turn is running: between turns a chat (or another server) may
    write the session, and the cached agent must not run on what it saw before."""
    store = open_store("memory://")
    built: list[int] = []

    def factory(store: Any, info: Any, spec: str) -> Any:
        built.append(info.last_seq)
        return build_agent(ServerConfig(token=TOKEN), store, info, spec)

    runner = AgentRunner(store, ServerConfig(token=TOKEN), agent_factory=factory)
    sid = store.create_session(model=SIM).id
    runner.run_turn(sid, TURNS[0].user, SIM)
    assert wait_for(lambda: not runner.is_running(sid))
    runner.run_turn(sid, TURNS[1].user, SIM)  # nobody else wrote: the cache is used
    assert wait_for(lambda: not runner.is_running(sid))
    assert built == [0]

    with store.get_session(sid).attached() as session:  # a chat elsewhere adds a turn
        session.append([Message.user("from a chat"), Message.assistant("ok")])
    last = store.session_info(sid).last_seq
    runner.run_turn(sid, TURNS[2].user, SIM)
    assert wait_for(lambda: not runner.is_running(sid))
    assert built == [0, last]  # rebuilt from the store as it is now
    messages = store.read_messages(sid)
    users = [m.text for m in messages if m.role == "user"]
    assert users == [TURNS[0].user, TURNS[1].user, "from a chat", TURNS[2].user]
    assert messages[-1].role == "assistant" and store.lock_holder(sid) is None
    runner.close()


def test_cli_imports_no_fastapi_and_serve_is_registered() -> None:
    code = (
        "import sys, threadline.cli.app as a; "
        "assert 'fastapi' not in sys.modules and 'uvicorn' not in sys.modules; "
        "print(sorted(a.COMMANDS))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "serve" in out.stdout


class BlockingModel:
    """A chat model that answers only when the test lets it (or fails, if told to)."""

    model = "blocking"

    def __init__(self, fail: bool = False) -> None:
        self.go = threading.Event()
        self.fail = fail

    def complete(self, request: Any) -> Any:
        from threadline.errors import ModelError
        from threadline.llm.base import ChatResponse
        from threadline.messages import Message, Usage

        assert self.go.wait(10)
        if self.fail:
            raise ModelError("the provider is down")
        return ChatResponse(message=Message.assistant("done"), model=self.model, usage=Usage())

    def stream(self, request: Any) -> Iterator[Any]:
        yield self.complete(request)


def blocking_runner(model: BlockingModel) -> tuple[AgentRunner, Any]:
    from threadline.agent import Agent, AgentConfig

    store = open_store("memory://")
    config = AgentConfig(name="default", model=SIM, summarizer="extractive", tools=())

    def factory(store: Any, info: Any, spec: str) -> Agent:
        return Agent(config, store=store, model=model)

    return AgentRunner(store, ServerConfig(token=TOKEN), agent_factory=factory), store


def test_one_turn_at_a_time_and_a_delete_mid_turn_stops_it_first() -> None:
    from threadline.server.procedures import DeleteInput, Procedures, PromptInput, classify

    model = BlockingModel()
    runner, store = blocking_runner(model)
    procs = Procedures(store, runner.config, runner, runner.hooks, runner.hub)
    sid = store.create_session(model=SIM).id
    out = procs.prompt(PromptInput(sessionId=sid, text="first"))
    assert runner.is_running(sid) and store.count_messages(sid) == 1  # stored before the turn
    with pytest.raises(Exception) as caught:
        procs.prompt(PromptInput(sessionId=sid, text="second"))
    assert classify(caught.value)[:2] == ("CONFLICT", 409)
    assert store.count_messages(sid) == 1

    # a delete cancels the turn and waits for it to store its end (this model notices
    # only when it answers), then deletes
    log = runner.hub.log(sid)  # what its followers see (the hub forgets it on delete)
    deleted: list[Any] = []
    deleter = threading.Thread(
        target=lambda: deleted.append(procs.delete(DeleteInput(sessionId=sid)))
    )
    deleter.start()
    entry = runner._cache[sid]  # the turn's own token: set once the delete asked
    assert wait_for(entry.cancel.is_set)
    model.go.set()
    deleter.join(10)
    assert deleted == [{"sessionId": sid, "deleted": True}]
    events, _ = log.after(out["lastEventId"])
    finished = [e for e in events if e.name == "turn_finished"]
    assert finished and finished[-1].data["stopped"] == "cancelled"
    with pytest.raises(SessionNotFound):
        store.session_info(sid)
    runner.close()


def test_a_sessions_turns_run_its_own_model(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The prompt's model, else the session's stored one, else its workspace's, else the
    server's; a model that cannot run is refused (400) before anything is stored."""
    from tests.fakes import FakeOpenAI
    from threadline.server.procedures import Procedures, PromptInput, classify

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    store = open_store("memory://")
    config = ServerConfig(token=TOKEN, workspace_models={"ws-mini": SIM_MINI})
    runner = AgentRunner(store, config)
    procs = Procedures(store, config, runner, runner.hooks, runner.hub)
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        fake.reply_text("an answer from the real model", usage=(50, 6))
        # a session of a chat on an OpenAI-compatible model, in a workspace of another model
        own = store.create_session(model="compatible/gpt-4o", metadata={"workspaceId": "ws-mini"})
        out = procs.prompt(PromptInput(sessionId=own.id, text="hello"))
        assert out["model"] == "compatible/gpt-4o"
        assert wait_for(lambda: not runner.is_running(own.id))
        assert len(fake.requests) == 1 and fake.requests[0].json()["model"] == "gpt-4o"
        stored = store.get_session(own.id).messages()
        assert [m.role for m in stored] == ["user", "assistant"]
        assert stored[-1].text == "an answer from the real model"
        assert stored[-1].metadata.get("simulated") is None

        # no stored model: the workspace's, then the server's; the prompt's wins over all
        bare = store.create_session(metadata={"workspaceId": "ws-mini"})
        assert procs.turn_model(bare.info) == SIM_MINI
        assert procs.turn_model(store.create_session().info) == SIM
        assert procs.turn_model(own.info, "simulated/x") == "simulated/x"

        # a model that cannot be resolved: 400 before the user message is stored, no traceback
        caplog.clear()
        for spec, why in (("bogus/x", "unknown provider"), ("openai/gpt-4o-mini", None)):
            if why is None:  # a known provider without its key
                monkeypatch.delenv("OPENAI_API_KEY")
            with pytest.raises(ConfigError) as caught:
                procs.prompt(PromptInput(sessionId=own.id, text="again", model=spec))
            assert classify(caught.value)[:2] == ("BAD_REQUEST", 400)
            assert why is None or why in str(caught.value)
            assert store.count_messages(own.id) == 2 and not runner.is_running(own.id)
        assert len(fake.requests) == 1
        assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    runner.close()


def test_a_failed_turn_is_an_error_event_and_frees_the_session() -> None:
    model = BlockingModel(fail=True)
    runner, store = blocking_runner(model)
    sid = store.create_session(model=SIM).id
    model.go.set()
    before = runner.run_turn(sid, "hello", SIM)
    assert wait_for(lambda: not runner.is_running(sid))
    events, _ = runner.hub.log(sid).after(before)
    assert [e.name for e in events][-2:] == ["error", "turn_finished"]
    assert events[-2].data == {"code": "ModelError", "message": "the provider is down"}
    assert events[-1].data["ok"] is False
    runner.close()
    assert store.lock_holder(sid) is None


def test_a_session_held_elsewhere_is_a_conflict() -> None:
    from threadline.server.procedures import Procedures, PromptInput, classify
    from threadline.store.locks import LockHolder

    store = open_store("memory://")
    runner = AgentRunner(store, ServerConfig(token=TOKEN))
    procs = Procedures(store, runner.config, runner, runner.hooks, runner.hub)
    sid = store.create_session(model=SIM).id
    store.acquire_lock(sid, LockHolder(pid=4242, host="another-host"))
    with pytest.raises(Exception) as caught:
        procs.prompt(PromptInput(sessionId=sid, text="hi"))
    assert classify(caught.value)[:2] == ("CONFLICT", 409)
    assert store.count_messages(sid) == 0 and runner.cached() == []


def test_failing_hooks_and_unreachable_webhooks_break_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from threadline.server.hooks import HookDispatcher, Webhook

    seen: list[str] = []

    def boom(event: str, payload: Any) -> None:
        raise RuntimeError("boom")

    hooks = HookDispatcher(
        [boom, lambda e, p: seen.append(e)],
        [Webhook(f"http://127.0.0.1:{free_port()}/gone", SECRET)],
    )
    hooks.fire("session_create", {"sessionId": "s"})
    hooks.close()  # waits for the webhook attempt
    assert seen == ["session_create"]
    assert "boom" in caplog.text and "webhook failed" in caplog.text
    with pytest.raises(ValueError):
        hooks.fire("no_such_event", {})


def test_event_log_resumes_and_says_when_events_were_lost() -> None:
    import asyncio

    from threadline.server.events import EventLog

    log = EventLog(capacity=3)
    for i in range(5):
        log.publish("text_delta", {"text": str(i)})
    events, lost = log.after(3)
    assert [e.id for e in events] == [4, 5] and not lost
    events, lost = log.after(1)  # 2 fell out of the buffer
    assert [e.id for e in events] == [3, 4, 5] and lost
    events, lost = log.after(99)  # an id from an earlier run of the server
    assert [e.id for e in events] == [3, 4, 5] and lost

    async def frames(last_id: int) -> list[str]:
        log.publish("turn_finished", {"ok": True})
        return [f async for f in log.follow(last_id, until="turn_finished")]

    out = asyncio.run(frames(1))
    assert out[0].startswith("event: events_lost\n")
    assert [f.split("\n")[0] for f in out[1:]] == ["id: 4", "id: 5", "id: 6"]


def test_the_app_sweeper_evicts_idle_agents() -> None:
    from fastapi.testclient import TestClient

    from threadline.server import create_app

    now = [0.0]
    store = open_store("memory://")
    config = ServerConfig(
        token=TOKEN,
        idle_seconds=60,
        sweep_seconds=0.02,
        clock=lambda: now[0],
        allowed_hosts=("testserver",),  # TestClient's Host
    )
    app = create_app(store, config)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        sid = c.post("/v1/sessions", json={"workerId": "w", "workspaceId": "ws"}).json()[
            "sessionId"
        ]
        assert c.post(f"/v1/sessions/{sid}/prompt", json={"text": "hi"}).status_code == 202
        assert wait_for(lambda: not app.state.runner.is_running(sid))
        time.sleep(0.1)
        assert app.state.runner.cached() == [sid]  # cached, not idle long enough
        assert store.lock_holder(sid) is None  # and no turn runs: no lock
        now[0] += 61
        assert wait_for(lambda: app.state.runner.cached() == [])


def test_agents_for_real_models_come_from_agent_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadline.server.runner import build_agent

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THREADLINE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "coder.yaml").write_text(
        "name: coder\nmodel: anthropic/claude-sonnet-4-5\nsystem_prompt: You code.\n"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    store = open_store("memory://")
    config = ServerConfig(token=TOKEN)
    coder_info = store.create_session(agent="coder").info
    coder = build_agent(config, store, coder_info, "openai/gpt-4o")
    assert (coder.config.name, coder.model_spec) == ("coder", "openai/gpt-4o")
    assert coder.config.system_prompt == "You code."
    unknown_info = store.create_session(agent="no-such-agent").info
    unknown = build_agent(config, store, unknown_info, "openai/gpt-4o-mini")
    assert (unknown.config.name, unknown.model_spec) == ("default", "openai/gpt-4o-mini")
    simulated = build_agent(config, store, coder_info, SIM)
    assert simulated.model_spec == SIM and simulated.config.name == "coder"
    # the model is resolved before a turn stores anything: what cannot run is a ConfigError
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_agent(config, store, coder_info, "openai/gpt-4o")
    with pytest.raises(ConfigError, match="unknown provider 'bogus'"):
        build_agent(config, store, coder_info, "bogus/x")


def test_threadline_serve_creates_a_token_and_serves(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, THREADLINE_CONFIG_DIR=str(tmp_path / "config"))
    env.pop(TOKEN_ENV, None)
    command = [sys.executable, "-m", "threadline.cli.app", "serve", "--port", str(port)]
    command += ["--store", f"sqlite://{tmp_path}/s.db"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        token_file = tmp_path / "config" / "server-token"

        def up() -> bool:
            try:
                return httpx.get(base + "/v1/sessions", timeout=1).status_code == 401
            except httpx.TransportError:
                return False

        assert wait_for(up, timeout=20), proc.stdout.read1().decode() if proc.stdout else ""
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        auth = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        r = httpx.post(
            base + "/trpc/session.create", json={"workerId": "w", "workspaceId": "ws"}, headers=auth
        )
        assert r.status_code == 200
        page = httpx.get(base + "/v1/sessions", headers=auth).json()
        assert page["total"] == 1
    finally:
        proc.terminate()
        proc.wait(10)
    assert f"sqlite://{tmp_path}/s.db" in (proc.stdout.read().decode() if proc.stdout else "")


def test_deleting_a_session_whose_forks_share_its_history_is_refused() -> None:
    from threadline.server.procedures import DeleteInput, Procedures, classify
    from threadline.store.fork import fork_session

    runner, store = blocking_runner(BlockingModel())
    procs = Procedures(store, runner.config, runner, runner.hooks, runner.hub)
    parent = store.create_session(model=SIM)
    parent.append([Message.user("p1"), Message.assistant("p2")])
    child = fork_session(parent, at=2)
    with pytest.raises(Exception) as caught:
        procs.delete(DeleteInput(sessionId=parent.id))
    code, status, text = classify(caught.value)
    assert (code, status) == ("CONFLICT", 409) and child.id in text
    assert [m.text for m in store.get_session(child.id).messages()] == ["p1", "p2"]
    procs.delete(DeleteInput(sessionId=child.id))
    procs.delete(DeleteInput(sessionId=parent.id))
    runner.close()


class StreamingBlockingModel(BlockingModel):
    """Streams a first piece at once, then waits for the test before the rest."""

    def stream(self, request: Any) -> Iterator[Any]:
        from threadline.llm.base import ChatResponse
        from threadline.messages import Usage

        yield "partial "
        assert self.go.wait(10)
        yield "rest"
        reply = Message.assistant("partial rest")
        yield ChatResponse(message=reply, model=self.model, usage=Usage())


def test_cancel_stops_a_streamed_turn_and_keeps_its_partial_reply_once() -> None:
    from threadline.server.procedures import CancelInput, Procedures, PromptInput

    model = StreamingBlockingModel()
    runner, store = blocking_runner(model)
    procs = Procedures(store, runner.config, runner, runner.hooks, runner.hub)
    sid = store.create_session(model=SIM).id
    assert procs.cancel(CancelInput(sessionId=sid))["cancelled"] is False  # nothing runs
    out = procs.prompt(PromptInput(sessionId=sid, text="go"))
    log = runner.hub.log(sid)
    assert wait_for(lambda: any(e.name == "text_delta" for e in log.after(out["lastEventId"])[0]))
    assert procs.cancel(CancelInput(sessionId=sid)) == {"sessionId": sid, "cancelled": True}
    model.go.set()
    assert wait_for(lambda: not runner.is_running(sid))
    events, _ = log.after(out["lastEventId"])
    finished = events[-1]
    assert finished.name == "turn_finished" and finished.data["stopped"] == "cancelled"
    stored = store.get_session(sid).messages()
    assert [(m.role, m.text) for m in stored] == [("user", "go"), ("assistant", "partial ")]
    assert stored[1].metadata["interrupted"] is True
    runner.close()


def test_cancel_over_both_wire_formats(client: httpx.Client) -> None:
    sid = create(client)
    assert data(trpc_call(client, "agent.cancel", {"sessionId": sid})) == {
        "sessionId": sid,
        "cancelled": False,
    }
    r = client.post(f"/v1/sessions/{sid}/cancel")
    assert r.status_code == 200 and r.json() == {"sessionId": sid, "cancelled": False}
    error(trpc_call(client, "agent.cancel", {"sessionId": "no-such-session"}), 404, "NOT_FOUND")
