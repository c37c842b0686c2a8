"""Time travel in a LangGraph thread as threadline sees it (issue 32): a graph that
goes back to an earlier checkpoint continues in a threadline fork, so history,
search, export and the context window show the branch the graph is on, never the
abandoned one merged into it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from typer.testing import CliRunner

from tests.conformance.backends import cleanup_url, make_url
from threadline.cli.app import app
from threadline.context.builder import build_context
from threadline.integrations.langgraph import ThreadlineSaver

runner = CliRunner()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    made = make_url(request.param, tmp_path)
    yield made
    cleanup_url(request.param, made)


def echo(saver: ThreadlineSaver) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return {"messages": []}
        return {"messages": [AIMessage(f"echo {last.content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=saver)


def config(thread: str, checkpoint: str | None = None) -> Any:
    configurable = {"thread_id": thread}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}


def after(graph: Any, thread: str, count: int, last: str | None = None) -> str:
    """The id of the thread's newest checkpoint, on any branch, that holds ``count``
    messages, the last an answer (``last``)."""
    for saved in graph.checkpointer.list(config(thread)):
        messages = saved.checkpoint["channel_values"].get("messages", [])
        answered = len(messages) == count and isinstance(messages[-1], AIMessage)
        if answered and (last is None or messages[-1].content == last):
            return str(saved.config["configurable"]["checkpoint_id"])
    raise AssertionError(f"no checkpoint with {count} messages")


def contents(messages: list[Any]) -> list[str]:
    return [m.content for m in messages]


def test_going_back_continues_in_a_fork_and_views_follow_it(url: str) -> None:
    """Before: the session held both branches as one conversation."""
    with ThreadlineSaver(url) as saver:
        graph = echo(saver)
        for text in ("one", "two", "three"):
            graph.invoke({"messages": [HumanMessage(text)]}, config("tt"))
        back = after(graph, "tt", 2)
        out = graph.invoke({"messages": [HumanMessage("other")]}, config("tt", back))
        branch = ["one", "echo one", "other", "echo other"]
        assert contents(out["messages"]) == branch
        head = saver.thread_session("tt")
        assert head is not None and head.fork is not None and head.fork.parent == "lg-tt"
        assert [m.text for m in head.messages()] == branch
        assert [m.text for m in build_context(head).messages] == branch
        abandoned = saver.store.get_session("lg-tt").messages()
        before = ["one", "echo one", "two", "echo two", "three", "echo three"]
        assert [m.text for m in abandoned] == before
        # the branch goes on where the graph goes on; old checkpoints read as they were
        out = graph.invoke({"messages": [HumanMessage("four")]}, config("tt"))
        assert [m.text for m in head.refresh().messages()] == contents(out["messages"])
        old = graph.get_state(config("tt", after(graph, "tt", 6, "echo three")))
        assert contents(old.values["messages"])[-1] == "echo three"
    exported = runner.invoke(
        app, ["--store", url, "sessions", "export", head.id, "-f", "json", "-o", "-"]
    )
    assert exported.exit_code == 0, exported.stderr
    assert "echo two" not in exported.stdout and "echo four" in exported.stdout
    found = runner.invoke(app, ["--store", url, "sessions", "search", "other", "--json"])
    assert found.exit_code == 0, found.stderr
    assert {hit["session_id"] for hit in json.loads(found.stdout)["items"]} == {head.id}


def test_a_message_resent_with_its_id_appears_where_the_graph_has_it(url: str) -> None:
    """Before: a message whose id the session held (on the abandoned branch) was never
    stored again, so the branch's history missed it."""
    with ThreadlineSaver(url) as saver:
        graph = echo(saver)
        graph.invoke({"messages": [HumanMessage("one", id="h1")]}, config("re"))
        graph.invoke({"messages": [HumanMessage("two", id="h2")]}, config("re"))
        back = after(graph, "re", 2)
        graph.update_state(config("re", back), {"messages": [HumanMessage("edited", id="h9")]})
        graph.update_state(config("re"), {"messages": [HumanMessage("two", id="h2")]})
        state = graph.get_state(config("re"))
        assert contents(state.values["messages"]) == ["one", "echo one", "edited", "two"]
        head = saver.thread_session("re")
        assert head is not None
        assert [m.text for m in head.messages()] == ["one", "echo one", "edited", "two"]


def test_a_replayed_tool_result_follows_its_call(url: str) -> None:
    """Before: the replayed result landed after the abandoned branch, an orphan far
    from its call (and a second result of one call)."""
    call = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1", "type": "tool_call"}])
    with ThreadlineSaver(url) as saver:
        graph = echo(saver)
        graph.invoke({"messages": [HumanMessage("list")]}, config("tools"))
        graph.update_state(config("tools"), {"messages": [call]})
        called = graph.get_state(config("tools")).config["configurable"]["checkpoint_id"]
        graph.update_state(config("tools"), {"messages": [ToolMessage("a.txt", tool_call_id="c1")]})
        graph.invoke({"messages": [HumanMessage("thanks")]}, config("tools"))
        graph.update_state(
            config("tools", called), {"messages": [ToolMessage("b.txt", tool_call_id="c1")]}
        )
        head = saver.thread_session("tools")
        assert head is not None
        texts = [m.text for m in head.messages()]
        assert texts == ["list", "echo list", "", "b.txt"]
        window = build_context(head).messages
        results = [m for m in window if m.role == "tool"]
        assert [(m.tool_call_id, m.text) for m in results] == [("c1", "b.txt")]
        assert "interrupted" not in " ".join(m.text for m in window)


def test_copy_and_delete_keep_to_their_own_thread(url: str) -> None:
    with ThreadlineSaver(url) as saver:
        graph = echo(saver)
        for text in ("one", "two"):
            graph.invoke({"messages": [HumanMessage(text)]}, config("src"))
        graph.invoke({"messages": [HumanMessage("alt")]}, config("src", after(graph, "src", 2)))
        saver.copy_thread("src", "dst")
        saver.delete_thread("src")
        assert saver.get_tuple(config("src")) is None
        out = graph.invoke({"messages": [HumanMessage("more")]}, config("dst"))
        copied = ["one", "echo one", "alt", "echo alt", "more", "echo more"]
        assert contents(out["messages"]) == copied
        head = saver.thread_session("dst")
        assert head is not None and [m.text for m in head.messages()] == contents(out["messages"])
        # every checkpoint the copy took reads as it was, the abandoned branch too
        old = graph.get_state(config("dst", after(graph, "dst", 4, "echo two")))
        assert contents(old.values["messages"]) == ["one", "echo one", "two", "echo two"]
        for state in graph.get_state_history(config("dst")):
            assert isinstance(state.values.get("messages", []), list)
        saver.delete_thread("dst")
        left = saver.store.list_sessions(limit=100).items
        # what stays is the deleted source's shared history, without checkpoints
        assert {i.metadata["langgraph"]["thread_id"] for i in left} == {"src"}
        assert saver.store.scratchpad_list("lg-src") == []
        assert list(saver.list(None)) == []
