"""Cancel requests in the session memo (``server/turn_signals.py``) against a model.

Whatever the order of asks, acknowledgements and forgets from several turns, a
server sees a request only for the turn it runs, only until it acknowledged it, and
an application's own memo keys are never touched.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline import open_store
from threadline.server.turn_signals import (
    acknowledge,
    await_reached,
    forget,
    request_cancel,
    requested,
    turn_id,
)
from threadline.store.locks import LockHolder

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
