"""``FollowedView`` gives what a fresh read of the view gives, whatever other handles
(another process, in effect) append, retract or clear between its reads, and reads
only what is new (issue 35)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance.backends import clean_store
from tests.store_calls import sizes_returned
from threadline import Message, Store
from threadline.store.followed import FollowedView
from threadline.store.protocol import Session

OPS = st.lists(
    st.sampled_from(["mine", "theirs", "pop", "clear", "recreate", "read"]),
    min_size=1,
    max_size=14,
)


@pytest.fixture(params=["memory", "sqlite", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


def text_of(m: Message) -> str:
    return f"{m.role}:{m.text}"


def fresh(store: Store, sid: str) -> list[tuple[int, str]]:
    return [(m.seq or 0, text_of(m)) for m in store.get_session(sid).messages()]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_the_followed_view_is_the_fresh_view(store: Store, ops: list[str]) -> None:
    store.delete_all(force=True)
    mine = store.create_session(id="followed")
    view: FollowedView[str] = FollowedView(text_of)
    for n, op in enumerate(ops, 1):
        other = store.get_session("followed")  # another handle: what another process does
        if op == "mine":
            view.appended(mine.append([Message.user(f"mine {n}"), Message.assistant(f"a {n}")]))
        elif op == "theirs":
            other.append(Message.user(f"theirs {n}"))
        elif op == "pop" and other.tail(1):
            other.retract([other.tail(1)[0].seq or 0])
        elif op == "clear":
            other.retract_all()
        elif op == "recreate":
            other.delete(force=True)
            store.create_session(id="followed").append(Message.user(f"again {n}"))
            mine = store.get_session("followed")
        assert [(s, t) for s, t in view.current(mine)] == fresh(store, "followed")


def test_a_followed_read_reads_only_what_is_new(store: Store) -> None:
    session = store.create_session(id="long")
    session.append([Message.user(f"m {i}") for i in range(200)])
    view: FollowedView[str] = FollowedView(text_of)
    assert len(view.current(session)) == 200
    reads = sizes_returned(store, "read_messages")
    assert len(view.current(session)) == 200
    assert reads == []  # nothing new: the counters only
    store.get_session("long").append([Message.user("new 1"), Message.user("new 2")])
    assert [t for _, t in view.current(session)][-2:] == ["user:new 1", "user:new 2"]
    assert sum(reads) == 2
    view.appended(session.append(Message.user("mine")))
    assert view.current(session)[-1][1] == "user:mine"
    assert sum(reads) == 2  # what it appended itself is held without a read


def test_a_retraction_elsewhere_is_seen(store: Store) -> None:
    session = store.create_session(id="r")
    session.append([Message.user(f"m {i}") for i in range(5)])
    view: FollowedView[str] = FollowedView(text_of)
    view.current(session)
    other = Session(store, store.session_info("r"))
    other.retract([2, 4])
    assert [s for s, _ in view.current(session)] == [1, 3, 5]


def test_a_clear_between_the_pages_of_a_first_read_is_seen_next(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a first read takes pages of 1,000, each with the retraction index as it is
    then; another handle clearing the session between two pages must not leave the view
    holding what the index now hides (it kept the 1,000 cleared items for good)."""
    session = store.create_session(id="p")
    session.append([Message.user(f"m {i}") for i in range(1005)])
    other = Session(store, store.session_info("p"))
    page = Session.read_messages

    def cleared_after_the_first_page(self: Session, **kw: object) -> list[Message]:
        got = page(self, **kw)  # type: ignore[arg-type]
        if len(got) == 1000:
            other.retract_all()
        return got

    view: FollowedView[str] = FollowedView(text_of)
    monkeypatch.setattr(Session, "read_messages", cleared_after_the_first_page)
    view.current(session)
    monkeypatch.undo()
    assert view.current(session) == fresh(store, "p") == []
