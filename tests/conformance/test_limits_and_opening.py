"""Rules of the shared store layer that bound work and protect data, on every backend:
the search query limits (``search_words``) and opening without creating
(``open_store(url, create=False)``)."""

from __future__ import annotations

import pytest

from tests.conformance.backends import SEARCH_UNSUPPORTED
from threadline import Message, Store, StoreNotFound, UsageError, open_store
from threadline.store.checks import MAX_SEARCH_QUERY_LENGTH, MAX_SEARCH_WORDS

CREATES_NOTHING = frozenset({"memory", "redis"})
"""Backends with no place that could be missing: a memory store is new by definition,
and a Redis store is only its keys."""


def test_search_query_limits(backend: str, store: Store) -> None:
    store.create_session().append(Message.user("needle " + "hay " * 50))
    if backend in SEARCH_UNSUPPORTED:
        return
    at_limit = ("needle " * MAX_SEARCH_QUERY_LENGTH)[:MAX_SEARCH_QUERY_LENGTH]
    assert len(store.search(at_limit)) == 1  # one word repeated: one word
    with pytest.raises(UsageError, match=f"the limit is {MAX_SEARCH_QUERY_LENGTH:,}"):
        store.search(at_limit + "x")
    with pytest.raises(UsageError, match="characters"):
        store.search("needle " * 20_000)  # 100 KB, refused before any work
    words = " ".join(f"w{i}" for i in range(MAX_SEARCH_WORDS))
    assert store.search(words) == []
    with pytest.raises(UsageError, match=f"different words; the limit is {MAX_SEARCH_WORDS}"):
        store.search(words + " one-more")
    with pytest.raises(UsageError, match="must be text"):
        store.search(b"needle")  # type: ignore[arg-type]


def test_opening_without_creating(backend: str, store_url: str) -> None:
    if backend in CREATES_NOTHING:
        open_store(store_url, create=False).close()
        return
    with pytest.raises(StoreNotFound, match="nothing was stored there yet"):
        open_store(store_url, create=False)
    with pytest.raises(StoreNotFound):  # the refusal created nothing either
        open_store(store_url, create=False)
    writer = open_store(store_url)
    sid = writer.create_session().id
    writer.close()
    reader = open_store(store_url, create=False)
    try:
        assert [s.id for s in reader.list_sessions()] == [sid]
    finally:
        reader.close()
