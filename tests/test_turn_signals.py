"""Cancel requests in the session memo (``server/turn_signals.py``) against a model.

Whatever the order of asks, acknowledgements and forgets from several turns, a
server sees a request only for the turn it runs, only until it acknowledged it, and
an application's own memo keys are never touched.
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline import open_store
from threadline.server.turn_signals import (
    acknowledge,
    await_reached,
    forget,
    mark_seen,
    request_cancel,
    requested,
    turn_id,
)
from threadline.store.locks import LockHolder
from threadline.store.protocol import Store

HOLDERS = [LockHolder(pid=100 + n, host="worker-host") for n in range(3)]
OPS = st.lists(
    st.tuples(st.sampled_from(["ask", "ack", "forget"]), st.integers(0, len(HOLDERS) - 1)),
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_a_request_reaches_only_the_turn_it_names(ops: list[tuple[str, int]]) -> None:
    store = open_store("memory://")
    session = store.create_session()
    session.set_memo({"app": "kept"})
    state: tuple[int, bool] | None = None  # (which turn, reached)
    for op, n in ops:
        turn = turn_id(HOLDERS[n])
        if op == "ask":
            assert request_cancel(store, session.id, HOLDERS[n]) == turn
            state = (n, False)
        elif op == "ack":
            acknowledge(store, session.id, turn)
            if state == (n, False):
                state = (n, True)
        else:
            forget(store, session.id, turn)
            if state == (n, False):
                state = None
        for m, holder in enumerate(HOLDERS):
            seen = requested(store, {session.id: turn_id(holder)})
            assert seen == ([session.id] if state == (m, False) else []), (ops, m)
        assert store.get_memo(session.id)["app"] == "kept"


def test_the_asker_hears_the_mark_and_a_turn_that_ended_without_it() -> None:
    store = open_store("memory://")
    sid = store.create_session().id
    held = store.acquire_lock(sid, HOLDERS[0])
    turn = request_cancel(store, sid, held)
    acknowledge(store, sid, turn)
    assert await_reached(store, sid, turn, timeout=0) is True
    assert "threadline.cancel" not in store.get_memo(sid)  # the asker took it

    turn = request_cancel(store, sid, held)
    store.release_lock(sid, HOLDERS[0])  # the turn ended before it looked
    forget(store, sid, turn)
    assert await_reached(store, sid, turn, timeout=5) is False
    assert store.get_memo(sid) == {}


class EndsTheTurnAfterAMemoRead:
    """A store on which the running server marks the request reached and its turn
    lets go of the lock right after the asker's first memo read."""

    def __init__(self, store: Store, holder: LockHolder) -> None:
        self._store = store
        self._holder = holder
        self._pending = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def get_memo(self, session_id: str) -> dict[str, Any]:
        memo = self._store.get_memo(session_id)
        if self._pending:
            self._pending = False
            acknowledge(self._store, session_id, turn_id(self._holder))
            self._store.release_lock(session_id, self._holder)
        return memo


def test_a_turn_cancelled_and_ended_between_the_askers_reads_is_heard_cancelled() -> None:
    """The bench (``bench/server_scale.py``) saw a cancel answered ``false`` whose turn
    had stopped ``cancelled``: the asker read the memo (not yet marked), then the lock
    (already gone), and took the turn for one that had ended on its own."""
    store = open_store("memory://")
    sid = store.create_session().id
    held = store.acquire_lock(sid, HOLDERS[0])
    turn = request_cancel(store, sid, held)
    racing = cast(Store, EndsTheTurnAfterAMemoRead(store, held))
    assert await_reached(racing, sid, turn, timeout=5) is True
    assert store.lock_holder(sid) is None and store.get_memo(sid) == {}


def test_a_turn_told_to_stop_that_has_not_ended_is_answered_stopping() -> None:
    """A model that does not close its request when cancelled keeps the turn running
    for a while: once the server running it has seen the request (the turn was told),
    the asker answers True after ``settle``; nobody seeing it is False."""
    store = open_store("memory://")
    sid = store.create_session().id
    held = store.acquire_lock(sid, HOLDERS[0])
    turn = request_cancel(store, sid, held)
    assert await_reached(store, sid, turn, timeout=0.3, settle=0.1) is False  # not seen
    turn = request_cancel(store, sid, held)
    mark_seen(store, sid, turn)
    assert requested(store, {sid: turn}) == []  # told once
    assert await_reached(store, sid, turn, timeout=0.3, settle=0.1) is True
    assert store.get_memo(sid) == {}  # the asker took it: the turn's end marks nothing
    acknowledge(store, sid, turn)
    assert store.get_memo(sid) == {}
