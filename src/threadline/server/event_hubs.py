"""Which event hub a server uses: the store's engine when other workers can share it
(PostgreSQL, Redis), else the in-process ``EventHub`` (SQLite, JSONL, memory: one
worker)."""

from __future__ import annotations

from threadline.server.config import DEFAULT_IDLE_SECONDS, ServerConfig
from threadline.server.events import DEFAULT_MAX_BYTES, EventHub
from threadline.server.shared_events import Bounds, EventEngine, SharedHub
from threadline.store.protocol import Store


def engine_for(store: Store, bounds: Bounds) -> EventEngine | None:
    """The store's engine for events, when other workers can share it."""
    place = store.shared_place()
    if place is None:
        return None
    kind, link, space = place
    if kind == "postgres":
        from threadline.server.events_postgres import PostgresEvents

        return PostgresEvents(link, space, bounds)
    from threadline.server.events_redis import RedisEvents

    return RedisEvents(link, space, bounds)


def hub_for(store: Store, config: ServerConfig) -> EventHub | SharedHub:
    bounds = Bounds(
        capacity=config.event_buffer,
        max_event_bytes=config.max_event_bytes,
        max_bytes=config.event_buffer_bytes,
        expire_seconds=config.idle_seconds,
    )
    engine = engine_for(store, bounds)
    if engine is not None:
        return SharedHub(engine, bounds)
    return EventHub(
        config.event_buffer,
        max_bytes=config.event_buffer_bytes,
        max_event_bytes=config.max_event_bytes,
    )


def event_findings(store: Store) -> list[tuple[bool, str]]:
    """What ``doctor`` says of the store's event table or streams, each (a warning?,
    the text): events past their expiry or over the byte budget mean no server trims
    them (its sweep does), so the table grows; a PostgreSQL table far larger on disk
    than the events it holds (and than the budget) grows with dead rows nothing
    reclaims."""
    place = store.shared_place()
    if place is None:
        return []
    kind, link, space = place
    if kind == "postgres":
        from threadline.server import events_postgres

        seen = events_postgres.survey(link, space)
    else:
        from threadline.server import events_redis

        seen = events_redis.survey(link, space)
    if seen is None:
        return []
    events, sessions, size, age, disk = seen
    told = f"{events:,} events of {sessions:,} sessions kept for event streams"
    found = []
    if disk > max(BLOAT_BYTES, size * BLOAT_RATIO):
        found.append(
            (
                True,
                f"the event table takes {disk:,} bytes on disk for {size:,} bytes of events: "
                "dead rows are not reclaimed (is autovacuum off?), so it grows; "
                "VACUUM threadline_events reclaims them",
            )
        )
    if age > DEFAULT_IDLE_SECONDS * 2:
        why = f"some {_age(age)} old (they expire after {DEFAULT_IDLE_SECONDS // 60:.0f} minutes)"
    elif size > DEFAULT_MAX_BYTES:
        why = f"{size:,} bytes, over the {DEFAULT_MAX_BYTES:,}-byte budget"
    else:
        return [(False, told), *found]
    return [(True, f"{told}, {why}: no server trims them, so they grow"), *found]


BLOAT_BYTES = 4 * DEFAULT_MAX_BYTES
"""An event table this large on disk, and ``BLOAT_RATIO`` times the events it holds,
is warned of: a sweeping server keeps at most ``DEFAULT_MAX_BYTES`` of events."""
BLOAT_RATIO = 4


def _age(seconds: float) -> str:
    return "never expiring" if seconds == float("inf") else f"{seconds / 3600:.1f} hours"
