"""``get_items(limit)`` of the Agents SDK session reads ``limit`` items' messages, not a
fixed page (issue 35), and gives what ``SQLiteSession`` gives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import SQLiteSession

from threadline.integrations.openai_agents import ThreadlineSession


def turn(i: int) -> list[Any]:
    return [
        {"role": "user", "content": f"question {i}"},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{i}",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {i}", "annotations": []}],
        },
    ]


@pytest.mark.parametrize("limit", [1, 5, 20, 150])
def test_a_limited_read_takes_the_messages_of_its_items(tmp_path: Path, limit: int) -> None:
    ours = ThreadlineSession("s", f"sqlite://{tmp_path / 't.db'}")
    theirs = SQLiteSession("s", db_path=str(tmp_path / "n.db"))
    read: list[int] = []

    async def run() -> tuple[list[Any], list[Any]]:
        for i in range(100):
            await ours.add_items(turn(i))
            await theirs.add_items(turn(i))
        original = ours.store.tail

        def counted(*args: Any, **kwargs: Any) -> Any:
            found = original(*args, **kwargs)
            read.append(len(found))
            return found

        ours.store.tail = counted  # type: ignore[method-assign]
        return await ours.get_items(limit), await theirs.get_items(limit)

    try:
        mine, native = asyncio.run(run())
    finally:
        ours.close()
        theirs.close()
    assert mine == native
    assert sum(read) <= limit * 2  # one message an item at most, one page more at worst
