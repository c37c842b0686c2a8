"""Pydantic AI inside a run (issue 35): ``ThreadlineHistory.processor`` as the agent's
history processor (``ProcessHistory``), or in ``WindowCapability``, which counts the
tool schemas too, give a real
``Agent`` the session's budgeted window before the run's own messages. A local
``FunctionModel`` records what the model receives: it fits ``context_limit -
response_reserve`` with the instructions and tools, every tool call comes with its
return, and the run's prompt is there. The async methods run off the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.test_integration_pydantic_ai import assert_returns_follow_calls
from threadline import open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.context.policy import ContextPolicy
from threadline.errors import ContextOverflow
from threadline.integrations.pydantic_ai import ThreadlineHistory, WindowCapability, to_threadline
from threadline.messages import Message
from threadline.tokens import counter_for

MODEL = "gpt-4o"
POLICY = ContextPolicy(context_limit=3000, response_reserve=500, min_recent_messages=2)
BUDGET = 2500
INSTRUCTIONS = "Answer about the city from what the lookup tool returns. " * 10
Sent = list[tuple[list[pm.ModelMessage], AgentInfo]]


def recording_model(sent: Sent) -> FunctionModel:
    """Calls ``lookup`` once per prompt, then answers; records every request."""

    def reply(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        sent.append((list(messages), info))
        last = messages[-1].parts[-1]
        if isinstance(last, pm.UserPromptPart):
            return pm.ModelResponse(parts=[pm.ToolCallPart("lookup", {"city": "Oslo"})])
        return pm.ModelResponse(parts=[pm.TextPart("It is big. " * 30)])

    return FunctionModel(reply)


def make_agent(sent: Sent, extension: Any) -> Agent[None, str]:
    capabilities = [extension] if extension is not None else []
    agent: Agent[None, str] = Agent(
        recording_model(sent),
        system_prompt="You know cities.",
        instructions=INSTRUCTIONS,
        capabilities=capabilities,
    )

    @agent.tool_plain
    def lookup(city: str, country: str = "", include_suburbs: bool = False) -> str:
        """The population, area and history of a city, by name, with its country to
        tell apart two cities of one name, and its suburbs when asked for."""
        return f"{city}: " + "many people live there. " * 30

    return agent


def model_input_tokens(messages: list[pm.ModelMessage], info: AgentInfo) -> int:
    """What the model got, counted apart from the processor: the messages, the
    instructions and the tool schemas."""
    counter = counter_for(MODEL)
    tools = [
        {"name": t.name, "description": t.description or "", "parameters": t.parameters_json_schema}
        for t in info.function_tools
    ]
    total = counter.count_messages(to_threadline(messages, answerable=set()))
    total += counter.count_tools(tools)
    if info.instructions:
        total += counter.count_message(Message.system(info.instructions))
    return total


def assert_calls_whole(messages: list[pm.ModelMessage]) -> None:
    calls = [p.tool_call_id for m in messages for p in m.parts if isinstance(p, pm.ToolCallPart)]
    returns = [
        p.tool_call_id for m in messages for p in m.parts if isinstance(p, pm.ToolReturnPart)
    ]
    assert sorted(calls) == sorted(returns)
    assert_returns_follow_calls(messages)


def converse(kind: str, turns: int = 10, last: str | None = None) -> tuple[Sent, int]:
    """``turns`` runs of an agent whose history is ``kind``: the capability (with the
    stored history passed in too: ``capability+history``), the processor, or
    (``whole``) the stored history passed in full and nothing else. Returns what the
    model got and how many messages the session stores."""
    store = open_store("memory://")
    history = ThreadlineHistory("trip", store, model=MODEL)
    extension: Any = None
    if kind in ("capability", "capability+history"):
        extension = WindowCapability(history.processor(POLICY))
    elif kind == "compacted":
        compactor = Compactor(ExtractiveSummarizer(), policy=POLICY)
        extension = WindowCapability(history.processor(POLICY, compactor=compactor))
    elif kind == "processor":
        extension = ProcessHistory(history.processor(POLICY))
    sent: Sent = []
    agent = make_agent(sent, extension)

    async def scenario() -> None:
        prompts = [
            f"Tell me about city {n}: " + "its parks and museums " * 20 for n in range(turns)
        ]
        if last is not None:
            prompts.append(last)
        for prompt in prompts:
            given = (
                await history.amessages() if kind.endswith("history") or kind == "whole" else None
            )
            result = await agent.run(prompt, message_history=given)
            await history.aadd(result.new_messages())

    try:
        asyncio.run(scenario())
        stored = len(history.messages())
    finally:
        store.close()
    return sent, stored


def test_the_model_gets_the_budgeted_window_with_tools_and_instructions() -> None:
    sent, stored = converse("capability")
    assert len(sent) == 20
    for messages, info in sent:
        assert model_input_tokens(messages, info) <= BUDGET
        assert_calls_whole(messages)
    messages, _ = sent[-1]
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, pm.UserPromptPart)]
    assert str(prompts[-1]).startswith("Tell me about city 9")
    assert len(messages) < stored  # old history left out...
    assert model_input_tokens(*sent[-1]) > BUDGET * 0.6  # ...not all of it
    system = [p for m in messages for p in m.parts if isinstance(p, pm.SystemPromptPart)]
    assert [p.content for p in system] == ["You know cities."]  # once, first
    assert isinstance(messages[0].parts[0], pm.SystemPromptPart)


def test_a_history_handed_to_the_run_is_replaced_by_the_window() -> None:
    """Code that passes ``message_history=history.messages()`` gets the same window."""
    sent, _ = converse("capability+history")
    for messages, info in sent:
        assert model_input_tokens(messages, info) <= BUDGET
        assert_calls_whole(messages)
    assert model_input_tokens(*sent[-1]) > BUDGET * 0.6


def test_with_a_compactor_the_dropped_history_is_summarized() -> None:
    sent, _ = converse("compacted")
    for messages, info in sent:
        assert model_input_tokens(messages, info) <= BUDGET
        assert_calls_whole(messages)
    messages, _ = sent[-1]
    system = [p.content for m in messages for p in m.parts if isinstance(p, pm.SystemPromptPart)]
    assert system[0] == "You know cities." and any("Summary" in s for s in system[1:])


def test_without_the_window_the_same_conversation_goes_over() -> None:
    sent, _ = converse("whole")
    assert model_input_tokens(*sent[-1]) > BUDGET


def test_the_processor_fits_the_messages_and_instructions() -> None:
    """The bare history processor cannot see the tools; what it sends fits the budget
    once the tool schemas, which the capability counts, are set aside."""
    sent, _ = converse("processor")
    counter = counter_for(MODEL)
    for messages, info in sent:
        tools = [
            {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
            for t in info.function_tools
        ]
        assert model_input_tokens(messages, info) - counter.count_tools(tools) <= BUDGET
        assert_calls_whole(messages)


def test_a_turn_that_cannot_fit_is_refused() -> None:
    with pytest.raises(ContextOverflow) as raised:
        converse("capability", turns=2, last="far too long " * 2000)
    assert raised.value.budget == BUDGET and raised.value.needed > BUDGET


def test_the_async_methods_run_off_the_event_loop_and_agree() -> None:
    store = open_store("memory://")
    history = ThreadlineHistory("async", store, model=MODEL)
    sent: Sent = []
    agent = make_agent(sent, None)
    threads: list[int] = []
    original = history._binding.for_write

    def for_write() -> Any:
        threads.append(threading.get_ident())
        return original()

    history._binding.for_write = for_write  # type: ignore[method-assign]

    async def scenario() -> tuple[list[pm.ModelMessage], int]:
        result = await agent.run("How big is Oslo?")
        await history.aadd(result.new_messages())
        return result.all_messages(), threading.get_ident()

    try:
        everything, loop_thread = asyncio.run(scenario())
        assert threads and loop_thread not in threads
        dumped = pm.ModelMessagesTypeAdapter.dump_python
        assert dumped(asyncio.run(history.amessages())) == dumped(everything)
        window = asyncio.run(history.awindow(POLICY))
        assert dumped(window) == dumped(history.window(POLICY))
    finally:
        store.close()
