"""Forks share their parent's history by reference, on every backend (issue 13, item 3).

A fork's view is the parent's messages up to the fork seq, then its own; its own
messages get seqs after the fork seq; its counters cover the view; a parent
checkpoint that covers only shared history applies to it; the parent never sees
the fork's messages, nor the fork the parent's later ones. The rule lives once in
``store/lineage.py`` and ``store/fork.py``; each backend supplies only the starting
counters at create time, which is what these tests hold every backend to.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance.backends import IN_PROCESS
from threadline import ContextPolicy, Message, Session, build_context, open_store
from threadline.errors import SessionHasForks, SessionNotFound, UsageError
from threadline.store import retraction
from threadline.store.encoding import primary_tokens
from threadline.store.fork import delete_session as delete_with_forks
from threadline.store.fork import deletion_order, fork_session, user_turn_seq
from threadline.store.lineage import fork_point
from threadline.store.protocol import Store
from threadline.store.session_info import FORK_KEY

MODEL = "openai/gpt-4o"


def turns(count: int, *, tag: str = "p", start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + count):
        out += [Message.user(f"{tag} question {i}"), Message.assistant(f"{tag} answer {i}")]
    return out


def parent_with(store: Store, n_turns: int) -> Session:
    session = store.create_session(model=MODEL, title="parent")
    if n_turns:
        session.append(turns(n_turns))
    return session


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


def test_fork_at_the_end_shares_everything_and_diverges(store: Store) -> None:
    parent = parent_with(store, 5)
    child = fork_session(parent)
    assert child.fork is not None and child.fork.parent == parent.id and child.fork.seq == 10
    assert child.agent == parent.agent and child.model == parent.model
    assert (child.last_seq, child.message_count, child.total_tokens) == (
        parent.last_seq,
        parent.message_count,
        parent.total_tokens,
    )
    assert texts(child.messages()) == texts(parent.messages())

    stored = child.append(Message.user("child only"))
    parent.append(Message.user("parent only"))
    assert stored[0].seq == 11
    assert texts(child.tail(2)) == ["child only", "p answer 4"]
    assert texts(parent.tail(2)) == ["parent only", "p answer 4"]
    assert "parent only" not in texts(child.messages())
    assert "child only" not in texts(parent.messages())
    child.refresh()
    assert child.count() == child.message_count == 11
    assert child.total_tokens == sum(primary_tokens(m) for m in child.messages())


def test_fork_earlier_chains_reads_across_the_fork_point(store: Store) -> None:
    parent = parent_with(store, 6)  # seqs 1..12
    child = fork_session(parent, at=5)
    child.append(turns(2, tag="c"))  # seqs 6..9
    expected = texts(parent.messages())[:5] + texts(turns(2, tag="c"))
    view = child.messages()
    assert texts(view) == expected
    assert [m.seq for m in view] == list(range(1, 10))
    assert texts(child.read_messages(after_seq=3, limit=4)) == expected[3:7]
    assert texts(child.tail(3, before_seq=8)) == expected[4:7][::-1]
    assert texts(child.tail(100)) == expected[::-1]
    assert child.total_tokens == sum(primary_tokens(m) for m in view)
    assert child.message_count == 9


def test_fork_of_a_fork_chains_through_every_generation(store: Store) -> None:
    root = parent_with(store, 3)  # 1..6
    middle = fork_session(root, at=4)
    middle.append(turns(1, tag="m"))  # 5..6
    leaf = fork_session(middle, at=5)
    leaf.append(Message.user("leaf"))  # 6
    expected = [*texts(root.messages())[:4], "m question 0", "leaf"]
    assert texts(leaf.messages()) == expected
    assert texts(leaf.tail(10)) == expected[::-1]
    assert [s.session_id for s in leaf.segments()] == [leaf.id, middle.id, root.id]


def test_a_fork_of_a_fork_ends_at_the_smallest_fork_point(store: Store) -> None:
    """F2 forks F1 before F1's own fork point: its view is the root's first 4 messages,
    never the root's messages between F2's and F1's fork points (issue 32). Records
    and checkpoints of the root past F2's point are not its either."""
    root = parent_with(store, 5)  # seqs 1-10
    root.add_checkpoint(covers_up_to=6, summary="up to 6")
    f1 = fork_session(root, at=8)
    f2 = fork_session(f1, at=4)
    f2.append(Message.user("own"))
    root.retract([2])  # seq 11: after both fork points, no fork's business
    view = [m.text for m in f2.messages()]
    assert view == [m.text for m in root.messages(include_retracted=True)[:4]] + ["own"]
    assert [m.seq for m in f2.tail(10)] == [5, 4, 3, 2, 1]
    assert (f2.message_count, f2.last_seq) == (5, 5)
    assert retraction.visible_count(f2) == 5
    assert f2.checkpoints() == [] and f2.latest_checkpoint() is None
    rewound = fork_session(f1, at=user_turn_seq(f1, 2))  # /fork, then /rewind 2
    assert [m.seq for m in rewound.messages()] == [1, 2, 3, 4]


