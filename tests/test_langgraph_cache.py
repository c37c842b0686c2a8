"""What the LangGraph saver keeps in memory of its threads' messages is bounded by
messages as well as by sessions: a few long threads do not hold a saver's memory,
and the threads it forgets read back as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from tests.test_langgraph_shapes import chat
from threadline.integrations.langgraph import ThreadlineSaver


def test_the_sessions_known_hold_at_most_the_message_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.messages import HumanMessage

    monkeypatch.setattr("threadline.integrations.langgraph.KNOWN_MESSAGES", 10)
    with ThreadlineSaver(f"sqlite://{tmp_path / 't.db'}") as saver:
        graph = chat(saver)
        for i in range(12):  # 4 threads, 6 messages each
            graph.invoke(
                {"messages": [HumanMessage(content=f"turn {i}")]},
                {"configurable": {"thread_id": f"t{i % 4}"}},
            )
        held = [len(known.messages) for known in saver._seen.values()]
        assert len(held) < 4 and (sum(held) <= 10 or len(held) == 1)
        assert saver._held == sum(held)
        for n in range(4):  # the forgotten threads read back whole
            state = graph.get_state({"configurable": {"thread_id": f"t{n}"}})
            assert [m.content for m in state.values["messages"]][::2] == [
                f"turn {i}" for i in range(n, 12, 4)
            ]
