"""A Google ADK memory service (``BaseMemoryService``) over any threadline store.

``ThreadlineMemoryService(store_or_url)`` remembers the events of ADK sessions
per app and user and finds them again by query: ``add_session_to_memory``
(a session may be added again as it grows: its memory then holds exactly the
session's events with content), ``add_events_to_memory`` (an increment: events
already remembered, by id, are left as they are) and ``search_memory`` (at most
``MAX_RESULTS`` memories, best first). It passes ADK's own memory-service tests
(``tests/third_party/test_adk_memory.py``) on SQLite, PostgreSQL and Redis.

- Each (app, user) keeps its memories as documents of one threadline session the
  service owns (``adkm-`` and a hash, ``integrations/documents.py``), one
  document per event (its content as ADK's JSON, author, time and session), so
  every backend keeps them and a user's search never reads another user's.
- A search ranks with threadline memory's lexical search
  (``integrations/doc_search.py``: BM25 over memory's folded, stemmed terms,
  unspaced scripts as character pairs); a memory sharing no term with the query
  is not returned, and equal scores keep the order the events were remembered in.

Each method runs the store's synchronous calls in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from threadline.integrations.binding import Face, missing_extra, open_or_use
from threadline.integrations.doc_search import COUNTED_TEXTS, best_first, scores
from threadline.integrations.documents import Documents, encode
from threadline.store import Store

try:
    from google.adk.events.event import Event
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session as AdkSession
    from google.genai import types
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise missing_extra("Google ADK", "adk", exc) from exc

MAX_RESULTS = 10
"""As ADK's in-memory service: a word shared with the whole store cannot return it."""
NO_SESSION = "__no_session__"
"""Where ``add_events_to_memory`` without a ``session_id`` keeps its events."""


def _digest(*parts: str) -> str:
    joined = "\0".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(joined).hexdigest()[:40]


FACE = Face("adk-memory", "adkm", namespace=lambda key: "adkm-" + _digest(*json.loads(key)))
"""An (app, user)'s memories are kept in ``adkm-`` and a hash of app and user."""


def _session_prefix(session_id: str) -> str:
    return _digest(session_id)[:32] + "/"


def _event_id(event: Event) -> str:
    """The event's id; one without an id is known by its time, author and content."""
    if event.id:
        return event.id
    content = event.content.model_dump_json() if event.content else ""
    return _digest(str(event.timestamp), str(event.author), content)


def _remembered(event: Event) -> bool:
    return bool(event.content and event.content.parts)


@lru_cache(maxsize=COUNTED_TEXTS)
def _indexed(document: str) -> tuple[int, str, str]:
    """A stored memory's (order, searched text, JSON text): its text parts as ADK's own
    service searches them. Kept per document text, so a search parses only what changed
    since the last and builds only the memories it returns."""
    value = json.loads(document)
    parts = (value.get("content") or {}).get("parts") or ()
    text = " ".join(t for part in parts if isinstance(t := part.get("text"), str) and t)
    return value["order"], text, document


class ThreadlineMemoryService(BaseMemoryService):
    """ADK's ``BaseMemoryService`` kept in a threadline store (see the module doc)."""

    def __init__(self, store: str | Store | None = None) -> None:
        self.store, self._owns_store = open_or_use(store)

    def _docs(self, app_name: str, user_id: str) -> Documents:
        """The memories of one app and user (one session, found on each call, so a
        service shared by threads and event loops holds no per-user state)."""
        return Documents(FACE, json.dumps([app_name, user_id]), self.store)

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        if self._owns_store:
            self.store.close()

    # -- ADK's interface ----------------------------------------------------

    async def add_session_to_memory(self, session: AdkSession) -> None:
        await asyncio.to_thread(
            self._remember,
            session.app_name,
            session.user_id,
            session.id,
            list(session.events),
            replace=True,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await asyncio.to_thread(
            self._remember, app_name, user_id, session_id or NO_SESSION, list(events)
        )

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        return await asyncio.to_thread(self._search, app_name, user_id, query)

    # -- the one implementation ---------------------------------------------

    def _remember(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: list[Event],
        *,
        replace: bool = False,
    ) -> None:
        """Store the events with content of one session; ``replace``: they are now all
        of its memories (a re-added session), else they are added to them."""
        docs = self._docs(app_name, user_id)
        prefix = _session_prefix(session_id)
        stored = {d.name: d.value for d in docs.under(prefix)}
        base = time.time_ns()
        values: dict[str, str] = {}
        for i, event in enumerate(e for e in events if _remembered(e)):
            name = prefix + _digest(_event_id(event))
            if name in values or (not replace and name in stored):
                continue
            old = stored.get(name)
            doc = {
                "session_id": session_id,
                "event_id": event.id,
                "author": event.author,
                "timestamp": event.timestamp,
                "content": event.content.model_dump(mode="json", exclude_none=True)
                if event.content
                else None,
                "order": old["order"] if old else base + i,
            }
            values[name] = encode(doc, "an event")
        docs.put_many(values, keep_existing=not replace)  # a concurrent add keeps its copy
        if replace:
            docs.delete_many(n for n in stored if n not in values)

    def _search(self, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        if not query.strip():
            return SearchMemoryResponse()
        found = sorted(
            (_indexed(text) for text in self._docs(app_name, user_id).texts_under("").values()),
            key=lambda memory: memory[0],
        )
        ranked = scores(query, [text for _, text, _ in found])
        best = [i for i in best_first(ranked) if ranked[i]][:MAX_RESULTS]
        return SearchMemoryResponse(memories=[self._entry(json.loads(found[i][2])) for i in best])

    @staticmethod
    def _entry(value: dict[str, Any]) -> MemoryEntry:
        timestamp = value.get("timestamp")
        return MemoryEntry(
            content=types.Content.model_validate(value["content"]),
            author=value.get("author"),
            id=value.get("event_id") or None,
            timestamp=datetime.fromtimestamp(timestamp).isoformat()
            if isinstance(timestamp, int | float)
            else None,
            custom_metadata={"session_id": value["session_id"]},
        )