def test_fork_at_zero_and_out_of_range(store: Store) -> None:
    parent = parent_with(store, 2)
    empty = fork_session(parent, at=0)
    assert empty.messages() == [] and empty.last_seq == 0 and empty.fork is not None
    empty.append(Message.user("fresh"))
    assert [m.seq for m in empty.messages()] == [1]
    for bad in (-1, 5):
        with pytest.raises(UsageError, match="cannot fork"):
            fork_session(parent, at=bad)


def test_reads_and_counters_survive_reopening(store: Store, store_url: str, backend: str) -> None:
    """A fresh handle (its own connection, and for JSONL no cached index) reads the
    fork's start from what was stored."""
    parent = parent_with(store, 3)
    child = fork_session(parent, at=4)
    child.append(Message.user("after reopening"))
    again = store if backend in IN_PROCESS else open_store(store_url)
    try:
        view = again.get_session(child.id)
        assert (view.last_seq, view.message_count) == (5, 5)
        assert texts(view.tail(2)) == ["after reopening", "p answer 1"]
        assert [m.seq for m in view.messages()] == [1, 2, 3, 4, 5]
        assert view.append(Message.assistant("and on"))[0].seq == 6
    finally:
        if again is not store:
            again.close()


def test_inherited_checkpoints_apply_up_to_the_fork_point(store: Store) -> None:
    parent = parent_with(store, 6)  # 1..12
    early = parent.add_checkpoint(covers_up_to=4, summary="up to 4")
    parent.add_checkpoint(covers_up_to=10, summary="up to 10", expect_previous=early.id)
    child = fork_session(parent, at=6)
    inherited = child.latest_checkpoint()
    assert inherited is not None and inherited.summary == "up to 4"
    assert inherited.session_id == parent.id
    assert [c.summary for c in child.checkpoints()] == ["up to 4"]
    # the fork's first own checkpoint builds on the inherited one
    own = child.add_checkpoint(covers_up_to=6, summary="child 6", expect_previous=inherited.id)
    assert own.session_id == child.id
    assert child.latest_checkpoint() == own
    assert [c.summary for c in child.checkpoints()] == ["up to 4", "child 6"]
    assert parent.latest_checkpoint() is not None
    assert parent.latest_checkpoint().summary == "up to 10"  # type: ignore[union-attr]


def test_build_context_on_a_fork_reads_the_shared_prefix(store: Store) -> None:
    parent = parent_with(store, 4)
    parent.add_checkpoint(covers_up_to=4, summary="the first two turns")
    child = fork_session(parent)
    child.append(Message.user("what now?"))
    window = build_context(child, model=MODEL, policy=ContextPolicy())
    sent = [m.text for m in window.messages]
    assert any("the first two turns" in t for t in sent)
    assert sent[-1] == "what now?"
    assert "p question 2" in sent and "p question 0" not in sent


