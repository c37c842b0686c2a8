"""``Store.append_messages`` on a mark (``expect``, with ``scratchpad_of``): messages
appended and scratchpad entries written in one step, on what a writer last read of the
session (``Mark``), on every backend (issue
35: a LangGraph ``put`` appends the new messages of a checkpoint and writes the
checkpoint in one commit, with no read of the session first).

With a mark that holds, the messages get the seqs after it and the entries are
stored; with one that does not (an append in between, the session made again),
nothing is written and ``SessionChanged`` says so. On every backend it is one atomic
step (``StoreCore._append``): a failure at the entries leaves no message behind.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Message
from threadline.errors import SessionChanged, SessionNotFound
from threadline.store.protocol import Store
from threadline.store.session_info import Mark


def _texts(store: Store, session_id: str) -> list[tuple[int | None, str]]:
    return [(m.seq, m.text) for m in store.read_messages(session_id)]


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.integers(0, 3),
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    stale=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_a_holding_mark_writes_all_and_a_stale_one_nothing(
    store: Store, before: int, sizes: list[int], stale: list[bool]
) -> None:
    session = store.create_session()
    if before:
        session.append([Message.user(f"before {i}") for i in range(before)])
    info = store.session_info(session.id)
    expected_texts = _texts(store, session.id)
    expected_entries: dict[str, str] = {}
    for step, size in enumerate(sizes):
        mark = Mark.of(info)
        if stale[step]:
            mark = Mark(info.created_at, info.last_seq + 1)
        batch = [Message.assistant(f"step {step} message {i}") for i in range(size)]
        entries = {f"e/{step}": f"entry of step {step}"}
        if stale[step]:
            with pytest.raises(SessionChanged):
                store.append_messages(session.id, batch, scratchpad=entries, expect=mark)
        else:
            stored = store.append_messages(session.id, batch, scratchpad=entries, expect=mark)
            assert [m.seq for m in stored] == list(
                range(mark.last_seq + 1, mark.last_seq + 1 + size)
            )
            expected_texts += [(m.seq, m.text) for m in stored]
            expected_entries.update(entries)
        info = store.session_info(session.id)
        assert _texts(store, session.id) == expected_texts
        assert store.scratchpad_contents(session.id, prefixes=["e/"]) == expected_entries
        assert info.last_seq == (expected_texts[-1][0] if expected_texts else 0)


def test_entries_go_to_one_session_and_messages_to_another(store: Store) -> None:
    root, branch = store.create_session(), store.create_session()
    mark = Mark.of(store.session_info(branch.id))
    stored = store.append_messages(
        branch.id,
        [Message.user("hi")],
        scratchpad={"c/1": "checkpoint"},
        scratchpad_of=root.id,
        expect=mark,
    )
    assert [m.seq for m in stored] == [1]
    assert _texts(store, branch.id) == [(1, "hi")]
    assert _texts(store, root.id) == []
    assert store.scratchpad_contents(root.id, names=["c/1"]) == {"c/1": "checkpoint"}
    assert store.scratchpad_contents(branch.id, names=["c/1"]) == {}


def test_a_session_made_again_under_its_id_breaks_the_mark(store: Store) -> None:
    first = store.create_session(id="again")
    mark = Mark.of(store.session_info(first.id))
    store.delete_session(first.id)
    store.create_session(id="again")
    made = store.session_info("again")
    if made.created_at == mark.created_at:  # the clock did not move: the test says nothing
        mark = Mark(made.created_at.replace(year=made.created_at.year - 1), mark.last_seq)
    with pytest.raises(SessionChanged):
        store.append_messages("again", [], scratchpad={"x": "y"}, expect=mark)
    assert store.scratchpad_contents("again", names=["x"]) == {}


def test_a_missing_session_is_not_found(store: Store) -> None:
    session = store.create_session()
    mark = Mark.of(store.session_info(session.id))
    with pytest.raises(SessionNotFound):
        store.append_messages(
            session.id, [Message.user("hi")], scratchpad={"x": "y"}, scratchpad_of="nobody"
        )
    with pytest.raises(SessionNotFound):
        store.append_messages(
            session.id, [], scratchpad={"x": "y"}, scratchpad_of="nobody", expect=mark
        )


def test_no_message_stays_when_the_entries_fail(store: Store) -> None:
    """One step: the entries' session is missing, so the messages go too."""
    session = store.create_session()
    mark = Mark.of(store.session_info(session.id))
    with pytest.raises(SessionNotFound):
        store.append_messages(
            session.id,
            [Message.user("hi")],
            scratchpad={"x": "y"},
            scratchpad_of="nobody",
            expect=mark,
        )
    assert _texts(store, session.id) == []
    assert store.session_info(session.id).last_seq == 0


def test_of_writers_on_one_mark_one_wins(store: Store) -> None:
    """Writers that read the session alike race to write on it: one writes, each other
    is told ``SessionChanged``, and the winner's messages have the seqs after the mark."""
    import threading

    session = store.create_session()
    session.append([Message.user("first")])
    mark = Mark.of(store.session_info(session.id))
    results: dict[int, object] = {}
    start = threading.Barrier(4)

    def write(n: int) -> None:
        start.wait()
        try:
            results[n] = store.append_messages(
                session.id,
                [Message.user(f"writer {n} says {i}") for i in range(2)],
                scratchpad={f"w/{n}": str(n)},
                expect=mark,
            )
        except SessionChanged as exc:
            results[n] = exc

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [n for n, r in results.items() if isinstance(r, list)]
    assert len(won) == 1 and len(results) == 4
    stored = results[won[0]]
    assert isinstance(stored, list) and [m.seq for m in stored] == [2, 3]
    texts = dict(_texts(store, session.id))
    assert [texts[2], texts[3]] == [f"writer {won[0]} says {i}" for i in range(2)]
    assert store.scratchpad_contents(session.id, prefixes=["w/"]) == {f"w/{won[0]}": str(won[0])}


def test_a_batch_sent_again_on_its_mark_gets_its_stored_copies(store: Store) -> None:
    """A retry after a lost reply sends the same batch on the same mark: it was stored,
    so the stored copies answer (as for any resent batch), not ``SessionChanged``; a
    different batch on that moved mark is still refused."""
    session = store.create_session()
    mark = Mark.of(store.session_info(session.id))
    batch = [Message.user("one"), Message.assistant("two")]
    first = store.append_messages(session.id, batch, scratchpad={"k": "v"}, expect=mark)
    again = store.append_messages(session.id, batch, scratchpad={"k": "v"}, expect=mark)
    assert (
        [(m.id, m.seq) for m in again]
        == [(m.id, m.seq) for m in first]
        == [
            (batch[0].id, 1),
            (batch[1].id, 2),
        ]
    )
    assert _texts(store, session.id) == [(1, "one"), (2, "two")]
    with pytest.raises(SessionChanged):
        store.append_messages(session.id, [Message.user("other")], expect=mark)
