"""Cancel stops the model call: a model that accepted the request and sends nothing.

The fakes' ``silent`` mode accepts a request and never answers (not even headers) until
the client hangs up, and records when it did. Cancelling must close that request at
once (the fake sees the hang-up), for a plain call, an agent's turn, a turn whose
subagents wait on such a model, and every running turn of a server sent SIGTERM;
and the next prompt must run. Elapsed times are measured and bounded generously (the
host is shared); the report carries the figures.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import llm_cases
from tests.fakes import FakeOpenAI, FakeServer
from tests.llm_cases import ANTHROPIC, OPENAI, ProviderCase
from tests.test_server import wait_for as server_wait_for
from threadline import open_store
from threadline.agent import Agent, AgentConfig
from threadline.errors import ModelError
from threadline.llm import ChatRequest, RetryPolicy
from threadline.llm.cancel import CallCancelled, CancelToken
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.messages import Message
from threadline.server.config import ServerConfig
from threadline.server.events import Event
from threadline.server.runner import AgentRunner

BOUND = 5.0
"""A generous bound on "at once" (the measured figures are far below it)."""
ANSWER_WAIT = 20.0

srv = llm_cases.srv  # fixture


def wait_for(check: Callable[[], Any], timeout: float = ANSWER_WAIT) -> Any:
    return server_wait_for(check, timeout)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc
        out["ended"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# -- the token -----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["add", "forget", "set"]), max_size=30))
def test_every_callback_still_registered_runs_exactly_once(steps: list[str]) -> None:
    """Whatever the order of registering, unregistering and setting (again): a callback
    runs once if it was registered and not forgotten before the set, at once if the
    token was already set, and never twice."""
    token = CancelToken()
    runs: list[int] = []
    forgets: list[Callable[[], None]] = []
    expected: set[int] = set()
    for step in steps:
        if step == "add":
            n = len(forgets)
            forgets.append(token.on_cancel(lambda n=n: runs.append(n)))
            expected.add(n)
        elif step == "forget" and forgets:
            forgets[-1]()
            if not token.is_set():
                expected.discard(len(forgets) - 1)
        elif step == "set":
            token.set()
    if not token.is_set():
        assert runs == []
        token.set()
    assert sorted(runs) == sorted(expected)


# -- the provider ------------------------------------------------------------------------


@pytest.mark.parametrize("case", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize("token", [CancelToken, threading.Event], ids=["token", "event"])
def test_cancel_closes_the_request_a_silent_model_holds(
    case: ProviderCase, srv: FakeServer, streaming: bool, token: type[threading.Event]
) -> None:
    srv.silent_forever = True
    cancel = token()
    request = ChatRequest(messages=[Message.user("hello?")], cancel=cancel)
    with case.model_class(case.model, api_key="test", base_url=srv.url) as model:

        def call() -> Any:
            return list(model.stream(request)) if streaming else model.complete(request)

        thread, out = in_thread(call)
        assert wait_for(lambda: srv.silent_open == 1), "the request never reached the fake"
        cancelled_at = time.monotonic()
        cancel.set()
        thread.join(BOUND)
        assert not thread.is_alive(), "the call still waits on the silent model"
        assert isinstance(out.get("error"), CallCancelled)
        assert out["ended"] - cancelled_at < BOUND
        assert wait_for(lambda: srv.hung_up), "the request was abandoned, not closed"
        assert srv.request_count == 1, "a cancelled call is not retried"


@pytest.mark.parametrize("case", [OPENAI], ids=["openai"])
def test_a_token_set_before_the_call_sends_nothing(case: ProviderCase, srv: FakeServer) -> None:
    cancel = CancelToken()
    cancel.set()
    with (
        case.model_class(case.model, api_key="test", base_url=srv.url) as model,
        pytest.raises(CallCancelled),
    ):
        model.complete(ChatRequest(messages=[Message.user("hi")], cancel=cancel))
    assert srv.request_count == 0


@pytest.mark.parametrize("case", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
@pytest.mark.parametrize(
    ("timeouts", "what"),
    [({"first_byte_timeout": 0.3}, "first byte"), ({"timeout": 0.3}, "whole call")],
    ids=["first-byte", "whole-call"],
)
def test_a_silent_model_times_out_on_the_first_byte_or_the_whole_call(
    case: ProviderCase, srv: FakeServer, timeouts: dict[str, float], what: str
) -> None:
    """Either bound ends a request the model never answers (and each attempt is closed);
    the default first-byte bound (60 s) is far below the whole call's (600 s)."""
    srv.silent_forever = True
    retry = RetryPolicy(max_retries=1, base_delay=0.001, max_delay=0.001)
    with (
        case.model_class(
            case.model, api_key="test", base_url=srv.url, retry=retry, **timeouts
        ) as model,
        pytest.raises(ModelError, match="timed out"),
    ):
        list(model.stream(ChatRequest(messages=[Message.user("hi")])))
    assert srv.request_count == 2
    assert wait_for(lambda: len(srv.hung_up) == 2)
    with case.model_class(case.model, api_key="test", base_url=srv.url) as default:
        assert (default.first_byte_timeout, default.timeout) == (60.0, 600.0)


