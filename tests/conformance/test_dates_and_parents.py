"""A session's own dates and the session it is listed under, on every backend (issue 22,
points 3 and 4).

Dates: ``create_session(created_at=..., updated_at=...)`` keeps a source's dates (an
imported transcript, a copied session); a batch dated by its source (``Batch.at``)
moves ``updated_at`` there and never back; a plain append moves it to now as ever; a
session made without dates is dated now. Parents: ``create_session(parent=...)``, a
fork's start, or one later ``update_session(parent=...)`` list a session under another;
``list_sessions(top_level=True)`` and ``list_sessions(parent=...)`` filter on it,
``count_children`` counts it, search hits name it, and deleting the parent makes its
children top-level. The rules live once in ``store/session_info.py``; these tests hold every
backend to them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Message, open_store
from threadline.errors import InvalidSessionId, SessionNotFound, UsageError
from threadline.stamps import utcnow
from threadline.store.checks import MAX_PAGE_SIZE
from threadline.store.encoding import dated, later, prepare_messages
from threadline.store.fork import fork_session
from threadline.store.protocol import Store

FEB = datetime(2025, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)
MAY = datetime(2025, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def chat(n: int, at: datetime, tag: str = "m") -> list[Message]:
    """``n`` user messages stamped from ``at`` on, a minute apart (a transcript's times)."""
    return [
        Message(role="user", content=f"{tag} {i}", created_at=at + timedelta(minutes=i))
        for i in range(n)
    ]


def reopened(store: Store, url: str) -> Store:
    """The same store read through a new handle (the memory store is its one handle)."""
    return store if url.startswith("memory:") else open_store(url)


# -- dates ---------------------------------------------------------------------------------


def test_a_session_keeps_the_dates_it_is_created_with(store: Store, store_url: str) -> None:
    s = store.create_session(created_at=FEB, updated_at=MAY, title="imported")
    assert (s.info.created_at, s.info.updated_at) == (FEB, MAY)
    other = reopened(store, store_url)
    try:
        info = other.session_info(s.id)
        assert (info.created_at, info.updated_at) == (FEB, MAY)
        assert other.list_sessions().items[0].updated_at == MAY
    finally:
        if other is not store:
            other.close()


def test_one_date_stands_for_the_other(store: Store) -> None:
    only_created = store.create_session(created_at=FEB).info
    assert only_created.updated_at == only_created.created_at == FEB
    only_updated = store.create_session(updated_at=MAY).info
    assert only_updated.created_at == only_updated.updated_at == MAY
    offset = timezone(timedelta(hours=-5))
    local = store.create_session(created_at=FEB.astimezone(offset)).info
    assert local.created_at == FEB and local.created_at.utcoffset() == timedelta(0)


def test_a_session_made_without_dates_is_dated_now(store: Store) -> None:
    before = utcnow()
    info = store.create_session().info
    assert before <= info.created_at == info.updated_at <= utcnow()


@pytest.mark.parametrize(
    ("created", "updated", "says"),
    [
        (MAY, FEB, "is after updated_at"),
        (datetime(2025, 2, 3), None, "no timezone"),
        ("2025-02-03T04:05:06Z", None, "must be a datetime"),
        (datetime(1969, 12, 31, tzinfo=UTC), None, "before 1970"),
    ],
)
def test_bad_dates_are_refused_and_create_nothing(
    store: Store, created: object, updated: object, says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        store.create_session(id="dated-0001", created_at=created, updated_at=updated)  # type: ignore[arg-type]
    with pytest.raises(SessionNotFound):
        store.session_info("dated-0001")


def test_a_date_ahead_of_the_clock_is_taken_as_now(store: Store) -> None:
    info = store.create_session(created_at=FEB, updated_at=utcnow() + timedelta(days=400)).info
    assert FEB == info.created_at <= info.updated_at <= utcnow()


def test_a_dated_batch_moves_updated_at_to_its_time_and_never_back(store: Store) -> None:
    s = store.create_session(created_at=FEB, updated_at=FEB)
    stored = s.append(prepare_messages(None, chat(3, FEB), at=MAY))  # the source's clock
    assert [m.created_at for m in stored] == [FEB + timedelta(minutes=i) for i in range(3)]
    assert s.info.updated_at == store.session_info(s.id).updated_at == MAY
    store.append_messages(s.id, dated(chat(1, FEB, "late"), FEB + timedelta(days=1)))
    assert store.session_info(s.id).updated_at == MAY  # an older batch: never back
    assert store.session_info(s.id).created_at == FEB


def test_a_plain_append_moves_updated_at_to_now_as_ever(store: Store) -> None:
    s = store.create_session(created_at=FEB, updated_at=MAY)
    before = utcnow()
    s.append(Message.user("continued today"))
    info = store.session_info(s.id)
    assert before <= info.updated_at <= utcnow() and info.created_at == FEB
    assert s.info.updated_at >= before


def test_list_sorts_by_the_sessions_own_dates(store: Store) -> None:
    older = store.create_session(created_at=FEB, title="february")
    newer = store.create_session(created_at=MAY, title="may")
    today = store.create_session(title="today")
    assert [s.id for s in store.list_sessions()] == [today.id, newer.id, older.id]
    older.append(prepare_messages(None, chat(1, FEB), at=MAY + timedelta(days=1)))
    assert [s.id for s in store.list_sessions()] == [today.id, older.id, newer.id]
    newer.append(Message.user("picked up again"))
    assert [s.id for s in store.list_sessions()] == [newer.id, today.id, older.id]


def test_updating_fields_leaves_the_dates_and_a_rename_moves_updated_at(store: Store) -> None:
    s = store.create_session(created_at=FEB, updated_at=MAY)
    info = store.update_session(s.id, title="  from the import ", metadata={"k": 1}, model="m")
    assert (info.title, info.metadata, info.model) == ("from the import", {"k": 1}, "m")
    assert (info.created_at, info.updated_at) == (FEB, MAY)
    assert store.update_session(s.id, title=None).title == "from the import"  # None: kept
    assert store.rename_session(s.id, "by a person").updated_at > MAY


def test_a_fork_keeps_its_parents_dates(store: Store) -> None:
    parent = store.create_session(created_at=FEB)
    parent.append(prepare_messages(None, chat(2, FEB), at=MAY))
    child = fork_session(parent)
    assert (child.info.created_at, child.info.updated_at) == (FEB, MAY)
    assert child.parent_id == parent.id


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 600), st.booleans()), min_size=1, max_size=12
    )
)
def test_updated_at_is_the_latest_batch_time_and_orders_the_list(
    store: Store, steps: list[tuple[int, int, bool]]
) -> None:
    """Property: after any mix of dated and plain appends to a few dated sessions, each
    session's ``updated_at`` is ``later`` folded over its creation and batch times, and
    the list is in that order (newest first, ties by id)."""
    store.delete_all(force=True)
    base = datetime(2024, 1, 1, tzinfo=UTC)
    sessions = [
        store.create_session(id=f"p-{i}", created_at=base + timedelta(days=i)) for i in range(4)
    ]
    expected = {s.id: s.info.updated_at for s in sessions}
    for which, day, plain in steps:
        s = sessions[which]
        if plain:
            before = utcnow()
            s.append(Message.user("now"))
            got = store.session_info(s.id).updated_at
            assert got >= before
            expected[s.id] = got
        else:
            at = base + timedelta(days=day, microseconds=day)
            s.append(prepare_messages(None, chat(1, base), at=at))
            expected[s.id] = later(expected[s.id], at)
        assert store.session_info(s.id).updated_at == expected[s.id]
    order = sorted(expected, key=lambda sid: (-expected[sid].timestamp(), sid))
    assert [i.id for i in store.list_sessions()] == order


