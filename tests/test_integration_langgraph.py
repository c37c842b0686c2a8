"""ThreadlineSaver with a real LangGraph agent: a ``create_react_agent`` graph whose
model (LangChain's ChatOpenAI) talks to the fake OpenAI server persists each step
through the saver, resumes from another process's view of the store, and leaves
the conversation in the session's messages, each message once."""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("langchain_openai")

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from typer.testing import CliRunner

from tests.fakes import FakeOpenAI
from threadline import open_store
from threadline.cli.app import app
from threadline.integrations.langgraph import (
    ThreadlineSaver,
    thread_session_id,
)

runner = CliRunner()


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def react_agent(server: FakeOpenAI, saver: ThreadlineSaver) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        from langgraph.prebuilt import create_react_agent

        model = ChatOpenAI(model="gpt-4o", api_key="test", base_url=server.url, max_retries=0)
        return create_react_agent(model, [get_weather], checkpointer=saver)


def ask(graph: Any, thread: str, text: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    result: dict[str, Any] = graph.invoke({"messages": [HumanMessage(text)]}, config)
    return result


def test_react_agent_persists_and_resumes(openai_server: FakeOpenAI, sqlite_url: str) -> None:
    openai_server.reply_tool_call("get_weather", {"city": "Paris"}, id="call_1")
    openai_server.reply_text("It is sunny in Paris.")
    with ThreadlineSaver(sqlite_url) as saver:
        first = ask(react_agent(openai_server, saver), "trip-1", "Weather in Paris?")
    assert first["messages"][-1].content == "It is sunny in Paris."

    # a new saver over the same store (as another process would open it) resumes
    openai_server.reply_text("You asked about Paris.")
    with ThreadlineSaver(sqlite_url) as saver:
        graph = react_agent(openai_server, saver)
        second = ask(graph, "trip-1", "What did I ask?")
        state = graph.get_state({"configurable": {"thread_id": "trip-1"}})
        history = list(graph.get_state_history({"configurable": {"thread_id": "trip-1"}}))
    assert [m.type for m in second["messages"]] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert state.values["messages"] == second["messages"]
    assert len(history) >= 8  # every step of both runs is a checkpoint
    sent = openai_server.requests[-1].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]

    # the conversation is the session's messages, each once, with the tool chain intact
    store = open_store(sqlite_url)
    try:
        session = store.get_session("lg-trip-1")
        messages = session.messages()
        roles = " ".join(m.role for m in messages)
        assert roles == "user assistant tool assistant user assistant"
        assert messages[1].tool_calls[0].id == "call_1"
        assert messages[2].tool_call_id == "call_1"
        assert [m.text for m in messages][-1] == "You asked about Paris."
        assert session.agent == "langgraph"
    finally:
        store.close()


def test_cli_shows_the_graph_conversation(openai_server: FakeOpenAI, sqlite_url: str) -> None:
    openai_server.reply_tool_call("get_weather", {"city": "Oslo"}, id="call_9")
    openai_server.reply_text("Sunny in Oslo.")
    with ThreadlineSaver(sqlite_url) as saver:
        ask(react_agent(openai_server, saver), "cli-thread", "Weather in Oslo?")
    history = runner.invoke(app, ["--store", sqlite_url, "sessions", "history", "lg-cli-thread"])
    assert history.exit_code == 0, history.stderr
    assert "Weather in Oslo?" in history.stdout and "Sunny in Oslo." in history.stdout
    found = runner.invoke(app, ["--store", sqlite_url, "sessions", "search", "Oslo", "--json"])
    assert found.exit_code == 0, found.stderr
    assert "lg-cli-thread" in found.stdout


def _echo_graph(saver: ThreadlineSaver) -> Any:
    """A graph whose node answers every message (no model): enough to drive the saver."""

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=saver)


