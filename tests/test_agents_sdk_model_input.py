"""The Agents SDK model input stays within a budgeted session's budget (issue 35):
``RunConfig(call_model_input_filter=session.input_filter)`` counts the instructions,
the tool schemas and the current turn with the stored window, so what ``Runner``
sends the model fits ``context_limit - response_reserve``; a current turn that
cannot fit is refused before the model is called."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.items import TResponseInputItem, TResponseStreamEvent
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

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
    """Answers every call and records what it was sent; with ``book``, a request that
    mentions booking is first answered with a ``book_flight`` call."""

    def __init__(self, book: bool = False) -> None:
        self.sent: list[tuple[str | None, list[TResponseInputItem], list[Any]]] = []
        self.book = book

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        instructions, given = kwargs["system_instructions"], kwargs["input"]
        tools = kwargs["tools"]
        self.sent.append((instructions, list(given), list(tools)))
        last = given[-1] if isinstance(given, list) else {}
        if self.book and last.get("role") == "user" and "book" in str(last.get("content")):
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{len(self.sent)}",
                name="book_flight",
                arguments=json.dumps(
                    {
                        "origin": "LIS",
                        "destination": "OPO",
                        "date": "2026-05-01",
                        "passengers": 2,
                        "cabin": "economy",
                    }
                ),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
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
    return "Booked: ABC123. " + "Seat 12A, bag included, meal on board. " * 60


def model_input_tokens(instructions: str | None, items: list[Any], tools: list[Any]) -> int:
    counter = counter_for(MODEL)
    total = counter.count_tools(tool_schemas(Agent(name="x", tools=tools)))
    if instructions:
        total += counter.count_message(Message.system(instructions))
    return total + counter.count_messages(items_to_messages(items))


def run(filtered: bool, current_turn: str, *, book: bool = False) -> list[int]:
    """Tokens of each model input of 12 turns and then ``current_turn`` (the last
    filtered or not); with ``book``, that turn calls ``book_flight`` first."""
    return [model_input_tokens(*sent) for sent in run_sent(filtered, current_turn, book)]


def run_sent(
    filtered: bool, current_turn: str, book: bool = False
) -> list[tuple[str | None, list[TResponseInputItem], list[Any]]]:
    store = open_store("memory://")
    session = ThreadlineSession("trip", store, policy=POLICY, model=MODEL)
    model = RecordingModel(book)
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
    return model.sent


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


def test_a_tool_call_in_the_large_turn_fits_with_its_output() -> None:
    """The large turn's model calls a tool whose output is long: the second call of
    the turn carries the call and its output, and still fits."""
    large = "Please book Lisbon to Porto for two. " + "We travel light, window seats. " * 250
    budget = POLICY.context_limit - POLICY.response_reserve  # type: ignore[operator]
    unfiltered = run(False, large, book=True)
    assert unfiltered[-1] > budget
    sent = run_sent(True, large, book=True)
    assert len(sent) == 12 + 2  # the large turn took two model calls
    for instructions, items, tools in sent[-2:]:
        assert model_input_tokens(instructions, items, tools) <= budget
        assert [t.name for t in tools] == ["book_flight"]
    items = sent[-1][1]
    calls = [i.get("call_id") for i in items if i.get("type") == "function_call"]
    outputs = [i.get("call_id") for i in items if i.get("type") == "function_call_output"]
    assert calls == outputs == ["call_13"]
    assert any(i.get("role") == "user" and i.get("content") == large for i in items)
