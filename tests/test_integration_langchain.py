"""ThreadlineChatMessageHistory: every LangChain message type round-trips exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from tests.conformance.backends import clean_store
from threadline import Message, Store
from threadline.context.policy import ContextPolicy
from threadline.errors import InvalidMessage, UsageError
from threadline.integrations.langchain import ThreadlineChatMessageHistory


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


def every_type() -> list[BaseMessage]:
    return [
        SystemMessage("You are terse.", id="sys-1", additional_kwargs={"cache": True}),
        HumanMessage("what is 2+3?", id="h-1", name="ana", response_metadata={"src": "web"}),
        AIMessage(
            "",
            id="ai-1",
            tool_calls=[
                {"name": "add", "args": {"a": 2, "b": 3}, "id": "call-1", "type": "tool_call"},
                {"name": "mul", "args": {"a": 2, "b": 3}, "id": "call-2", "type": "tool_call"},
            ],
            additional_kwargs={"refusal": None},
            response_metadata={"model_name": "gpt-4o", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        ),
        ToolMessage("5", tool_call_id="call-1", name="add", id="t-1", artifact={"raw": 5}),
        ToolMessage("6", tool_call_id="call-2", name="mul", status="error"),
        AIMessage("2+3 is 5.", id="ai-2", name="calc"),
        HumanMessage(
            [
                {"type": "text", "text": "and this picture?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ]
        ),
        AIMessage([{"type": "text", "text": "a cat"}, "plain block"]),
        ChatMessage("a note", role="critic"),
        ChatMessage("from the assistant", role="assistant"),
        FunctionMessage("legacy result", name="old_fn"),
        AIMessageChunk("streamed", id="chunk-1"),
        AIMessage(
            "bad call",
            invalid_tool_calls=[
                {
                    "name": "f",
                    "args": "{oops",
                    "id": "bad-1",
                    "error": "no json",
                    "type": "invalid_tool_call",
                }
            ],
        ),
        HumanMessage(""),
    ]


def test_every_message_type_round_trips(store: Store) -> None:
    history = ThreadlineChatMessageHistory("lc-1", store=store)
    sent = every_type()
    history.add_messages(sent[:3])
    for message in sent[3:]:
        history.add_message(message)
    assert history.messages == sent
    again = ThreadlineChatMessageHistory("lc-1", store=store)  # a fresh object reads the same
    assert again.messages == sent
    assert [type(m) for m in again.messages] == [type(m) for m in sent]


def test_threadline_sees_roles_and_tool_chains(store: Store) -> None:
    history = ThreadlineChatMessageHistory("lc-2", store=store)
    history.add_messages(every_type())
    session = store.get_session("lc-lc-2")
    roles = [m.role for m in session.messages()]
    assert roles[:6] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c.id for c in session.messages()[2].tool_calls] == ["call-1", "call-2"]
    assert session.messages()[8].role == "user"  # a chat message with an unknown role


def test_tool_message_without_its_call_is_kept_but_never_orphaned(store: Store) -> None:
    history = ThreadlineChatMessageHistory("lc-orphan", store=store)
    lone = ToolMessage("stray", tool_call_id="nobody")
    history.add_messages([HumanMessage("hi"), lone])
    assert history.messages == [HumanMessage("hi"), lone]
    window = history.window_messages(ContextPolicy(), "gpt-4o")
    assert not any(isinstance(m, ToolMessage) for m in window)


def test_messages_from_other_faces_read_as_nearest_type(store: Store) -> None:
    session = store.create_session(id="lc-x3")  # the face's own id: adopted
    session.append(
        [
            Message.user("from the cli"),
            Message.assistant("", tool_calls=[{"id": "c1", "name": "ls", "arguments": {}}]),  # type: ignore[list-item]
            Message.tool("a.txt", tool_call_id="c1", name="ls"),
            Message.system("note"),
        ]
    )
    got = ThreadlineChatMessageHistory("x3", store=store).messages
    assert [type(m) for m in got] == [HumanMessage, AIMessage, ToolMessage, SystemMessage]
    assert isinstance(got[1], AIMessage) and got[1].tool_calls[0]["id"] == "c1"


def test_clear_retracts_and_history_keeps_everything(store: Store) -> None:
    history = ThreadlineChatMessageHistory("lc-4", store=store)
    history.add_messages(every_type())
    history.clear()
    assert history.messages == []
    history.add_messages([HumanMessage("fresh start")])
    assert history.messages == [HumanMessage("fresh start")]
    session = store.get_session("lc-lc-4")
    audit = session.messages(include_retracted=True)
    assert len(audit) == len(every_type()) + 2  # the record and the new message
    assert "what is 2+3?" in json.dumps([m.text for m in audit])


def test_window_is_budgeted_and_keeps_tool_pairs(store: Store) -> None:
    history = ThreadlineChatMessageHistory("lc-5", store=store, model="gpt-4o")
    for turn in range(30):
        call = {"name": "add", "args": {"a": turn}, "id": f"c{turn}", "type": "tool_call"}
        history.add_messages(
            [
                HumanMessage(f"turn {turn}: " + "words " * 30),
                AIMessage("", tool_calls=[call]),  # type: ignore[list-item]
                ToolMessage("result " * 40, tool_call_id=f"c{turn}"),
                AIMessage(f"done {turn}"),
            ]
        )
    session = history.threadline_session()
    assert session is not None
    session.add_checkpoint(covers_up_to=20, summary="## Current State\n- adding turns")
    policy = ContextPolicy(context_limit=1200, response_reserve=100, min_recent_messages=2)
    window = history.window_messages(policy, "gpt-4o", system_prompt="be brief")
    assert isinstance(window[0], SystemMessage) and window[0].content == "be brief"
    assert "adding turns" in json.dumps([m.content for m in window])
    assert len(window) < len(history.messages)
    assert window[-1] == AIMessage("done 29")
    called: set[str] = set()
    for m in window:
        if isinstance(m, AIMessage):
            called |= {c["id"] for c in m.tool_calls if c["id"]}
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in called


def test_bad_input_is_refused_and_loses_nothing(store: Store) -> None:
    with pytest.raises(UsageError):
        ThreadlineChatMessageHistory("", store=store)
    history = ThreadlineChatMessageHistory("lc-6", store=store)
    history.add_messages([HumanMessage("kept")])
    with pytest.raises(InvalidMessage):
        history.add_messages([HumanMessage("ok"), "not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidMessage):  # an artifact JSON cannot hold
        history.add_messages([ToolMessage("x", tool_call_id="c", artifact=float("nan"))])
    assert history.messages == [HumanMessage("kept")]
    assert ThreadlineChatMessageHistory("unused", store=store).messages == []


def test_async_methods_work(store: Store) -> None:
    import asyncio

    history = ThreadlineChatMessageHistory("lc-async", store=store)

    async def scenario() -> None:
        await history.aadd_messages([HumanMessage("hi"), AIMessage("hello")])
        assert await history.aget_messages() == [HumanMessage("hi"), AIMessage("hello")]
        await history.aclear()
        assert await history.aget_messages() == []

    asyncio.run(scenario())
