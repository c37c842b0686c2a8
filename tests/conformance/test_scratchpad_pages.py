"""Scratchpad pages from the end of the name index, and many entries in one write, on
every backend (issue 35: a LangGraph thread's latest checkpoint and ``list(limit=N)``
read a page, not the thread; ``put_writes`` is one write).

``scratchpad_page`` is ``scratchpad_list`` reversed, names below ``before``, cut at
``limit``: the SQL backends read just that range of their index, the others slice a
scan, and all of them give the same entries. ``scratchpad_write_many`` stores what
one ``scratchpad_write`` each would, and with ``keep_existing`` leaves stored
entries as they were.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline.errors import SessionNotFound, UsageError
from threadline.store.protocol import Store

NAMES = st.text(alphabet="ab~=é/-\U0001f600", min_size=1, max_size=6)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=st.sets(NAMES, max_size=12),
    prefix=st.sampled_from(["", "a", "a/", "~", "é", "b="]),
    limit=st.integers(1, 14),
    before=st.none() | NAMES,
)
def test_a_page_is_the_listing_reversed_below_before_and_cut(
    store: Store, names: set[str], prefix: str, limit: int, before: str | None
) -> None:
    session = store.create_session()
    for name in names:
        store.scratchpad_write(session.id, name, f"content of {name}")
    listed = store.scratchpad_list(session.id, prefix=prefix)
    expected = [e for e in reversed(listed) if before is None or e.name < before][:limit]
    page = store.scratchpad_page(session.id, prefix=prefix, limit=limit, before=before)
    assert [(e.name, e.content) for e in page] == [(e.name, e.content) for e in expected]
    pairs = store.scratchpad_page_contents(session.id, prefix=prefix, limit=limit, before=before)
    assert pairs == [(e.name, e.content) for e in expected]


def test_paging_down_reads_every_entry_once(store: Store) -> None:
    session = store.create_session()
    names = [f"c/{i:04d}" for i in range(23)]
    store.scratchpad_write_many(session.id, {n: n for n in names})
    store.scratchpad_write(session.id, "d/after", "not in the prefix")
    seen: list[str] = []
    below = None
    while page := store.scratchpad_page(session.id, prefix="c/", limit=5, before=below):
        seen += [e.name for e in page]
        below = page[-1].name
    assert seen == names[::-1]


def test_write_many_keeps_or_replaces_as_asked(store: Store) -> None:
    session = store.create_session()
    store.scratchpad_write(session.id, "w/1", "first")
    store.scratchpad_write_many(session.id, {"w/1": "second", "w/2": "new"}, keep_existing=True)
    assert {e.name: e.content for e in store.scratchpad_list(session.id)} == {
        "w/1": "first",
        "w/2": "new",
    }
    store.scratchpad_write_many(session.id, {"w/1": "third", "w/2": "newer"})
    assert {e.name: e.content for e in store.scratchpad_list(session.id)} == {
        "w/1": "third",
        "w/2": "newer",
    }


def test_bad_input_and_missing_sessions_are_refused(store: Store) -> None:
    session = store.create_session()
    assert store.scratchpad_page(session.id, limit=0) == []
    with pytest.raises(UsageError):
        store.scratchpad_page(session.id, limit="3")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        store.scratchpad_write_many(session.id, {"ok": 3})  # type: ignore[dict-item]
    with pytest.raises(UsageError):
        store.scratchpad_write_many(session.id, {"": "empty name"})
    assert store.scratchpad_list(session.id) == []  # nothing half-written
    with pytest.raises(SessionNotFound):
        store.scratchpad_page("no-such-session", limit=3)
    with pytest.raises(SessionNotFound):
        store.scratchpad_write_many("no-such-session", {"a": "b"})
    with pytest.raises(SessionNotFound):
        store.scratchpad_write_many("no-such-session", {})


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=st.sets(NAMES, max_size=12),
    wanted=st.lists(NAMES, max_size=5),
    prefixes=st.lists(st.sampled_from(["a", "a/", "~", "é", "b=", "\U0001f600"]), max_size=3),
)
def test_contents_are_the_named_and_prefixed_entries_of_the_listing(
    store: Store, names: set[str], wanted: list[str], prefixes: list[str]
) -> None:
    session = store.create_session()
    store.scratchpad_write_many(session.id, {n: f"content of {n}" for n in names})
    expected = {
        e.name: e.content
        for e in store.scratchpad_list(session.id)
        if e.name in wanted or any(e.name.startswith(p) for p in prefixes)
    }
    got = store.scratchpad_contents(session.id, names=wanted, prefixes=prefixes)
    assert got == expected
    assert list(got) == sorted(got)


def test_contents_refuse_bad_input_and_missing_sessions(store: Store) -> None:
    session = store.create_session()
    store.scratchpad_write(session.id, "a", "x")
    assert store.scratchpad_contents(session.id) == {}
    assert store.scratchpad_contents(session.id, names=["b"]) == {}
    with pytest.raises(UsageError):
        store.scratchpad_contents(session.id, names="a")  # text, not a list of names
    with pytest.raises(UsageError):
        store.scratchpad_contents(session.id, names=[""])
    with pytest.raises(UsageError):
        store.scratchpad_contents(session.id, prefixes=["x" * 300])
    for names in ([], ["a"]):
        with pytest.raises(SessionNotFound):
            store.scratchpad_contents("no-such-session", names=names)


def test_pages_of_contents_refuse_what_pages_refuse(store: Store) -> None:
    session = store.create_session()
    assert store.scratchpad_page_contents(session.id, limit=3) == []
    assert store.scratchpad_page_contents(session.id, limit=0) == []
    with pytest.raises(UsageError):
        store.scratchpad_page_contents(session.id, limit="3")  # type: ignore[arg-type]
    for limit in (0, 3):
        with pytest.raises(SessionNotFound):
            store.scratchpad_page_contents("no-such-session", limit=limit)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pages=st.sets(NAMES, max_size=8),
    filed=st.sets(st.tuples(NAMES, NAMES), max_size=12),
    limit=st.integers(1, 10),
    before=st.none() | NAMES.map(lambda n: "c/" + n),
)
def test_a_page_beside_is_the_page_and_what_is_filed_under_its_names(
    store: Store,
    pages: set[str],
    filed: set[tuple[str, str]],
    limit: int,
    before: str | None,
) -> None:
    """Beside each page entry ``c/<rest>``: the entries ``w/<rest>/...``, and no other
    (not ``w/<rest>`` itself, nor ``w/<rest>x/...``, nor those of entries off the page)."""
    session = store.create_session()
    entries = {f"c/{n}": f"page {n}" for n in pages}
    entries |= {f"w/{rest}/{tail}": f"filed {rest} {tail}" for rest, tail in filed}
    entries |= {f"w/{rest}": "no child" for rest, _ in filed}
    if entries:
        store.scratchpad_write_many(session.id, entries)
    page, beside = store.scratchpad_page_beside(
        session.id, prefix="c/", limit=limit, before=before, beside="w/"
    )
    assert page == store.scratchpad_page_contents(
        session.id, prefix="c/", limit=limit, before=before
    )
    starts = [f"w/{name[2:]}/" for name, _ in page]
    expected = store.scratchpad_contents(session.id, prefixes=starts) if starts else {}
    assert beside == expected
    assert all(any(name.startswith(s) for s in starts) for name in beside)


def test_a_page_beside_refuses_what_pages_refuse(store: Store) -> None:
    session = store.create_session()
    assert store.scratchpad_page_beside(session.id, prefix="c/", limit=3, beside="w/") == ([], {})
    assert store.scratchpad_page_beside(session.id, limit=0, beside="w/") == ([], {})
    with pytest.raises(UsageError):
        store.scratchpad_page_beside(session.id, limit=3, beside="x" * 300)
    for limit in (0, 3):
        with pytest.raises(SessionNotFound):
            store.scratchpad_page_beside("no-such-session", limit=limit, beside="w/")


def test_a_page_beside_reads_the_named_entries_with_it(store: Store) -> None:
    """``names`` come back with the page (those stored), whether or not the page holds
    anything, and a missing session is still refused."""
    session = store.create_session()
    store.scratchpad_write_many(session.id, {"c/1": "one", "w/1/a": "w", "b/x": "x", "b/y": "y"})
    page, beside = store.scratchpad_page_beside(
        session.id, prefix="c/", limit=1, beside="w/", names=["b/x", "b/none", "b/x"]
    )
    assert page == [("c/1", "one")]
    assert beside == {"w/1/a": "w", "b/x": "x"}
    empty, named = store.scratchpad_page_beside(
        session.id, prefix="d/", limit=1, beside="w/", names=["b/y"]
    )
    assert (empty, named) == ([], {"b/y": "y"})
    many = [f"b/{i}" for i in range(450)] + ["b/y"]  # past one query's ranges
    assert store.scratchpad_page_beside(session.id, prefix="c/", limit=1, beside="w/", names=many)[
        1
    ] == {"w/1/a": "w", "b/y": "y"}
    with pytest.raises(UsageError):
        store.scratchpad_page_beside(session.id, limit=1, beside="w/", names="b/x")
    with pytest.raises(SessionNotFound):
        store.scratchpad_page_beside("no-such-session", limit=1, beside="w/", names=["b/x"])
