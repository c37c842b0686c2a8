"""ThreadlineMemoryService beyond ADK's own tests (tests/third_party): what those
tests check through InMemoryMemoryService's private dict, checked here through
search_memory, and that memories persist and stay with their app and user."""

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("google.adk.memory")

from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from tests.store_calls import threads_calling
from threadline.integrations.adk_memory import MAX_RESULTS, ThreadlineMemoryService
from threadline.store import Store


@pytest.fixture
def store(face_store: Store) -> Store:
    return face_store


def event(eid: str, text: str | None, author: str = "user") -> Event:
    content = types.Content(parts=[types.Part(text=text)]) if text is not None else None
    return Event(id=eid, invocation_id="inv", author=author, timestamp=1700000000, content=content)


def session(sid: str, *events: Event, app: str = "app", user: str = "ada") -> Session:
    return Session(app_name=app, user_id=user, id=sid, events=list(events))


def texts(service: ThreadlineMemoryService, query: str, user: str = "ada") -> list[str]:
    found = asyncio.run(service.search_memory(app_name="app", user_id=user, query=query))
    return [m.content.parts[0].text or "" for m in found.memories if m.content.parts]


def test_a_re_added_session_is_remembered_as_it_is_now(store: Store) -> None:
    service = ThreadlineMemoryService(store)
    asyncio.run(
        service.add_session_to_memory(
            session("s", event("e1", "the kettle is blue"), event("e2", "the mug is blue"))
        )
    )
    assert sorted(texts(service, "blue")) == ["the kettle is blue", "the mug is blue"]
    grown = session("s", event("e2", "the mug is blue"), event("e3", "the pot is blue"))
    asyncio.run(service.add_session_to_memory(grown))
    assert sorted(texts(service, "blue")) == ["the mug is blue", "the pot is blue"]
    asyncio.run(service.add_session_to_memory(session("empty", event("e9", None))))
    assert texts(service, "kettle") == []


def test_added_events_append_and_keep_the_first_copy_of_an_id(store: Store) -> None:
    service = ThreadlineMemoryService(store)
    asyncio.run(service.add_session_to_memory(session("s", event("e1", "jasmine tea"))))

    def add(*events: Event, sid: str | None = "s") -> None:
        asyncio.run(
            service.add_events_to_memory(
                app_name="app", user_id="ada", events=list(events), session_id=sid
            )
        )

    add(event("e1", "rooibos tea"), event("e2", "green tea"))
    assert sorted(texts(service, "tea")) == ["green tea", "jasmine tea"]
    add(event("e3", "oolong tea"), sid=None)
    add(event("e3", "oolong tea"), sid=None)
    assert texts(service, "oolong") == ["oolong tea"]


def test_memories_stay_with_their_app_and_user(store: Store) -> None:
    service = ThreadlineMemoryService(store)
    asyncio.run(service.add_session_to_memory(session("s", event("e", "secret plan"))))
    asyncio.run(service.add_session_to_memory(session("s", event("e", "other plan"), user="bob")))
    assert texts(service, "plan") == ["secret plan"]
    assert texts(service, "plan", user="bob") == ["other plan"]
    other_app = asyncio.run(service.search_memory(app_name="app2", user_id="ada", query="plan"))
    assert other_app.memories == []


def test_memories_persist_and_say_where_they_came_from(sqlite_url: str) -> None:
    first = ThreadlineMemoryService(sqlite_url)
    asyncio.run(first.add_session_to_memory(session("trip", event("e1", "flight to Lisbon"))))
    first.close()
    again = ThreadlineMemoryService(sqlite_url)
    found = asyncio.run(again.search_memory(app_name="app", user_id="ada", query="Lisbon"))
    (memory,) = found.memories
    assert memory.id == "e1" and memory.author == "user"
    assert memory.custom_metadata == {"session_id": "trip"}
    assert memory.timestamp is not None and memory.timestamp.startswith("2023-11-1")
    again.close()


def test_a_search_returns_the_best_ten(store: Store) -> None:
    service = ThreadlineMemoryService(store)
    events = [event(f"e{i}", f"note {i} about work") for i in range(15)]
    asyncio.run(service.add_session_to_memory(session("s", *events)))
    found = texts(service, "note work")
    assert len(found) == MAX_RESULTS
    assert found == [f"note {i} about work" for i in range(MAX_RESULTS)]
    assert texts(service, "   ") == []


def test_calls_run_off_the_event_loop(store: Store) -> None:
    service = ThreadlineMemoryService(store)
    threads = threads_calling(store, "scratchpad_write_many")
    searching = threads_calling(store, "scratchpad_contents")  # the read a search makes

    async def scenario() -> int:
        await service.add_session_to_memory(session("s", event("e", "hello there")))
        found = await service.search_memory(app_name="app", user_id="ada", query="hello")
        assert len(found.memories) == 1
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert threads and searching
    assert loop_thread not in threads | searching


def test_unspaced_scripts_are_indexed_as_character_pairs() -> None:
    """The pairs a run of Chinese, Japanese or Korean text is read as, set apart from
    the words around it; a lone character is its own term."""
    from threadline.integrations.doc_search import searchable

    assert searchable("私はPythonを") == " 私は Python を "
    pairs = ["東京", "京タ", "タワ", "ワー", "is", "tall"]
    assert searchable("東京タワー is tall").split() == pairs
    assert searchable("plain text") == "plain text"


def test_a_memory_added_again_with_new_text_is_found_by_its_new_words(store: Store) -> None:
    """Searches keep what they counted of each memory's text between calls; a memory
    whose session is added again with other text is found by the new words only."""
    service = ThreadlineMemoryService(store)
    asyncio.run(service.add_session_to_memory(session("s", event("e", "the heron flies"))))
    first = asyncio.run(service.search_memory(app_name="app", user_id="ada", query="heron"))
    assert len(first.memories) == 1
    asyncio.run(service.add_session_to_memory(session("s", event("e2", "a kingfisher dives"))))
    again = asyncio.run(service.search_memory(app_name="app", user_id="ada", query="heron"))
    assert again.memories == []
    found = asyncio.run(service.search_memory(app_name="app", user_id="ada", query="kingfisher"))
    assert [m.id for m in found.memories] == ["e2"]
