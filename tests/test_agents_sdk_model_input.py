"""The Agents SDK model input stays within a budgeted session's budget (issue 35):
``RunConfig(call_model_input_filter=session.input_filter)`` counts the instructions,
the tool schemas and the current turn with the stored window, so what ``Runner``
sends the model fits ``context_limit - response_reserve``; a current turn that
cannot fit is refused before the model is called."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.items import TResponseInputItem, TResponseStreamEvent
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from threadline import open_store
from threadline.context.policy import ContextPolicy
from threadline.errors import ContextOverflow
from threadline.integrations.agents_input import tool_schemas
from threadline.integrations.openai_agents import ThreadlineSession
from threadline.interop.responses_format import items_to_messages
from threadline.messages import Message
from threadline.tokens import counter_for

MODEL = "gpt-4o"
POLICY = ContextPolicy(context_limit=4000, response_reserve=500, min_recent_messages=2)
INSTRUCTIONS = "You answer questions about the travel plan. " * 60


class RecordingModel(Model):
    """Answers every call and records what it was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str | None, list[TResponseInputItem], list[Any]]] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        instructions, given = kwargs["system_instructions"], kwargs["input"]
        tools = kwargs["tools"]
        self.sent.append((instructions, list(given), list(tools)))
        answer = ResponseOutputMessage(
            id=f"msg_{len(self.sent)}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="noted " * 40, annotations=[])],
        )
        return ModelResponse(output=[answer], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests do not stream")


@function_tool
def book_flight(origin: str, destination: str, date: str, passengers: int, cabin: str) -> str:
    """Book a flight between two airports on a date, for a number of passengers in a
    cabin class (economy, premium economy, business or first). Returns a booking
    reference to quote in later questions about the trip."""
    return "ABC123"


def model_input_tokens(instructions: str | None, items: list[Any], tools: list[Any]) -> int:
    counter = counter_for(MODEL)
    total = counter.count_tools(tool_schemas(Agent(name="x", tools=tools)))
    if instructions:
        total += counter.count_message(Message.system(instructions))
    return total + counter.count_messages(items_to_messages(items))


def run(filtered: bool, current_turn: str) -> list[int]:
    store = open_store("memory://")
    session = ThreadlineSession("trip", store, policy=POLICY, model=MODEL)
    model = RecordingModel()
    agent = Agent(name="planner", instructions=INSTRUCTIONS, model=model, tools=[book_flight])
    config = RunConfig(call_model_input_filter=session.input_filter if filtered else None)

    async def scenario() -> None:
        for turn in range(12):
            await Runner.run(agent, f"day {turn}: " + "museums and food " * 30, session=session)
        await Runner.run(agent, current_turn, session=session, run_config=config)

    try:
        asyncio.run(scenario())
    finally:
        store.close()
    return [model_input_tokens(*sent) for sent in model.sent]


def test_the_model_input_fits_with_instructions_tools_and_a_large_turn() -> None:
    large = "Here is my whole itinerary, please check it: " + "Lisbon to Porto by train. " * 300
    budget = POLICY.context_limit - POLICY.response_reserve  # type: ignore[operator]
    unfiltered = run(False, large)
    assert unfiltered[-1] > budget  # the stored window alone fits; the whole input does not
    filtered = run(True, large)
    assert filtered[-1] <= budget
    assert filtered[-1] > budget * 0.6  # it drops old history, not everything


def test_a_current_turn_that_cannot_fit_is_refused() -> None:
    with pytest.raises(ContextOverflow) as raised:
        run(True, "far too long " * 3000)
    assert raised.value.budget == 3500 and raised.value.needed > 3500