def test_deleting_a_parent_with_forks_needs_force(store: Store) -> None:
    parent = parent_with(store, 1)
    child = fork_session(parent)
    grandchild = fork_session(child)
    other = parent_with(store, 1)
    with pytest.raises(SessionHasForks) as caught:
        parent.delete()
    assert set(caught.value.forks) == {child.id, grandchild.id}
    assert store.session_info(parent.id)  # nothing deleted
    # deleting the whole lineage at once needs no force; forks go first
    assert deletion_order(store, [parent.id, child.id, grandchild.id], force=False) == [
        grandchild.id,
        child.id,
        parent.id,
    ]
    assert delete_with_forks(store, child.id, force=True) == [grandchild.id, child.id]
    parent.delete()
    for gone in (parent.id, child.id, grandchild.id):
        with pytest.raises(SessionNotFound):
            store.session_info(gone)
    assert store.session_info(other.id)


def test_a_fork_whose_parent_is_gone_still_reads_its_own(store: Store) -> None:
    parent = parent_with(store, 2)
    child = fork_session(parent)
    child.append(Message.user("mine"))
    store.delete_session(parent.id)  # the primitive: knows nothing of lineage
    orphan = store.get_session(child.id)
    with pytest.warns(UserWarning, match="fork parent .* is gone"):
        assert texts(orphan.messages()) == ["mine"]


def test_the_fork_key_is_reserved(store: Store) -> None:
    with pytest.raises(UsageError, match="reserved"):
        store.create_session(metadata={FORK_KEY: {"session": "x", "seq": 1}})
    session = parent_with(store, 1)
    with pytest.raises(UsageError, match="reserved"):
        store.update_session(session.id, metadata={FORK_KEY: {"session": "x", "seq": 1}})
    child = fork_session(session)
    store.update_session(child.id, metadata={"note": "kept"})
    info = store.session_info(child.id)
    assert fork_point(info) is not None and info.metadata["note"] == "kept"


def test_rewind_point_is_before_the_nth_last_request(store: Store) -> None:
    parent = parent_with(store, 3)  # requests at seqs 1, 3, 5
    assert user_turn_seq(parent, 1) == 4
    assert user_turn_seq(parent, 3) == 0
    with pytest.raises(UsageError, match="cannot rewind 4 user turns"):
        user_turn_seq(parent, 4)
    rewound = fork_session(parent, at=user_turn_seq(parent, 1))
    assert texts(rewound.messages())[-1] == "p answer 1"


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    n=st.integers(0, 12),
    data=st.data(),
)
def test_chained_reads_equal_slices_of_the_view(store: Store, n: int, data: st.DataObject) -> None:
    """Whatever the fork point and the read window, a fork reads exactly the slice of
    its view (parent prefix, then own tail) that a plain session would."""
    parent = store.create_session(model=MODEL)
    if n:
        parent.append([Message.user(f"p{i}") for i in range(n)])
    at = data.draw(st.integers(0, n), label="at")
    child = fork_session(parent, at=at)
    own = data.draw(st.integers(0, 5), label="own")
    if own:
        child.append([Message.user(f"c{i}") for i in range(own)])
    parent.append(Message.user("later"))
    view = [f"p{i}" for i in range(at)] + [f"c{i}" for i in range(own)]
    total = len(view)
    after = data.draw(st.integers(0, total + 1), label="after")
    limit = data.draw(st.none() | st.integers(1, total + 2), label="limit")
    got = child.read_messages(after_seq=after, limit=limit)
    assert texts(got) == view[after:][:limit]
    assert [m.seq for m in got] == list(range(after + 1, after + 1 + len(got)))
    before = data.draw(st.none() | st.integers(1, total + 2), label="before")
    count = data.draw(st.integers(1, total + 2), label="count")
    upto = total if before is None else min(total, before - 1)
    assert texts(child.tail(count, before_seq=before)) == view[:upto][::-1][:count]
