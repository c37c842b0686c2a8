"""ThreadlineSession under the Agents SDK's real Runner, side by side with SQLiteSession.

A local ``Model`` returns scripted responses (reasoning, text, function calls), so
``Runner.run`` executes real ``function_tool`` calls and saves real items through
the session. Every scenario runs on SQLite, PostgreSQL and Redis and is checked against
the SDK's own ``SQLiteSession`` fed the same inputs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

agents = pytest.importorskip("agents")

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

from tests.conformance.backends import clean_store  # noqa: E402
from threadline import Message, Store, open_store  # noqa: E402
from threadline.context.policy import ContextPolicy  # noqa: E402
from threadline.errors import UsageError  # noqa: E402
from threadline.integrations.openai_agents import ThreadlineSession  # noqa: E402

set_tracing_disabled(True)

BACKENDS = ["sqlite", "postgres", "redis"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


# -- a scripted model ------------------------------------------------------------------


def text(msg_id: str, words: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=msg_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=words, annotations=[])],
    )


def call(call_id: str, a: int, b: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        call_id=call_id,
        type="function_call",
        name="add",
        arguments=json.dumps({"a": a, "b": b}),
        status="completed",
    )


def reasoning(rs_id: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=rs_id, type="reasoning", summary=[Summary(type="summary_text", text="adding")]
    )


class ScriptedModel(Model):
    """Returns the next scripted output each call and records the input it was given."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        given = kwargs.get("input", args[1] if len(args) > 1 else None)
        self.inputs.append(list(given) if isinstance(given, list) else [given])
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests do not stream")


@function_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def turns(n: int) -> list[tuple[str, list[list[Any]]]]:
    """``n`` user turns; each makes the model reason, call ``add`` twice in parallel, then
    answer (every third turn answers without a tool)."""
    out = []
    for t in range(n):
        if t % 3 == 2:
            out.append((f"just say hi {t}", [[text(f"msg_{t}", f"hi {t}")]]))
            continue
        out.append(
            (
                f"add things {t}",
                [
                    [reasoning(f"rs_{t}"), call(f"c{t}a", t, 1), call(f"c{t}b", t, 2)],
                    [text(f"msg_{t}", f"sums are {t + 1} and {t + 2}")],
                ],
            )
        )
    return out


async def run_turns(session: Any, script: list[tuple[str, list[list[Any]]]]) -> ScriptedModel:
    model = ScriptedModel([step for _, steps in script for step in steps])
    agent = Agent(name="calc", instructions="Use the add tool.", model=model, tools=[add])
    for prompt, _ in script:
        await Runner.run(agent, prompt, session=session)
    return model


def both(store: Store, tmp_path: Path, sid: str = "agents-1") -> tuple[ThreadlineSession, Any]:
    return ThreadlineSession(sid, store=store), SQLiteSession(sid, tmp_path / "sdk.db")


# -- side by side with SQLiteSession -----------------------------------------------------


def test_runner_turns_match_sqlite_session(store: Store, tmp_path: Path) -> None:
    ours, theirs = both(store, tmp_path)

    async def scenario() -> None:
        script = turns(5)
        mine = await run_turns(ours, script)
        sdk = await run_turns(theirs, script)
        assert mine.inputs == sdk.inputs  # the model saw the same input every step
        everything = await theirs.get_items()
        assert await ours.get_items() == everything
        kinds = {i.get("type", "message") for i in everything}
        assert {"message", "function_call", "function_call_output", "reasoning"} <= kinds
        for limit in (None, -1, 0, 1, 2, 3, 5, 7, len(everything), len(everything) + 5):
            assert await ours.get_items(limit) == await theirs.get_items(limit), limit

    asyncio.run(scenario())


