"""Each framework face owns its sessions (issue 32, point 4): a face opens only the
sessions it created for its key, its ids never alias another key's or another
face's, deleting touches only its own, and sessions an older face made are adopted
by the rule of ``integrations/binding.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph.graph")
pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")

from langchain_core.messages import HumanMessage
from pydantic_ai.messages import ModelRequest, UserPromptPart

from tests.test_integration_langgraph_branches import echo, url  # noqa: F401 (a fixture)
from threadline import Message, Store, open_store
from threadline.errors import NotOwned, UsageError
from threadline.integrations.binding import OWNER, adopt
from threadline.integrations.langchain import FACE as LANGCHAIN
from threadline.integrations.langchain import ThreadlineChatMessageHistory
from threadline.integrations.langgraph import ThreadlineSaver, thread_session_id
from threadline.integrations.openai_agents import ThreadlineSession
from threadline.integrations.pydantic_ai import ThreadlineHistory


@pytest.fixture
def store(url: str) -> Iterator[Store]:  # noqa: F811 (the fixture imported above)
    """A store on each backend the ``url`` fixture names (SQLite, PostgreSQL, Redis)."""
    opened = open_store(url)
    yield opened
    opened.close()


def say(graph: Any, thread: str, text: str) -> list[str]:
    out = graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    return [m.content for m in out["messages"]]


def texts(store: Store, session_id: str) -> list[str]:
    return [m.text for m in store.get_session(session_id).messages()]


def test_a_thread_named_like_another_faces_session_does_not_open_it(store: Store) -> None:
    """Before: thread ``chat-1`` appended into the CLI chat ``chat-1`` and
    ``delete_thread`` deleted it; a LangChain history and an Agents SDK session of the
    same name shared it too."""
    store.create_session(id="chat-1").append([Message.user("from the cli")])
    history = ThreadlineChatMessageHistory("chat-1", store=store)
    history.add_messages([HumanMessage("from langchain")])
    pyd = ThreadlineHistory("chat-1", store=store)
    pyd.add([ModelRequest(parts=[UserPromptPart("from pydantic ai")])])
    sdk = ThreadlineSession("chat-1", store=store)
    asyncio.run(sdk.add_items([{"role": "user", "content": "from the agents sdk"}]))
    with ThreadlineSaver(store) as saver:
        graph = echo(saver)
        assert say(graph, "chat-1", "from langgraph") == ["from langgraph", "echo from langgraph"]
        assert texts(store, "chat-1") == ["from the cli"]
        assert [m.content for m in history.messages] == ["from langchain"]
        assert len(pyd.messages()) == 1
        assert asyncio.run(sdk.get_items()) == [{"role": "user", "content": "from the agents sdk"}]
        saver.delete_thread("chat-1")
        assert saver.get_tuple({"configurable": {"thread_id": "chat-1"}}) is None
    # every other face's session is still there, untouched
    assert texts(store, "chat-1") == ["from the cli"]
    assert [m.content for m in history.messages] == ["from langchain"]
    assert texts(store, "pa-chat-1") == ["from pydantic ai"]
    assert texts(store, "oa-chat-1") == ["from the agents sdk"]


def test_a_hashed_thread_id_typed_as_a_thread_is_another_thread(store: Store) -> None:
    """Before: thread ``lg-<hash>`` was the session of the thread whose hash it is:
    its reader saw that thread's messages, wrote into them and deleted them."""
    odd = "tenant/a thread: ü"
    typed = thread_session_id(odd)  # what a user sees in ``sessions list``
    with ThreadlineSaver(store) as saver:
        graph = echo(saver)
        say(graph, odd, "secret")
        assert saver.get_tuple({"configurable": {"thread_id": typed}}) is None
        assert say(graph, typed, "hello") == ["hello", "echo hello"]
        saver.delete_thread(typed)
        state = graph.get_state({"configurable": {"thread_id": odd}})
        assert [m.content for m in state.values["messages"]] == ["secret", "echo secret"]
        session = saver.thread_session(odd)
        assert session is not None and session.id == typed
        assert [m.text for m in session.messages()] == ["secret", "echo secret"]


def test_list_none_lists_every_thread_of_the_saver(store: Store) -> None:
    """Before: a thread named as another thread's session id was that thread, and
    missing from ``list(None)``."""
    store.create_session(id="cli-chat", agent="langgraph").append([Message.user("not a thread")])
    odd = "tenant/a thread: ü"
    threads = ["plain", odd, thread_session_id(odd), "lg-looks-derived", "lg_0123abcd"]
    with ThreadlineSaver(store) as saver:
        graph = echo(saver)
        for thread in threads:
            say(graph, thread, "hi")
        listed = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert listed == set(threads)
        saver.copy_thread("plain", "copied")
        listed = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert listed == {*threads, "copied"}


def test_a_session_another_face_owns_is_refused(store: Store) -> None:
    store.create_session(id="lg-x", metadata={OWNER: {"name": "langchain", "key": "x"}})
    store.create_session(id="lg-y", metadata={"langgraph": {"thread_id": "not y"}})
    with ThreadlineSaver(store) as saver:
        graph = echo(saver)
        for thread in ("x", "y"):
            with pytest.raises(NotOwned, match=f"lg-{thread}"):
                say(graph, thread, "hi")
            with pytest.raises(NotOwned):
                saver.delete_thread(thread)
    assert store.session_info("lg-x").message_count == 0
    ThreadlineChatMessageHistory("a", store=store).add_messages([HumanMessage("hi")])
    store.update_session("lc-a", metadata={OWNER: {"name": "langgraph", "key": "a"}})
    with pytest.raises(NotOwned, match="belongs to langgraph 'a'"):
        ThreadlineChatMessageHistory("a", store=store).add_messages([HumanMessage("more")])
    assert store.session_info("lc-a").message_count == 1


def test_sessions_an_older_face_made_are_adopted_by_the_rule(store: Store) -> None:
    """An older saver kept thread ``trip`` at ``trip`` and recorded the thread id: it
    is adopted. A CLI session ``chat`` records no thread: thread ``chat`` is a new
    session. An older LangChain history kept at its bare key opens after ``adopt``."""
    old = store.create_session(
        id="trip", agent="langgraph", metadata={"langgraph": {"thread_id": "trip"}}
    )
    old.append([Message.user("said before the upgrade")])
    store.create_session(id="chat").append([Message.user("a cli chat")])
    with ThreadlineSaver(store) as saver:
        trip = saver.thread_session("trip")
        assert trip is not None and trip.id == "trip"
        assert trip.info.metadata[OWNER] == {"name": "langgraph", "key": "trip"}
        assert saver.thread_session("chat") is None
        say(echo(saver), "chat", "new")
        assert texts(store, "lg-chat") == ["new", "echo new"]
        assert texts(store, "chat") == ["a cli chat"]
    store.create_session(id="old-history").append([Message.user("kept")])
    history = ThreadlineChatMessageHistory("old-history", store=store)
    assert history.messages == []
    adopt(store, LANGCHAIN, "old-history", "old-history")
    again = ThreadlineChatMessageHistory("old-history", store=store)
    assert [m.content for m in again.messages] == ["kept"]
    with pytest.raises(UsageError):
        adopt(store, LANGCHAIN, "other", "old-history")
