"""The store's records (``store/records.py``): the JSON they write and read, and what
they refuse. The shapes here are the ones stores already hold (written by earlier
versions, whose records were pydantic models), so old stores keep loading."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from threadline import Message, open_store
from threadline.errors import CorruptRecord
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import CorruptRecordWarning
from threadline.store.listing import SessionPage
from threadline.store.locks import LockHolder
from threadline.store.records import format_time
from threadline.store.search_records import SearchHit
from threadline.store.session_info import ScratchpadEntry, SessionInfo, SessionStart

T0 = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
STORED_LOCK = (
    '{"pid":4242,"host":"elsewhere","started_at":"2026-01-02T03:04:05.123456Z",'
    '"renewed_at":"2026-01-02T03:04:05Z","lease_seconds":600.0}'
)
"""A lock as every backend has stored it (SQLite and Redis as this text, JSONL and
PostgreSQL as the object)."""


def info(**changes: object) -> SessionInfo:
    fields: dict[str, object] = {
        "id": "s-0001",
        "agent": "coder",
        "created_at": T0,
        "updated_at": T0,
        "metadata": {"k": [1, 2.5, None]},
    }
    return SessionInfo(**{**fields, **changes})  # type: ignore[arg-type]


# -- writing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dt", "text"),
    [
        (datetime(2026, 1, 2, tzinfo=UTC), "2026-01-02T00:00:00Z"),
        (T0, "2026-01-02T03:04:05.123456Z"),
        (datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC), "2026-01-02T03:04:05.120000Z"),
        (T0.astimezone(timezone(timedelta(hours=2))), "2026-01-02T05:04:05.123456+02:00"),
        (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
    ],
)
def test_times_are_written_as_before(dt: datetime, text: str) -> None:
    assert format_time(dt) == text


def test_session_info_json_has_the_documented_fields_in_order() -> None:
    data = info(title="ü ☃").to_dict()
    assert list(data) == [
        "id",
        "agent",
        "model",
        "title",
        "created_at",
        "updated_at",
        "message_count",
        "total_tokens",
        "last_seq",
        "metadata",
        "parent_id",
    ]
    assert data["created_at"] == "2026-01-02T03:04:05.123456Z" and data["model"] is None
    assert json.loads(info(title="ü ☃").to_json()) == data
    assert "ü ☃" in info(title="ü ☃").to_json()  # UTF-8, not \\u escapes


def test_to_dict_copies_containers_and_excludes_fields() -> None:
    record = info()
    data = record.to_dict(exclude={"id"})
    assert "id" not in data
    data["metadata"]["k"].append("changed")
    assert record.metadata == {"k": [1, 2.5, None]}


def test_lock_json_is_the_stored_shape() -> None:
    holder = LockHolder(
        pid=4242,
        host="elsewhere",
        started_at=T0,
        renewed_at=T0.replace(microsecond=0),
    )
    assert holder.to_json() == STORED_LOCK


def test_page_nests_its_sessions() -> None:
    page = SessionPage(items=[info()], total=3)
    data = page.to_dict()
    assert data["items"] == [info().to_dict()] and (data["total"], data["offset"]) == (3, 0)
    assert list(page) == [info()] and len(page) == 1
    assert SessionPage.from_dict(data) == page


# -- reading ----------------------------------------------------------------------


def test_stored_lock_reads_back_from_text_and_object() -> None:
    holder = LockHolder.from_json(STORED_LOCK)
    assert holder.pid == 4242 and holder.started_at == T0 and holder.lease_seconds == 600.0
    assert holder.started_at.utcoffset() == timedelta(0)
    assert LockHolder.from_dict(json.loads(STORED_LOCK)) == holder
    assert LockHolder.from_json(holder.to_json()) == holder


def test_redis_hash_fields_read_as_text() -> None:
    """Redis keeps a session as a hash of strings, with keys a record does not have."""
    fields = {
        "id": "s-0001",
        "agent": "coder",
        "created_at": "2026-01-02T03:04:05.123456Z",
        "updated_at": "2026-01-02T03:04:05.123456Z",
        "message_count": "4",
        "total_tokens": "120",
        "last_seq": "4",
        "metadata": {},
        "memo": "{}",
        "lock": STORED_LOCK,
        "seq_base": "0",
    }
    record = SessionInfo.from_dict(fields)
    assert (record.message_count, record.total_tokens, record.last_seq) == (4, 120, 4)
    assert record.created_at == T0 and record.model is None and record.title is None


def test_checkpoint_and_scratchpad_shapes_of_redis_and_jsonl() -> None:
    body = (
        '{"session_id":"s-0001","covers_up_to":7,"summary":"so far",'
        '"created_at":"2026-01-02T03:04:05.123456Z","metadata":{"by":"test"}}'
    )
    cp = Checkpoint.from_json(body)  # Redis keeps it without its id: the list index is
    assert (cp.id, cp.covers_up_to, cp.created_at, cp.metadata) == (0, 7, T0, {"by": "test"})
    assert Checkpoint.from_dict(cp.replace(id=3).to_dict()) == cp.replace(id=3)
    entry = {"content": "plan", "created_at": "2026-01-02T03:04:05Z", "updated_at": T0}
    read = ScratchpadEntry.from_dict({"name": "todo", **entry})
    assert read.name == "todo" and read.updated_at == T0
    hit = SearchHit.from_dict({"session_id": "s", "seq": 2, "role": "user", "snippet": "x"})
    assert hit.agent is None


def test_unknown_keys_are_ignored() -> None:
    data = {**json.loads(STORED_LOCK), "written_by": "a newer threadline"}
    assert LockHolder.from_dict(data) == LockHolder.from_json(STORED_LOCK)


# -- refusing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (None, r"LockHolder: expected an object, got NoneType"),
        ([1, 2], r"LockHolder: expected an object"),
        ({"host": "h"}, r"LockHolder: missing pid"),
        ({"pid": "abc", "host": "h"}, r"LockHolder\.pid: expected an integer, got str 'abc'"),
        ({"pid": True, "host": "h"}, r"LockHolder\.pid: expected an integer, got bool"),
        ({"pid": 1.5, "host": "h"}, r"LockHolder\.pid: expected an integer"),
        ({"pid": 1, "host": 7}, r"LockHolder\.host: expected text, got int 7"),
        ({"pid": 1, "host": "h", "started_at": "soon"}, r"LockHolder\.started_at: expected"),
        ({"pid": 1, "host": "h", "lease_seconds": "long"}, r"LockHolder\.lease_seconds"),
    ],
)
def test_bad_lock_data_is_a_clear_value_error(data: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        LockHolder.from_dict(data)


def test_bad_json_text_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="LockHolder: not JSON"):
        LockHolder.from_json("{not json")
    with pytest.raises(ValueError, match="LockHolder: not JSON"):
        LockHolder.from_json(b"\xff\xfe")
    with pytest.raises(ValueError, match="Checkpoint: expected an object"):
        Checkpoint.from_json("[]")


def test_constructing_and_replacing_check_too() -> None:
    with pytest.raises(ValueError, match=r"SessionInfo\.metadata: expected a JSON object"):
        info(metadata=["not", "an", "object"])
    with pytest.raises(ValueError, match=r"SessionInfo\.title: expected text"):
        info().replace(title=42)
    with pytest.raises(ValueError, match=r"SessionPage\.items: SessionInfo: missing id"):
        SessionPage.from_dict({"items": [{"agent": "x"}], "total": 1})
    assert LockHolder(pid=1, host="h", lease_seconds=60).lease_seconds == 60.0


@pytest.mark.parametrize("field", ["last_seq", "message_count", "total_tokens"])
def test_a_session_start_is_never_negative(field: str) -> None:
    counters = {"last_seq": 3, "message_count": 3, "total_tokens": 10, field: -1}
    with pytest.raises(ValueError, match=rf"SessionStart\.{field} must be >= 0, got -1"):
        SessionStart(parent="p-0001", **counters)


# -- the stores' paths for unreadable records -------------------------------------


def test_sqlite_reads_an_old_lock_and_reports_a_corrupt_one(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = open_store(f"sqlite://{path}")
    sid = store.create_session().id
    with sqlite3.connect(path) as con:
        con.execute("UPDATE sessions SET lock = ? WHERE id = ?", (STORED_LOCK, sid))
    assert store.lock_holder(sid) == LockHolder.from_json(STORED_LOCK)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE sessions SET lock = ? WHERE id = ?", ('{"pid": "x"}', sid))
    with pytest.raises(CorruptRecord, match=rf"session {sid}: unreadable lock record"):
        store.lock_holder(sid)
    with pytest.raises(CorruptRecord, match="LockHolder"):
        store.acquire_lock(sid)
    store.delete_session(sid, force=True)
    store.close()


def test_jsonl_reports_a_corrupt_lock_and_checkpoints(tmp_path: Path) -> None:
    store = open_store(f"jsonl://{tmp_path}")
    session = store.create_session(agent="coder")
    session.append(Message.user("hi"))
    session.add_checkpoint(covers_up_to=1, summary="said hi")
    meta_path = next(tmp_path.rglob(f"{session.id}.meta.json"))
    meta = json.loads(meta_path.read_text())
    meta["lock"] = json.loads(STORED_LOCK)
    meta_path.write_text(json.dumps(meta))
    assert store.lock_holder(session.id) == LockHolder.from_json(STORED_LOCK)
    meta["lock"] = {"pid": 1}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CorruptRecord, match="unreadable lock record: LockHolder: missing host"):
        store.lock_holder(session.id)
    store.delete_session(session.id)  # an unreadable session can always be deleted
    store.close()


def test_redis_skips_a_corrupt_entry_and_reports_a_corrupt_lock() -> None:
    import uuid

    import redis

    from tests.conftest import require_redis
    from threadline.store.redis import parse_redis_url

    url = require_redis()
    prefix = f"threadline-test:{uuid.uuid4().hex[:12]}:"
    raw = redis.Redis.from_url(parse_redis_url(url)[0])
    store = open_store(f"{url}?prefix={prefix}")
    try:
        sid = store.create_session().id
        store.scratchpad_write(sid, "good", "kept")
        stored = store.scratchpad_read(sid, "good")
        assert stored is not None
        raw.hset(f"{prefix}p:{sid}", "bad", stored.replace(name="bad").to_json())
        assert store.scratchpad_read(sid, "bad") == stored.replace(name="bad")
        raw.hset(f"{prefix}p:{sid}", "bad", json.dumps({**stored.to_dict(), "content": 5}))
        with pytest.warns(CorruptRecordWarning, match=r"'bad'.*ScratchpadEntry\.content"):
            assert [e.name for e in store.scratchpad_list(sid)] == ["good"]
        raw.hset(f"{prefix}s:{sid}", "lock", STORED_LOCK)
        assert store.lock_holder(sid) == LockHolder.from_json(STORED_LOCK)
        raw.hset(f"{prefix}s:{sid}", "lock", "{not json")
        with pytest.raises(CorruptRecord, match="unreadable lock record"):
            store.lock_holder(sid)
    finally:
        store.close()
        for key in raw.scan_iter(match=prefix + "*", count=1000):
            raw.delete(key)


def test_postgres_reads_an_old_lock_and_reports_a_corrupt_one() -> None:
    import uuid

    import psycopg

    from tests.conftest import require_postgres
    from threadline.store.postgres import split_postgres_url

    url = require_postgres()
    schema = "t" + uuid.uuid4().hex[:16]
    admin = psycopg.connect(split_postgres_url(url)[0], autocommit=True)
    store = open_store(f"{url}{'&' if '?' in url else '?'}schema={schema}")
    try:
        sid = store.create_session().id
        update = f'UPDATE "{schema}".sessions SET lock = %s WHERE id = %s'
        admin.execute(update, (STORED_LOCK, sid))
        assert store.lock_holder(sid) == LockHolder.from_json(STORED_LOCK)
        admin.execute(update, ('{"pid": 1, "host": "h", "renewed_at": 5}', sid))
        with pytest.raises(CorruptRecord, match=r"LockHolder\.renewed_at: expected an RFC 3339"):
            store.lock_holder(sid)
        with pytest.raises(CorruptRecord, match="unreadable lock record"):
            store.delete_session(sid)
        store.delete_session(sid, force=True)
    finally:
        store.close()
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()