def test_pop_and_clear_match_sqlite_session(store: Store, tmp_path: Path) -> None:
    ours, theirs = both(store, tmp_path)

    async def scenario() -> None:
        await run_turns(ours, turns(4))
        await run_turns(theirs, turns(4))
        before = await ours.get_items()
        # pop through output items grouped in one message (text, calls, reasoning)
        for _ in range(6):
            assert await ours.pop_item() == await theirs.pop_item()
            assert await ours.get_items() == await theirs.get_items()
            assert await ours.get_items(3) == await theirs.get_items(3)
        # a new turn after pops, then more pops
        extra: list[TResponseInputItem] = [{"role": "user", "content": "again"}]
        await ours.add_items(extra)
        await theirs.add_items(extra)
        assert await ours.get_items() == await theirs.get_items()
        assert await ours.pop_item() == await theirs.pop_item()
        await ours.clear_session()
        await theirs.clear_session()
        assert await ours.get_items() == await theirs.get_items() == []
        assert await ours.pop_item() is None and await theirs.pop_item() is None
        await run_turns(ours, turns(2))
        await run_turns(theirs, turns(2))
        assert await ours.get_items() == await theirs.get_items()
        # the history kept everything: the audit view holds what was popped and cleared
        session = ours.threadline_session()
        assert session is not None
        audit = session.messages(include_retracted=True)
        assert len(audit) > len(session.messages())
        kept_text = "\n".join(m.text for m in audit)
        for item in before:
            if item.get("type") is None and isinstance(item.get("content"), str):
                assert item["content"] in kept_text

    asyncio.run(scenario())


def test_empty_and_unknown_sessions_match(store: Store, tmp_path: Path) -> None:
    ours, theirs = both(store, tmp_path, "never-used")

    async def scenario() -> None:
        assert await ours.get_items() == await theirs.get_items() == []
        assert await ours.pop_item() is None and await theirs.pop_item() is None
        await ours.clear_session()
        await theirs.clear_session()
        await ours.add_items([])
        assert ours.threadline_session() is None  # nothing was created

    asyncio.run(scenario())


def test_items_round_trip_exactly(store: Store) -> None:
    items: list[Any] = [
        {"role": "developer", "content": "be terse"},
        {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "abc"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        },
        {"type": "function_call", "call_id": "x1", "name": "f", "arguments": '{"b": 1,  "a":2}'},
        {"type": "function_call_output", "call_id": "x1", "output": "done"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"role": "assistant", "content": "bye"},
    ]
    session = ThreadlineSession("exact", store=store)

    async def scenario() -> None:
        await session.add_items(items[:4])
        await session.add_items(items[4:])
        assert await session.get_items() == items
        for n in range(len(items) + 2):
            assert await session.get_items(n) == (items[-n:] if n else [])

    asyncio.run(scenario())


ITEM_KINDS = ["user", "assistant", "reasoning", "call", "output", "hosted"]


def make_item(kind: str, n: int, open_calls: list[str]) -> Any:
    if kind == "assistant":
        said = {"type": "output_text", "text": f"said {n}", "annotations": []}
        return {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [said],
        }
    if kind == "reasoning":
        return {"type": "reasoning", "id": f"rs_{n}", "summary": []}
    if kind == "call":
        open_calls.append(f"call_{n}")
        return {"type": "function_call", "call_id": f"call_{n}", "name": "add", "arguments": "{}"}
    if kind == "output" and open_calls:
        return {"type": "function_call_output", "call_id": open_calls.pop(0), "output": str(n)}
    if kind == "hosted":
        return {"type": "web_search_call", "id": f"ws_{n}", "status": "completed"}
    return {"role": "user", "content": f"asked {n}"}


session_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(ITEM_KINDS), min_size=1, max_size=5)),
        st.tuples(st.just("pop"), st.integers(1, 3)),
        st.tuples(st.just("clear"), st.just([])),
        st.tuples(st.just("get"), st.integers(-1, 12)),
    ),
    max_size=14,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_ops)
