"""The latest checkpoint is read with the values it keeps outside its record when
the saver wrote it (it names them before the read), and read right when another
writer has put a newer one since (issue 35)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from tests.test_langgraph_reads import Counted
from threadline import open_store
from threadline.integrations.langgraph import ThreadlineSaver
from threadline.store.protocol import Store


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite://{tmp_path / 't.db'}" if request.param == "sqlite" else "memory://"
    made = open_store(url)
    yield made
    made.close()


def put(saver: ThreadlineSaver, config: Any, value: object) -> Any:
    """A checkpoint whose channel ``v`` holds ``value`` (a list: kept outside the
    record) at a new version."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    current = config["configurable"].get("version")
    version = saver.get_next_version(current, None)
    checkpoint["channel_values"] = {"v": value}
    checkpoint["channel_versions"] = {"v": version}
    done = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"v": version})
    done["configurable"]["version"] = version
    return done


def latest(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def test_the_latest_this_saver_wrote_is_one_read_with_its_values(store: Store) -> None:
    with ThreadlineSaver(store) as saver:
        config = put(saver, latest("t"), ["first"])
        config = put(saver, config, ["second", {"n": 2}])
        counted = Counted(store)
        got = saver.get_tuple(latest("t"))
        assert got is not None
        assert got.checkpoint["channel_values"] == {"v": ["second", {"n": 2}]}
        assert counted.calls == {"scratchpad_page_beside": 1}


def test_a_newer_checkpoint_another_saver_put_is_read_as_it_is(store: Store) -> None:
    with ThreadlineSaver(store) as mine, ThreadlineSaver(store) as other:
        config = put(mine, latest("t"), ["mine"])
        assert other.get_tuple(latest("t")) is not None
        newer = put(other, config, ["theirs"])
        other.put_writes(newer, [("v", ["pending"])], "task-1")
        got = mine.get_tuple(latest("t"))
        assert got is not None
        assert got.checkpoint["id"] == newer["configurable"]["checkpoint_id"]
        assert got.checkpoint["channel_values"] == {"v": ["theirs"]}
        assert [(t, c, v) for t, c, v in got.pending_writes] == [("task-1", "v", ["pending"])]
        assert got.parent_config is not None
        assert (
            got.parent_config["configurable"]["checkpoint_id"]
            == (config["configurable"]["checkpoint_id"])
        )
