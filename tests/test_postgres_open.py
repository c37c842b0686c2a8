"""Opening a PostgreSQL store (issue 26, point 4): a store already at this schema version
is seen with one read and no lock, and connects once; everything else still goes
through the migration under the advisory lock and says what it says there.

The lock is shown by holding it from another connection while the store opens, with
a ``lock_timeout`` on the store's connections: an open that waits for it fails at
once with that timeout instead of waiting.

Listing a PostgreSQL store loads no message models either (pydantic: about 100 ms of
a CLI run), as listing a SQLite store does not (``tests/test_cli_startup.py``).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import require_postgres
from tests.test_cli_startup import MODELS, loaded_after
from tests.test_postgres_store import _admin, _set_version, admin_sql, fresh_schema
from threadline import Message, open_store
from threadline.errors import NotAThreadlineStore, SchemaTooNew, StoreError, StoreNotFound
from threadline.store.postgres import MIGRATION_LOCK_KEY, PostgresStore
from threadline.store.postgres_schema import SCHEMA_VERSION

LOCK_TIMEOUT = "options=-c%20lock_timeout%3D200"
"""libpq option: the store's statements give up waiting for a lock after 200 ms."""


def _hold_migration_lock(url: str, schema: str) -> psycopg.Connection[Any]:
    admin = _admin(url)
    admin.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (MIGRATION_LOCK_KEY, schema))
    return admin


def _version(url: str, schema: str) -> str:
    with _admin(url) as admin:
        row = admin.execute(
            f"SELECT value FROM \"{schema}\".threadline_meta WHERE key = 'schema_version'"
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_a_current_store_opens_without_the_lock_and_on_one_connection() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        open_store(store_url).create_session(id="kept").store.close()
        admin = _hold_migration_lock(url, schema)
        try:
            store = PostgresStore.from_url(f"{store_url}&{LOCK_TIMEOUT}", create=False)
            try:
                assert store.session_info("kept").id == "kept"
                assert store._pool.get_stats()["connections_num"] == 1
            finally:
                store.close()
        finally:
            admin.close()


def test_an_older_store_is_upgraded_under_the_lock() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        open_store(store_url).create_session(id="kept").store.close()
        _set_version(url, schema, SCHEMA_VERSION - 1)  # the last migration is idempotent
        admin = _hold_migration_lock(url, schema)
        try:
            with pytest.raises(StoreError, match="lock timeout"):
                open_store(f"{store_url}&{LOCK_TIMEOUT}")
        finally:
            admin.close()
        assert _version(url, schema) == str(SCHEMA_VERSION - 1)
        store = open_store(store_url)
        try:
            assert store.session_info("kept").id == "kept"
        finally:
            store.close()
        assert _version(url, schema) == str(SCHEMA_VERSION)


def test_too_new_foreign_and_missing_stores_are_still_refused() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        open_store(store_url).close()
        _set_version(url, schema, SCHEMA_VERSION + 1)
        for create in (True, False):
            with pytest.raises(SchemaTooNew, match="upgrade threadline"):
                PostgresStore.from_url(store_url, create=create)
        _set_version(url, schema, SCHEMA_VERSION)
        with _admin(url) as admin:
            admin.execute(
                f"UPDATE \"{schema}\".threadline_meta SET value = 'other' WHERE key = 'app'"
            )
        with pytest.raises(NotAThreadlineStore, match="not a threadline store"):
            open_store(store_url)
    with fresh_schema(url) as (store_url, schema):
        admin_sql(
            url,
            f'CREATE SCHEMA "{schema}"',
            f'CREATE TABLE "{schema}".threadline_meta (name text)',
            f'CREATE TABLE "{schema}".invoices (id int)',
        )
        with pytest.raises(StoreError):
            open_store(store_url)
        with _admin(url) as admin:
            admin.execute(f'DROP TABLE "{schema}".threadline_meta')
        with pytest.raises(NotAThreadlineStore, match="invoices"):
            open_store(store_url)
    with fresh_schema(url) as (store_url, schema):
        with pytest.raises(StoreNotFound):
            PostgresStore.from_url(store_url, create=False)
        with _admin(url) as admin:
            found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            assert found.fetchone() is None  # nothing was created


def test_listing_a_postgres_store_loads_no_message_models() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, _):
        store = open_store(store_url)
        try:
            session = store.create_session(agent="coder", title="first")
            session.append([Message.user("hello"), Message.user("oops")])
            session.retract([2])
        finally:
            store.close()
        for args in (["sessions", "list"], ["sessions", "list", "--json"]):
            assert loaded_after(["--store", store_url, *args], MODELS) == {
                "code": 0,
                "loaded": [],
            }
