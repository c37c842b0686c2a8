"""Reads past a checkpoint stop at it: a window or a cut just after a compaction reads the
few messages above the checkpoint, not a page of messages it then drops (an agent that
compacts every step would otherwise copy a page of large tool results per build)."""

from __future__ import annotations

import pytest

from threadline import ContextPolicy, Message, build_context, open_store
from threadline.compaction.triggers import iter_tail
from threadline.context.builder import ContextWindow
from threadline.store.memory import MemoryStore
from threadline.store.protocol import Session


@pytest.fixture
def read_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each tail read of a memory store returned."""
    sizes: list[int] = []
    original = MemoryStore._tail_range

    def counted(self: MemoryStore, sid: str, limit: int, before: int | None) -> list[Message]:
        page = original(self, sid, limit, before)
        sizes.append(len(page))
        return page

    monkeypatch.setattr(MemoryStore, "_tail_range", counted)
    return sizes


def compacted_session(total: int, covered: int) -> Session:
    session = open_store("memory://").create_session(model="gpt-4o")
    session.append([Message.user(f"step {i}: ran the tests, all green") for i in range(total)])
    session.add_checkpoint(covers_up_to=covered, summary="Earlier: the tests ran green.")
    return session


def shown(window: ContextWindow) -> list[int]:
    return [m.seq for m in window.messages if m.seq is not None and not m.summary]


def test_a_window_just_past_a_checkpoint_reads_only_what_is_above_it(
    read_sizes: list[int],
) -> None:
    session = compacted_session(300, 296)
    window = build_context(session, policy=ContextPolicy(context_limit=100_000))
    assert shown(window) == [297, 298, 299, 300]
    assert sum(read_sizes) <= 4, read_sizes


def test_a_stale_handle_still_reads_every_message_above_the_checkpoint(
    read_sizes: list[int],
) -> None:
    """The first page trusts the handle's last seq; one written by another handle since is
    read all the same (the next pages go by the seqs read)."""
    session = compacted_session(300, 290)
    other = session.store.get_session(session.id)
    other.append([Message.user(f"late {i}") for i in range(20)])
    window = build_context(session, policy=ContextPolicy(context_limit=100_000))
    assert shown(window) == list(range(291, 321))
    assert sum(read_sizes) <= 30 + 1, read_sizes


def test_the_cut_reads_the_tail_down_to_the_floor_only(read_sizes: list[int]) -> None:
    session = compacted_session(300, 250)
    seqs = [m.seq for m in iter_tail(session, floor=250, last_seq=300)]
    assert seqs == list(range(300, 250, -1))
    assert sum(read_sizes) == 50, read_sizes
