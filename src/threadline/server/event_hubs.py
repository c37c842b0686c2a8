"""Which event hub a server uses: the store's engine when other workers can share it
(PostgreSQL, Redis), else the in-process ``EventHub`` (SQLite, JSONL, memory: one
worker)."""

from __future__ import annotations

from typing import Any, cast

from threadline.server.config import DEFAULT_IDLE_SECONDS, ServerConfig
from threadline.server.events import DEFAULT_MAX_BYTES, EventHub
from threadline.server.shared_events import Bounds, SharedHub
from threadline.store.protocol import Store


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


def event_findings(store: Store) -> list[tuple[bool, str]]:
    """What ``doctor`` says of the store's event table or streams, each (a warning?,
    the text): events past their expiry or over the byte budget mean no server trims
    them (its sweep does), so the table grows."""
    engine = cast(Any, store)
    kind = scheme(store)
    if kind in ("postgresql", "postgres"):
        from threadline.server import events_postgres

        seen = events_postgres.survey(engine._conninfo, engine.schema)
    elif kind in ("redis", "rediss"):
        from threadline.server import events_redis

        seen = events_redis.survey(engine._r, engine.prefix)
    else:
        return []
    if seen is None:
        return []
    events, sessions, size, age = seen
    told = f"{events:,} events of {sessions:,} sessions kept for event streams"
    if age > DEFAULT_IDLE_SECONDS * 2:
        return [
            (
                True,
                f"{told}, some {_age(age)} old (they expire after "
                f"{DEFAULT_IDLE_SECONDS // 60:.0f} minutes): no server trims them, so they grow",
            )
        ]
    if size > DEFAULT_MAX_BYTES:
        return [
            (
                True,
                f"{told}, {size:,} bytes, over the {DEFAULT_MAX_BYTES:,}-byte budget: "
                "no server trims them, so they grow",
            )
        ]
    return [(False, told)]


def _age(seconds: float) -> str:
    return "never expiring" if seconds == float("inf") else f"{seconds / 3600:.1f} hours"
