"""A PostgreSQL listing's total comes from ``session_counts`` (migration 4, issue 26
point 4): deltas a trigger writes with every session row, folded now and then. These
tests hold it to ``count(*)`` over the sessions themselves after every kind of change
(create, fork, subagent, a parent set later, deletes that make children top-level,
rows written by plain SQL in bulk, enough to fold many times) and after an upgrade of
a store that already held sessions.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from tests.conftest import require_postgres
from tests.test_postgres_store import _admin, fresh_schema
from threadline import Message, open_store
from threadline.store.fork import fork_session
from threadline.store.postgres_schema import COUNT_ROLLUP, SCHEMA_VERSION
from threadline.store.protocol import Store

AGENTS = ("a1", "a2")


def exact(admin: psycopg.Connection[Any], schema: str, where: str) -> int:
    row = admin.execute(f'SELECT count(*) FROM "{schema}".sessions{where}').fetchone()
    assert row is not None
    return int(row[0])


def assert_totals_exact(
    store: Store, url: str, schema: str, most_rows: int = COUNT_ROLLUP + 2 * (len(AGENTS) + 1)
) -> None:
    """Every total a listing gives matches ``count(*)``, and the deltas stay few
    (``most_rows``: at most a fold's worth, plus one row per group, when writes come
    one after another)."""
    with _admin(url) as admin:
        for agent in (None, *AGENTS, "nobody"):
            for top_level in (False, True):
                clauses = [f"agent = '{agent}'"] if agent else []
                clauses += ["parent_id IS NULL"] if top_level else []
                where = " WHERE " + " AND ".join(clauses) if clauses else ""
                page = store.list_sessions(agent=agent, top_level=top_level, limit=1)
                assert page.total == exact(admin, schema, where), (agent, top_level)
        rows = admin.execute(f'SELECT count(*) FROM "{schema}".session_counts').fetchone()
    assert rows is not None and rows[0] <= most_rows


def test_totals_stay_exact_through_every_kind_of_change() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        store = open_store(store_url)
        try:
            assert_totals_exact(store, url, schema)
            parent = store.create_session(agent="a1")
            parent.append([Message.user("hello")])
            fork = fork_session(parent)
            sub = store.create_session(agent="a2", parent=parent.id)
            loose = store.create_session(agent="a2")
            assert_totals_exact(store, url, schema)
            store.update_session(loose.id, parent=sub.id)
            store.update_session(loose.id, metadata={"k": "v"})
            assert_totals_exact(store, url, schema)
            store.delete_session(sub.id)  # loose becomes top-level
            assert_totals_exact(store, url, schema)
            with _admin(url) as admin:
                admin.execute(
                    f'INSERT INTO "{schema}".sessions (id, agent, created_at, updated_at, '
                    "parent_id) SELECT 'bulk' || i, 'a' || (1 + i %% 2), now(), now(), "
                    "CASE WHEN i %% 3 = 0 THEN %s END FROM generate_series(1, %s) AS i",
                    (parent.id, 3 * COUNT_ROLLUP + 7),
                )
            assert_totals_exact(store, url, schema)
            store.delete_session(parent.id, force=True)  # its fork too; children top-level
            assert_totals_exact(store, url, schema)
            assert store.delete_all(agent="a2") > COUNT_ROLLUP
            assert_totals_exact(store, url, schema)
            store.delete_all()
            assert_totals_exact(store, url, schema)
            assert store.list_sessions().total == 0 and fork.id
        finally:
            store.close()


def test_an_upgraded_store_counts_the_sessions_it_held() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        store = open_store(store_url)
        try:
            parent = store.create_session(agent="a1")
            for _ in range(3):
                store.create_session(agent="a2", parent=parent.id)
                store.create_session(agent="a1")
        finally:
            store.close()
        with _admin(url) as admin:  # back to schema 3: as a store made before counts
            admin.execute(f'DROP TABLE "{schema}".session_counts')
            admin.execute(f'DROP FUNCTION "{schema}".count_sessions() CASCADE')
            admin.execute(
                f"UPDATE \"{schema}\".threadline_meta SET value = %s WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION - 1),),
            )
        store = open_store(store_url)
        try:
            assert store.list_sessions().total == 7
            assert store.list_sessions(top_level=True, agent="a1").total == 4
            # a fold leaves what writers held uncommitted meanwhile (at most 4 x 300)
            assert_totals_exact(store, url, schema, most_rows=3 * COUNT_ROLLUP)
        finally:
            store.close()


def test_totals_stay_exact_when_writers_and_folds_race() -> None:
    """Writers on their own connections insert and delete sessions in bulk at once, so
    many folds run while other transactions write and fold: none waits for another,
    none fails, and the totals still match the rows."""
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        store = open_store(store_url)
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                with _admin(url) as conn:
                    for r in range(12):
                        with conn.transaction():
                            conn.execute(
                                f'INSERT INTO "{schema}".sessions (id, agent, created_at, '
                                "updated_at) SELECT %s || i, %s, now(), now() "
                                "FROM generate_series(1, 150) AS i",
                                (f"w{w}-{r}-", AGENTS[w % 2]),
                            )
                            if r % 3 == 2:
                                conn.execute(
                                    f'DELETE FROM "{schema}".sessions WHERE id LIKE %s',
                                    (f"w{w}-{r - 1}-%",),
                                )
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            assert store.list_sessions().total == 4 * (12 - 4) * 150
            # a fold leaves what writers held uncommitted meanwhile (at most 4 x 300)
            assert_totals_exact(store, url, schema, most_rows=3 * COUNT_ROLLUP)
        finally:
            store.close()
