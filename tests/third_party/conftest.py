"""Runs the frameworks' own tests (copied here) against threadline's faces on SQLite,
PostgreSQL and Redis.

Every test in this folder runs once per backend, with a clean store
(``tests/conformance/backends.py``). Coroutine tests run as their frameworks run
them (``asyncio_mode = auto`` in both LangGraph's and ADK's settings). Where a
framework test checks something threadline deliberately does differently,
``DIVERGENCES`` says why and the test is a strict expected failure, so a change
that makes it pass turns the run red until the entry is removed.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadline.store import Store

_EMBEDDINGS = (
    "LangGraph's InMemoryStore scores by the test's character embeddings; "
    "ThreadlineStore ranks by words with threadline memory's BM25"
)
_INTERNALS = (
    "reads InMemoryMemoryService's private _session_events dict; "
    "tests/test_adk_memory.py checks the same behaviour through search_memory"
)
DIVERGENCES: dict[tuple[str, str], str] = {
    ("test_langgraph_store", "test_vector_store_initialization"): (
        "reads the embedding index config (dims, embed) back from the store; "
        "ThreadlineStore keeps no embeddings: it ranks by words (memory's BM25)"
    ),
    ("test_langgraph_store", "test_vector_search_with_filters"): (
        f"{_EMBEDDINGS}: the misspelt 'bbbbluuu' shares no word with 'blue car', so "
        "it ranks nothing first (the filter part of the test passes)"
    ),
    ("test_langgraph_store", "test_async_vector_search_with_filters"): (
        f"{_EMBEDDINGS}: the misspelt 'bbbbluuu' shares no word with 'blue car', so "
        "it ranks nothing first (the filter part of the test passes)"
    ),
    ("test_langgraph_store", "test_embed_with_path"): (
        f"{_EMBEDDINGS}: it embeds each field apart and keeps the best field's "
        "score, so one matching field scores the same in a 2- and a 3-field item; "
        "BM25 scores the item's indexed text as one document, shorter ones higher"
    ),
    **{
        ("test_adk_memory", name): _INTERNALS
        for name in (
            "test_add_session_to_memory",
            "test_add_events_to_memory_with_explicit_events",
            "test_add_events_to_memory_without_session_id_uses_default_bucket",
            "test_add_events_to_memory_alias_is_supported",
            "test_add_events_to_memory_appends_without_replacing",
            "test_add_events_to_memory_deduplicates_event_ids",
            "test_add_session_with_no_events_to_memory",
        )
    },
}
"""(test module, test name) -> why threadline does this differently."""


def _divergence(module: str, name: str) -> str | None:
    return DIVERGENCES.get((module, name))


def pytest_collectstart(collector: pytest.Collector) -> None:
    """Mark this folder's coroutine tests for pytest-asyncio, as ``asyncio_mode = auto``."""
    if isinstance(collector, pytest.Module):
        for obj in vars(collector.obj).values():
            if inspect.iscoroutinefunction(obj) and obj.__name__.startswith("test_"):
                marks = getattr(obj, "pytestmark", [])
                if not any(m.name == "asyncio" for m in marks):
                    pytest.mark.asyncio(obj)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or Path(item.path).parent != Path(__file__).parent:
            continue
        reason = _divergence(Path(item.path).stem, item.originalname)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.fixture(autouse=True)
def threadline_backend(face_store: Store) -> Iterator[Store]:
    """Every test here on each backend (``tests/conftest.face_store``)."""
    from tests.third_party import faces

    faces._STORES.append(face_store)
    try:
        yield face_store
    finally:
        faces._STORES.pop()
