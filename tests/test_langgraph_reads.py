"""The LangGraph saver's reads cost what they return, not the thread (issue 35).

Counted at the store's interface, so no clock is involved: the scratchpad entries a
call reads back (the latest checkpoint, one by id, ``list(limit=10)``) stay the same
when the thread grows tenfold; ``put_writes`` reads nothing and writes once;
``alist`` yields its first checkpoint before it has read the thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from tests.store_calls import sizes_returned
from threadline import open_store
from threadline.integrations.langgraph import ThreadlineSaver
from threadline.store.protocol import Store
from threadline.store.sqlite import SQLiteStore


class Counted:
    """Counts the scratchpad calls a store answers and the entries they give back."""

    def __init__(self, store: Store) -> None:
        self.calls: dict[str, int] = {}
        self.entries = 0
        for name in (
            "scratchpad_read",
            "scratchpad_list",
            "scratchpad_page",
            "scratchpad_page_contents",
            "scratchpad_page_beside",
            "scratchpad_contents",
        ):
            setattr(store, name, self._reading(name, getattr(store, name)))
        for name in (
            "scratchpad_write",
            "scratchpad_write_many",
            "append_messages",
        ):
            setattr(store, name, self._writing(name, getattr(store, name)))

    def _reading(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            found = method(*args, **kwargs)
            parts = found if isinstance(found, tuple) else (found,)  # a page and beside
            for part in parts:
                many = isinstance(part, list | dict)
                self.entries += len(part) if many else part is not None
            return found

        return counted

    def _writing(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return counted

    def reset(self) -> None:
        self.calls, self.entries = {}, 0


@pytest.fixture(params=["sqlite", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ThreadlineSaver]:
    url = f"sqlite://{tmp_path / 't.db'}" if request.param == "sqlite" else "memory://"
    store = open_store(url)
    with ThreadlineSaver(store) as made:
        yield made
    store.close()


def fill(saver: ThreadlineSaver, thread: str, count: int) -> list[str]:
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ids, version = [], None
    for i in range(count):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=i))
        version = saver.get_next_version(version, None)
        checkpoint["channel_values"] = {"n": i}
        checkpoint["channel_versions"] = {"n": version}
        config = saver.put(config, checkpoint, {"source": "loop", "step": i}, {"n": version})
        ids.append(checkpoint["id"])
    return ids


def entries_read(saver: ThreadlineSaver, call: Callable[[], Any]) -> int:
    counted = Counted(saver.store)
    call()
    return counted.entries


def config(thread: str, cid: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    return {"configurable": configurable | ({"checkpoint_id": cid} if cid else {})}


def test_latest_by_id_and_a_page_read_the_same_however_long_the_thread(
    saver: ThreadlineSaver,
) -> None:
    small, big = fill(saver, "small", 15), fill(saver, "big", 150)
    reads = {}
    for name, ids in (("small", small), ("big", big)):
        latest = saver.get_tuple(config(name))
        assert latest is not None and latest.checkpoint["id"] == ids[-1]
        middle = saver.get_tuple(config(name, ids[7]))
        assert middle is not None and middle.checkpoint["channel_values"] == {"n": 7}
        page = [t.checkpoint["id"] for t in saver.list(config(name), limit=10)]
        assert page == ids[::-1][:10]
        reads[name] = (
            entries_read(saver, lambda n=name: saver.get_tuple(config(n))),
            entries_read(saver, lambda n=name, i=ids: saver.get_tuple(config(n, i[7]))),
            entries_read(saver, lambda n=name: list(saver.list(config(n), limit=10))),
        )
    assert reads["big"] == reads["small"]
    latest, by_id, page = reads["big"]
    assert latest <= 3 and by_id <= 3 and page <= 3 * 11


def test_list_before_pages_down_the_whole_thread(saver: ThreadlineSaver) -> None:
    ids = fill(saver, "t", 40)
    got = [t.checkpoint["id"] for t in saver.list(config("t"), before=config("t", ids[30]))]
    assert got == ids[:30][::-1]
    got = [t.checkpoint["id"] for t in saver.list(config("t"), limit=3, filter={"step": 5})]
    assert got == [ids[5]]


def test_put_writes_reads_nothing_and_writes_once(saver: ThreadlineSaver) -> None:
    ids = fill(saver, "t", 3)
    counted = Counted(saver.store)
    writes = [("n", 1), ("n", 2), ("other", "x")]
    saver.put_writes(config("t", ids[-1]), writes, "task-1")
    assert counted.calls.get("scratchpad_write_many") == 1
    assert not counted.calls.get("scratchpad_write")
    if isinstance(saver.store, SQLiteStore):  # one statement (elsewhere the store loops)
        assert not counted.calls.get("scratchpad_read")
    saver.put_writes(config("t", ids[-1]), [("n", 99)], "task-1")  # a resend keeps the first
    got = saver.get_tuple(config("t"))
    assert got is not None
    assert got.pending_writes == [("task-1", "n", 1), ("task-1", "n", 2), ("task-1", "other", "x")]


def test_alist_yields_before_it_has_read_the_thread(saver: ThreadlineSaver) -> None:
    fill(saver, "t", 200)  # its values in the checkpoint records: one entry each
    everything = entries_read(saver, lambda: list(saver.list(config("t"))))

    async def first() -> int:
        counted = Counted(saver.store)
        async for _ in saver.alist(config("t")):
            return counted.entries
        raise AssertionError("nothing listed")

    assert asyncio.run(first()) < everything / 2


def test_put_is_one_write(saver: ThreadlineSaver) -> None:
    """Each put one write and no read: the saver knows the thread's session from its
    last write, and the write checks it is still so (``Store.append_messages``)."""
    fill(saver, "t", 2)
    counted = Counted(saver.store)
    fill(saver, "t", 3)
    assert counted.calls == {"append_messages": 3}


def test_a_chat_turn_appends_and_writes_its_checkpoint_at_once(saver: ThreadlineSaver) -> None:
    """A put whose checkpoint holds new messages appends them in the same write (the
    append with the checkpoint's entries and the mark: ``Store.append_messages``)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from threadline.integrations.langgraph import thread_session_id

    config: Any = {"configurable": {"thread_id": "chat", "checkpoint_ns": ""}}
    said: list[Any] = []
    version = None
    for turn in range(3):
        counted = Counted(saver.store)
        said += [
            HumanMessage(f"question {turn}", id=f"h{turn}"),
            AIMessage(f"answer {turn}", id=f"a{turn}"),
        ]
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=turn))
        version = saver.get_next_version(version, None)
        checkpoint["channel_values"] = {"messages": list(said)}
        checkpoint["channel_versions"] = {"messages": version}
        config = saver.put(config, checkpoint, {"step": turn}, {"messages": version})
        # the one write: the append with its companions (``Session.append``)
        assert counted.calls == {"append_messages": 1}
    texts = [m.text for m in saver.store.read_messages(thread_session_id("chat"))]
    assert texts == [m.content for m in said]
    got = saver.get_tuple(config)
    assert got is not None
    assert got.checkpoint["channel_values"]["messages"] == said


