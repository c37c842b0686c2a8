"""Pydantic AI histories in a threadline session: a real ``Agent`` (its OpenAI model
talking to the fake OpenAI server) stores its runs and continues from the stored or
the budgeted history; any history round-trips exactly (property test)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage

from tests.fakes import FakeOpenAI
from threadline import open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.context.policy import ContextPolicy
from threadline.integrations.pydantic_ai import ThreadlineHistory


def agent_for(server: FakeOpenAI) -> Agent[None, str]:
    provider = OpenAIProvider(base_url=server.url, api_key="test")
    agent: Agent[None, str] = Agent(
        OpenAIChatModel("gpt-4o", provider=provider), system_prompt="Be brief."
    )

    @agent.tool_plain
    def lookup(city: str) -> str:
        """The population of a city."""
        return f"{city}: " + "many people. " * 40

    return agent


def assert_returns_follow_calls(messages: list[pm.ModelMessage]) -> None:
    """No tool return comes before, or without, its call."""
    called: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(part, pm.ToolCallPart):
                called.add(part.tool_call_id)
            if isinstance(part, pm.ToolReturnPart):
                assert part.tool_call_id in called, part


def dumped(messages: list[pm.ModelMessage]) -> Any:
    return pm.ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def test_agent_runs_store_and_continue(openai_server: FakeOpenAI, sqlite_url: str) -> None:
    agent = agent_for(openai_server)
    history = ThreadlineHistory("pyd-1", store=sqlite_url, model="gpt-4o")
    openai_server.reply_tool_call("lookup", {"city": "Oslo"}, id="call_1")
    openai_server.reply_text("Oslo is big.")
    first = agent.run_sync("How big is Oslo?", message_history=history.messages())
    history.add(first.new_messages())
    assert dumped(history.messages()) == dumped(first.all_messages())

    openai_server.reply_text("You asked about Oslo.")
    second = agent.run_sync("What did I ask?", message_history=history.messages())
    history.add(second.new_messages())
    sent = openai_server.requests[-1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert dumped(history.messages()) == dumped(second.all_messages())
    history.close()

    # the rest of threadline reads the same conversation
    store = open_store(sqlite_url)
    session = store.get_session("pa-pyd-1")
    roles = " ".join(m.role for m in session.messages())
    assert roles == "system user assistant tool assistant user assistant"
    assert session.messages()[2].tool_calls[0].id == "call_1"
    store.close()


def test_budgeted_window_feeds_the_next_run(openai_server: FakeOpenAI, sqlite_url: str) -> None:
    agent = agent_for(openai_server)
    history = ThreadlineHistory("pyd-long", store=sqlite_url, model="gpt-4o")
    for n in range(12):
        openai_server.reply_tool_call("lookup", {"city": f"City{n}"}, id=f"call_{n}")
        openai_server.reply_text(f"City{n} is big.")
        result = agent.run_sync(f"How big is City{n}?", message_history=history.messages())
        history.add(result.new_messages())
    policy = ContextPolicy(context_limit=1500, response_reserve=300, min_recent_messages=2)
    compactor = Compactor(ExtractiveSummarizer(), policy=policy)
    window = history.window(policy, "gpt-4o", compactor=compactor)
    everything = history.messages()
    assert len(window) < len(everything)
    assert "Summary" in dumped(window[:2]).__repr__()
    returns = [p for m in window for p in m.parts if isinstance(p, pm.ToolReturnPart)]
    calls = {p.tool_call_id for m in window for p in m.parts if isinstance(p, pm.ToolCallPart)}
    assert all(p.tool_call_id in calls for p in returns)  # no return without its call
    openai_server.reply_text("City11 was the last one.")
    agent.run_sync("Which city was last?", message_history=window)
    sent = openai_server.requests[-1].json()["messages"]
    assert len(sent) < 2 * len(everything)
    assert "City11" in str(sent)
    session = history.threadline_session()
    assert session is not None and session.checkpoints()  # compacted, nothing deleted
    assert dumped(history.messages()) == dumped(everything)
    history.close()


# -- round trip (property) -------------------------------------------------------------

WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
TIMES = st.datetimes(
    min_value=datetime(2001, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)


@st.composite
def histories(draw: st.DrawFn) -> list[pm.ModelMessage]:
    """Requests and responses in a plausible order: a response's tool calls answered by
    the next request's tool returns (some left unanswered, some returns answering
    nothing), with thinking parts, system prompts and usage."""
    out: list[pm.ModelMessage] = []
    open_calls: list[str] = []
    start = draw(TIMES)
    for turn in range(draw(st.integers(min_value=1, max_value=6))):
        when = start + timedelta(seconds=turn)
        parts: list[Any] = []
        if turn == 0 and draw(st.booleans()):
            parts.append(pm.SystemPromptPart(draw(WORDS)))
        for call_id in open_calls:
            if draw(st.integers(0, 3)) > 0:
                content = draw(st.one_of(WORDS, st.dictionaries(WORDS, st.integers(), max_size=3)))
                parts.append(
                    pm.ToolReturnPart(
                        tool_name="t", content=content, tool_call_id=call_id, timestamp=when
                    )
                )
        if draw(st.integers(0, 3)) == 0:
            parts.append(pm.ToolReturnPart(tool_name="t", content="stray", tool_call_id=f"x{turn}"))
        parts.append(pm.UserPromptPart(draw(WORDS), timestamp=when))
        out.append(
            pm.ModelRequest(parts=parts, timestamp=when, instructions=draw(st.none() | WORDS))
        )
        reply: list[Any] = []
        if draw(st.booleans()):
            reply.append(pm.ThinkingPart(draw(WORDS), signature=draw(st.none() | WORDS)))
        if draw(st.booleans()):
            reply.append(pm.TextPart(draw(WORDS)))
        open_calls = [f"c{turn}_{k}" for k in range(draw(st.integers(min_value=0, max_value=2)))]
        reply += [
            pm.ToolCallPart(tool_name="t", args={"n": k, "w": draw(WORDS)}, tool_call_id=c)
            for k, c in enumerate(open_calls)
        ]
        usage = RequestUsage(input_tokens=draw(st.integers(0, 999)), output_tokens=3)
        out.append(
            pm.ModelResponse(
                parts=reply or [pm.TextPart("")], usage=usage, model_name="gpt-4o", timestamp=when
            )
        )
    return out


def complete(history: list[pm.ModelMessage]) -> bool:
    """Every tool call answered, every tool return answering a call."""
    calls = {p.tool_call_id for m in history for p in m.parts if isinstance(p, pm.ToolCallPart)}
    returns = {p.tool_call_id for m in history for p in m.parts if isinstance(p, pm.ToolReturnPart)}
    return calls == returns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), cut=st.integers(min_value=0, max_value=12))
def test_round_trip_property(history: list[pm.ModelMessage], cut: int) -> None:
    """Whatever is added (in one batch or two) reads back exactly. The window of a
    history that fits holds no tool return without its call before it and no call
    without its return (an unanswered one gets an "interrupted" return), and is the
    history itself when that was already so."""
    store = open_store("memory://")
    kept = ThreadlineHistory("rt", store=store, model="gpt-4o")
    kept.add(history[:cut])
    kept.add(history[cut:])
    assert dumped(kept.messages()) == dumped(history)
    window = kept.window(ContextPolicy(context_limit=1_000_000), "gpt-4o")
    assert_returns_follow_calls(window)
    assert complete(window)
    if complete(history):
        assert dumped(window) == dumped(history)
    store.close()


def test_a_retry_answering_a_call_is_that_calls_result(sqlite_url: str) -> None:
    """pydantic-ai 1.x answers a call whose tool raised ``ModelRetry`` (or whose
    arguments failed validation) with a ``RetryPromptPart`` naming the tool and the
    call; 2.x with a ``ToolReturnPart`` whose outcome is ``retried``. Before: the 1.x
    part was stored as a user message, so the window invented an "[interrupted]"
    result for the call beside the real retried one (one call, two returns)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 2.x deprecates RetryPromptPart; 1.x histories hold it
        from pydantic_ai.messages import RetryPromptPart

        retry_1x = RetryPromptPart(content="a must be 2", tool_name="add", tool_call_id="c1")
        feedback = RetryPromptPart(content="answer in JSON")  # answers no call
    retry_2x = pm.ToolReturnPart(tool_name="add", content="a must be 2", tool_call_id="d1")
    retry_2x.outcome = "retried"
    history = ThreadlineHistory("retries", store=sqlite_url, model="gpt-4o")
    for call, retry, again in (("c1", retry_1x, "c2"), ("d1", retry_2x, "d2")):
        history.add(
            [
                pm.ModelRequest(parts=[pm.UserPromptPart("add")]),
                pm.ModelResponse(parts=[pm.ToolCallPart("add", {"a": 1}, tool_call_id=call)]),
                pm.ModelRequest(parts=[retry]),
                pm.ModelResponse(parts=[pm.ToolCallPart("add", {"a": 2}, tool_call_id=again)]),
                pm.ModelRequest(parts=[pm.ToolReturnPart("add", 2, tool_call_id=again), feedback]),
                pm.ModelResponse(parts=[pm.TextPart("2")]),
            ]
        )
    session = history.threadline_session()
    assert session is not None
    stored = session.messages()
    assert [m.tool_call_id for m in stored if m.role == "tool"] == ["c1", "c2", "d1", "d2"]
    assert [m.text for m in stored if m.role == "user"] == ["add", "answer in JSON"] * 2
    window = history.window(ContextPolicy(context_limit=8000))
    returns = [
        p.tool_call_id
        for m in window
        if isinstance(m, pm.ModelRequest)
        for p in m.parts
        if isinstance(p, pm.ToolReturnPart)
    ]
    assert returns == ["c1", "c2", "d1", "d2"]  # one result per call, none invented
    assert "interrupted" not in str(window)
    history.close()
