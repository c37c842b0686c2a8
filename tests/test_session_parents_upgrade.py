"""Stores written before sessions had a parent field (issue 22, point 4): each backend's
migration moves the links kept in metadata (a fork's ``forked_from.session``, an
imported subagent's ``parent_session``) into ``parent_id``, and a page of top-level
sessions is served by an index, not by reading every session.

SQLite and PostgreSQL run their ordered migrations; Redis upgrades its key layout on
open; the JSONL store reads an old session's link from its metadata.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.backends import clean_store
from tests.conftest import require_postgres, require_redis
from threadline import Message, open_store
from threadline.store.listing import ListRequest
from threadline.store.protocol import Store

LEGACY = [  # id, metadata as an old store kept it
    ("root-0001", {}),
    ("fork-0001", {"forked_from": {"session": "root-0001", "seq": 0}}),
    ("sub-00001", {"parent_session": "root-0001", "parent_source_id": "x"}),
    ("lost-0001", {"parent_session": "gone-0001"}),  # its parent was deleted: top-level
    ("self-0001", {"parent_session": "self-0001"}),  # never its own parent
    ("odd-00001", {"forked_from": "not an object", "parent_session": 7}),
]
UPDATED = {sid: f"2025-0{i + 1}-01T00:00:00.000000Z" for i, (sid, _) in enumerate(LEGACY)}


def expect_upgraded(store: Store) -> None:
    assert {s.id: s.parent_id for s in store.list_sessions().items} == {
        "root-0001": None,
        "fork-0001": "root-0001",
        "sub-00001": "root-0001",
        "lost-0001": None,
        "self-0001": None,
        "odd-00001": None,
    }
    top = store.list_sessions(top_level=True)
    assert [s.id for s in top] == ["odd-00001", "self-0001", "lost-0001", "root-0001"]
    assert store.count_children(["root-0001"]) == {"root-0001": 2}
    child = store.create_session(parent="root-0001", id="new-00001")  # and new ones go on
    assert child.parent_id == "root-0001"


# -- SQLite ------------------------------------------------------------------------


def test_sqlite_migration_moves_links_out_of_metadata(tmp_path: Path) -> None:
    from threadline.store.sqlite import INDEX_TEXT_FUNCTION, MIGRATIONS, _index_text_sql

    path = tmp_path / "v3.db"
    con = sqlite3.connect(path, isolation_level=None)
    con.create_function(INDEX_TEXT_FUNCTION, 1, _index_text_sql, deterministic=True)
    con.execute("BEGIN")
    for migration in MIGRATIONS[:3]:
        migration(con)
    con.execute("PRAGMA user_version = 3")
    con.execute("INSERT INTO threadline_meta (key, value) VALUES ('app', 'threadline')")
    for sid, meta in LEGACY:
        con.execute(
            "INSERT INTO sessions (id, agent, created_at, updated_at, metadata) "
            "VALUES (?, 'default', ?, ?, ?)",
            (sid, UPDATED[sid], UPDATED[sid], json.dumps(meta)),
        )
    con.execute("INSERT INTO sessions (id, agent, created_at, updated_at, metadata) "
                "VALUES ('bad-00001', 'default', ?, ?, 'not json')",
                ("2024-01-01T00:00:00.000000Z",) * 2)  # fmt: skip
    con.execute("COMMIT")
    con.close()
    store = open_store(f"sqlite://{path}")  # metadata that is no JSON stops nothing
    try:
        store.delete_session("bad-00001")
        expect_upgraded(store)
    finally:
        store.close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    con.close()


def test_sqlite_every_listing_is_served_by_an_index_in_order(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    store.close()
    con = sqlite3.connect(tmp_path / "s.db")
    plans = {}
    for name, request, index in (
        ("top", ListRequest(None, 20, 0, True, None), "sessions_by_parent"),  # its NULLs
        ("top of an agent", ListRequest("a", 20, 0, True, None), "sessions_top_by_agent"),
        ("children", ListRequest(None, 20, 0, False, "p-1"), "sessions_by_parent"),
        ("all", ListRequest(None, 20, 0, False, None), "sessions_by_updated"),
    ):
        where, args = request.where(":{}")
        for query in (
            f"SELECT id FROM sessions{where} ORDER BY updated_at DESC, id LIMIT 20",
            f"SELECT count(*) FROM sessions{where}",
        ):
            rows = con.execute("EXPLAIN QUERY PLAN " + query, args).fetchall()
            plans[(name, query)] = (" ".join(str(r[-1]) for r in rows), index)
    counted = con.execute(
        "EXPLAIN QUERY PLAN SELECT parent_id, count(*) FROM sessions "
        "WHERE parent_id IN ('a', 'b') GROUP BY parent_id"
    ).fetchall()
    con.close()
    for (name, query), (plan, index) in plans.items():
        if name == "all" and "count" in query:  # counting every row: any index will do
            index = r"\w+"
        assert re.search(rf"INDEX {index}\b", plan), f"{name}: {query}\n{plan}"
        assert "TEMP B-TREE" not in plan, f"{name} sorts: {plan}"
    assert "sessions_by_parent" in " ".join(str(r[-1]) for r in counted)


# -- PostgreSQL --------------------------------------------------------------------


def test_postgres_migration_moves_links_out_of_metadata() -> None:
    import psycopg
    from psycopg.types.json import Json

    from tests.test_postgres_store import _admin, fresh_schema
    from threadline.store.postgres_schema import MIGRATIONS

    url = require_postgres()
    with fresh_schema(url) as (store_url, schema), _admin(url) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'SET search_path TO "{schema}"')
        with admin.transaction():
            for migration in MIGRATIONS[:2]:
                migration(admin)  # type: ignore[arg-type]
            admin.execute(
                "INSERT INTO threadline_meta (key, value) "
                "VALUES ('app', 'threadline'), ('schema_version', '2')"
            )
            for sid, meta in LEGACY:
                admin.execute(
                    "INSERT INTO sessions (id, agent, created_at, updated_at, metadata) "
                    "VALUES (%s, 'default', %s, %s, %s)",
                    (sid, UPDATED[sid], UPDATED[sid], Json(meta)),
                )
        store = open_store(store_url)
        try:
            expect_upgraded(store)
        finally:
            store.close()
        version = admin.execute(
            "SELECT value FROM threadline_meta WHERE key = 'schema_version'"
        ).fetchone()
        assert version is not None and int(version[0]) == len(MIGRATIONS)
        with pytest.raises(psycopg.errors.ForeignKeyViolation):  # the column keeps its word
            admin.execute("UPDATE sessions SET parent_id = 'nobody' WHERE id = 'odd-00001'")


# -- Redis -------------------------------------------------------------------------


@pytest.fixture
def redis_store(tmp_path: Path) -> Iterator[Store]:
    require_redis()
    yield from clean_store("redis", tmp_path)


def test_redis_layout_upgrade_moves_links_out_of_metadata(redis_store: Store) -> None:
    from threadline.store.redis import LAYOUT, RedisStore

    store = redis_store
    assert isinstance(store, RedisStore)
    for sid, _ in LEGACY:
        store.create_session(id=sid, created_at=_parse(UPDATED[sid]))
    r, p = store._r, store.prefix
    # the keys as layout 1 wrote them: links in metadata, no parent field, no top-level or
    # children indexes
    for sid, meta in LEGACY:
        r.hset(f"{p}s:{sid}", "metadata", json.dumps(meta))
        r.hdel(f"{p}s:{sid}", "parent_id")
    r.delete(f"{p}layout", f"{p}top", f"{p}top-agent:default", f"{p}up", f"{p}kids:root-0001")
    again = RedisStore(r, prefix=p)
    expect_upgraded(again)
    assert int(r.get(f"{p}layout") or 0) == LAYOUT
    RedisStore(r, prefix=p)  # a second open finds the layout current and changes nothing
    expect_upgraded_once_more(again)


def expect_upgraded_once_more(store: Store) -> None:
    assert store.count_children(["root-0001"]) == {"root-0001": 3}  # new-00001 too
    assert store.list_sessions(top_level=True).total == 4


def test_redis_expired_parent_leaves_its_children_top_level(redis_store: Store) -> None:
    import time

    from threadline.store.redis import RedisStore

    store = redis_store
    assert isinstance(store, RedisStore)
    parent = store.create_session(id="mortal-01")
    kid = store.create_session(id="kid-00001", parent=parent.id)
    kid.append(Message.user("outlives its parent"))
    store.set_ttl(parent.id, 0.05)
    time.sleep(0.2)
    assert [s.id for s in store.list_sessions(top_level=True)] == [kid.id]  # reaped first
    assert store.session_info(kid.id).parent_id is None
    assert store.count_children([parent.id]) == {parent.id: 0}


# -- JSONL -------------------------------------------------------------------------


def test_jsonl_reads_an_old_sessions_link_from_its_metadata(tmp_path: Path) -> None:
    root = tmp_path / "j"
    store = open_store(f"jsonl://{root}")
    for sid, _ in LEGACY:
        store.create_session(id=sid, created_at=_parse(UPDATED[sid]))
    store.close()
    kept = dict(LEGACY)
    for path in (root / "sessions" / "default").glob("*.jsonl"):  # as format 1 wrote them
        header, *rest = path.read_bytes().split(b"\n", 1)
        record = json.loads(header)
        del record["parent"]
        record["metadata"] = kept[record["id"]]
        path.write_bytes(json.dumps(record).encode() + b"\n" + b"".join(rest))
        sidecar = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
        meta = json.loads(sidecar.read_text())
        del meta["parent"]
        meta["metadata"] = kept[record["id"]]
        sidecar.write_text(json.dumps(meta))
    store = open_store(f"jsonl://{root}")
    try:
        expect_upgraded(store)
    finally:
        store.close()


def _parse(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00"))
