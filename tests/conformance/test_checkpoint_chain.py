"""Checkpoints only move forward, on every backend (issue 9, item 3).

Two compactions that built on the same checkpoint must not both write a successor,
and a checkpoint must never cover less than the one before it. Each backend supplies
two compare-and-set steps for that (``add_checkpoint(..., expect_previous=...)`` and
``replace_memo``, under the compaction mark); these tests race them through separate
handles on one session (a second store opened on the same URL, or for the in-process
backend a second object in front of the same store) and force the interleaving that
used to move a session's checkpoints backwards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any, cast

import pytest

from tests.conformance.backends import IN_PROCESS
from threadline import (
    CheckpointConflict,
    Compactor,
    ContextPolicy,
    Message,
    Session,
    build_context,
    open_store,
)
from threadline.compaction.compactor import current_mark
from threadline.compaction.snapshot import Snapshot, SummaryResult
from threadline.errors import SessionNotFound, UsageError
from threadline.store.checkpoints import Checkpoint
from threadline.store.protocol import Store

WAIT_SECONDS = 60.0
"""How long a step waits for the other side of a forced interleaving before failing."""
RACERS = 6
ROUNDS = 5
MEMO_INCREMENTS = 15


# -- helpers ----------------------------------------------------------------------------


class Handle:
    """Another object in front of ``store``: a second handle on the same data. The
    compactor's in-process guard is keyed by store object, so with this it no longer
    stands in for the store's own compare-and-set. ``before_write`` runs before each
    ``add_checkpoint`` reaches the store."""

    def __init__(self, store: Store, before_write: Callable[[], None] | None = None) -> None:
        self._store = store
        self._before_write = before_write

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def add_checkpoint(self, session_id: str, **kwargs: Any) -> Checkpoint:
        if self._before_write is not None:
            self._before_write()
        return self._store.add_checkpoint(session_id, **kwargs)


@pytest.fixture
def second_store(backend: str, store: Store, store_url: str) -> Iterator[Store]:
    """A second store on the same data: its own connection or files where it can."""
    if backend in IN_PROCESS:
        yield store
        return
    other = open_store(store_url)
    try:
        yield other
    finally:
        other.close()


def handle(store: Store, session: Session, **kwargs: Any) -> Session:
    return Session(cast(Store, Handle(store, **kwargs)), store.session_info(session.id))


class Summarizer:
    """Says what it covered; ``pause`` runs first, to hold a compaction mid-way."""

    name = "conformance"

    def __init__(self, pause: Callable[[], None] | None = None) -> None:
        self.pause = pause

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        if self.pause is not None:
            self.pause()
        snap = Snapshot.parse(previous) if previous else Snapshot()
        snap.add("current_state", f"summarized {messages[0].seq}-{messages[-1].seq}", score=1.0)
        return SummaryResult(text=snap.render(max_words), snapshot=snap, summarizer=self.name)


def turns(count: int, *, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + count):
        out += [Message.user(f"question {i}"), Message.assistant(f"answer {i}")]
    return out


POLICY = ContextPolicy(min_recent_messages=2, preserve_user_turns=1, preserve_fill=False)
"""A small kept tail, so these short sessions always have something to compact."""


def assert_one_forward_chain(checkpoints: list[Checkpoint]) -> None:
    """Each checkpoint follows the one before it, and covers more."""
    covers = [c.covers_up_to for c in checkpoints]
    assert covers == sorted(set(covers)), f"covers_up_to goes backwards or repeats: {covers}"
    previous = [c.metadata.get("previous_checkpoint") for c in checkpoints]
    assert previous == [None, *(c.id for c in checkpoints[:-1])], (
        f"not one successor per checkpoint: ids {[c.id for c in checkpoints]}, built on {previous}"
    )


# -- the store's compare-and-set --------------------------------------------------------


def test_add_checkpoint_on_an_expected_predecessor(store: Store) -> None:
    session = store.create_session()
    session.append(turns(5))
    first = session.add_checkpoint(covers_up_to=4, summary="first", expect_previous=None)
    with pytest.raises(CheckpointConflict, match=f"checkpoint {first.id} appeared") as late:
        session.add_checkpoint(covers_up_to=6, summary="also first", expect_previous=None)
    assert (late.value.expected, late.value.latest) == (None, first.id)
    for covers in (4, 3):  # on the right predecessor, but not covering more than it
        with pytest.raises(CheckpointConflict, match="cannot follow"):
            session.add_checkpoint(covers_up_to=covers, summary="back", expect_previous=first.id)
    with pytest.raises(UsageError):
        session.add_checkpoint(covers_up_to=11, summary="past the end", expect_previous=first.id)
    second = session.add_checkpoint(covers_up_to=8, summary="second", expect_previous=first.id)
    with pytest.raises(CheckpointConflict):
        session.add_checkpoint(covers_up_to=10, summary="stale", expect_previous=first.id)
    assert [c.id for c in session.checkpoints()] == [first.id, second.id]
    anyway = session.add_checkpoint(covers_up_to=2, summary="an import may")  # ANY_PREVIOUS
    assert session.latest_checkpoint() == anyway
    with pytest.raises(SessionNotFound):
        store.add_checkpoint("no-such-session", covers_up_to=0, summary="x", expect_previous=None)


def test_replace_memo_is_a_compare_and_set(store: Store) -> None:
    session = store.create_session()
    session.set_memo({"a": 1, "nested": {"x": [1, 2]}})
    assert not store.replace_memo(session.id, {"a": 0}, {"a": 2})
    assert session.get_memo() == {"a": 1, "nested": {"x": [1, 2]}}
    assert store.replace_memo(session.id, {"nested": {"x": [1, 2]}, "a": 1}, {"a": 2})
    assert session.get_memo() == {"a": 2}
    assert not store.replace_memo(session.id, {"a": 1}, {"a": 2})  # no ABA: a plain compare
    assert session.update_memo(lambda m: {**m, "b": 3}) == {"a": 2, "b": 3}
    assert session.update_memo(lambda m: None) == {"a": 2, "b": 3}  # None: leave it
    with pytest.raises(SessionNotFound):
        store.replace_memo("no-such-session", {}, {"a": 1})


def race_once(stores: list[Store], session_id: str, tag: str) -> tuple[list[Any], list[Any]]:
    """Every store adds a checkpoint on the same latest one at once: (won, lost)."""
    latest = stores[0].latest_checkpoint(session_id)
    base = latest.covers_up_to if latest else 0
    previous = latest.id if latest else None
    barrier = threading.Barrier(len(stores))
    won: list[Checkpoint] = []
    lost: list[BaseException] = []

    def write(k: int) -> None:
        barrier.wait()
        try:
            won.append(
                stores[k].add_checkpoint(
                    session_id,
                    covers_up_to=base + 1 + (k * 7) % len(stores),
                    summary=f"{tag} writer {k}",
                    metadata={"previous_checkpoint": previous},
                    expect_previous=previous,
                )
            )
        except BaseException as exc:
            lost.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_SECONDS)
    return won, lost


def test_racing_checkpoint_writers_leave_one_successor(
    store: Store, backend: str, store_url: str
) -> None:
    """Writers on handles of their own all build on the same latest checkpoint, each
    covering a different amount: exactly one of them wins each round."""
    session = store.create_session()
    session.append(turns(ROUNDS * RACERS))
    stores = [store if backend in IN_PROCESS else open_store(store_url) for _ in range(RACERS)]
    try:
        for r in range(ROUNDS):
            won, lost = race_once(stores, session.id, f"round {r}")
            assert len(won) == 1, (won, lost)
            assert len(lost) == RACERS - 1
            assert all(isinstance(e, CheckpointConflict) for e in lost), lost
    finally:
        for other in stores:
            if other is not store:
                other.close()
    checkpoints = session.checkpoints()
    assert len(checkpoints) == ROUNDS
    assert_one_forward_chain(checkpoints)


def test_racing_memo_updates_lose_nothing(store: Store, backend: str, store_url: str) -> None:
    """``update_memo`` from handles of their own: every increment survives."""
    session = store.create_session()
    session.set_memo({"kept": "as it was"})
    stores = [store if backend in IN_PROCESS else open_store(store_url) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)
    errors: list[BaseException] = []

    def bump(memo: dict[str, Any]) -> dict[str, Any]:
        memo["n"] = memo.get("n", 0) + 1
        return memo

    def run(k: int) -> None:
        try:
            mine = Session(stores[k], stores[k].session_info(session.id))
            barrier.wait()
            for _ in range(MEMO_INCREMENTS):
                mine.update_memo(bump)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(RACERS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT_SECONDS)
    finally:
        for other in stores:
            if other is not store:
                other.close()
    assert errors == []
    assert session.get_memo() == {"kept": "as it was", "n": RACERS * MEMO_INCREMENTS}


# -- two compactions interleaved ----------------------------------------------------------


@pytest.mark.parametrize("where", ["summarizer", "write"])
def test_interleaved_compactions_write_one_successor_and_never_go_back(
    store: Store, second_store: Store, where: str
) -> None:
    """Both compactions plan on the same checkpoint. The second one (its mark's lease
    already over, so the first may take it over) is held, in its summarizer or just
    before its checkpoint reaches the store, until the first, which covers more, has
    written. Its checkpoint must then be refused: writing it would leave two successors
    of one checkpoint, the newest covering less than the one before."""
    session = store.create_session(model="gpt-4o")
    session.append(turns(10))
    base = Compactor(Summarizer(), policy=POLICY).compact(session, force=True)
    assert base.checkpoint is not None
    session.append(turns(5, start=10))

    held, first_written = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        assert first_written.wait(WAIT_SECONDS), "the first compaction never wrote"

    second = Compactor(
        Summarizer(pause=hold if where == "summarizer" else None),
        policy=POLICY,
        lease=timedelta(0),
    )
    second_handle = handle(second_store, session, before_write=hold if where == "write" else None)
    outcome: dict[str, Any] = {}

    def run_second() -> None:
        try:
            outcome["result"] = second.compact(second_handle, force=True)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run_second)
    thread.start()
    try:
        assert held.wait(WAIT_SECONDS), f"the second compaction never reached its {where}"
        session.append(turns(5, start=15))  # so the first compaction covers more
        first = Compactor(Summarizer(), policy=POLICY).compact(session.refresh(), force=True)
    finally:
        first_written.set()
        thread.join(WAIT_SECONDS)
    assert first.checkpoint is not None
    assert first.previous_checkpoint_id == base.checkpoint.id
    checkpoints = session.checkpoints()
    assert_one_forward_chain(checkpoints)
    assert [c.id for c in checkpoints] == [base.checkpoint.id, first.checkpoint.id]
    assert isinstance(outcome.get("error"), CheckpointConflict), outcome
    assert current_mark(session) is None  # the first cleared its mark, the second had none


def test_a_compaction_that_lost_the_race_reports_in_progress(
    store: Store, second_store: Store
) -> None:
    """Through ``compact_if_needed`` (which never raises) the refused checkpoint is an
    ``in_progress`` result, like a live mark, and the next compaction builds on the
    winner's checkpoint."""
    session = store.create_session(model="gpt-4o")
    session.append(turns(10))
    policy = POLICY.model_copy(update={"max_messages_before_summary": 10})
    winner: dict[str, Any] = {}

    def first_writes_meanwhile() -> None:
        winner["result"] = Compactor(Summarizer(), policy=policy).compact(session, force=True)

    loser = Compactor(Summarizer(), policy=policy, lease=timedelta(0))
    result = loser.compact_if_needed(
        handle(second_store, session, before_write=first_writes_meanwhile)
    )
    assert result.status == "in_progress" and result.checkpoint is None
    assert "appeared" in (result.error or "")
    assert winner["result"].compacted
    session.append(turns(5, start=10))
    after = Compactor(Summarizer(), policy=policy).compact(session.refresh(), force=True)
    assert after.previous_checkpoint_id == winner["result"].checkpoint.id
    assert_one_forward_chain(session.checkpoints())


def test_compact_to_fit_builds_on_the_checkpoint_that_won(
    store: Store, second_store: Store
) -> None:
    """A window about to drop history compacts first; when another compaction wins the
    race, the window is built again on the winner's checkpoint instead of being sent
    with history left out."""
    policy = ContextPolicy(
        min_recent_messages=2, preserve_user_turns=1, context_limit=4_000, response_reserve=500
    )
    session = store.create_session(model="gpt-4o")
    for i in range(20):
        session.append(
            [Message.user(f"question {i} " + "word " * 300), Message.assistant(f"answer {i}")]
        )

    def winner_writes_meanwhile() -> None:
        assert Compactor(Summarizer(), policy=policy).compact(session, force=True).compacted

    loser_session = handle(second_store, session, before_write=winner_writes_meanwhile)
    loser = Compactor(Summarizer(), policy=policy, lease=timedelta(0))
    window, result = loser.compact_to_fit(
        loser_session, lambda: build_context(loser_session, policy=policy)
    )
    assert result is not None and result.status == "in_progress"
    assert window.report.dropped_messages == 0, window.report.notes
    assert any("meanwhile" in note for note in window.report.notes)
    assert_one_forward_chain(session.checkpoints())
