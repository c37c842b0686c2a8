"""Subagents: the ``task`` tool runs delegate agents in child sessions, over the fake
OpenAI wire (one fake server per agent, so each agent's script is its own)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeOpenAI, FakeToolCall, Reply
from threadline import Store, open_store
from threadline.agent import Agent, AgentConfig, Calibrator, TurnResult, parse_agent
from threadline.agent.subagents import MAX_DEPTH, SUBAGENT_KEY, TASK_TOOL, subagent_hints
from threadline.context.builder import build_context
from threadline.errors import ConfigError
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.report.lineage import forest, relation
from threadline.store.protocol import Session
from threadline.store.session_info import SessionInfo

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def store() -> Store:
    return open_store("memory://")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children resolve their own model from their config (base_url: a fake server)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def write_agent(directory: Path, name: str, url: str, **extra: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        f"description: {extra.pop('description', f'The {name} agent.')}",
        "model:",
        "  provider: openai/gpt-4o",
        f"  base_url: {url}",
        f"system_prompt: You are the {name}.",
        "summarizer: extractive",
        *(f"{key}: {value}" for key, value in extra.items()),
    ]
    (directory / f"{name}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def parent_config(*agents: str) -> AgentConfig:
    return AgentConfig.model_validate(
        {
            "name": "lead",
            "model": "openai/gpt-4o",
            "system_prompt": "You are the lead.",
            "summarizer": "extractive",
            "agents": list(agents),
        }
    )


def openai_model(srv: FakeOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o", api_key="test-key", base_url=srv.url, max_retries=0)


def task(agent: str, prompt: str, id: str, description: str = "a task") -> FakeToolCall:
    return FakeToolCall(
        TASK_TOOL, {"agent": agent, "description": description, "prompt": prompt}, id=id
    )


def lead(
    store: Store, srv: FakeOpenAI, dirs: list[Path], *agents: str
) -> tuple[Agent, Events, OpenAIChatModel]:
    events: Events = []
    model = openai_model(srv)
    agent = Agent(
        parent_config(*agents),
        store=store,
        model=model,
        calibrator=Calibrator(),
        agent_dirs=dirs,
        on_event=lambda name, payload: events.append((name, payload)),
    )
    return agent, events, model


def lead_turn(
    store: Store, srv: FakeOpenAI, dirs: list[Path], agents: tuple[str, ...], prompt: str
) -> tuple[Session, TurnResult, Events]:
    """One turn of the lead (its model closed after): its session, result and events."""
    agent, events, model = lead(store, srv, dirs, *agents)
    session = agent.new_session()
    try:
        return session, agent.run_turn(session, prompt), events
    finally:
        model.close()


def children_of(store: Store, session_id: str) -> list[SessionInfo]:
    return store.list_sessions(parent=session_id, limit=100).items


def assert_valid(store: Store, session_id: str) -> None:
    """Readable, every tool call answered once after it, and a context builds from it."""
    session = store.get_session(session_id)
    messages = session.messages()
    asked: list[str] = []
    for m in messages:
        if m.role == "assistant":
            asked += [c.id for c in m.tool_calls]
        elif m.role == "tool":
            assert m.tool_call_id in asked, f"{session_id}: result {m.tool_call_id} before its call"
    answered = [m.tool_call_id for m in messages if m.role == "tool"]
    assert sorted(asked) == sorted(answered), f"{session_id}: calls {asked}, results {answered}"
    window = build_context(session, model=session.model or "openai/gpt-4o")
    assert window.messages


def sent_messages(srv: FakeOpenAI, index: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = srv.requests[index].json()["messages"]
    return messages


# -- the must-show: two tasks in parallel, then cancelled --------------------------------


def test_two_task_calls_run_in_parallel_in_linked_child_sessions(
    store: Store, tmp_path: Path
) -> None:
    both_in_flight = threading.Barrier(2, timeout=10)  # breaks unless both children wait at once
    with FakeOpenAI() as top, FakeOpenAI() as r_srv, FakeOpenAI() as w_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "researcher", r_srv.url)
        write_agent(dirs[0], "writer", w_srv.url)
        r_srv.reply_held(Reply(text="The cache hit rate is 91%."), both_in_flight.wait)
        w_srv.reply_held(Reply(text="Draft: caching pays off."), both_in_flight.wait)
        top.reply_tool_calls(
            [
                task("researcher", "Measure the cache hit rate.", "call_r", "measure cache"),
                task("writer", "Draft one line on caching.", "call_w", "draft line"),
            ]
        )
        top.reply_text("Both subagents answered.")
        session, result, events = lead_turn(
            store,
            top,
            dirs,
            (
                "researcher",
                "writer",
            ),
            "Research the cache and write it up.",
        )

        assert result.text == "Both subagents answered." and result.stopped == "done"
        stored = session.messages()
        assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
        calling = stored[1]
        r_result, w_result = stored[2], stored[3]
        assert (r_result.tool_call_id, r_result.text) == ("call_r", "The cache hit rate is 91%.")
        assert (w_result.tool_call_id, w_result.text) == ("call_w", "Draft: caching pays off.")
        assert not r_result.metadata.get("is_error") and not w_result.metadata.get("is_error")
        # the parent's next request carried both answers
        answers = [m["content"] for m in sent_messages(top, 1) if m["role"] == "tool"]
        assert answers == ["The cache hit rate is 91%.", "Draft: caching pays off."]

        children = {info.agent: info for info in children_of(store, session.id)}
        assert set(children) == {"researcher", "writer"}
        for name, call_id, prompt, answer, result_msg in (
            ("researcher", "call_r", "Measure the cache hit rate.", r_result.text, r_result),
            ("writer", "call_w", "Draft one line on caching.", w_result.text, w_result),
        ):
            info = children[name]
            assert info.parent_id == session.id and relation(info) == "subagent"
            link = info.metadata[SUBAGENT_KEY]
            assert link["tool_call_id"] == call_id and link["message_seq"] == calling.seq
            assert link["parent_session"] == session.id and link["depth"] == 1
            assert result_msg.metadata[SUBAGENT_KEY]["session_id"] == info.id
            child = store.get_session(info.id).messages()
            assert [(m.role, m.text) for m in child] == [("user", prompt), ("assistant", answer)]
            assert child[1].model == "gpt-4o"
            assert_valid(store, info.id)
        assert_valid(store, session.id)
        # each child saw only its own prompt, under its own system prompt
        r_sent = sent_messages(r_srv, 0)
        assert r_sent[0]["role"] == "system" and "You are the researcher." in r_sent[0]["content"]
        assert [m["content"] for m in r_sent[1:]] == ["Measure the cache hit rate."]
        assert r_srv.requests[0].streaming  # children stream, so a cancel stops them mid-reply

    started = [p["session_id"] for n, p in events if n == "subagent_started"]
    finished = [p for n, p in events if n == "subagent_finished"]
    assert sorted(started) == sorted(info.id for info in children.values())
    assert sorted(p["stopped"] for p in finished) == ["done", "done"]
    child_calls = [
        p["session_id"] for n, p in events if n == "subagent_event" and p["event"] == "model_called"
    ]
    assert sorted(child_calls) == sorted(started)
    deltas = "".join(
        p["payload"]["text"]
        for n, p in events
        if n == "subagent_event" and p["event"] == "text_delta" and p["agent"] == "writer"
    )
    assert deltas == "Draft: caching pays off."
    # sessions list folds the children under the parent
    [node] = forest(store, store.list_sessions(top_level=True).items, nested=True)
    assert node.info.id == session.id and node.child_count == 2
    assert {c.info.id for c in node.children} == set(started)


def test_cancelling_the_parent_cancels_both_children_and_every_session_stays_valid(
    store: Store, tmp_path: Path
) -> None:
    arrived = threading.Semaphore(0)
    release = threading.Event()

    def hold() -> None:
        arrived.release()
        assert release.wait(10)

    with FakeOpenAI() as top, FakeOpenAI() as r_srv, FakeOpenAI() as w_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "researcher", r_srv.url)
        write_agent(dirs[0], "writer", w_srv.url)
        r_srv.reply_held(Reply(text="a long research answer nobody reads"), hold)
        w_srv.reply_held(Reply(text="a long draft nobody reads"), hold)
        top.reply_tool_calls(
            [task("researcher", "Research.", "call_r"), task("writer", "Write.", "call_w")]
        )
        top.reply_text("never asked for")
        agent, events, model = lead(store, top, dirs, "researcher", "writer")
        session = agent.new_session()
        cancel = threading.Event()
        out: dict[str, Any] = {}

        def turn() -> None:
            out["result"] = agent.run_turn(session, "Do both.", cancel=cancel)

        runner = threading.Thread(target=turn)
        runner.start()
        for _ in range(2):  # both children are mid-call
            assert arrived.acquire(timeout=10)
        cancel.set()
        release.set()
        runner.join(30)
        assert not runner.is_alive()
        model.close()

        result = out["result"]
        assert result.stopped == "cancelled"
        assert top.request_count == 1 and top.pending == 1  # the parent made no further call
        stored = session.messages()
        assert [m.role for m in stored] == ["user", "assistant", "tool", "tool"]
        for tool_result in stored[2:]:
            assert tool_result.metadata["is_error"] is True
            assert tool_result.metadata["error_kind"] == "cancelled"
            assert "was cancelled" in tool_result.text
        children = children_of(store, session.id)
        assert len(children) == 2
        for info in children:
            child = store.get_session(info.id).messages()
            assert [m.role for m in child] == ["user", "assistant"]
            assert child[1].metadata.get("interrupted") is True
            assert_valid(store, info.id)
        assert_valid(store, session.id)
    finished = sorted(p["stopped"] for n, p in events if n == "subagent_finished")
    assert finished == ["cancelled", "cancelled"]


# -- failures are tool errors --------------------------------------------------------------


def test_a_childs_failure_is_a_tool_error_and_the_parent_goes_on(
    store: Store, tmp_path: Path
) -> None:
    with FakeOpenAI() as top, FakeOpenAI() as w_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "writer", w_srv.url)
        w_srv.fail(400, message="Invalid value for 'messages'.")
        top.reply_tool_calls(
            [
                task("writer", "Write.", "call_w"),
                task("nobody", "Anything.", "call_n"),
                task("ghost", "Haunt.", "call_g"),
            ]
        )
        top.reply_text("I will do it myself.")
        session, result, _events = lead_turn(
            store,
            top,
            dirs,
            (
                "writer",
                "ghost",
            ),
            "Delegate.",
        )

    assert result.stopped == "done" and result.text == "I will do it myself."
    w, n, g = session.messages()[2:5]
    assert w.metadata["error_kind"] == "subagent_failed" and "Invalid value" in w.text
    assert n.metadata["error_kind"] == "bad_arguments" and "'nobody'" in n.text
    assert g.metadata["error_kind"] == "bad_agent" and "'ghost' not found" in g.text
    [child] = children_of(store, session.id)  # only the writer got as far as a session
    assert child.agent == "writer" and w.metadata[SUBAGENT_KEY]["session_id"] == child.id
    assert [m.role for m in store.get_session(child.id).messages()] == ["user"]
    assert_valid(store, session.id)
    assert_valid(store, child.id)


def test_a_child_at_its_step_limit_is_a_tool_error(store: Store, tmp_path: Path) -> None:
    with FakeOpenAI() as top, FakeOpenAI() as r_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "researcher", r_srv.url, max_steps="1", tools="[scratchpad_list]")
        r_srv.reply_tool_call("scratchpad_list", {}, id="call_list")
        top.reply_tool_call(
            TASK_TOOL, {"agent": "researcher", "description": "dig", "prompt": "Dig."}, id="c1"
        )
        top.reply_text("The researcher ran out of steps.")
        session, result, _events = lead_turn(store, top, dirs, ("researcher",), "Dig deep.")

    assert result.stopped == "done"
    tool_result = session.messages()[2]
    assert tool_result.metadata["is_error"] is True
    assert tool_result.metadata["error_kind"] == "subagent_step_limit"
    assert "step limit (1 model calls)" in tool_result.text
    assert tool_result.metadata[SUBAGENT_KEY]["stopped"] == "step_limit"
    [child] = children_of(store, session.id)
    roles = [m.role for m in store.get_session(child.id).messages()]
    assert roles == ["user", "assistant", "tool", "user"]  # the last: the step-limit note
    assert_valid(store, child.id)


def test_subagents_of_subagents_stop_at_the_depth_limit(store: Store, tmp_path: Path) -> None:
    with FakeOpenAI() as srv:  # one agent delegating to itself: one call at a time, in order
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "looper", srv.url, agents="[looper]")
        for level in range(MAX_DEPTH + 1):
            srv.reply_tool_call(
                TASK_TOOL,
                {"agent": "looper", "description": f"level {level + 1}", "prompt": "Go deeper."},
                id=f"call_{level}",
            )
        for level in reversed(range(MAX_DEPTH + 1)):
            srv.reply_text(f"level {level} done")
        events: Events = []
        model = openai_model(srv)
        config = parse_agent((dirs[0] / "looper.yaml").read_text(), default_name="looper")
        agent = Agent(
            config,
            store=store,
            model=model,
            agent_dirs=dirs,
            on_event=lambda n, p: events.append((n, p)),
        )
        session = agent.new_session()
        result = agent.run_turn(session, "Go.")
        model.close()
        assert srv.pending == 0

    assert result.text == "level 0 done"
    chain = [session.id]
    while kids := children_of(store, chain[-1]):
        [kid] = kids
        assert kid.metadata[SUBAGENT_KEY]["depth"] == len(chain)
        chain.append(kid.id)
    assert len(chain) == MAX_DEPTH + 1
    deepest = store.get_session(chain[-1]).messages()
    refused = [m for m in deepest if m.role == "tool"]
    assert refused[0].metadata["error_kind"] == "subagent_depth"
    for sid in chain:
        assert_valid(store, sid)
    # a grandchild's events reach the top agent tagged with the grandchild's session
    tagged = {p["session_id"] for n, p in events if n == "subagent_event"}
    assert tagged == set(chain[1:])


# -- config and hints ----------------------------------------------------------------------


def test_agents_field_is_validated() -> None:
    assert parent_config("a", "./agents/b.yaml").agents == ("a", "./agents/b.yaml")
    for bad, said in (
        (["a", "a"], "listed twice"),
        (["bad name!"], "'bad name!'"),
        ([""], "empty agent name"),
    ):
        with pytest.raises(ConfigError, match=said):
            parse_agent(f"agents: {bad!r}\n", source="x.yaml")
    with pytest.raises(ConfigError, match="agents"):
        parse_agent("agents: 3\n", source="x.yaml")


def test_no_agents_no_task_tool(store: Store) -> None:
    agent = Agent(parent_config(), store=store, model=None)
    assert TASK_TOOL not in agent.tools and agent.subagents is None


def test_hints_and_the_tool_list_delegates_in_config_order(tmp_path: Path) -> None:
    dirs = [tmp_path / "agents"]
    write_agent(dirs[0], "writer", "http://127.0.0.1:9/v1", description="Writes short prose.")
    write_agent(dirs[0], "researcher", "http://127.0.0.1:9/v1")
    path = str(dirs[0] / "writer.yaml")
    config = parent_config("writer", path, "researcher")
    hints = subagent_hints(config, dirs)
    assert [name for name, _ in hints] == ["writer", "researcher"]  # the path repeats "writer"
    config = parent_config("writer", "researcher", "ghost")
    hints = subagent_hints(config, dirs)
    assert hints[0] == ("writer", "Writes short prose.")
    assert hints[1] == ("researcher", "The researcher agent.")
    assert hints[2][0] == "ghost" and hints[2][1].startswith("unavailable: agent 'ghost' not found")
    assert subagent_hints(config, dirs) == hints  # stable
    agent = Agent(config, store=open_store("memory://"), agent_dirs=dirs)
    definition = next(d for d in agent.tools.definitions() if d["name"] == TASK_TOOL)
    assert definition["parameters"]["properties"]["agent"]["enum"] == [
        "writer",
        "researcher",
        "ghost",
    ]
    assert "- writer: Writes short prose." in definition["description"]


# -- the agent server streams the children's events ----------------------------------------


def test_the_server_streams_child_events_tagged_with_the_childs_session(
    store: Store, tmp_path: Path
) -> None:
    from threadline.server.config import ServerConfig
    from threadline.server.runner import AgentRunner

    with FakeOpenAI() as top, FakeOpenAI() as r_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "researcher", r_srv.url, tools="[scratchpad_list]")
        r_srv.reply_tool_call("scratchpad_list", {}, id="call_inner")
        r_srv.reply_text("nothing noted yet")
        top.reply_tool_call(
            TASK_TOOL, {"agent": "researcher", "description": "look", "prompt": "Look."}, id="c1"
        )
        top.reply_text("The researcher found nothing.")
        model = openai_model(top)

        def factory(store: Store, info: SessionInfo, spec: str) -> Agent:
            return Agent(parent_config("researcher"), store=store, model=model, agent_dirs=dirs)

        runner = AgentRunner(store, ServerConfig(token="t" * 32), agent_factory=factory)
        sid = store.create_session(agent="lead", model="openai/gpt-4o").id
        before = runner.run_turn(sid, "Look around.", "openai/gpt-4o")
        for _ in range(500):
            if not runner.is_running(sid):
                break
            time.sleep(0.02)
        events, _lost = runner.hub.log(sid).after(before)
        runner.close()
        model.close()

    [child] = children_of(store, sid)
    seen = [(e.name, e.data.get("sessionId"), e.data.get("name")) for e in events]
    assert ("subagent_started", child.id, None) in seen
    assert ("tool_call", None, TASK_TOOL) in seen  # the parent's own call: untagged
    assert ("tool_call", child.id, "scratchpad_list") in seen  # the child's, tagged
    assert ("tool_result", child.id, "scratchpad_list") in seen
    child_text = "".join(
        e.data["text"] for e in events if e.name == "text_delta" and e.data.get("sessionId")
    )
    assert child_text == "nothing noted yet"
    for e in events:
        if e.data.get("sessionId") == child.id and e.name != "turn_started":
            assert e.data["parentSessionId"] == sid
    finished = [e.data for e in events if e.name == "subagent_finished"]
    assert finished == [
        {
            "sessionId": child.id,
            "parentSessionId": sid,
            "toolCallId": "c1",
            "agent": "researcher",
            "stopped": "done",
            "steps": 2,
        }
    ]
    names = [e.name for e in events]
    assert names.index("subagent_started") < names.index("subagent_finished")
    assert names[-1] == "turn_finished" and events[-1].data["text"] == (
        "The researcher found nothing."
    )


# -- what the CLI and the web page show of them --------------------------------------------


def delegated_twice(store: Store, tmp_path: Path) -> str:
    """A finished parent turn that delegated to two subagents; the parent's id."""
    with FakeOpenAI() as top, FakeOpenAI() as r_srv, FakeOpenAI() as w_srv:
        dirs = [tmp_path / "agents"]
        write_agent(dirs[0], "researcher", r_srv.url)
        write_agent(dirs[0], "writer", w_srv.url)
        r_srv.reply_text("Found three callers of round_half_even.")
        w_srv.reply_text("Wrote the changelog entry.")
        top.reply_tool_calls(
            [
                task("researcher", "Find the callers.", "call_r", "find callers"),
                task("writer", "Write the changelog.", "call_w", "write changelog"),
            ]
        )
        top.reply_text("Done: callers found and changelog written.")
        agent, _events, model = lead(store, top, dirs, "researcher", "writer")
        session = agent.new_session(title="Lead task")
        agent.run_turn(session, "Find the callers, then write the changelog.")
        model.close()
    return session.id


