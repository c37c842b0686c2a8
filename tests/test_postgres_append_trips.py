"""An append on PostgreSQL is one pipelined transaction with two round trips (lock and
look up; write and commit), and one that fails leaves its connection idle for the next.

The round trips are counted at the driver: each time the client blocks for the server's
answer. psycopg's ``transaction()`` added three (a sync at BEGIN, before COMMIT and at
COMMIT), all but the first while the session's row lock was held.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import require_postgres
from tests.test_postgres_store import fresh_schema
from threadline import Message, open_store
from threadline.errors import InvalidMessage, SessionNotFound
from threadline.store.encoding import prepare_messages
from threadline.store.postgres import PostgresStore


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    """A store of one pooled connection: a connection a failed append left in a
    transaction would be the next append's."""
    with fresh_schema(require_postgres(), pool_size="1") as (url, _):
        opened = open_store(url)
        assert isinstance(opened, PostgresStore)
        try:
            yield opened
        finally:
            opened.close()


def answers_waited(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry each time a pipeline syncs or flushes and reads what came back."""
    waited: list[int] = []
    original = psycopg.Pipeline._fetch_gen

    def counted(self: Any, *, flush: bool) -> Any:
        if self.result_queue:  # answers still to come: it blocks for them
            waited.append(len(self.result_queue))
        return original(self, flush=flush)

    monkeypatch.setattr(psycopg.Pipeline, "_fetch_gen", counted)
    return waited


def test_an_append_waits_for_the_server_twice(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = store.create_session(agent="writer").id
    model = store.session_info(sid).model
    store.append_messages(sid, prepare_messages(model, [Message.user("warm the pool")]))
    waited = answers_waited(monkeypatch)
    store.append_messages(sid, prepare_messages(model, [Message.user("one")]))
    assert len(waited) <= 3, waited  # the lock's answer, the commit's, the pipeline's end
    assert [m.text for m in store.read_messages(sid)] == ["warm the pool", "one"]


def test_a_failed_append_leaves_its_connection_idle(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    sid = store.create_session(agent="writer").id
    model = store.session_info(sid).model
    twice = Message.user("twice")
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        with pytest.raises(SessionNotFound):  # raised here, inside the transaction
            store.append_messages("no-such-session", prepare_messages(model, [twice]))
        with pytest.raises(InvalidMessage):  # refused by the server, inside the pipeline
            store.append_messages(sid, prepare_messages(model, [twice, twice]))
        stored = store.append_messages(sid, prepare_messages(model, [Message.user("after")]))
    assert not [r for r in caplog.records if "rolling back" in r.getMessage()]
    assert [m.seq for m in stored] == [1]
    assert [m.text for m in store.read_messages(sid)] == ["after"]
    with store._read() as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
