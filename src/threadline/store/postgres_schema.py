"""PostgreSQL's schema: the ordered migrations every open applies once (under the
store's advisory lock, ``store/postgres.py``), and the search text a message row holds,
which the store writes and ``m002`` rebuilds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from threadline.store.search_query import body_pieces, capped_index_text

Conn = psycopg.Connection[tuple[Any, ...]]

MIGRATION_BATCH = 1000
"""Rows a migration rewrites per round trip."""
SEARCH_TEXT_LIMIT = 100_000
"""Characters of a message indexed for search; a tsvector is limited to 1 MB."""


# -- migrations: one ordered list, applied in one place when the store opens ------


def m001_initial(conn: Conn) -> None:
    conn.execute(_M001)


_M001 = """
CREATE TABLE threadline_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE sessions (
    id text COLLATE "C" PRIMARY KEY, agent text COLLATE "C" NOT NULL, model text, title text,
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    message_count bigint NOT NULL DEFAULT 0, total_tokens bigint NOT NULL DEFAULT 0,
    last_seq bigint NOT NULL DEFAULT 0,
    metadata json NOT NULL DEFAULT '{}', memo json NOT NULL DEFAULT '{}', lock json);
CREATE INDEX sessions_by_updated ON sessions (updated_at DESC, id);
CREATE INDEX sessions_by_agent ON sessions (agent, updated_at DESC, id);
CREATE TABLE messages (
    session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL, id text NOT NULL, role text NOT NULL, created_at timestamptz NOT NULL,
    tokens bigint NOT NULL, body text NOT NULL, search_text text NOT NULL,
    search tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED,
    CONSTRAINT messages_by_seq PRIMARY KEY (session_id, seq),
    CONSTRAINT messages_by_id UNIQUE (session_id, id));
CREATE INDEX messages_search ON messages USING gin (search);
CREATE TABLE checkpoints (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    covers_up_to bigint NOT NULL, summary json NOT NULL, created_at timestamptz NOT NULL,
    metadata json NOT NULL DEFAULT '{}');
