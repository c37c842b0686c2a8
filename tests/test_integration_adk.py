"""ThreadlineSessionService beyond ADK's contract: pages, events as threadline
messages (tool calls and results as the context engine reads them), messages other
faces wrote, and the app > user > session tree the CLI lists."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from tests.conformance.backends import clean_store
from threadline import Message, Store, open_store
from threadline.errors import UsageError
from threadline.integrations.adk import (
    ThreadlineSessionService,
    app_key,
    session_key,
    user_key,
)


def said(role: str, *parts: types.Part) -> types.Content:
    return types.Content(role=role, parts=list(parts))


def test_pages_walk_every_session_newest_first(sqlite_url: str) -> None:
    service = ThreadlineSessionService(sqlite_url)

    async def scenario() -> None:
        for n in range(7):
            await service.create_session(app_name="app", user_id="ada", session_id=f"s{n}")
        await service.create_session(app_name="app", user_id="bob", session_id="other")
        seen: list[str] = []
        token = None
        while True:
            page: Any = await service.list_sessions(
                app_name="app", user_id="ada", page_size=3, page_token=token
            )
            seen += [s.id for s in page.sessions]
            token = page.next_page_token
            if token is None:
                break
        assert seen == [f"s{n}" for n in reversed(range(7))]
        everyone = await service.list_sessions(app_name="app", user_id=None, page_size=20)
        assert {s.id for s in everyone.sessions} == {*seen, "other"}
        whole = await service.list_sessions(app_name="app", user_id="ada")
        assert [s.id for s in whole.sessions] == [f"s{n}" for n in range(7)]  # ADK: oldest first
        with pytest.raises(UsageError):
            await service.list_sessions(app_name="app", user_id="ada", page_size=0)
        with pytest.raises(UsageError):
            await service.list_sessions(app_name="app", user_id="ada", page_size=2, page_token="x")

    asyncio.run(scenario())
    service.close()


def test_events_are_messages_the_context_engine_reads(sqlite_url: str) -> None:
    service = ThreadlineSessionService(sqlite_url)
    call = types.Part(function_call=types.FunctionCall(id="fc-1", name="find", args={"q": "x"}))
    answer = types.Part(
        function_response=types.FunctionResponse(id="fc-1", name="find", response={"hit": 1})
    )
    stray = types.Part(
        function_response=types.FunctionResponse(id="nope", name="find", response={"hit": 0})
    )
    events = [
        Event(author="user", content=said("user", types.Part(text="find x"))),
        Event(author="finder", content=said("model", types.Part(text="looking"), call)),
        Event(author="finder", content=said("user", answer, stray)),
        Event(author="finder", content=said("model", types.Part(text="found x"))),
    ]

    async def scenario() -> None:
        session = await service.create_session(app_name="app", user_id="ada", session_id="e")
        for event in events:
            await service.append_event(session, event)
        got = await service.get_session(app_name="app", user_id="ada", session_id="e")
        assert got is not None and got.events == events
        recent = await service.get_session(
            app_name="app",
            user_id="ada",
            session_id="e",
            config=GetSessionConfig(num_recent_events=2),
        )
        assert recent is not None and recent.events == events[2:]  # two messages, one event

    asyncio.run(scenario())
    service.close()
    store = open_store(sqlite_url)
    thread = store.get_session(session_key("app", "ada", "e"))
    messages = thread.messages()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert messages[1].tool_calls[0].id == "fc-1" and messages[1].text == "looking"
    assert messages[2].tool_call_id == "fc-1" and '"hit": 1' in messages[2].text
    assert thread.title == "e" and thread.agent == "app"
    # the tree: app > user > session
    assert thread.parent_id == user_key("app", "ada")
    assert store.session_info(user_key("app", "ada")).parent_id == app_key("app")
    tops = [i.id for i in store.list_sessions(top_level=True).items]
    assert tops == [app_key("app")]
    store.close()


def test_a_message_another_face_wrote_reads_as_an_event(sqlite_url: str) -> None:
    service = ThreadlineSessionService(sqlite_url)

    async def scenario() -> None:
        session = await service.create_session(app_name="app", user_id="ada", session_id="f")
        await service.append_event(
            session, Event(author="user", content=said("user", types.Part(text="hi")))
        )
        store = service.store
        store.get_session(session_key("app", "ada", "f")).append(Message.assistant("from the CLI"))
        got = await service.get_session(app_name="app", user_id="ada", session_id="f")
        assert got is not None and len(got.events) == 2
        assert got.events[1].content is not None
        assert got.events[1].content.parts[0].text == "from the CLI"

    asyncio.run(scenario())
    service.close()


def test_deleting_a_session_leaves_the_others(sqlite_url: str) -> None:
    service = ThreadlineSessionService(sqlite_url)

    async def scenario() -> None:
        await service.create_session(app_name="app", user_id="ada", session_id="a")
        await service.create_session(app_name="app", user_id="ada", session_id="b")
        await service.delete_session(app_name="app", user_id="ada", session_id="a")
        await service.delete_session(app_name="app", user_id="ada", session_id="never")
        left = await service.list_sessions(app_name="app", user_id="ada")
        assert [s.id for s in left.sessions] == ["b"]

    asyncio.run(scenario())
    service.close()


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


def test_an_event_and_its_session_state_are_one_write(any_store: Store) -> None:
    """The event's messages and its session-scoped state delta go to the store in one
    append (``Store.append_messages(metadata=)``, one atomic step): a crash keeps both
    or neither. A failed write of the state fails the event with it."""
    store = any_store
    service = ThreadlineSessionService(store)
    calls: list[str] = []
    append, update = store.append_messages, store.update_session

    def counted_append(*args: Any, **kwargs: Any) -> Any:
        calls.append("append" + (" with state" if kwargs.get("metadata") else ""))
        return append(*args, **kwargs)

    def counted_update(*args: Any, **kwargs: Any) -> Any:
        calls.append("update")
        return update(*args, **kwargs)

    async def scenario() -> None:
        made = await service.create_session(app_name="app", user_id="ada", session_id="s")
        store.append_messages = counted_append  # type: ignore[method-assign]
        store.update_session = counted_update  # type: ignore[method-assign]
        delta = Event(
            author="user",
            content=said("user", types.Part(text="hi")),
            actions=EventActions(state_delta={"step": 1}),
        )
        await service.append_event(made, delta)
        assert calls == ["append with state"]

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise OSError("injected: the write failed")

        store.append_messages = refused  # type: ignore[method-assign]
        again = await service.get_session(app_name="app", user_id="ada", session_id="s")
        assert again is not None
        later = Event(
            author="user",
            content=said("user", types.Part(text="lost")),
            actions=EventActions(state_delta={"step": 2}),
        )
        with pytest.raises(OSError):
            await service.append_event(again, later)
        store.append_messages = append  # type: ignore[method-assign]
        stored = await service.get_session(app_name="app", user_id="ada", session_id="s")
        assert stored is not None
        assert stored.state["step"] == 1
        assert [e.content.parts[0].text for e in stored.events if e.content] == ["hi"]

    asyncio.run(scenario())