def test_context_counts_subagents_and_sessions_list_folds_them(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from threadline.cli.app import app

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url)
    parent = delegated_twice(store, tmp_path)
    kids = children_of(store, parent)
    store.close()

    def cli(*args: str) -> str:
        result = CliRunner().invoke(app, ["--store", url, *args])
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return str(result.stdout)

    report = cli("context", parent)
    line = next(x for x in report.splitlines() if x.strip().startswith("Subagents:"))
    assert "2 child sessions, 4 messages" in line
    assert "Subagents:" not in cli("context", kids[0].id)  # a child ran none itself
    listing = cli("sessions", "list")
    assert "Lead task" in listing and "find callers" not in listing  # folded: counted only
    tree = cli("sessions", "list", "--tree")
    assert "find callers" in tree and "write changelog" in tree and "subagent" in tree


def test_the_session_page_links_a_task_result_to_the_childs_session(
    store: Store, tmp_path: Path
) -> None:
    pytest.importorskip("jinja2")
    from threadline.server.web import ContextView, _environment, conversation, tool_names

    parent = delegated_twice(store, tmp_path)
    messages = store.get_session(parent).messages()
    info = store.session_info(parent)
    html = (
        _environment()
        .get_template("session.html")
        .render(
            info=info,
            title=info.title,
            relation="",
            parent_title=None,
            children=[],
            items=conversation(messages, []),
            tool_names=tool_names(messages),
            ctx=ContextView(error="-"),
            model="openai/gpt-4o",
            older_url=None,
            newest_url=None,
            running=False,
            follow_after=None,
        )
    )
    for kid in children_of(store, parent):
        assert f'href="/sessions/{kid.id}">its session</a>' in html
    assert "Answered by subagent researcher" in html


