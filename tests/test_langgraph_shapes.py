"""The LangGraph saver has the shapes LangGraph's own savers have (issue 35):
``from_conn_string`` as a context manager (``with`` and ``async with``), ``setup()``
(called, or awaited as the async savers' is), and async methods that leave the event
loop free while the store works."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from threadline import open_store
from threadline.errors import ThreadlineError, UsageError
from threadline.integrations.langgraph import ThreadlineSaver


def chat(saver: ThreadlineSaver) -> Any:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"seen {len(state['messages'])}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    return graph.compile(checkpointer=saver)


def test_from_conn_string_opens_and_closes_like_sqlite_saver(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 't.db'}"
    with ThreadlineSaver.from_conn_string(url) as saver:
        assert saver.setup() is not None  # returns at once; awaitable for async code
        got = chat(saver).invoke(
            {"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "a"}}
        )
        assert [m.content for m in got["messages"]] == ["hi", "seen 1"]
    with pytest.raises(ThreadlineError):  # closed with the block
        saver.store.list_sessions()
    with open_store(url) as store:
        assert store.session_info("lg-a").message_count == 2
    with pytest.raises(UsageError):
        ThreadlineSaver.from_conn_string(None)  # type: ignore[arg-type]


def test_async_with_and_awaited_setup_as_the_async_savers(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 't.db'}"

    async def run() -> list[str]:
        async with ThreadlineSaver.from_conn_string(url) as saver:
            await saver.setup()
            got = await chat(saver).ainvoke(
                {"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "b"}}
            )
            listed = [t async for t in saver.alist({"configurable": {"thread_id": "b"}})]
            assert len(listed) >= 2
            return [str(m.content) for m in got["messages"]]

    assert asyncio.run(run()) == ["hi", "seen 1"]


def test_async_methods_leave_the_event_loop_free(tmp_path: Path) -> None:
    """While a store call is held up, the loop still runs other tasks."""
    saver = ThreadlineSaver(f"sqlite://{tmp_path / 't.db'}")
    release = threading.Event()
    original = saver.store.scratchpad_page_beside  # what get_tuple reads

    def held(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(10)
        return original(*args, **kwargs)

    async def run() -> None:
        await chat(saver).ainvoke(
            {"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "c"}}
        )
        saver.store.scratchpad_page_beside = held  # type: ignore[method-assign]
        reading = asyncio.create_task(saver.aget_tuple({"configurable": {"thread_id": "c"}}))
        ticks = 0
        for _ in range(5):  # the loop keeps turning while the read waits
            await asyncio.sleep(0)
            ticks += 1
        assert not reading.done()
        release.set()
        assert (await reading) is not None
        assert ticks == 5

    try:
        asyncio.run(run())
    finally:
        saver.close()
