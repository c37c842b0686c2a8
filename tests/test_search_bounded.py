"""Search is bounded on every backend (issue 33).

Scanning backends (Redis, JSONL, memory) read sessions a chunk at a time and keep only
the page they return plus a count, so memory stays flat however many messages match;
they stop at a time budget and say the total is then a lower bound. SQLite's search is
interrupted at its ``search_timeout`` as PostgreSQL's is. The server runs a few
searches at once per process and answers the rest 429.
"""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conformance.backends import clean_store
from threadline import Message, open_store
from threadline.errors import StoreUnavailable
from threadline.store.protocol import Store
from threadline.store.search_query import (
    SCAN_CHUNK,
    order_key,
    scan_search,
    search_request,
)
from threadline.store.search_records import SearchPage
from threadline.store.session_info import SessionInfo

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BIG_TEXT = "error " + "x" * 2000


def fill(store: Store, sessions: int, per_session: int, text: str = BIG_TEXT) -> None:
    for n in range(sessions):
        session = store.create_session(agent="a")
        session.append(
            [
                Message.user(f"{text} {n}.{k}", created_at=T0 + timedelta(seconds=n * 1000 + k))
                for k in range(per_session)
            ]
        )


@pytest.fixture(params=["redis", "jsonl", "memory"])
def scanning(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


# -- the scan keeps the page, not every hit ------------------------------------------------


def test_a_scan_reads_sessions_in_chunks_and_keeps_only_the_page(scanning: Store) -> None:
    """3,000 matching messages of 2 KB: before, every hit (and each whole session) was
    held at once, 6 MB and more; now a chunk and the page."""
    fill(scanning, sessions=2, per_session=1500)
    tracemalloc.start()
    try:
        page = scanning.search("error", limit=5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page.total == 3000 and page.exact and len(page) == 5
    assert [h.seq for h in page] == [1500, 1499, 1498, 1497, 1496]  # the newest session's
    print(f"\npeak while searching 3,000 x 2 KB hits: {peak / 1e6:.1f} MB")
    assert peak < 2.5e6 + SCAN_CHUNK * 12_000, f"peak {peak / 1e6:.1f} MB"


def test_the_scan_of_a_store_reads_a_chunk_at_a_time(tmp_path: Path) -> None:
    store = open_store(f"jsonl://{tmp_path / 's'}")
    fill(store, sessions=1, per_session=SCAN_CHUNK * 2 + 3, text="word")
    limits: list[int | None] = []
    real = store.read_messages

    def spy(session_id: str, *, after_seq: int = 0, limit: int | None = None) -> Any:
        limits.append(limit)
        return real(session_id, after_seq=after_seq, limit=limit)

    store.read_messages = spy  # type: ignore[method-assign]
    page = store.search("word", limit=3, offset=2)
    assert page.total == SCAN_CHUNK * 2 + 3 and len(page) == 3
    assert limits and None not in limits and max(x or 0 for x in limits) <= SCAN_CHUNK


# -- a time budget, and a total that says it is a lower bound ----------------------------


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def infos_and_messages(counts: list[int]) -> dict[str, tuple[SessionInfo, list[Message]]]:
    store = open_store("memory://")
    out = {}
    for n, count in enumerate(counts):
        session = store.create_session(agent="a")
        batch = [
            Message.user(
                f"hit {n} {k}" if k % 2 == 0 else f"miss {n} {k}",
                created_at=T0 + timedelta(minutes=(k * 7 + n * 13) % 50),
            )
            for k in range(count)
        ]
        stored = session.append(batch) if batch else []
        out[session.id] = (session.info, stored)
    return out


def test_a_scan_stops_at_its_time_budget_and_says_the_total_is_a_lower_bound() -> None:
    data = infos_and_messages([40, 40])
    request = search_request("hit", limit=5)
    page = scan_search(
        request,
        [info for info, _ in data.values()],
        lambda info: data[info.id][1],
        lambda info: {},
        timeout=25.5,
        clock=Ticks(),
    )
    assert not page.exact and page.total_text() == f"more than {page.total}"
    assert 0 < page.total < 40  # stopped inside the first session
    assert len(page) == 5


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    offset=st.integers(0, 40),
    limit=st.integers(1, 10),
)
def test_the_bounded_scan_pages_exactly_as_sorting_every_hit_would(
    counts: list[int], offset: int, limit: int
) -> None:
    data = infos_and_messages(counts)
    every = sorted(
        (order_key(m.created_at, sid, m.seq), sid, m.seq)
        for sid, (_, messages) in data.items()
        for m in messages
        if m.text.startswith("hit") and m.seq is not None
    )
    request = search_request("hit", limit=limit, offset=offset)
    page: SearchPage = scan_search(
        request,
        [info for info, _ in data.values()],
        lambda info: iter(data[info.id][1]),
        lambda info: {},
    )
    assert page.exact and page.total == len(every)
    assert [(h.session_id, h.seq) for h in page] == [
        (sid, seq) for _, sid, seq in every[offset : offset + limit]
    ]


# -- SQLite stops a search at its search_timeout --------------------------------------------


def test_sqlite_interrupts_a_search_past_its_timeout(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    store = open_store(url)
    fill(store, sessions=4, per_session=500, text="error alpha beta")
    assert store.search("e*", limit=1).total == 2000  # the default budget: 10 s
    store.close()
    hasty = open_store(url + "?search_timeout=0.000001")
    try:
        with pytest.raises(StoreUnavailable, match="took longer than 1e-06 s"):
            hasty.search("e* a* b*", limit=1)
        assert hasty.search_timeout == 1e-06  # type: ignore[attr-defined]
    finally:
        hasty.close()
    with pytest.raises(Exception, match="search_timeout"):
        open_store(url + "?search_timeout=0")


# -- the server: a few at once ------------------------------------------------------------


def test_the_server_runs_a_few_searches_at_once_and_refuses_the_rest_with_429() -> None:
    from threadline.server.config import ServerConfig
    from threadline.server.events import EventHub
    from threadline.server.hooks import HookDispatcher
    from threadline.server.procedures import Procedures, SearchInput, classify
    from threadline.server.runner import AgentRunner

    store = open_store("memory://")
    store.create_session().append([Message.user("needle")])
    inside = threading.Barrier(3, timeout=10)
    release = threading.Event()
    real = store.search

    def slow(query: str, **options: Any) -> SearchPage:
        inside.wait()
        assert release.wait(10)
        return real(query, **options)

    store.search = slow  # type: ignore[method-assign]
    config = ServerConfig(token="t" * 24, search_slots=2, search_wait=0.05)
    hub = EventHub(100)
    procs = Procedures(store, config, AgentRunner(store, config, hub=hub), HookDispatcher(), hub)
    out: list[Any] = []
    running = [
        threading.Thread(target=lambda: out.append(procs.search(SearchInput(q="needle"))))
        for _ in range(2)
    ]
    for t in running:
        t.start()
    inside.wait()  # both slots are taken
    with pytest.raises(Exception) as refused:
        procs.search(SearchInput(q="needle"))
    assert classify(refused.value)[:2] == ("TOO_MANY_REQUESTS", 429)
    release.set()
    for t in running:
        t.join(10)
    assert [r["total"] for r in out] == [1, 1] and all(r["totalExact"] for r in out)
    store.search = real  # type: ignore[method-assign]
    assert procs.search(SearchInput(q="needle"))["total"] == 1  # the slots are free again
