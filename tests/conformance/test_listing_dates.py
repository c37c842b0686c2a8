"""``list_sessions(updated_since=..., updated_until=...)`` on every backend (issue 36: the
MCP server's date range deep in 100,000 sessions reads a range of the store's listing
index instead of scanning down to it).

The range is ``updated_since`` included, ``updated_until`` excluded, as search's
``since`` / ``until``; it combines with the other filters and pages like any listing.
The property: every page of a dated listing is the same page of the full listing
filtered by the range.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline.errors import UsageError
from threadline.store.protocol import Store

BASE = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)


def at(minute: int) -> datetime:
    return BASE + timedelta(minutes=minute)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    minutes=st.lists(st.integers(0, 30), min_size=1, max_size=12),
    since=st.none() | st.integers(-1, 31),
    until=st.none() | st.integers(-1, 31),
    agent=st.sampled_from([None, "a", "b"]),
    top_level=st.booleans(),
    limit=st.integers(1, 5),
    offset=st.integers(0, 6),
    data=st.data(),
)
def test_a_dated_listing_is_the_full_listing_filtered(
    store: Store,
    minutes: list[int],
    since: int | None,
    until: int | None,
    agent: str | None,
    top_level: bool,
    limit: int,
    offset: int,
    data: st.DataObject,
) -> None:
    store.delete_all(force=True)
    made = []
    for i, minute in enumerate(minutes):
        parent = made[data.draw(st.integers(0, len(made) - 1))] if made and i % 3 == 2 else None
        made.append(
            store.create_session(
                agent="ab"[i % 2], updated_at=at(minute), created_at=at(-1), parent=parent
            ).id
        )
    start = None if since is None else at(since)
    end = None if until is None else at(until)
    everything = store.list_sessions(agent=agent, top_level=top_level, limit=200).items
    wanted = [
        i
        for i in everything
        if (start is None or i.updated_at >= start) and (end is None or i.updated_at < end)
    ]
    page = store.list_sessions(
        agent=agent,
        top_level=top_level,
        updated_since=start,
        updated_until=end,
        limit=limit,
        offset=offset,
    )
    assert [i.id for i in page.items] == [i.id for i in wanted[offset : offset + limit]]
    assert page.total == len(wanted)


def test_the_range_includes_its_start_and_excludes_its_end(store: Store) -> None:
    ids = [store.create_session(updated_at=at(m)).id for m in range(5)]
    page = store.list_sessions(updated_since=at(1), updated_until=at(3))
    assert [i.id for i in page.items] == [ids[2], ids[1]]
    assert page.total == 2
    # the same instants written in another zone
    plus2 = timezone(timedelta(hours=2))
    shifted = store.list_sessions(
        updated_since=at(1).astimezone(plus2), updated_until=at(3).astimezone(plus2)
    )
    assert [i.id for i in shifted.items] == [ids[2], ids[1]]
    assert store.list_sessions(updated_since=at(4)).total == 1
    assert store.list_sessions(updated_until=at(0)).total == 0
    assert store.list_sessions(updated_since=at(3), updated_until=at(3)).items == []


def test_the_range_applies_to_a_parents_children(store: Store) -> None:
    root = store.create_session(agent="a", updated_at=at(0))
    kids = [store.create_session(agent="a", parent=root.id, updated_at=at(m)).id for m in (1, 2, 3)]
    store.create_session(agent="b", parent=root.id, updated_at=at(2))
    page = store.list_sessions(parent=root.id, agent="a", updated_since=at(2))
    assert [i.id for i in page.items] == [kids[2], kids[1]]
    today = store.create_session(agent="a")  # dated now, after the range
    assert today.id not in [i.id for i in store.list_sessions(updated_until=at(5)).items]
    assert [i.id for i in store.list_sessions(updated_since=at(5)).items] == [today.id]


@pytest.mark.parametrize(
    "bad",
    [datetime(2026, 3, 1), "2026-03-01", 1_700_000_000],  # naive, text, a number
)
def test_a_bad_bound_is_a_clear_error(store: Store, bad: object) -> None:
    store.create_session(updated_at=at(0))
    for key in ("updated_since", "updated_until"):
        with pytest.raises(UsageError, match=f"{key} must be a timezone-aware datetime"):
            store.list_sessions(**{key: bad})  # type: ignore[arg-type]
    assert store.list_sessions().total == 1