CREATE INDEX checkpoints_by_session ON checkpoints (session_id, id);
CREATE TABLE scratchpad (
    session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name text COLLATE "C" NOT NULL, content json NOT NULL,
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, name))
"""


def m002_index_decoded_text(conn: Conn) -> None:
    """Search what a message says, decoded (``search_query.index_text``: text, tool
    names, tool arguments' keys and values, CJK split by character): ``search_text``
    holds those tokens joined by spaces and ``search`` is their ``array_to_tsvector``,
    taken as they are, so PostgreSQL's parser never splits words differently from the
    other backends. Existing rows get their new text from their stored bodies."""
    conn.execute("DROP INDEX IF EXISTS messages_search")
    conn.execute("ALTER TABLE messages DROP COLUMN IF EXISTS search")
    with conn.cursor(name="threadline_m002") as rows:
        rows.itersize = MIGRATION_BATCH
        rows.execute("SELECT session_id, seq, body FROM messages")
        while batch := rows.fetchmany(MIGRATION_BATCH):
            with conn.cursor() as update:
                update.executemany(
                    "UPDATE messages SET search_text = %s WHERE session_id = %s AND seq = %s",
                    [(search_text(body_pieces(body)), sid, seq) for sid, seq, body in batch],
                )
    conn.execute(
        "ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS "
        "(array_to_tsvector(array_remove(string_to_array(search_text, ' '), ''))) STORED"
    )
    conn.execute("CREATE INDEX messages_search ON messages USING gin (search)")


def m003_session_parents(conn: Conn) -> None:
    """A session names the session it is listed under in ``parent_id`` (a subagent's
    parent, a fork's), which listing filters on by index: ``sessions_by_parent`` serves
    a parent's children, partial indexes the top-level sessions (all, and of one
    agent), so a page of top-level sessions reads that page, never every session's
    metadata. Deleting a parent makes its children top-level (``ON DELETE SET NULL``).
    Existing links move out of the metadata: a fork's point and an imported subagent's
    ``parent_session``, when that session exists."""
    conn.execute(
        'ALTER TABLE sessions ADD COLUMN IF NOT EXISTS parent_id text COLLATE "C" '
        "REFERENCES sessions (id) ON DELETE SET NULL"
    )
    conn.execute(
        "UPDATE sessions s SET parent_id = p.id FROM sessions p "
        "WHERE s.parent_id IS NULL AND p.id <> s.id AND p.id = (COALESCE("
        "s.metadata -> 'forked_from' ->> 'session', s.metadata ->> 'parent_session'"
        ') COLLATE "C")'
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS sessions_top ON sessions (updated_at DESC, id) "
        "WHERE parent_id IS NULL"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS sessions_top_by_agent ON sessions "
        "(agent, updated_at DESC, id) WHERE parent_id IS NULL"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent_id, updated_at DESC, id)"
    )


def m004_session_counts(conn: Conn) -> None:
    """A listing's total is exact without counting every session: ``session_counts``
    holds signed deltas per agent and top-level flag, written by a trigger in the same
    transaction as the session row, so the sum over it is the count any snapshot sees
    (``list_sql``). Deltas are only inserted, so writers never wait on a shared row;
    every ``COUNT_ROLLUP``-th one folds the rest into one row per group, which keeps
    the sum a read of a few rows (skipping rows another fold holds: folds never wait
    on each other, so they cannot deadlock). The trigger skips appends (only ``agent`` and
    ``parent_id`` matter). Existing sessions are counted afresh here, under the table
    lock that creating the trigger takes, so no write slips between (and it may run
    again, as the other migrations may)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS session_counts (id bigint GENERATED ALWAYS AS IDENTITY "
        'PRIMARY KEY, agent text COLLATE "C" NOT NULL, top boolean NOT NULL, n bigint NOT NULL)'
    )
    conn.execute(_COUNT_SESSIONS.replace("COUNT_ROLLUP", str(COUNT_ROLLUP)))
    conn.execute("DROP TRIGGER IF EXISTS sessions_counted ON sessions")
    conn.execute(
        "CREATE TRIGGER sessions_counted AFTER INSERT OR DELETE OR UPDATE OF agent, parent_id "
        "ON sessions FOR EACH ROW EXECUTE FUNCTION count_sessions()"
    )
    conn.execute("DELETE FROM session_counts")
    conn.execute(
        "INSERT INTO session_counts (agent, top, n) "
        "SELECT agent, parent_id IS NULL, count(*) FROM sessions GROUP BY 1, 2"
    )


COUNT_ROLLUP = 1000
"""Every this many deltas, ``session_counts`` is folded to one row per group."""
_COUNT_SESSIONS = """
CREATE OR REPLACE FUNCTION count_sessions() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    added bigint;
    fold boolean := false;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.agent = NEW.agent
            AND (OLD.parent_id IS NULL) = (NEW.parent_id IS NULL) THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO session_counts (agent, top, n)
        VALUES (OLD.agent, OLD.parent_id IS NULL, -1) RETURNING id INTO added;
        fold := added % COUNT_ROLLUP = 0;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO session_counts (agent, top, n)
        VALUES (NEW.agent, NEW.parent_id IS NULL, 1) RETURNING id INTO added;
        fold := fold OR added % COUNT_ROLLUP = 0;
    END IF;
    IF fold THEN
        WITH gone AS (DELETE FROM session_counts WHERE id IN (
            SELECT id FROM session_counts FOR UPDATE SKIP LOCKED) RETURNING agent, top, n)
        INSERT INTO session_counts (agent, top, n)
        SELECT agent, top, sum(n) FROM gone GROUP BY agent, top HAVING sum(n) <> 0;
    END IF;
    RETURN NULL;
END $$"""


MIGRATIONS: list[Callable[[Conn], None]] = [
    m001_initial,
    m002_index_decoded_text,
    m003_session_parents,
    m004_session_counts,
]
SCHEMA_VERSION = len(MIGRATIONS)


def search_text(pieces: list[str]) -> str:
    """What ``search`` indexes: the index text, cut at a token boundary to
    ``SEARCH_TEXT_LIMIT`` characters (a tsvector is limited to 1 MB)."""
    text = capped_index_text(pieces)
    if len(text) > SEARCH_TEXT_LIMIT:
        text = text[: SEARCH_TEXT_LIMIT + 1].rsplit(" ", 1)[0]
    return text


# -- rows -------------------------------------------------------------------------