# -- parents -------------------------------------------------------------------------------


def test_children_are_listed_under_their_parent_not_at_the_top(
    store: Store, store_url: str
) -> None:
    parent = store.create_session(created_at=FEB, title="parent")
    kids = [
        store.create_session(parent=parent.id, created_at=FEB + timedelta(hours=h), title=f"k{h}")
        for h in (1, 2)
    ]
    loner = store.create_session(created_at=MAY, title="loner")
    assert all(k.parent_id == parent.id for k in kids)
    other = reopened(store, store_url)
    try:
        top = other.list_sessions(top_level=True)
        assert [s.id for s in top] == [loner.id, parent.id] and top.total == 2
        under = other.list_sessions(parent=parent.id)
        assert [s.id for s in under] == [kids[1].id, kids[0].id] and under.total == 2
        assert all(s.parent_id == parent.id for s in under)
        assert other.list_sessions().total == 4  # everything, as before
        assert other.count_children([parent.id, loner.id, kids[0].id, "no-such-id"]) == {
            parent.id: 2,
            loner.id: 0,
            kids[0].id: 0,
            "no-such-id": 0,
        }
        assert other.session_info(kids[0].id).parent_id == parent.id
    finally:
        if other is not store:
            other.close()


def test_top_level_listing_pages_and_filters_by_agent(store: Store) -> None:
    tops = []
    for i in range(5):
        top = store.create_session(agent="alice" if i % 2 else "bob", created_at=FEB + timedelta(i))
        store.create_session(agent="alice", parent=top.id, created_at=MAY + timedelta(i))
        tops.append(top)
    newest_first = [t.id for t in reversed(tops)]
    pages = [store.list_sessions(top_level=True, limit=2, offset=o) for o in (0, 2, 4)]
    assert [s.id for p in pages for s in p] == newest_first
    assert all(p.total == 5 for p in pages)
    alice = store.list_sessions(top_level=True, agent="alice")
    assert [s.id for s in alice] == [t.id for t in reversed(tops) if t.agent == "alice"]
    assert store.list_sessions(agent="alice").total == 7
    bob_kids = store.list_sessions(parent=tops[0].id, agent="bob")
    assert bob_kids.total == 0
    alice_kids = store.list_sessions(parent=tops[0].id, agent="alice")
    assert alice_kids.total == 1


