"""ThreadlineSessionService as ADK's database service behaves where the in-memory
one differs (issue 32): a stale session object is refused, an event delivered twice
is stored and held once, ids are kept exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

pytest.importorskip("google.adk")

from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.genai import types

from threadline import open_store
from threadline.errors import NotOwned
from threadline.integrations.adk import ThreadlineSessionService, session_key, user_key
from threadline.integrations.binding import OWNER


def run(url: str, scenario: Callable[[ThreadlineSessionService], Awaitable[None]]) -> None:
    service = ThreadlineSessionService(url)
    try:
        asyncio.run(scenario(service))
    finally:
        service.close()


def event(text: str, author: str = "user") -> Event:
    return Event(
        author=author,
        invocation_id="inv",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def test_a_stale_session_object_is_refused(sqlite_url: str) -> None:
    """Before: the second writer's append was accepted over the first's."""

    async def scenario(service: ThreadlineSessionService) -> None:
        made = await service.create_session(app_name="app", user_id="u", session_id="s")
        first = await service.get_session(app_name="app", user_id="u", session_id="s")
        second = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert first is not None and second is not None
        await service.append_event(first, event("one"))
        await service.append_event(first, event("two"))  # its own writes keep it fresh
        with pytest.raises(StaleSessionError, match="modified in storage"):
            await service.append_event(second, event("lost?"))
        with pytest.raises(StaleSessionError):
            await service.append_event(made, event("older still"))
        assert [e.content.parts[0].text for e in second.events] == []  # untouched
        fresh = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert fresh is not None
        await service.append_event(fresh, event("three"))
        stored = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert stored is not None
        texts = [e.content.parts[0].text for e in stored.events if e.content]
        assert texts == ["one", "two", "three"]

    run(sqlite_url, scenario)


def test_a_marker_less_session_object_is_judged_by_its_latest_event(sqlite_url: str) -> None:
    async def scenario(service: ThreadlineSessionService) -> None:
        made = await service.create_session(app_name="app", user_id="u", session_id="s")
        loaded = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert loaded is not None
        await service.append_event(loaded, event("one"))
        copy = loaded.model_copy(deep=True)  # a copy carries no marker (a private field)
        copy.last_update_time -= 10
        await service.append_event(copy, event("two"))  # its latest event is storage's
        made_copy = made.model_copy(deep=True)
        with pytest.raises(StaleSessionError):
            await service.append_event(made_copy, event("three"))

    run(sqlite_url, scenario)


def test_an_event_delivered_twice_is_stored_and_held_once(sqlite_url: str) -> None:
    """Before: the session object held the event twice."""

    async def scenario(service: ThreadlineSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        once = event("hello")
        await service.append_event(session, once)
        again = await service.append_event(session, once.model_copy())
        assert again.id == once.id
        assert [e.id for e in session.events] == [once.id]
        stored = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert stored is not None and [e.id for e in stored.events] == [once.id]
        assert stored.events == session.events

    run(sqlite_url, scenario)


def test_ids_are_kept_exactly(sqlite_url: str) -> None:
    """Before: ``" s1 "`` was ``"s1"``: two ADK sessions were one."""

    async def scenario(service: ThreadlineSessionService) -> None:
        padded = await service.create_session(app_name="app", user_id="u", session_id=" s1 ")
        plain = await service.create_session(app_name="app", user_id="u", session_id="s1")
        assert (padded.id, plain.id) == (" s1 ", "s1")
        await service.append_event(padded, event("padded"))
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        assert got is not None and got.events == []
        listed = await service.list_sessions(app_name="app", user_id="u")
        assert sorted(s.id for s in listed.sessions) == [" s1 ", "s1"]
        await service.delete_session(app_name="app", user_id="u", session_id="s1")
        kept = await service.get_session(app_name="app", user_id="u", session_id=" s1 ")
        assert kept is not None and len(kept.events) == 1

    run(sqlite_url, scenario)
    store = open_store(sqlite_url)
    try:
        assert store.session_info(session_key("app", "u", " s1 ")).metadata["adk"]["id"] == " s1 "
    finally:
        store.close()


def test_the_service_opens_only_its_own_sessions(sqlite_url: str) -> None:
    """A session at an ADK id that the service did not make is refused; one an older
    service made (no owner recorded, its own record of app, user and id) is adopted."""
    store = open_store(sqlite_url)
    foreign = {OWNER: {"name": "langchain", "key": "x"}}
    store.create_session(id=session_key("app", "u", "theirs"), metadata=foreign)
    store.create_session(id=user_key("app", "eve"), metadata=foreign)
    older = {"adk": {"kind": "session", "app": "app", "user": "u", "id": "old"}}
    store.create_session(id=session_key("app", "u", "old"), metadata=older)
    store.close()

    async def scenario(service: ThreadlineSessionService) -> None:
        for call in (service.get_session, service.delete_session):
            with pytest.raises(NotOwned):
                await call(app_name="app", user_id="u", session_id="theirs")
        with pytest.raises(NotOwned):
            await service.create_session(app_name="app", user_id="eve", session_id="s")
        old = await service.get_session(app_name="app", user_id="u", session_id="old")
        assert old is not None and old.id == "old"

    run(sqlite_url, scenario)
    store = open_store(sqlite_url)
    try:
        assert store.session_info(session_key("app", "u", "theirs")).metadata == foreign
        adopted = store.session_info(session_key("app", "u", "old")).metadata[OWNER]
        assert adopted == {"name": "adk", "key": '["app", "u", "old"]'}
    finally:
        store.close()
