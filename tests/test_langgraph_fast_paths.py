"""The LangGraph saver's per-call work (issue 35): a read of the latest checkpoint
decodes no checkpoint to learn which values to read with it, and a SQLite write that
fails rolls back and raises threadline's error."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from tests.test_langgraph_latest import latest, put
from threadline.errors import StoreUnavailable
from threadline.integrations.langgraph import ThreadlineSaver
from threadline.store.sqlite import SQLiteStore


def test_the_latest_is_read_without_decoding_a_checkpoint_first(tmp_path: Path) -> None:
    with ThreadlineSaver(f"sqlite://{tmp_path / 't.db'}") as saver:
        config = put(saver, latest("t"), ["first"])
        put(saver, config, ["second"])
        decoded: list[str] = []
        loads = saver.serde.loads_typed

        def spy(data: tuple[str, bytes]) -> Any:
            decoded.append(data[0])
            return loads(data)

        saver.serde.loads_typed = spy  # type: ignore[method-assign]
        got = saver.get_tuple(latest("t"))
        assert got is not None and got.checkpoint["channel_values"] == {"v": ["second"]}
        # the checkpoint, its metadata and its one value: nothing decoded twice
        assert len(decoded) == 3


def test_a_failing_write_rolls_back_and_raises_ours(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    try:
        with pytest.raises(ValueError), store._write() as con:
            con.execute("CREATE TABLE scratch_test (x)")
            raise ValueError("the block fails")
        with store._read() as con:
            assert not con.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'scratch_test'"
            ).fetchall()
        with pytest.raises(StoreUnavailable) as caught, store._write() as con:
            con.execute("SELECT * FROM no_such_table")
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        assert store._lock.acquire(blocking=False)  # released after each
        store._lock.release()
        with store._write() as con:  # and the store writes on
            con.execute("CREATE TABLE scratch_test (x)")
    finally:
        store.close()


def test_list_with_a_limit_reads_that_many_checkpoints(tmp_path: Path) -> None:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    from tests.test_langgraph_reads import Counted

    with ThreadlineSaver(f"sqlite://{tmp_path / 't.db'}") as saver:
        config: Any = latest("t")
        for step in range(8):  # plain values: kept in the checkpoint records themselves
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=step))
            version = saver.get_next_version(None, None)
            checkpoint["channel_values"] = {"n": step}
            checkpoint["channel_versions"] = {"n": version}
            config = saver.put(config, checkpoint, {"step": step}, {"n": version})
        counted = Counted(saver.store)
        got = list(saver.list(latest("t"), limit=3))
        assert [t.metadata["step"] for t in got] == [7, 6, 5]
        assert counted.entries == 3  # not a fourth, read only to be dropped
        assert list(saver.list(latest("t"), limit=0)) == []


def test_same_answers_as_pydantic_equality() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from threadline.integrations.langgraph import _same

    class Loud(HumanMessage):
        pass

    first = HumanMessage(content="hi", id="a")
    pairs = [
        (first, HumanMessage(content="hi", id="a")),
        (first, HumanMessage(content="hi!", id="a")),
        (first, HumanMessage(content="hi", id="a", name="someone")),
        (first, AIMessage(content="hi", id="a")),
        (first, Loud(content="hi", id="a")),
        (first, HumanMessage(content="hi", id="a", extra_field="x")),
        (
            AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": "1"}]),
            AIMessage(content=""),
        ),
    ]
    for known, given in pairs:
        assert _same(known, given) == (known == given), (known, given)
