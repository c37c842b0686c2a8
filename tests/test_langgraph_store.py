"""ThreadlineStore beyond LangGraph's own tests (tests/third_party): it persists, keeps
stores apart, refuses bad input without losing anything, runs a batch in order,
never runs the database on the event loop, and agrees with a plain dict model."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, PutOp, SearchOp

from tests.store_calls import threads_calling
from threadline import open_store
from threadline.errors import UsageError
from threadline.integrations.langgraph_store import ThreadlineStore
from threadline.store import Store


@pytest.fixture
def store(face_store: Store) -> Store:
    return face_store


def test_items_persist_with_their_dates(sqlite_url: str) -> None:
    first = ThreadlineStore(sqlite_url)
    first.put(("users", "ada"), "prefs", {"editor": "vim"})
    created = first.get(("users", "ada"), "prefs")
    assert created is not None
    time.sleep(0.01)
    first.put(("users", "ada"), "prefs", {"editor": "helix"})
    first.close()

    again = ThreadlineStore(sqlite_url)
    item = again.get(("users", "ada"), "prefs")
    assert item is not None and item.value == {"editor": "helix"}
    assert item.created_at == created.created_at
    assert item.updated_at > created.updated_at
    assert again.list_namespaces() == [("users", "ada")]
    again.close()


def test_stores_of_other_names_are_apart(store: Store) -> None:
    one, two = ThreadlineStore(store, name="one"), ThreadlineStore(store, name="two")
    one.put(("ns",), "k", {"v": 1})
    assert two.get(("ns",), "k") is None
    assert two.search(("ns",)) == []
    assert two.list_namespaces() == []
    assert one.store is store  # a Store given is used, never closed by the face
    one.close()
    assert ThreadlineStore(store, name="one").get(("ns",), "k") is not None


def test_ttl_is_refused_and_nothing_is_written(store: Store) -> None:
    face = ThreadlineStore(store)
    assert face.supports_ttl is False
    with pytest.raises(NotImplementedError):
        face.put(("ns",), "k", {"v": 1}, ttl=5.0)
    with pytest.raises(NotImplementedError):
        face.batch([PutOp(("ns",), "a", {"v": 1}), PutOp(("ns",), "k", {"v": 1}, ttl=5.0)])
    assert face.search(("ns",)) == []


def test_bad_input_is_refused_and_loses_nothing(store: Store) -> None:
    face = ThreadlineStore(store)
    face.put(("ns",), "kept", {"v": 1})
    with pytest.raises(UsageError, match="too long"):
        face.batch([PutOp(("ns",), "new", {"v": 2}), PutOp(("ns",), "k" * 300, {"v": 3})])
    with pytest.raises(UsageError, match="JSON"):
        face.batch([PutOp(("ns",), "new", {"v": 2}), PutOp(("ns",), "bad", {"v": object()})])
    with pytest.raises(UsageError, match="JSON"):
        face.put(("ns",), "nan", {"v": float("nan")})
    with pytest.raises(UsageError, match="operator"):
        face.search(("ns",), filter={"v": {"$in": [1]}})
    assert [i.key for i in face.search(("ns",))] == ["kept"]


def test_a_batch_runs_in_order(store: Store) -> None:
    face = ThreadlineStore(store)
    results = face.batch(
        [
            PutOp(("ns",), "a", {"v": 1}),
            GetOp(("ns",), "a"),
            PutOp(("ns",), "a", None),
            GetOp(("ns",), "a"),
            PutOp(("ns",), "b", {"v": 2}),
            SearchOp(("ns",), filter={"v": 2}),
        ]
    )
    assert results[1] is not None and results[1].value == {"v": 1}
    assert results[3] is None
    assert [i.key for i in results[5]] == ["b"]


def test_abatch_never_runs_the_store_on_the_event_loop(store: Store) -> None:
    face = ThreadlineStore(store)
    threads = threads_calling(store, "scratchpad_write_many")

    async def scenario() -> int:
        await face.aput(("ns",), "k", {"v": 1})
        assert (await face.aget(("ns",), "k")) is not None
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert threads and loop_thread not in threads


def test_query_ranks_words_and_unindexed_items_come_last(store: Store) -> None:
    face = ThreadlineStore(store, index_fields=["text"])
    face.put(("m",), "tea", {"text": "Ada prefers jasmine tea", "note": "coffee"})
    face.put(("m",), "coffee", {"text": "Bob drinks coffee daily"})
    face.put(("m",), "hidden", {"text": "coffee coffee coffee"}, index=False)
    face.put(("m",), "jp", {"text": "私はPythonでコーヒーを飲みます"})
    found = face.search(("m",), query="coffee")
    assert [i.key for i in found] == ["coffee", "jp", "tea", "hidden"]  # ties: key order
    assert found[2].score == 0.0  # its "coffee" is in a field not indexed
    assert found[-1].key == "hidden" and found[-1].score is None
    assert face.search(("m",), query="コーヒー")[0].key == "jp"
    assert face.search(("m",), query="python")[0].key == "jp"
    assert face.search(("m",), query="thon")[0].score == 0.0


# -- a model: a dict of (namespace, key) -> value ---------------------------------

LABELS = st.sampled_from(["a", "b", "c", "users", "ü", "語"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
KEYS = st.sampled_from(["k", "k2", "key with space", "ключ", "a/b"])
VALUES = st.none() | st.fixed_dictionaries(
    {"n": st.integers(0, 3), "t": st.sampled_from(["x", "y"])}
)
OPS = st.lists(st.tuples(NAMESPACES, KEYS, VALUES), max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, prefix=st.lists(LABELS, max_size=2).map(tuple), n=st.integers(0, 3))
def test_store_agrees_with_a_dict(
    ops: list[tuple[tuple[str, ...], str, dict[str, Any] | None]],
    prefix: tuple[str, ...],
    n: int,
) -> None:
    face = ThreadlineStore(open_store("memory://"))
    model: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
    face.batch([PutOp(ns, key, value) for ns, key, value in ops])
    for ns, key, value in ops:
        if value is None:
            model.pop((ns, key), None)
        else:
            model[(ns, key)] = value
    for (ns, key), value in model.items():
        item = face.get(ns, key)
        assert item is not None and item.value == value
    under = {(ns, k) for (ns, k) in model if ns[: len(prefix)] == prefix}
    found = face.search(prefix, limit=1000)
    assert {(i.namespace, i.key) for i in found} == under
    wanted = {(ns, k) for (ns, k), v in model.items() if (ns, k) in under and v["n"] == n}
    found = face.search(prefix, filter={"n": n}, limit=1000)
    assert {(i.namespace, i.key) for i in found} == wanted
    assert face.list_namespaces(prefix=prefix or None, limit=1000) == sorted(
        {ns for ns, _ in under}
    )
    assert face.list_namespaces(max_depth=1, limit=1000) == sorted({ns[:1] for ns, _ in model})
