"""``get_items(limit)`` of the Agents SDK session reads ``limit`` items' messages, not a
fixed page (issue 35), and gives what ``SQLiteSession`` gives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import SQLiteSession

from tests.store_calls import sizes_returned
from threadline.integrations.openai_agents import ThreadlineSession


def turn(i: int) -> list[Any]:
    said = {"type": "output_text", "text": f"answer {i}", "annotations": []}
    answer = {"type": "message", "role": "assistant", "id": f"msg_{i}", "content": [said]}
    return [{"role": "user", "content": f"question {i}"}, {**answer, "status": "completed"}]


@pytest.mark.parametrize("limit", [1, 5, 20, 150])
def test_a_limited_read_takes_the_messages_of_its_items(tmp_path: Path, limit: int) -> None:
    ours = ThreadlineSession("s", f"sqlite://{tmp_path / 't.db'}")
    theirs = SQLiteSession("s", db_path=str(tmp_path / "n.db"))
    sizes: list[list[int]] = []

    async def run() -> tuple[list[Any], list[Any]]:
        for i in range(100):
            await ours.add_items(turn(i))
            await theirs.add_items(turn(i))
        sizes.append(sizes_returned(ours.store, "tail"))
        return await ours.get_items(limit), await theirs.get_items(limit)

    try:
        mine, native = asyncio.run(run())
    finally:
        ours.close()
        theirs.close()
    assert mine == native
    assert sum(sizes[0]) <= limit * 2  # one message an item at most, one page more at worst


def test_a_session_that_read_before_reads_only_what_is_new(tmp_path: Path) -> None:
    """After one full read a session holds its items: the next reads cost the counters
    and what another writer appended, and see what another writer popped or cleared."""
    url = f"sqlite://{tmp_path / 't.db'}"
    ours, other = ThreadlineSession("s", url), ThreadlineSession("s", url)
    theirs = SQLiteSession("s", db_path=str(tmp_path / "n.db"))

    async def both(action: str, *args: Any) -> None:
        for session in (other, theirs):
            await getattr(session, action)(*args)

    async def run() -> None:
        for i in range(30):
            await both("add_items", turn(i))
        assert await ours.get_items() == await theirs.get_items()
        tails = sizes_returned(ours.store, "tail")
        reads = sizes_returned(ours.store, "read_messages")
        assert await ours.get_items(5) == await theirs.get_items(5)
        assert await ours.get_items() == await theirs.get_items()
        assert (tails, reads) == ([], [])  # nothing new: nothing read
        await both("add_items", turn(30))
        assert await ours.get_items(3) == await theirs.get_items(3)
        assert sum(reads) == 2  # the two new messages
        await both("pop_item")
        assert await ours.get_items() == await theirs.get_items()
        await ours.add_items(turn(31))
        await theirs.add_items(turn(31))
        assert await ours.get_items(4) == await theirs.get_items(4)
        await both("clear_session")
        assert await ours.get_items() == [] == await theirs.get_items()

    try:
        asyncio.run(run())
    finally:
        for s in (ours, other, theirs):
            s.close()