def test_a_fork_is_listed_under_its_parent(store: Store) -> None:
    parent = store.create_session(title="parent")
    parent.append(Message.user("hello"))
    child = fork_session(parent)
    assert child.parent_id == parent.id
    assert [s.id for s in store.list_sessions(top_level=True)] == [parent.id]
    assert [s.id for s in store.list_sessions(parent=parent.id)] == [child.id]


def test_bad_parents_are_refused(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        store.create_session(id="orphan-01", parent="no-such-session")
    with pytest.raises(SessionNotFound):
        store.session_info("orphan-01")
    with pytest.raises(UsageError, match="under itself"):
        store.create_session(id="self-0001", parent="self-0001")
    with pytest.raises(InvalidSessionId):
        store.create_session(parent="../etc")
    with pytest.raises(InvalidSessionId):
        store.list_sessions(parent="a/b")
    with pytest.raises(UsageError):
        store.list_sessions(parent="abcd-1234", top_level=True)
    with pytest.raises(UsageError):
        store.count_children([f"s-{i}" for i in range(MAX_PAGE_SIZE + 1)])
    with pytest.raises(UsageError):
        store.count_children("one-id")  # type: ignore[arg-type]


def test_a_session_is_put_under_a_parent_once(store: Store) -> None:
    a = store.create_session(created_at=FEB, updated_at=MAY)
    b = store.create_session()
    c = store.create_session()
    info = store.update_session(a.id, parent=b.id)
    assert info.parent_id == b.id and info.updated_at == MAY  # linking is no edit
    assert [s.id for s in store.list_sessions(parent=b.id)] == [a.id]
    assert a.id not in {s.id for s in store.list_sessions(top_level=True)}
    assert store.update_session(a.id, parent=b.id).parent_id == b.id  # again: nothing to do
    with pytest.raises(UsageError, match="already listed under"):
        store.update_session(a.id, parent=c.id)
    with pytest.raises(UsageError, match=f"{b.id} cannot be listed under {a.id}"):
        store.update_session(b.id, parent=a.id)  # a loop would hide both
    with pytest.raises(UsageError, match="under itself"):
        store.update_session(c.id, parent=c.id)
    with pytest.raises(SessionNotFound):
        store.update_session(c.id, parent="no-such-session")
    assert store.session_info(c.id).parent_id is None
    assert store.count_children([b.id, c.id]) == {b.id: 1, c.id: 0}


def test_deleting_a_parent_makes_its_children_top_level(store: Store, store_url: str) -> None:
    parent = store.create_session(title="parent")
    kid = store.create_session(parent=parent.id, title="kid")
    grandkid = store.create_session(parent=kid.id, title="grandkid")
    store.delete_session(parent.id)
    other = reopened(store, store_url)
    try:
        assert other.session_info(kid.id).parent_id is None
        assert other.session_info(grandkid.id).parent_id == kid.id
        assert {s.id for s in other.list_sessions(top_level=True)} == {kid.id}
        assert other.count_children([parent.id, kid.id]) == {parent.id: 0, kid.id: 1}
        other.update_session(kid.id, parent=store.create_session().id)  # it may move now
    finally:
        if other is not store:
            other.close()
    store.delete_sessions([kid.id, grandkid.id])
    assert len(store.list_sessions(top_level=True)) == 1


def test_search_hits_name_the_parent_of_their_session(store: Store) -> None:
    parent = store.create_session(title="parent")
    parent.append(Message.user("the parent talks about zebras"))
    kid = store.create_session(parent=parent.id)
    kid.append(Message.user("the subagent talks about zebras too"))
    hits = {h.session_id: h for h in store.search("zebras")}
    assert hits[kid.id].parent_id == parent.id
    assert hits[parent.id].parent_id is None
