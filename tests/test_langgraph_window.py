"""The LangGraph pre-model hook (issue 35): ``create_react_agent(pre_model_hook=
window_hook(saver, policy))`` sends the model the thread's budgeted window from the
threadline session instead of the whole ``messages`` state. The model is LangChain's
ChatOpenAI talking to the local fake OpenAI server, so what is checked is the request
the model actually got: with the agent's prompt and tool schemas it fits
``context_limit - response_reserve``, every tool call comes with its result, and the
turn's question is there; sync and async runs alike."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("langchain_openai")

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.fakes import FakeOpenAI
from tests.test_langgraph_reads import entries_read, fill
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.context.policy import ContextPolicy
from threadline.errors import ContextOverflow
from threadline.integrations.langgraph import ThreadlineSaver
from threadline.integrations.langgraph_window import window_hook
from threadline.interop.openai_format import messages_from_openai
from threadline.tokens import counter_for

MODEL = "gpt-4o"
POLICY = ContextPolicy(context_limit=3000, response_reserve=500, min_recent_messages=2)
BUDGET = 2500
PROMPT = "You plan trips. Check the weather with the tool before answering. " * 8


@tool
def get_weather(city: str, day: str = "today", units: str = "metric") -> str:
    """The weather forecast for a city on a day, in metric or imperial units, with
    wind, rain and temperature by the hour."""
    return f"{city} on {day}: " + "sunny, light wind, 21 degrees. " * 40


def agent(server: FakeOpenAI, saver: ThreadlineSaver, hook: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        from langgraph.prebuilt import create_react_agent

        model = ChatOpenAI(model=MODEL, api_key="test", base_url=server.url, max_retries=0)
        return create_react_agent(
            model, [get_weather], prompt=PROMPT, pre_model_hook=hook, checkpointer=saver
        )


def request_tokens(body: dict[str, Any]) -> int:
    """What the model got, counted from the request itself: messages and tools."""
    counter = counter_for(MODEL)
    tools = [t["function"] for t in body.get("tools", [])]
    return counter.count_messages(messages_from_openai(body["messages"])) + counter.count_tools(
        tools
    )


def assert_chains_whole(messages: list[dict[str, Any]]) -> None:
    called: list[str] = []
    answered: list[str] = []
    for m in messages:
        called += [c["id"] for c in m.get("tool_calls") or []]
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, "a tool result before (or without) its call"
            answered.append(m["tool_call_id"])
    assert sorted(called) == sorted(answered)


def converse(
    server: FakeOpenAI,
    url: str,
    hook_options: dict[str, Any] | None,
    turns: int = 8,
    policy: ContextPolicy = POLICY,
) -> list[dict[str, Any]]:
    """``turns`` questions on one thread, each answered after a tool call (the last
    two through ``ainvoke``); the request bodies the model got."""
    with ThreadlineSaver(url, model=MODEL) as saver:
        hook = None
        if hook_options is not None:
            hook = window_hook(
                saver, policy, instructions=PROMPT, tools=[get_weather], **hook_options
            )
        graph = agent(server, saver, hook)
        config = {"configurable": {"thread_id": "trip"}}

        def question(n: int) -> dict[str, Any]:
            server.reply_tool_call("get_weather", {"city": f"City{n}"}, id=f"call_{n}")
            server.reply_text(f"City{n} looks fine for a visit. " * 12)
            ask = f"Trip {n}: is City{n} nice this week? We like parks, museums and food."
            return {"messages": [HumanMessage(ask)]}

        for n in range(turns - 2):
            graph.invoke(question(n), config)

        async def last_two() -> None:  # one event loop: the model's async client is bound to it
            for n in range(turns - 2, turns):
                await graph.ainvoke(question(n), config)

        asyncio.run(last_two())
        state = graph.get_state(config).values["messages"]
        assert len(state) == turns * 4  # the state keeps every message
    return [r.json() for r in server.requests]


def test_the_model_gets_the_thread_window_within_the_budget(
    openai_server: FakeOpenAI, sqlite_url: str
) -> None:
    bodies = converse(openai_server, sqlite_url, {})
    assert len(bodies) == 16
    for n, body in enumerate(bodies):
        assert request_tokens(body) <= BUDGET
        assert_chains_whole(body["messages"])
        questions = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert questions[-1].startswith(f"Trip {n // 2}:")  # the turn's question is there
        assert body["messages"][0] == {"role": "system", "content": PROMPT}
    assert len(bodies[-1]["messages"]) < 8 * 4  # old turns left out...
    assert request_tokens(bodies[-1]) > BUDGET * 0.6  # ...not all of them


def test_without_the_hook_the_same_thread_goes_over(
    openai_server: FakeOpenAI, sqlite_url: str
) -> None:
    bodies = converse(openai_server, sqlite_url, None)
    assert request_tokens(bodies[-1]) > BUDGET


def test_with_a_compactor_what_falls_out_is_summarized(
    openai_server: FakeOpenAI, sqlite_url: str
) -> None:
    # room for the extractive summary, which pins the requests and the latest results
    policy = ContextPolicy(context_limit=6000, response_reserve=500, summary_share=0.9)
    compactor = Compactor(ExtractiveSummarizer(), policy=policy)
    bodies = converse(openai_server, sqlite_url, {"compactor": compactor}, 16, policy)
    for body in bodies:
        assert request_tokens(body) <= 5500
        assert_chains_whole(body["messages"])
    system = [m["content"] for m in bodies[-1]["messages"] if m["role"] == "system"]
    assert system[0] == PROMPT and any("Summary" in s for s in system[1:])
    assert "City0" in json.dumps(bodies[-1]["messages"])  # the first turn, summarized


def test_a_turn_that_cannot_fit_is_refused(openai_server: FakeOpenAI, sqlite_url: str) -> None:
    with ThreadlineSaver(sqlite_url, model=MODEL) as saver:
        hook = window_hook(saver, POLICY, instructions=PROMPT, tools=[get_weather])
        graph = agent(openai_server, saver, hook)
        with pytest.raises(ContextOverflow) as raised:
            graph.invoke(
                {"messages": [HumanMessage("far too long " * 3000)]},
                {"configurable": {"thread_id": "big"}},
            )
    assert raised.value.budget == BUDGET
    assert not openai_server.requests  # refused before the model was called


def test_the_thread_lookup_reads_the_same_however_long_the_thread(tmp_path: Path) -> None:
    """The hook finds the thread's session on every model call: the latest checkpoint
    is one small read, not the thread's whole list of checkpoints."""
    with ThreadlineSaver(f"sqlite://{tmp_path / 't.db'}") as saver:
        fill(saver, "small", 15)
        fill(saver, "big", 150)
        reads = {
            name: entries_read(saver, lambda n=name: saver.thread_session(n))
            for name in ("small", "big")
        }
        assert reads["small"] == reads["big"] <= 2
