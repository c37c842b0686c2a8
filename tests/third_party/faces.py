"""What the frameworks' own tests construct, built as threadline's faces instead.

The copied test files import ``InMemoryStore`` and ``InMemoryMemoryService`` from
here in place of the frameworks' in-memory ones: each construction is a
threadline face over the store of the backend the test runs on (``conftest.py``),
empty when built. This is the only thing the copies adapt.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from threadline.store import Store

pytest.importorskip("langgraph.store.base")
pytest.importorskip("google.adk.memory")

from threadline.integrations.adk_memory import ThreadlineMemoryService
from threadline.integrations.langgraph_store import ThreadlineStore

_STORES: list[Store] = []
"""The store of the running test (set by ``conftest.threadline_backend``)."""


def current_store() -> Store:
    if not _STORES:
        raise RuntimeError("no threadline backend is set up for this test")
    return _STORES[-1]


class InMemoryStore(ThreadlineStore):
    """LangGraph's ``InMemoryStore(index=...)`` as a new, empty ``ThreadlineStore``:
    the index's ``fields`` become the fields a query is matched on; its embedding
    settings have no counterpart (threadline ranks by words)."""

    def __init__(self, *, index: dict[str, Any] | None = None) -> None:
        fields = (index or {}).get("fields")
        super().__init__(current_store(), name=uuid.uuid4().hex, index_fields=fields)


class InMemoryMemoryService(ThreadlineMemoryService):
    """ADK's ``InMemoryMemoryService()`` as a ``ThreadlineMemoryService`` over the
    test's store (a new store per test, so it starts empty)."""

    def __init__(self) -> None:
        super().__init__(current_store())