# -- the invariant, for any mix of outcomes ------------------------------------------------

OUTCOMES = ("answer", "model_error", "step_limit", "unknown_agent", "empty_prompt")
EXPECTED_KIND = {
    "model_error": "subagent_failed",
    "step_limit": "subagent_step_limit",
    "unknown_agent": "bad_arguments",
    "empty_prompt": "bad_arguments",
}


def _child_script(prompt: str) -> list[Any]:
    """What a child's (scripted) model does, read from its prompt: ``outcome:index``."""
    from threadline.errors import ModelError
    from threadline.llm.scripted import tool_call

    outcome, index = prompt.split(":")
    if outcome == "model_error":
        return [ModelError(f"provider down for task {index}")]
    if outcome == "step_limit":
        return [tool_call("scratchpad_list", id=f"inner_{index}")]
    return [f"answer {index}"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=6),
    cancel_first=st.booleans(),
)
def test_every_task_call_gets_one_result_in_order_and_every_session_stays_valid(
    outcomes: list[str], cancel_first: bool
) -> None:
    from threadline.llm.scripted import ScriptedChatModel, tool_call

    store = open_store("memory://")
    worker = AgentConfig.model_validate(
        {"name": "worker", "summarizer": "extractive", "max_steps": 1, "tools": ["scratchpad_list"]}
    )
    cancel = threading.Event()

    def factory(config: AgentConfig) -> Agent:
        def first(request: Any) -> Any:  # the child's first call reads its own prompt
            if cancel_first:
                cancel.set()  # the parent is cancelled while this child runs
            script = _child_script(request.messages[-1].text)
            item = script[0]
            if isinstance(item, Exception):
                raise item
            return item

        return Agent(config, store=store, model=ScriptedChatModel([first]))

    calls = [
        tool_call(
            TASK_TOOL,
            id=f"call_{i}",
            agent="nobody" if outcome == "unknown_agent" else "worker",
            description=f"task {i}",
            prompt="  " if outcome == "empty_prompt" else f"{outcome}:{i}",
        )
        for i, outcome in enumerate(outcomes)
    ]
    parent = Agent(
        parent_config("worker"),
        store=store,
        model=ScriptedChatModel([calls, "all done"]),
        subagent_factory=factory,
        agent_configs={"worker": worker},
    )
    session = parent.new_session()
    result = parent.run_turn(session, "Fan out.", cancel=cancel)

    stored = session.messages()
    results = [m for m in stored if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [c.id for c in calls]  # one each, in order
    runs = any(o in ("answer", "model_error", "step_limit") for o in outcomes)
    cancelled = cancel_first and runs
    assert result.stopped == ("cancelled" if cancelled else "done")
    for outcome, message in zip(outcomes, results, strict=True):
        kind = message.metadata.get("error_kind")
        if kind == "cancelled":
            assert cancel_first and outcome in ("answer", "model_error", "step_limit")
        elif outcome == "answer":
            assert kind is None and message.text == f"answer {message.tool_call_id[5:]}"
        else:
            assert kind == EXPECTED_KIND[outcome], (outcome, message.text)
    assert_valid(store, session.id)
    children = children_of(store, session.id)
    assert len(children) <= sum(o in ("answer", "model_error", "step_limit") for o in outcomes)
    for info in children:
        assert info.metadata[SUBAGENT_KEY]["tool_call_id"] in {c.id for c in calls}
        assert_valid(store, info.id)
