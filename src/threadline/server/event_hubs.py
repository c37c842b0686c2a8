"""Which event hub a server uses: the store's engine when other workers can share it
(PostgreSQL, Redis), else the in-process ``EventHub`` (SQLite, JSONL, memory: one
worker)."""

from __future__ import annotations

from typing import Any, cast

from threadline.server.config import ServerConfig
from threadline.server.events import EventHub
from threadline.server.shared_events import Bounds, SharedHub
from threadline.store.base import Store


def scheme(store: Store) -> str:
    return str(getattr(store, "url", "")).partition("://")[0].lower()


def hub_for(store: Store, config: ServerConfig) -> EventHub | SharedHub:
    bounds = Bounds(
        capacity=config.event_buffer,
        max_event_bytes=config.max_event_bytes,
        max_bytes=config.event_buffer_bytes,
        expire_seconds=config.idle_seconds,
    )
    engine = cast(Any, store)  # the backend's connection details, read without importing it
    kind = scheme(store)
    if kind in ("postgresql", "postgres"):
        from threadline.server.events_postgres import PostgresEvents

        return SharedHub(PostgresEvents(engine._conninfo, engine.schema, bounds), bounds)
    if kind in ("redis", "rediss"):
        from threadline.server.events_redis import RedisEvents

        return SharedHub(RedisEvents(engine._r, engine.prefix, bounds), bounds)
    return EventHub(
        config.event_buffer,
        max_bytes=config.event_buffer_bytes,
        max_event_bytes=config.max_event_bytes,
    )
