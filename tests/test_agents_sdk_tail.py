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