def test_messages_are_appended_once_across_checkpoints_and_edits(sqlite_url: str) -> None:
    with ThreadlineSaver(sqlite_url) as saver:
        graph = _echo_graph(saver)
        config = {"configurable": {"thread_id": "echo"}}
        for text in ("one", "two", "three"):
            graph.invoke({"messages": [HumanMessage(text)]}, config)
        values = graph.get_state(config).values["messages"]
        # the graph drops a message and edits another (same id): the history keeps both
        graph.update_state(
            config,
            {"messages": [RemoveMessage(id=values[0].id), AIMessage("edited", id=values[1].id)]},
        )
        edited = [m.content for m in graph.get_state(config).values["messages"]]
        assert edited[:2] == ["edited", "two"]  # the checkpoint keeps the graph's view
        graph.invoke({"messages": [HumanMessage("four")]}, config)
        session = saver.thread_session("echo")
        assert session is not None
        texts = [m.text for m in session.messages()]
    assert texts == [
        "one",
        "echo one",
        "two",
        "echo two",
        "three",
        "echo three",
        "four",
        "echo four",
    ]


def test_messages_channel_is_stored_by_reference(tmp_path: Path) -> None:
    """A checkpoint's messages channel refers to the session's messages instead of
    holding a copy of the conversation: a fraction of the bytes, the same state."""
    sizes = {}
    for key in ("messages", None):
        with ThreadlineSaver(f"sqlite://{tmp_path / f'{key}.db'}", messages_key=key) as saver:
            graph = _echo_graph(saver)
            config = {"configurable": {"thread_id": "t"}}
            for n in range(30):
                out = graph.invoke(
                    {"messages": [HumanMessage(f"turn {n} " + "word " * 40)]}, config
                )
            assert graph.get_state(config).values["messages"] == out["messages"]
            blobs = saver.store.scratchpad_list("lg-t", prefix="lg/b/")
            sizes[key] = sum(len(e.content) for e in blobs)
    assert sizes["messages"] * 10 < sizes[None]


def test_any_thread_id_maps_to_a_session(sqlite_url: str) -> None:
    odd = "user/42 thread: ü " + "x" * 200
    sid = thread_session_id(odd)
    assert sid.startswith("lg_") and len(sid) <= 128
    assert thread_session_id("plain-id") == "lg-plain-id"
    assert thread_session_id(str(uuid.UUID(int=1))) == "lg-" + str(uuid.UUID(int=1))
    with ThreadlineSaver(sqlite_url) as saver:
        graph = _echo_graph(saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": odd}})
        session = saver.thread_session(odd)
        assert session is not None and session.id == sid
        assert session.info.metadata["langgraph"]["thread_id"] == odd
        assert saver.get_tuple({"configurable": {"thread_id": "none"}}) is None
        listed = list(saver.list(None))
        assert {t.config["configurable"]["thread_id"] for t in listed} == {odd}


def test_copy_is_a_fork_and_survives_the_source(sqlite_url: str) -> None:
    with ThreadlineSaver(sqlite_url) as saver:
        graph = _echo_graph(saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "src"}})
        saver.copy_thread("src", "dst")
        copy = saver.thread_session("dst")
        assert copy is not None and copy.fork is not None and copy.fork.parent == "lg-src"
        saver.delete_thread("src")
        assert saver.get_tuple({"configurable": {"thread_id": "src"}}) is None
        # the copy still reads its checkpoints and its shared history
        graph.invoke({"messages": [HumanMessage("again")]}, {"configurable": {"thread_id": "dst"}})
        state = graph.get_state({"configurable": {"thread_id": "dst"}})
        assert [m.content for m in state.values["messages"]] == [
            "hi",
            "echo hi",
            "again",
            "echo again",
        ]
        assert [m.text for m in copy.refresh().messages()] == [
            "hi",
            "echo hi",
            "again",
            "echo again",
        ]


def test_prune_keeps_the_conversation(sqlite_url: str) -> None:
    with ThreadlineSaver(sqlite_url) as saver:
        graph = _echo_graph(saver)
        config = {"configurable": {"thread_id": "long"}}
        for n in range(5):
            graph.invoke({"messages": [HumanMessage(f"m{n}")]}, config)
        session = saver.thread_session("long")
        assert session is not None
        before = len(saver.store.scratchpad_list(session.id))
        saver.prune(["long"])
        after = len(saver.store.scratchpad_list(session.id))
        assert len(list(saver.list(config))) == 1
        assert after < before / 3
        assert len(session.messages()) == 10  # checkpoints go, what was said stays
        graph.invoke({"messages": [HumanMessage("m5")]}, config)
        assert len(graph.get_state(config).values["messages"]) == 12