def test_no_second_read_of_a_thread_past_the_cache_of_threads(
    saver: ThreadlineSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round robin over more threads than the saver keeps in memory: each turn reads
    the thread's messages once (the checkpoint's value), not again to append. (The
    cache made small here: past it, at any size, is what is tested.)"""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph

    monkeypatch.setattr("threadline.integrations.langgraph.KNOWN_SESSIONS", 16)

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"seen {len(state['messages'])}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    chat = graph.compile(checkpointer=saver)
    threads = 16 + 6

    def turn(i: int) -> None:
        said = {"messages": [HumanMessage(content=f"turn {i}")]}
        chat.invoke(said, {"configurable": {"thread_id": f"t{i % threads}"}})

    for i in range(threads * 2):
        turn(i)
    read = sizes_returned(saver.store, "read_messages")
    for i in range(threads * 2, threads * 3):
        turn(i)
    assert sum(read) <= threads * 4  # the 4 messages each thread holds, read once


def test_a_known_thread_is_read_without_looking_up_its_session(saver: ThreadlineSaver) -> None:
    """After the first read of a thread, ``get_tuple`` and ``put_writes`` go straight
    to its records: one read of the checkpoint with its pending writes (its values are
    in the record)."""
    ids = fill(saver, "t", 5)
    saver.get_tuple(config("t"))
    looked_up = sizes_returned(saver.store, "session_info")
    counted = Counted(saver.store)
    got = saver.get_tuple(config("t"))
    assert got is not None and got.checkpoint["id"] == ids[-1]
    saver.put_writes(config("t", ids[-1]), [("n", 1)], "task-1")
    assert counted.calls == {"scratchpad_page_beside": 1, "scratchpad_write_many": 1}
    assert looked_up == []


def test_a_thread_deleted_elsewhere_is_gone_and_written_anew(saver: ThreadlineSaver) -> None:
    """What a saver remembers of a thread's session does not outlive the session: a
    thread another saver deleted reads as absent, and a write makes it again."""
    ids = fill(saver, "t", 3)
    assert saver.get_tuple(config("t")) is not None
    with ThreadlineSaver(saver.store) as other:
        other.delete_thread("t")
    assert saver.get_tuple(config("t")) is None
    assert saver.get_tuple(config("t", ids[0])) is None
    assert list(saver.list(config("t"))) == []
    saver.put_writes(config("t", ids[-1]), [("n", 1)], "task-1")  # as before: made anew
    assert saver.store.session_info(saver.thread_session("t").id)  # type: ignore[union-attr]


def test_a_session_at_the_threads_id_that_it_did_not_make_is_still_refused(
    saver: ThreadlineSaver,
) -> None:
    from threadline.errors import NotOwned
    from threadline.integrations.langgraph import thread_session_id

    saver.store.create_session(id=thread_session_id("mine"), metadata={"face": {"name": "x"}})
    with pytest.raises(NotOwned):
        saver.get_tuple(config("mine"))
    with pytest.raises(NotOwned):
        saver.put_writes(config("mine", "1"), [("n", 1)], "task-1")


def test_a_put_on_a_thread_another_saver_moved_is_made_again(tmp_path: Path) -> None:
    """Two savers take turns on one thread (two processes serving it): each put of the
    one that is behind finds the session changed, nothing written, and is made again
    on the session as it is; every message is kept once, in order, and no fork."""
    from langchain_core.messages import AIMessage, HumanMessage

    from threadline.integrations.langgraph import thread_session_id

    store = open_store(f"sqlite://{tmp_path / 't.db'}")
    savers = [ThreadlineSaver(store), ThreadlineSaver(store)]
    redone: list[str] = []
    for saver in savers:
        forget = saver._forget_thread
        saver._forget_thread = lambda t, f=forget: (redone.append(t), f(t))[1]  # type: ignore[method-assign]
    said: list[Any] = []
    version = None
    for turn in range(6):
        saver = savers[turn % 2]
        latest = saver.get_tuple(config("chat"))
        parent = latest.config if latest is not None else config("chat")
        said += [HumanMessage(f"q{turn}", id=f"h{turn}"), AIMessage(f"a{turn}", id=f"a{turn}")]
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=turn))
        version = saver.get_next_version(version, None)
        checkpoint["channel_values"] = {"messages": list(said)}
        checkpoint["channel_versions"] = {"messages": version}
        saver.put(parent, checkpoint, {"step": turn}, {"messages": version})
    texts = [m.text for m in store.read_messages(thread_session_id("chat"))]
    assert texts == [m.content for m in said]
    assert store.list_sessions().total == 1
    assert redone == ["chat"] * 4  # each turn of a saver after its first
    for saver in savers:
        got = saver.get_tuple(config("chat"))
        assert got is not None and got.checkpoint["channel_values"]["messages"] == said
    store.close()


def test_messages_read_from_what_the_saver_knows_are_copies(tmp_path: Path) -> None:
    """A checkpoint's messages the saver knows already come back without a read of the
    session, each a copy: a caller changing one changes neither the next read nor what
    another saver (another process) reads."""
    from langchain_core.messages import AIMessage, HumanMessage

    store = open_store(f"sqlite://{tmp_path / 't.db'}")
    saver = ThreadlineSaver(store)
    said = [HumanMessage("q", id="h"), AIMessage("a", id="a", additional_kwargs={"k": [1]})]
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"messages": list(said)}
    checkpoint["channel_versions"] = {"messages": version}
    saved = saver.put(config("chat"), checkpoint, {"step": 0}, {"messages": version})
    counted = Counted(store)
    calls = {"n": 0}
    read_messages = store.read_messages

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return read_messages(*args, **kwargs)

    store.read_messages = counting  # type: ignore[method-assign]
    first = saver.get_tuple(saved)
    assert first is not None and calls["n"] == 0 and counted.calls
    got = first.checkpoint["channel_values"]["messages"]
    assert got == said
    got[1].additional_kwargs["k"].append(2)
    got[0].content = "changed"
    again = saver.get_tuple(saved)
    assert again is not None and again.checkpoint["channel_values"]["messages"] == said
    store.read_messages = read_messages  # type: ignore[method-assign]
    other = ThreadlineSaver(store).get_tuple(saved)
    assert other is not None and other.checkpoint["channel_values"]["messages"] == said
    store.close()


def test_a_thread_made_again_elsewhere_is_read_not_remembered(tmp_path: Path) -> None:
    """Another saver deletes the thread and makes it again, with other messages at the
    same seqs: this saver's memory of the old session is not what it gives back."""
    from langchain_core.messages import AIMessage, HumanMessage

    store = open_store(f"sqlite://{tmp_path / 't.db'}")
    mine, other = ThreadlineSaver(store), ThreadlineSaver(store)

    def put(saver: ThreadlineSaver, said: list[Any]) -> Any:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6())
        version = saver.get_next_version(None, None)
        checkpoint["channel_values"] = {"messages": said}
        checkpoint["channel_versions"] = {"messages": version}
        return saver.put(config("chat"), checkpoint, {"step": 0}, {"messages": version})

    put(mine, [HumanMessage("old question", id="h"), AIMessage("old answer", id="a")])
    assert mine.get_tuple(config("chat")) is not None  # remembered from here on
    other.delete_thread("chat")
    now = [HumanMessage("new question", id="h"), AIMessage("new answer", id="a")]
    put(other, now)
    got = mine.get_tuple(config("chat"))
    assert got is not None and got.checkpoint["channel_values"]["messages"] == now
    store.close()