def test_model_config_names_both_timeouts() -> None:
    config = AgentConfig.model_validate(
        {"name": "a", "model": {"provider": "openai/gpt-4o", "first_byte_timeout": 5}}
    )
    assert (config.model.timeout, config.model.first_byte_timeout) == (600.0, 5.0)
    agent = Agent(config, store=open_store("memory://"))
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENAI_API_KEY", "test")
            model = agent.model
        assert isinstance(model, OpenAIChatModel) and model.first_byte_timeout == 5.0
    finally:
        agent.close()


def test_a_cancelled_turn_closes_its_summarizers_request_too() -> None:
    """A turn that compacts mid-turn with a model summarizer waits on that model too."""
    from threadline.compaction.llm import LLMSummarizer

    with FakeOpenAI() as srv:
        srv.silent_forever = True
        model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url)
        config = AgentConfig.model_validate(
            {"name": "a", "model": "openai/gpt-4o", "summarizer": "hybrid"}
        )
        agent = Agent(config, store=open_store("memory://"), model=model)
        summarizer = agent.compactor.summarizer
        llm = getattr(summarizer, "llm", None)
        assert isinstance(llm, LLMSummarizer) and llm.cancel is not None
        assert llm.cancel() is None  # outside a turn: nothing to cancel
        token = CancelToken()
        llm.cancel = lambda: token  # what the agent's getter gives inside a turn
        thread, out = in_thread(lambda: llm.summarize([Message.user("a fact: port 8080")]))
        assert wait_for(lambda: srv.silent_open == 1)
        token.set()
        thread.join(BOUND)
        assert not thread.is_alive() and isinstance(out.get("error"), CallCancelled)
        assert wait_for(lambda: srv.hung_up)
        model.close()


# -- the server's turns ------------------------------------------------------------------


def openai_agent(store: Any, srv: FakeOpenAI, **config: Any) -> Agent:
    """An agent on the real OpenAI provider, talking to ``srv``."""
    model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url)
    agent_config = AgentConfig.model_validate(
        {"name": "lead", "model": "openai/gpt-4o", "summarizer": "extractive", **config}
    )
    return Agent(agent_config, store=store, model=model)


def finished_after(runner: AgentRunner, sid: str, after: int) -> Event | None:
    events, _ = runner.hub.log(sid).after(after)
    done = [e for e in events if e.name == "turn_finished"]
    return done[-1] if done else None


def cancel_then_prompt(
    runner: AgentRunner, sid: str, silent_count: Callable[[], int], expect: int
) -> tuple[float, Event]:
    """Prompt, wait until ``expect`` requests hang, cancel; returns the seconds from the
    cancel to ``turn_finished`` and that event."""
    before = runner.run_turn(sid, "go", "openai/gpt-4o")
    assert wait_for(lambda: silent_count() >= expect), "the model requests never arrived"
    cancelled_at = time.monotonic()
    assert runner.cancel_turn(sid)
    finished = wait_for(lambda: finished_after(runner, sid, before), BOUND)
    elapsed = time.monotonic() - cancelled_at
    assert finished is not None, "no turn_finished after the cancel"
    assert wait_for(lambda: not runner.is_running(sid), BOUND)
    return elapsed, finished


def test_cancel_ends_a_turn_on_a_silent_model_and_the_next_prompt_runs() -> None:
    store = open_store("memory://")
    with FakeOpenAI() as srv:
        srv.silent()

        def factory(store: Any, info: Any, spec: str) -> Agent:
            return openai_agent(store, srv)

        runner = AgentRunner(store, ServerConfig(token="t" * 24), agent_factory=factory)
        sid = store.create_session(model="openai/gpt-4o").id
        elapsed, finished = cancel_then_prompt(runner, sid, lambda: srv.silent_open, 1)
        print(f"\ncancel -> turn_finished with a silent model: {elapsed * 1000:.0f} ms")
        assert finished.data["stopped"] == "cancelled" and elapsed < BOUND
        assert wait_for(lambda: srv.hung_up), "the model request was not closed"

        srv.reply_text("back again")
        before = runner.run_turn(sid, "again", "openai/gpt-4o")
        done = wait_for(lambda: finished_after(runner, sid, before))
        assert done is not None and done.data["stopped"] == "done"
        assert done.data["text"] == "back again"
        stored = store.get_session(sid).messages()
        assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
        assert stored[1].metadata["interrupted"] is True
        runner.close()


