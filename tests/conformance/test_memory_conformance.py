"""The memory protocol on every backend that supports it (sqlite, postgres, jsonl, memory).

Writes, supersession (now and as of a time), scopes, provenance, forget, the
durable pending state and the export/import round trip; the supersession chain
is also a hypothesis property. Redis declares memory unsupported, tested here too.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance.backends import clean_store, cleanup_url, make_url
from threadline import Message, Store, open_store
from threadline.errors import ImportFormatError, NotSupported, UsageError
from threadline.memory import (
    Entity,
    Episode,
    Extraction,
    Fact,
    MemoryRecorder,
    MemoryStore,
    Relation,
    open_memory,
)
from threadline.memory.core import EXTRACTION_BATCH, Memory
from threadline.memory.records import Records, Row

MEMORY_BACKENDS = ["memory", "sqlite", "jsonl", "postgres"]
_MARKS = {"postgres": [pytest.mark.postgres]}
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


@pytest.fixture(params=[pytest.param(b, marks=_MARKS.get(b, []), id=b) for b in MEMORY_BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """The conformance ``backend`` fixture, without Redis (which has no memory)."""
    name: str = request.param
    return name


@pytest.fixture
def memory(store: Store) -> Iterator[MemoryStore]:
    with contextlib.closing(open_memory(store)) as mem:
        yield mem


def reopen(backend: str, url: str, store: Store) -> tuple[Store, MemoryStore]:
    """The same memory through a new store handle (the same object for memory://)."""
    if backend == "memory":
        return store, open_memory(store)
    again = open_store(url)
    return again, open_memory(again)


def test_write_and_list_with_provenance(store: Store, memory: MemoryStore) -> None:
    s = store.create_session(agent="ana")
    s.append(Message.user("I moved to Porto last week"))
    fact = memory.write_fact(
        "agent:ana",
        "Ana lives in Porto",
        subject="Ana",
        session_id=s.id,
        seq=1,
        observed_at=day(1),
        confidence=0.9,
    )
    assert fact.current and fact.slot == "lives in"
    listed = memory.list_facts("agent:ana")
    assert [f.id for f in listed] == [fact.id]
    assert (listed[0].session_id, listed[0].seq, listed[0].confidence) == (s.id, 1, 0.9)
    hits = memory.search("where does Ana live", scopes=["agent:ana"], now=day(2))
    assert hits and hits[0].id == fact.id
    assert (hits[0].session_id, hits[0].seq) == (s.id, 1)
    assert memory.get_fact(fact.id) == listed[0]
    assert [e.name for e in memory.list_entities("agent:ana")] == ["Ana"]


def test_supersession_now_and_as_of(memory: MemoryStore) -> None:
    old = memory.write_fact("agent:a", "Ana lives in Lisbon", subject="Ana", observed_at=day(1))
    new = memory.write_fact("agent:a", "Ana lives in Porto", subject="Ana", observed_at=day(10))
    assert [f.statement for f in memory.list_facts("agent:a")] == ["Ana lives in Porto"]
    kept = {f.id: f for f in memory.list_facts("agent:a", include_superseded=True)}
    assert set(kept) == {old.id, new.id}
    assert kept[old.id].superseded_by == new.id and kept[old.id].superseded_at == day(10)
    assert [f.id for f in memory.list_facts("agent:a", as_of=day(5))] == [old.id]
    assert [f.id for f in memory.list_facts("agent:a", as_of=day(11))] == [new.id]
    assert memory.list_facts("agent:a", as_of=day(0)) == []
    # a fact learned late about an earlier time slots into the past
    earlier = memory.write_fact("agent:a", "Ana lives in Faro", subject="Ana", observed_at=day(0))
    assert [f.id for f in memory.list_facts("agent:a")] == [new.id]
    assert memory.get_fact(earlier.id).superseded_by == old.id  # type: ignore[union-attr]
    # the same observation again adds nothing; a later one is a new observation
    same = memory.write_fact("agent:a", "Ana lives in Porto", subject="Ana", observed_at=day(10))
    assert same.id == new.id
    later = memory.write_fact("agent:a", "Ana lives in Porto", subject="Ana", observed_at=day(12))
    assert [f.id for f in memory.list_facts("agent:a")] == [later.id]
    report = memory.recall("ana", scopes=["agent:a"])
    assert report is not None and report.facts[0].id == later.id
    assert any(r.target == "Porto" for r in report.relations) or report.relations == []


def test_facts_without_a_slot_accumulate(memory: MemoryStore) -> None:
    memory.write_fact("agent:a", "Ana likes tea", subject="Ana")
    memory.write_fact("agent:a", "Ana likes jazz", subject="Ana")
    assert len(memory.list_facts("agent:a")) == 2


def test_scopes_are_separate_and_shared_on_request(memory: MemoryStore) -> None:
    memory.write_fact("agent:one", "The deploy key lives in vault", subject="deploy")
    memory.write_fact("project:site", "The site deploys with terraform", subject="site")
    assert memory.search("deploy", scopes=["agent:two"]) == []
    both = memory.search("deploy terraform vault", scopes=["agent:one", "project:site"])
    assert {h.text for h in both if h.kind == "fact"} == {
        "The deploy key lives in vault",
        "The site deploys with terraform",
    }
    assert [f.subject for f in memory.list_facts("project:site")] == ["site"]
    assert memory.recall("site", scopes=["agent:one"]) is None
    assert memory.scopes() == ["agent:one", "project:site"]  # what a search may span
    assert {(h.scope, h.kind) for h in both if h.kind == "fact"} == {
        ("agent:one", "fact"),
        ("project:site", "fact"),
    }


def test_forget_marks_and_restores_the_previous_fact(memory: MemoryStore) -> None:
    old = memory.write_fact("agent:a", "Ana works at Acme", subject="Ana", observed_at=day(1))
    new = memory.write_fact("agent:a", "Ana works at Globex", subject="Ana", observed_at=day(2))
    assert memory.forget(new.id) is True
    assert memory.forget(new.id) is False
    assert memory.forget(str(uuid.uuid4())) is False
    assert [f.id for f in memory.list_facts("agent:a")] == [old.id]
    gone = memory.get_fact(new.id)
    assert gone is not None and gone.retracted
    assert all(h.id != new.id for h in memory.search("Globex", scopes=["agent:a"]))


def test_bad_input_is_refused_and_stores_nothing(memory: MemoryStore) -> None:
    for call in (
        lambda: memory.write_fact("nope", "x y z"),
        lambda: memory.write_fact("agent:a", "   "),
        lambda: memory.write_fact("agent:a", "x" * 5000),
        lambda: memory.write_fact("agent:a", "a fact", confidence=2),
        lambda: memory.write_fact("agent:a", "a fact", session_id="s"),
        lambda: memory.search("", scopes=["agent:a"]),
        lambda: memory.search("x", scopes=["agent:a"], k=0),
        lambda: memory.search("x", scopes="agent:a"),
        lambda: memory.list_facts("../etc"),
    ):
        with pytest.raises(UsageError):
            call()
    assert memory.list_facts("agent:a", include_superseded=True) == []
    with pytest.raises(ImportFormatError):
        memory.import_({"format": "something else"})


def test_recorder_extracts_with_provenance_and_pending_survives_reopen(
    backend: str, store_url: str, store: Store, memory: MemoryStore
) -> None:
    s = store.create_session(agent="ana")
    stored = s.append(
        [
            Message.user("I prefer PostgreSQL over MySQL for project Atlas.", name="Ana"),
            Message.assistant("Noted: PostgreSQL for Atlas."),
            Message.user("We decided to deploy Atlas on Fridays.", name="Ana"),
        ]
    )
    rec = MemoryRecorder(memory, scope="agent:ana", threshold=5)
    assert rec.observe(s, stored) == 2
    store2, mem2 = reopen(backend, store_url, store)
    try:
        rec2 = MemoryRecorder(mem2, scope="agent:ana", threshold=5)
        assert rec2.pending(s) == 2
        assert rec2.flush(s) >= 2
        assert rec2.pending(s) == 0
        # lexical search: the query names the stored words (no fact says "database")
        hits = mem2.search("PostgreSQL for Atlas", scopes=["agent:ana"])
        assert hits and (hits[0].session_id, hits[0].seq) == (s.id, 1)
        atlas = mem2.recall("Atlas", scopes=["agent:ana"])
        assert atlas is not None and atlas.entity.kind == "project"
    finally:
        if store2 is not store:
            mem2.close()
            store2.close()


def test_export_import_round_trip(backend: str, memory: MemoryStore, tmp_path: Path) -> None:
    memory.write_fact("agent:a", "Ana lives in Lisbon", subject="Ana", observed_at=day(1))
    memory.write_fact("agent:a", "Ana lives in Porto", subject="Ana", observed_at=day(3))
    memory.write_fact("user:ana", "Ana prefers vim for python", subject="Ana")
    data = memory.export()
    assert {f["scope"] for f in data["facts"]} == {"agent:a", "user:ana"}
    assert len(memory.export("user:ana")["facts"]) == 1
    other_url = make_url(backend, tmp_path / "other")
    other_store = open_store(other_url)
    try:
        other = open_memory(other_store)
        first = other.import_(data)
        assert first.added == len(data["facts"]) + len(data["entities"]) + len(
            data["relations"]
        ) + len(data["episodes"])
        assert (first.kept, first.replaced, first.other_scopes) == (0, 0, {})
        again = other.import_(data)  # ids kept: importing twice changes nothing
        assert (again.added, again.replaced, again.kept) == (0, 0, first.added)
        assert other.export() == data
        assert [f.statement for f in other.list_facts("agent:a")] == ["Ana lives in Porto"]
        other.close()
    finally:
        other_store.close()
        cleanup_url(backend, other_url)


_writes = st.lists(
    st.tuples(
        st.sampled_from(["Ana", "Bo"]),
        st.sampled_from(["lives in", "works at"]),
        st.sampled_from(["Lisbon", "Porto", "Acme"]),
        st.integers(min_value=0, max_value=30),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=_writes, probe=st.integers(min_value=-1, max_value=31))
def test_one_current_fact_per_subject_and_slot(
    memory: MemoryStore, writes: list[tuple[str, str, str, int]], probe: int
) -> None:
    scope = f"agent:p{uuid.uuid4().hex[:10]}"
    for subject, slot, value, when in writes:
        memory.write_fact(
            scope, f"{subject} {slot} {value}", subject=subject, observed_at=day(when)
        )
    chains = {(s, slot) for s, slot, _, _ in writes}
    current = memory.list_facts(scope)
    for chain in chains:
        assert sum((f.subject, f.slot) == chain for f in current) == 1
    then = memory.list_facts(scope, as_of=day(probe))
    for chain in chains:
        assert sum((f.subject, f.slot) == chain for f in then) <= 1
    # the latest value of each chain (by time, then by order of writing) is true now
    for chain in chains:
        ordered = [(w[3], i, w[2]) for i, w in enumerate(writes) if (w[0], w[1]) == chain]
        latest = max(ordered)[2]
        now = next(f for f in current if (f.subject, f.slot) == chain)
        assert now.statement.endswith(latest)
    assert len(memory.list_facts(scope, include_superseded=True)) <= len(writes)


@pytest.mark.redis
def test_redis_declares_memory_unsupported(tmp_path: Path) -> None:
    for store in clean_store("redis", tmp_path):
        with pytest.raises(NotSupported, match="Redis"):
            open_memory(store)


def test_import_keeps_what_is_stored_and_replaces_only_in_its_scope(memory: MemoryStore) -> None:
    """An edited export cannot overwrite a scope's facts: records present are kept unless
    ``replace`` is asked, and then only in the scope imported, never moved across."""
    alice = memory.write_fact("user:alice", "Alice lives in Oslo", subject="Alice")
    data = memory.export("user:alice")
    edited = copy.deepcopy(data)
    edited["facts"][0]["statement"] = "Alice lives in Mordor"
    kept = memory.import_(edited, scope="user:alice")
    assert (kept.added, kept.kept, kept.replaced) == (0, len(data["facts"]) + 1, 0)
    assert memory.get_fact(alice.id) == alice
    moved = copy.deepcopy(edited)
    moved["facts"][0]["scope"] = "agent:mallory"
    refused = memory.import_(moved, scope="agent:mallory", replace=True)
    assert (refused.added, refused.kept, refused.replaced) == (0, 1, 0)
    assert refused.other_scopes == {"user:alice": 1}  # its entity stays behind
    assert memory.get_fact(alice.id) == alice
    assert memory.list_facts("agent:mallory") == []
    replaced = memory.import_(edited, scope="user:alice", replace=True)
    assert replaced.replaced == len(data["facts"]) + 1
    changed = memory.get_fact(alice.id)
    assert changed is not None and changed.statement == "Alice lives in Mordor"
    other = memory.import_(edited, scope="project:elsewhere")
    assert other.written == other.kept == 0 and other.other_scopes == {"user:alice": 2}


class CountingRecords:
    """A backend's records, counting the distinct records of each kind that every
    outermost write transaction stores."""

    def __init__(self, inner: Records) -> None:
        self.inner = inner
        self.depth = 0
        self.transactions: list[dict[str, set[str]]] = []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.depth += 1
        if self.depth == 1:
            self.transactions.append({})
        try:
            with self.inner.transaction():
                yield
        finally:
            self.depth -= 1

    def put(self, rows: Sequence[Row]) -> None:
        assert self.depth, "a write outside a transaction"
        for row in rows:
            self.transactions[-1].setdefault(row.kind, set()).add(row.id)
        self.inner.put(rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_large_extraction_is_written_in_small_transactions(memory: MemoryStore) -> None:
    """A flush of thousands of facts must not hold the store's write lock for its whole
    length (SQLite: one writer at a time): no transaction stores more than
    ``EXTRACTION_BATCH`` records of a kind, and everything is stored."""
    assert isinstance(memory, Memory)
    n = EXTRACTION_BATCH * 4 + 7
    found = Extraction()
    for i in range(n):
        name = f"Person {i}"
        found.entities.append(Entity(scope="agent:a", name=name, kind="person"))
        found.episodes.append(
            Episode(scope="agent:a", session_id="s1", seq=i + 1, text=f"{name} moved to Town {i}")
        )
        found.facts.append(
            Fact(
                scope="agent:a",
                subject=name,
                statement=f"{name} lives in Town {i}",
                session_id="s1",
                seq=i + 1,
            )
        )
        found.relations.append(
            Relation(scope="agent:a", source=name, label="lives in", target=f"Town {i}")
        )
    counting = CountingRecords(memory.records)
    memory.records = counting
    assert memory.store_extraction("agent:a", found) == n
    biggest = max(len(ids) for t in counting.transactions for ids in t.values())
    assert biggest <= EXTRACTION_BATCH, f"{biggest} records of one kind in one transaction"
    assert len(memory.list_facts("agent:a")) == n
    assert len(memory.list_entities("agent:a")) == n
    assert len(memory.export("agent:a")["episodes"]) == n
