"""The turn loop, driven by ScriptedChatModel and by the local fake OpenAI server."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.fakes import FakeOpenAI
from threadline import ContextLengthExceeded, Message, Store, open_store
from threadline.agent import Agent, AgentConfig, Calibrator, ToolRegistry
from threadline.agent.calibration import LAST_USAGE_KEY, MEMO_KEY, last_usage
from threadline.agent.doom import WARNING_PREFIX
from threadline.agent.loop import ESTIMATE_METADATA_KEY, STEP_LIMIT_PREFIX
from threadline.compaction.compactor import CompactionResult, Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import SummaryResult
from threadline.context.builder import build_context
from threadline.errors import ModelError
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.llm.scripted import ScriptedChatModel, tool_call, with_usage
from threadline.messages import INTERRUPTED_RESULT
from threadline.store.protocol import Session

FIXED_NOW = datetime(2025, 1, 15, 14, 33, 7, tzinfo=ZoneInfo("Europe/Berlin"))


def config(**overrides: Any) -> AgentConfig:
    data: dict[str, Any] = {
        "name": "tester",
        "model": "openai/gpt-4o",
        "system_prompt": "You are a test agent.",
        "summarizer": "extractive",
    }
    data.update(overrides)
    return AgentConfig.model_validate(data)


def summarizing_config(after: int, min_recent: int) -> AgentConfig:
    """A config that compacts once more than ``after`` messages are stored."""
    return config(
        context={
            "max_messages_before_summary": after,
            "min_recent_messages": min_recent,
            "preserve_user_turns": 1,
            "preserve_fill": False,  # these short sessions fit the share a compaction keeps
        }
    )


def tools() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @reg.tool()
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("the tool blew up")

    @reg.tool()
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    return reg


@pytest.fixture
def store() -> Store:
    return open_store("memory://")


def make_agent(
    store: Store, model: ScriptedChatModel | OpenAIChatModel, **kw: Any
) -> tuple[Agent, list[tuple[str, dict[str, Any]]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    cfg = kw.pop("cfg", None) or config()
    agent = Agent(
        cfg,
        store=store,
        model=model,
        tools=kw.pop("tools", tools()),
        on_event=lambda name, payload: events.append((name, payload)),
        calibrator=kw.pop("calibrator", Calibrator()),
        now=lambda: FIXED_NOW,
        **kw,
    )
    return agent, events


def names(events: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    return [n for n, _ in events]


# -- basic turns ------------------------------------------------------------------------


def test_plain_reply_is_stored_with_model_and_usage(store: Store) -> None:
    model = ScriptedChatModel([with_usage("hello there", input_tokens=321, output_tokens=4)])
    agent, events = make_agent(store, model)
    session = agent.new_session()
    result = agent.run_turn(session, "hi")
    assert result.text == "hello there"
    assert result.steps == 1
    assert result.stopped == "done"
    assert [m.role for m in result.messages_appended] == ["user", "assistant"]
    stored = session.messages()
    assert [m.text for m in stored] == ["hi", "hello there"]
    reply = stored[-1]
    assert reply.model == "scripted"
    assert reply.usage is not None and reply.usage.input_tokens == 321
    assert reply.metadata[ESTIMATE_METADATA_KEY] == result.context_tokens
    assert result.usage.input_tokens == 321 and result.usage.output_tokens == 4
    assert result.reported_input_tokens == 321
    assert result.estimated_input_tokens == result.context_tokens > 0
    assert names(events) == ["turn_started", "model_called", "turn_finished"]
    request = model.requests[0]
    assert request.messages[0].role == "system"
    assert "You are a test agent." in request.messages[0].text
    assert "2025-01-15" in request.messages[0].text
    assert request.messages[-1].text == "hi"
    assert {t["name"] for t in request.tools} == {"add", "explode", "read_file"}


def test_session_without_model_takes_the_agents(store: Store) -> None:
    agent, _ = make_agent(store, ScriptedChatModel(["ok"]))
    session = store.create_session(agent="tester")
    assert session.model is None
    agent.run_turn(session, "hi")
    assert session.model == "openai/gpt-4o"


def test_tool_round_trip(store: Store) -> None:
    model = ScriptedChatModel([tool_call("add", a=2, b=3, id="call_1"), "the sum is 5"])
    agent, events = make_agent(store, model)
    session = agent.new_session()
    result = agent.run_turn(session, "add 2 and 3")
    assert result.steps == 2
    roles = [(m.role, m.text) for m in session.messages()]
    assert roles == [
        ("user", "add 2 and 3"),
        ("assistant", ""),
        ("tool", "5"),
        ("assistant", "the sum is 5"),
    ]
    second = model.requests[1].messages
    assert second[-2].tool_calls[0].id == "call_1"
    assert second[-1].role == "tool" and second[-1].tool_call_id == "call_1"
    assert names(events) == [
        "turn_started",
        "model_called",
        "tool_started",
        "tool_finished",
        "model_called",
        "turn_finished",
    ]
    finished = dict(events)["tool_finished"]
    assert finished["is_error"] is False and finished["result"].text == "5"
    assert len(result.observations) == 2


def test_a_failing_tool_is_an_error_result_and_the_loop_goes_on(store: Store) -> None:
    model = ScriptedChatModel([tool_call("explode"), tool_call("nope"), "sorry, it failed"])
    agent, events = make_agent(store, model)
    session = agent.new_session()
    result = agent.run_turn(session, "try it")
    assert result.text == "sorry, it failed"
    assert result.steps == 3
    results = [m for m in session.messages() if m.role == "tool"]
    assert [m.metadata.get("is_error") for m in results] == [True, True]
    assert "RuntimeError: the tool blew up" in results[0].text
    assert "unknown tool 'nope'" in results[1].text
    assert "the tool blew up" in model.requests[1].messages[-1].text
    assert [p["is_error"] for n, p in events if n == "tool_finished"] == [True, True]


def test_parallel_calls_are_answered_in_one_batch_in_call_order(store: Store) -> None:
    calls = [tool_call("add", a=1, b=1, id="c1"), tool_call("read_file", path="x", id="c2")]
    model = ScriptedChatModel([calls, "done"])
    agent, _ = make_agent(store, model)
    session = agent.new_session()
    agent.run_turn(session, "go")
    tool_msgs = [m for m in session.messages() if m.role == "tool"]
    assert [m.tool_call_id for m in tool_msgs] == ["c1", "c2"]
    assert tool_msgs[0].seq is not None and tool_msgs[1].seq == tool_msgs[0].seq + 1


def test_step_limit_stops_the_turn_with_a_synthetic_note(store: Store) -> None:
    model = ScriptedChatModel(default=lambda req: tool_call("add", a=len(req.messages), b=1))
    agent, events = make_agent(store, model, cfg=config(max_steps=3))
    session = agent.new_session()
    result = agent.run_turn(session, "loop forever")
    assert result.steps == 3
    assert result.stopped == "step_limit"
    assert len(model.requests) == 3
    stored = session.messages()
    note = stored[-1]
    assert note.role == "user" and note.synthetic
    assert note.text.startswith(STEP_LIMIT_PREFIX)
    # every call has its result: the unit is complete
    call_ids = [c.id for m in stored for c in m.tool_calls]
    result_ids = [m.tool_call_id for m in stored if m.role == "tool"]
    assert call_ids == result_ids and len(call_ids) == 3
    assert "step_limit" in names(events)
    assert agent.run_turn(session, "again", max_steps=1).steps == 1


def test_crash_mid_tool_leaves_the_call_stored_and_the_view_repairs_it(store: Store) -> None:
    reg = ToolRegistry()

    @reg.tool()
    def hang() -> str:
        """Interrupted."""
        raise KeyboardInterrupt

    model = ScriptedChatModel([tool_call("hang", id="call_h")])
    agent, _ = make_agent(store, model, tools=reg)
    session = agent.new_session()
    with pytest.raises(KeyboardInterrupt):
        agent.run_turn(session, "go")
    stored = session.messages()
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].tool_calls[0].id == "call_h"
    window = build_context(session, model="openai/gpt-4o")
    assert window.messages[-1].text == INTERRUPTED_RESULT
    assert window.report.synthesized_results == ["call_h"]


def test_streaming_sends_text_to_the_callback(store: Store) -> None:
    model = ScriptedChatModel([tool_call("add", a=1, b=2), "one plus two is three"])
    agent, _ = make_agent(store, model)
    session = agent.new_session()
    chunks: list[str] = []
    result = agent.run_turn(session, "sum", stream=chunks.append)
    assert "".join(chunks) == "one plus two is three"
    assert len(chunks) > 1
    assert result.text == "one plus two is three"
    assert all(call.streamed for call in model.calls)


def test_broken_event_handler_does_not_break_the_turn(store: Store) -> None:
    def handler(name: str, payload: dict[str, Any]) -> None:
        raise ValueError("listener bug")

    agent = Agent(config(), store=store, model=ScriptedChatModel(["fine"]), on_event=handler)
    assert agent.run_turn(agent.new_session(), "hi").text == "fine"


def test_bad_input_and_exhausted_script(store: Store) -> None:
    agent, _ = make_agent(store, ScriptedChatModel([]))
    session = agent.new_session()
    with pytest.raises(ValueError, match="empty"):
        agent.run_turn(session, "   ")
    with pytest.raises(ValueError, match="user"):
        agent.run_turn(session, Message.assistant("not a user"))
    with pytest.raises(ModelError, match="no scripted reply left"):
        agent.run_turn(session, "hi")


def test_system_prompt_is_stable_across_turns(store: Store) -> None:
    model = ScriptedChatModel(["a", "b"])
    agent, _ = make_agent(store, model)
    session = agent.new_session()
    agent.run_turn(session, "one")
    agent.run_turn(session, "two")
    first, second = (r.messages[0].text for r in model.requests)
    assert first == second
    assert "14:33" not in first  # rounded to the day


# -- doom loops in the loop -----------------------------------------------------------------


def test_doom_loop_warning_is_injected_once(store: Store) -> None:
    script: list[Any] = [tool_call("read_file", path="a.py") for _ in range(5)] + ["giving up"]
    model = ScriptedChatModel(script)
    agent, events = make_agent(store, model)
    session = agent.new_session()
    result = agent.run_turn(session, "read it")
    assert len(result.loop_warnings) == 1
    warnings = [m for m in session.messages() if m.text.startswith(WARNING_PREFIX)]
    assert len(warnings) == 1
    assert warnings[0].role == "user" and warnings[0].synthetic
    assert "read_file(path=a.py)" in warnings[0].text
    # the warning is placed after the third call's result and the model sees it
    assert any(m.text.startswith(WARNING_PREFIX) for m in model.requests[3].messages)
    assert not any(m.text.startswith(WARNING_PREFIX) for m in model.requests[2].messages)
    assert names(events).count("doom_loop") == 1


def test_cycle_warning_in_the_loop(store: Store) -> None:
    script: list[Any] = []
    for _ in range(3):
        script += [tool_call("read_file", path="a.py"), tool_call("add", a=1, b=2)]
    model = ScriptedChatModel([*script, "stopping"])
    agent, _ = make_agent(store, model)
    result = agent.run_turn(agent.new_session(), "work")
    assert [w.kind for w in result.loop_warnings] == ["cycle"]
    assert "read_file(path=a.py) -> add(a=1, b=2) 3 times" in result.loop_warnings[0].text


# -- compaction after the turn ---------------------------------------------------------------


class SpyCompactor(Compactor):
    """Records when the after-turn check runs: how many model calls had been made."""

    def __init__(self, model: ScriptedChatModel, **kw: Any) -> None:
        super().__init__(ExtractiveSummarizer(), **kw)
        self.model = model
        self.checked_at: list[int] = []

    def compact_if_needed(self, session: Session, **kw: Any) -> CompactionResult:
        self.checked_at.append(len(self.model.calls))
        assert kw["context_tokens"] is not None and kw["context_tokens"] > 0
        assert kw["window"] is not None and kw["budget"] > 0
        return super().compact_if_needed(session, **kw)


def test_compaction_is_checked_after_the_turn_not_inside(store: Store) -> None:
    model = ScriptedChatModel(
        [tool_call("add", a=1, b=1), tool_call("add", a=2, b=2), "four", "next"]
    )
    spy = SpyCompactor(model)
    agent, _ = make_agent(store, model, compactor=spy)
    session = agent.new_session()
    result = agent.run_turn(session, "go")
    assert spy.checked_at == [3]  # once, after all three model calls
    assert result.compaction is not None and result.compaction.status == "not_needed"
    agent.run_turn(session, "again")
    assert spy.checked_at == [3, 4]


def test_compaction_happens_when_a_trigger_fires(store: Store) -> None:
    cfg = summarizing_config(after=8, min_recent=2)
    model = ScriptedChatModel(default="noted")
    agent, events = make_agent(store, model, cfg=cfg)
    session = agent.new_session()
    results = [agent.run_turn(session, f"fact {i}: port {8000 + i}") for i in range(8)]
    compacted = [r for r in results if r.compaction is not None and r.compaction.compacted]
    assert compacted, [r.compaction.status for r in results if r.compaction]
    checkpoint = session.latest_checkpoint()
    assert checkpoint is not None
    assert "8000" in checkpoint.summary
    assert "compacted" in names(events)
    assert len(session.messages()) == 16  # history is never rewritten


class BrokenSummarizer:
    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        raise RuntimeError("summarizer down")


def test_compaction_failure_never_breaks_the_turn(store: Store) -> None:
    cfg = summarizing_config(after=1, min_recent=0)
    policy = cfg.context
    model = ScriptedChatModel(default="ok")
    compactor = Compactor(BrokenSummarizer(), policy=policy)
    agent, events = make_agent(store, model, cfg=cfg, compactor=compactor)
    session = agent.new_session()
    results = [agent.run_turn(session, f"msg {i}") for i in range(4)]
    assert all(r.text == "ok" for r in results)
    statuses = [r.compaction.status for r in results if r.compaction]
    assert "failed" in statuses
    failed = [p for n, p in events if n == "compaction_failed"]
    assert failed and "summarizer down" in (failed[0]["result"].error or "")


def test_a_compactor_that_raises_is_contained(store: Store) -> None:
    class Raising(Compactor):
        def compact_if_needed(self, session: Session, **kw: Any) -> CompactionResult:
            raise RuntimeError("unexpected")

    agent, _ = make_agent(
        store, ScriptedChatModel(["ok"]), compactor=Raising(ExtractiveSummarizer())
    )
    result = agent.run_turn(agent.new_session(), "hi")
    assert result.text == "ok"
    assert result.compaction is not None and result.compaction.status == "failed"


# -- calibration -------------------------------------------------------------------------


def test_reported_tokens_calibrate_and_persist(store: Store) -> None:
    calibrator = Calibrator()
    model = ScriptedChatModel(["a", "b"], input_scale=1.5)
    agent, _ = make_agent(store, model, calibrator=calibrator)
    session = agent.new_session()
    first = agent.run_turn(session, "hello")
    obs = first.observations[0]
    assert obs.reported_input_tokens is not None
    assert obs.reported_input_tokens > obs.estimated_input_tokens
    assert calibrator.factor("openai/gpt-4o") == pytest.approx(1.5, rel=0.05)
    memo = session.get_memo()
    assert memo[MEMO_KEY]["openai/gpt-4o"]["samples"] == 1
    assert memo[LAST_USAGE_KEY]["reported_input_tokens"] == obs.reported_input_tokens
    saved = last_usage(session)
    assert saved is not None and saved.error is not None and saved.error > 0.4
    second = agent.run_turn(session, "again")
    assert any("budget calibrated" in n for n in second.context_report.notes)
    assert second.context_report.limit < 128_000
    # a fresh process (fresh calibrator) picks the ratio up from the session it resumes
    fresh = Calibrator()
    other, _ = make_agent(store, ScriptedChatModel(["c"]), calibrator=fresh)
    other.build(store.get_session(session.id))
    assert fresh.factor("openai/gpt-4o") == pytest.approx(calibrator.factor("openai/gpt-4o"))


def test_no_reported_usage_leaves_the_ratio_alone(store: Store) -> None:
    from threadline.messages import Usage

    calibrator = Calibrator()
    reply = Message.assistant("x", usage=Usage())
    agent, _ = make_agent(store, ScriptedChatModel([reply]), calibrator=calibrator)
    result = agent.run_turn(agent.new_session(), "hi")
    assert result.reported_input_tokens is None
    assert calibrator.factor("openai/gpt-4o") == 1.0
    assert not calibrator.knows("openai/gpt-4o")


# -- context length recovery -----------------------------------------------------------------


def fill_history(session: Session, turns: int, *, result_chars: int = 2_000) -> None:
    """``turns`` user turns, each with a tool call and a large result."""
    batch: list[Message] = []
    for i in range(turns):
        call = tool_call("read_file", path=f"src/mod{i}.py", id=f"hist_{i}")
        body = "".join(f"line {j}: value = {i * 1000 + j}\n" for j in range(result_chars // 20))
        batch += [
            Message.user(f"look at module {i}"),
            Message.assistant(tool_calls=[call]),
            Message.tool(body, tool_call_id=call.id, name="read_file"),
            Message.assistant(f"module {i} looks fine"),
        ]
    session.append(batch)


def test_context_length_error_prunes_compacts_and_retries_scripted(store: Store) -> None:
    model = ScriptedChatModel([ContextLengthExceeded("prompt is too long"), "recovered"])
    agent, events = make_agent(store, model)
    session = agent.new_session()
    fill_history(session, 10)
    result = agent.run_turn(session, "summarise the modules")
    assert result.text == "recovered"
    assert result.steps == 1
    assert result.recovered and "compaction" in " ".join(result.recovered)
    assert session.latest_checkpoint() is not None
    assert len(model.requests[1].messages) < len(model.requests[0].messages)
    assert names(events).count("context_length_exceeded") == 1


def test_second_context_length_error_is_a_clear_error_scripted(store: Store) -> None:
    model = ScriptedChatModel([ContextLengthExceeded("too long"), ContextLengthExceeded("again")])
    agent, _ = make_agent(store, model)
    session = agent.new_session()
    fill_history(session, 10)
    with pytest.raises(ContextLengthExceeded) as info:
        agent.run_turn(session, "go")
    text = str(info.value)
    assert "after recovery" in text and "compaction" in text and "pruning" in text
    assert len(model.requests) == 2


def openai_model(srv: FakeOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o", api_key="test-key", base_url=srv.url, max_retries=0)


def test_context_length_error_from_the_openai_wire_recovers(store: Store) -> None:
    with FakeOpenAI() as srv:
        srv.fail_context_length()
        srv.reply_text("all modules look fine", usage=(9000, 7))
        model = openai_model(srv)
        agent = Agent(config(), store=store, model=model, calibrator=Calibrator())
        session = agent.new_session()
        fill_history(session, 12, result_chars=30_000)
        result = agent.run_turn(session, "summarise")
        assert result.text == "all modules look fine"
        assert srv.request_count == 2
        first, second = (r.json() for r in srv.requests)
        assert len(second["messages"]) <= len(first["messages"])
        assert len(srv.requests[1].body) < len(srv.requests[0].body)
        assert session.latest_checkpoint() is not None
        reply = session.messages()[-1]
        assert reply.usage is not None and reply.usage.input_tokens == 9000
        assert reply.model == "gpt-4o"
        model.close()


def test_second_context_length_error_from_the_openai_wire_is_clear(store: Store) -> None:
    with FakeOpenAI() as srv:
        srv.fail_context_length()
        srv.fail_context_length()
        model = openai_model(srv)
        agent = Agent(config(), store=store, model=model, calibrator=Calibrator())
        session = agent.new_session()
        fill_history(session, 12, result_chars=30_000)
        with pytest.raises(ContextLengthExceeded) as info:
            agent.run_turn(session, "summarise")
        assert srv.request_count == 2  # exactly one retry
        text = str(info.value)
        assert "openai/gpt-4o still refused the prompt as too long after recovery" in text
        assert "forced compaction" in text and "aggressive pruning" in text
        assert "maximum context length" in text
        assert session.messages()[-1].text == "summarise"  # the user message stays stored
        model.close()


def test_streamed_tool_round_trip_over_the_openai_wire(store: Store) -> None:
    with FakeOpenAI() as srv:
        srv.reply_tool_call("add", {"a": 20, "b": 22}, usage=(50, 5))
        srv.reply_text("it is 42", usage=(80, 3))
        model = openai_model(srv)
        agent = Agent(config(), store=store, model=model, tools=tools(), calibrator=Calibrator())
        session = agent.new_session()
        chunks: list[str] = []
        result = agent.run_turn(session, "add", stream=chunks.append)
        assert "".join(chunks) == "it is 42"
        assert [m.role for m in session.messages()] == ["user", "assistant", "tool", "assistant"]
        assert session.messages()[2].text == "42"
        assert result.usage.input_tokens == 130
        sent = srv.requests[1].json()
        assert sent["messages"][-1]["role"] == "tool"
        assert sent["tools"][0]["function"]["name"] == "add"
        model.close()