def test_cancel_ends_a_parent_whose_subagents_wait_on_silent_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_subagents import task, write_agent

    monkeypatch.setenv("OPENAI_API_KEY", "test")  # the children build their own models

    store = open_store("memory://")
    with FakeOpenAI() as top, FakeOpenAI() as r_srv, FakeOpenAI() as w_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "researcher", r_srv.url)
        write_agent(dirs[0], "writer", w_srv.url)
        r_srv.silent_forever = w_srv.silent_forever = True
        top.reply_tool_calls(
            [task("researcher", "Research.", "call_r"), task("writer", "Write.", "call_w")]
        )

        def factory(store: Any, info: Any, spec: str) -> Agent:
            model = OpenAIChatModel("gpt-4o", api_key="test", base_url=top.url)
            config = AgentConfig.model_validate(
                {
                    "name": "lead",
                    "model": "openai/gpt-4o",
                    "summarizer": "extractive",
                    "agents": ["researcher", "writer"],
                }
            )
            return Agent(config, store=store, model=model, agent_dirs=dirs)

        runner = AgentRunner(store, ServerConfig(token="t" * 24), agent_factory=factory)
        sid = store.create_session(model="openai/gpt-4o").id
        elapsed, finished = cancel_then_prompt(
            runner, sid, lambda: r_srv.silent_open + w_srv.silent_open, 2
        )
        print(f"\ncancel -> turn_finished, two subagents on silent models: {elapsed * 1000:.0f} ms")
        assert finished.data["stopped"] == "cancelled" and elapsed < BOUND
        assert wait_for(lambda: r_srv.hung_up and w_srv.hung_up), "a child's request stayed open"
        stored = store.get_session(sid).messages()
        assert [m.role for m in stored] == ["user", "assistant", "tool", "tool"]
        assert all(m.metadata["error_kind"] == "cancelled" for m in stored[2:])

        top.reply_text("done now")
        before = runner.run_turn(sid, "again", "openai/gpt-4o")
        done = wait_for(lambda: finished_after(runner, sid, before))
        assert done is not None and done.data["text"] == "done now"
        runner.close()


# -- SIGTERM -----------------------------------------------------------------------------


TURNS_HANGING = 3
TOKEN = "cancel-test-token-0123456789"


def test_over_http_cancel_frees_the_session_at_once_and_sigterm_ends_three_hanging_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's reproduction against ``threadline serve``: before, the next prompt got
    409 for as long as the model stayed silent (75 s), and SIGTERM of a server with three
    such turns took 90 s."""
    from tests.serve_cli import start_serve

    with FakeOpenAI() as srv:
        srv.silent_forever = True
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        store_url = f"sqlite:///{tmp_path / 'store.db'}"
        with start_serve(tmp_path, "--store", store_url, "--port", "0", "--token", TOKEN) as live:
            client = httpx.Client(
                base_url=live.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
            )

            def prompt(sid: str) -> httpx.Response:
                body = {"text": "hi", "model": "openai/gpt-4o"}
                return client.post(f"/v1/sessions/{sid}/prompt", json=body)

            sids = []
            for n in range(TURNS_HANGING):
                created = client.post(
                    "/v1/sessions", json={"workerId": "w", "workspaceId": f"ws{n}"}
                )
                assert created.status_code == 201, created.text
                sids.append(created.json()["sessionId"])
            first = sids[0]
            assert prompt(first).status_code == 202
            assert wait_for(lambda: srv.silent_open == 1), live.output()
            cancelled_at = time.monotonic()
            assert client.post(f"/v1/sessions/{first}/cancel").json()["cancelled"] is True
            refused = 0
            while (answer := prompt(first)).status_code == 409:
                refused += 1
                assert time.monotonic() - cancelled_at < BOUND, answer.text
            freed = time.monotonic() - cancelled_at
            assert answer.status_code == 202, answer.text
            print(f"\ncancel -> next prompt accepted over HTTP: {freed * 1000:.0f} ms;", end=" ")
            print(f"{refused} prompt(s) refused with 409 meanwhile")
            for sid in sids[1:]:
                assert prompt(sid).status_code == 202
            client.close()
            assert wait_for(lambda: srv.silent_open == TURNS_HANGING), live.output()
            started = time.monotonic()
            live.proc.send_signal(signal.SIGTERM)
            live.proc.wait(60)
            took = time.monotonic() - started
        print(f"SIGTERM with {TURNS_HANGING} hanging turns: exited in {took:.2f} s")
        assert took < 15.0, live.output()
        assert wait_for(lambda: len(srv.hung_up) == TURNS_HANGING + 1)
    store = open_store(store_url)
    try:
        roles = {sid: [m.role for m in store.get_session(sid).messages()] for sid in sids}
        assert roles[first] == ["user", "assistant"] * 2
        assert all(roles[sid] == ["user", "assistant"] for sid in sids[1:])
        for sid in sids:
            assert store.get_session(sid).messages()[-1].metadata["interrupted"] is True
    finally:
        store.close()