def test_random_operations_match_sqlite_session(operations: list[tuple[str, Any]]) -> None:
    """Random adds, pops, clears and reads give what SQLiteSession gives (memory store)."""
    ours = ThreadlineSession("prop", store=open_store("memory://"))
    theirs = SQLiteSession("prop")

    async def scenario() -> None:
        n = 0
        for op, arg in operations:
            if op == "add":
                visible = await theirs.get_items()
                open_calls = [i["call_id"] for i in visible if i.get("type") == "function_call"]
                answered = {
                    i["call_id"] for i in visible if i.get("type") == "function_call_output"
                }
                open_calls = [c for c in open_calls if c not in answered]
                batch = []
                for kind in arg:
                    n += 1
                    batch.append(make_item(kind, n, open_calls))
                await ours.add_items(batch)
                await theirs.add_items(batch)
            elif op == "pop":
                for _ in range(arg):
                    assert await ours.pop_item() == await theirs.pop_item()
            elif op == "clear":
                await ours.clear_session()
                await theirs.clear_session()
            else:
                assert await ours.get_items(arg) == await theirs.get_items(arg)
            assert await ours.get_items() == await theirs.get_items()

    asyncio.run(scenario())
    theirs.close()


# -- the budgeted mode ---------------------------------------------------------------------


def test_budgeted_mode_never_emits_an_orphan_output(store: Store) -> None:
    policy = ContextPolicy(
        context_limit=900, response_reserve=100, min_recent_messages=2, trim_strategy="greedy"
    )
    session = ThreadlineSession("budget", store=store, policy=policy, model="gpt-4o")
    plain = ThreadlineSession("budget", store=store)

    async def scenario() -> None:
        await run_turns(session, turns(12))
        thread = session.threadline_session()
        assert thread is not None
        thread.add_checkpoint(covers_up_to=8, summary="## Current State\n- adding numbers")
        for _ in range(14):  # pops cut calls from their outputs, in every position
            window = await session.get_items()
            everything = await plain.get_items()
            assert len(window) < len(everything)
            assert_no_orphans(window)
            assert "Summary of the earlier conversation" in json.dumps(window[0])
            assert everything[-1] in window[-3:]  # a popped result shows as interrupted
            for limit in (1, 2, 3, 5):
                assert_no_orphans(await session.get_items(limit))
            await session.pop_item()
        await session.clear_session()
        assert await session.get_items() == []
        await run_turns(session, turns(1))
        window = await session.get_items()
        assert "adding numbers" not in json.dumps(window)  # the cleared summary stays gone
        assert window == await plain.get_items()

    asyncio.run(scenario())


def assert_no_orphans(items: list[Any]) -> None:
    seen: set[str] = set()
    for item in items:
        if item.get("type") == "function_call":
            seen.add(item["call_id"])
        if item.get("type") == "function_call_output":
            assert item["call_id"] in seen, f"orphan output {item['call_id']} in {items}"


def test_runner_over_a_budgeted_session(store: Store) -> None:
    policy = ContextPolicy(context_limit=2000, response_reserve=300, min_recent_messages=2)
    session = ThreadlineSession("budget-run", store=store, policy=policy, model="gpt-4o")

    async def scenario() -> None:
        model = await run_turns(session, turns(8))
        for sent in model.inputs:
            assert_no_orphans(sent)
        assert len(model.inputs[-1]) < len(await ThreadlineSession("budget-run", store).get_items())

    asyncio.run(scenario())


# -- bad input -------------------------------------------------------------------------


def test_bad_input_gets_clear_errors(store: Store) -> None:
    with pytest.raises(UsageError):
        ThreadlineSession("", store=store)
    with pytest.raises(UsageError):
        ThreadlineSession("ok", store=42)  # type: ignore[arg-type]
    session = ThreadlineSession("bad-items", store=store)

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": "kept"}])
        with pytest.raises(UsageError):
            await session.add_items([{"type": "function_call", "call_id": "x"}])  # type: ignore[list-item]
        assert await session.get_items() == [{"role": "user", "content": "kept"}]

    asyncio.run(scenario())


def test_shared_store_sees_the_same_session(store: Store) -> None:
    """Other threadline faces read what the SDK wrote, minus what it retracted."""
    session = ThreadlineSession("faces", store=store)

    async def scenario() -> None:
        await run_turns(session, turns(2))
        await session.pop_item()

    asyncio.run(scenario())
    thread = store.get_session("oa-faces")  # the face's namespace
    assert all(isinstance(m, Message) for m in thread.messages())
    assert thread.tail(1)[0].role == "tool"  # the final answer was popped
