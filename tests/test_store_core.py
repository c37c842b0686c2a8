"""Rules the store core applies once for every backend (``StoreCore``), where the
backends used to disagree: read bounds, prefix case, delete refusals, resent and
clashing batches, and driver errors becoming the ``ThreadlineError`` tree."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.backends import BACKENDS, cleanup_url, make_url
from threadline import Message, Store, open_store
from threadline.errors import (
    AmbiguousSessionId,
    InvalidMessage,
    SessionLocked,
    SessionNotFound,
    StoreUnavailable,
    ThreadlineError,
)
from threadline.store.core import StoreCore
from threadline.store.locks import LockHolder

_MARKS = {"postgres": [pytest.mark.postgres], "redis": [pytest.mark.redis]}


@pytest.fixture(params=[pytest.param(b, marks=_MARKS.get(b, []), id=b) for b in BACKENDS])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = make_url(request.param, tmp_path)
    s = open_store(url)
    try:
        yield s
    finally:
        s.close()
        cleanup_url(request.param, url)


def _filled(store: Store, n: int = 5) -> str:
    session = store.create_session(agent="a")
    session.append([Message.user(f"m{i}") for i in range(n)])
    return session.id


def test_a_limit_of_zero_or_below_reads_nothing(store: Store) -> None:
    sid = _filled(store)
    assert store.read_messages(sid, limit=-1) == []
    assert store.read_messages(sid, limit=0) == []
    assert store.tail(sid, 0) == []
    assert store.tail(sid, -3) == []
    assert store.tail(sid, 5, before_seq=1) == []
    assert [m.seq for m in store.read_messages(sid, after_seq=-10, limit=2)] == [1, 2]
    assert [m.seq for m in store.tail(sid, 2, before_seq=4)] == [3, 2]


def test_empty_reads_of_a_missing_session_say_so(store: Store) -> None:
    for read in (
        lambda: store.tail("missing", 0),
        lambda: store.tail("missing", 3, before_seq=1),
        lambda: store.read_messages("missing", limit=0),
        lambda: store.read_messages("missing"),
        lambda: store.count_messages("missing"),
    ):
        with pytest.raises(SessionNotFound):
            read()


def test_prefixes_are_case_sensitive(store: Store) -> None:
    upper = store.create_session(agent="a", id="RunAlpha1")
    lower = store.create_session(agent="a", id="runalpha2")
    assert store.resolve_id("runal") == lower.id
    assert store.resolve_id("RunAl") == upper.id
    with pytest.raises(SessionNotFound):
        store.resolve_id("RUNAL")
    store.create_session(agent="a", id="runalpha3")
    with pytest.raises(AmbiguousSessionId):
        store.resolve_id("runal")
    assert store.resolve_id("runalpha2") == lower.id  # an exact id wins over its prefixes


def test_a_live_lock_refuses_the_whole_delete_unless_forced(store: Store) -> None:
    free, held = _filled(store), _filled(store)
    store.acquire_lock(held, LockHolder(pid=1, host="elsewhere"))
    with pytest.raises(SessionLocked):
        store.delete_sessions([free, held, "missing"])
    assert store.session_info(free).message_count == 5  # nothing deleted
    assert store.delete_sessions([free, held, free, "missing"], force=True) == 2
    with pytest.raises(SessionNotFound):
        store.session_info(held)


def test_delete_all_by_agent(store: Store) -> None:
    mine = [store.create_session(agent="mine").id for _ in range(3)]
    other = store.create_session(agent="other").id
    assert store.delete_all(agent="mine") == 3
    assert [i.id for i in store.list_sessions()] == [other]
    assert all(sid not in [i.id for i in store.list_sessions()] for sid in mine)


def test_resent_and_clashing_batches(store: Store) -> None:
    sid = store.create_session(agent="a").id
    batch = [Message.user("one", id="m-1"), Message.user("two", id="m-2")]
    first = store.append_messages(sid, batch)
    assert [m.seq for m in first] == [1, 2]
    assert [m.seq for m in store.append_messages(sid, batch)] == [1, 2]  # a resend
    with pytest.raises(InvalidMessage, match="partly stored"):
        store.append_messages(sid, [batch[0], Message.user("new", id="m-3")])
    with pytest.raises(InvalidMessage, match="already stored"):
        store.append_messages(sid, [Message.user("new", id="m-4"), batch[1]])
    assert store.count_messages(sid) == 2


class _Broken(StoreCore):
    """A backend whose driver fails: the core turns what ``_driver_error`` names into
    ours and lets the rest through."""

    def _driver_error(self, exc: Exception) -> ThreadlineError | None:
        return StoreUnavailable(f"down: {exc}") if isinstance(exc, ConnectionError) else None

    def session_info(self, session_id: str) -> object:  # type: ignore[override]
        with self._translate():
            if session_id == "driver":
                raise ConnectionError("refused")
            if session_id == "ours":
                raise SessionNotFound(session_id)
            raise KeyError(session_id)


def test_driver_errors_become_ours() -> None:
    broken = _Broken()
    with pytest.raises(StoreUnavailable, match="down: refused") as caught:
        broken.session_info("driver")
    assert isinstance(caught.value.__cause__, ConnectionError)
    with pytest.raises(SessionNotFound):
        broken.session_info("ours")
    with pytest.raises(KeyError):
        broken.session_info("other")
