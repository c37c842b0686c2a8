"""PostgreSQL-only behaviour of ``PostgresStore``; the shared contract is in tests/conformance.

What only a server shows: the planner serves tail, list and prefix lookups from
indexes; concurrent writers in separate processes never break the seq order; a
connection cut in the middle of an append, or right after its COMMIT, is resent
by the store and leaves exactly one copy, and connections terminated over and
over while a loop appends never reach the caller nor stderr; bad URLs and a
server that goes away give ``StoreUnavailable`` with a clear message, and the
pool recovers afterwards.

Every test uses a schema of its own (``?schema=t<hex>``) and drops it at the end.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import require_postgres
from threadline import Store, open_store
from threadline.errors import (
    NotAThreadlineStore,
    SchemaTooNew,
    SessionLocked,
    StoreUnavailable,
    UsageError,
)
from threadline.messages import Message
from threadline.store.checks import CorruptRecordWarning
from threadline.store.encoding import encode_message, prepare_messages
from threadline.store.locks import LockHolder
from threadline.store.postgres import (
    LIST_BY_AGENT_SQL,
    LIST_SQL,
    LIST_TOP_BY_AGENT_SQL,
    LIST_TOP_SQL,
    READ_SQL,
    RESOLVE_PREFIX_SQL,
    TAIL_SQL,
    PostgresStore,
    redact_url,
    split_postgres_url,
)
from threadline.store.postgres_schema import SCHEMA_VERSION

WAIT_FOR_SERVER_STATE = 30.0
"""Seconds a test polls pg_stat_activity for a state it is waiting for before failing."""
TERMINATE_FOR = 6.0
"""Seconds the terminating loop runs while appends go on."""
TERMINATE_EVERY = 0.2
"""Seconds between two rounds of ``pg_terminate_backend``."""


# -- helpers ------------------------------------------------------------------------


def _admin(url: str) -> psycopg.Connection[Any]:
    conninfo, _ = split_postgres_url(url)
    return psycopg.connect(conninfo, autocommit=True)


def admin_sql(url: str, *statements: str) -> None:
    """Run ``statements`` as the administrator, outside any store."""
    with _admin(url) as admin:
        for statement in statements:
            admin.execute(statement)


def _set_version(url: str, schema: str, version: int) -> None:
    with _admin(url) as admin:
        admin.execute(
            f"UPDATE \"{schema}\".threadline_meta SET value = %s WHERE key = 'schema_version'",
            (str(version),),
        )


@contextlib.contextmanager
def fresh_schema(url: str, **options: str) -> Iterator[tuple[str, str]]:
    """A store URL with a schema of its own (and ``options``); the schema is dropped after."""
    schema = "t" + uuid.uuid4().hex[:16]
    query = "&".join(f"{k}={v}" for k, v in {"schema": schema, **options}.items())
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}{query}", schema
    finally:
        with _admin(url) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _wait_for(admin: psycopg.Connection[Any], query: str, args: tuple[Any, ...]) -> Any:
    deadline = time.monotonic() + WAIT_FOR_SERVER_STATE
    while time.monotonic() < deadline:
        row = admin.execute(query, args).fetchone()
        if row is not None:
            return row[0]
        time.sleep(0.02)
    pytest.fail(f"the server never reached the expected state: {query} {args}")


def _explain(admin: psycopg.Connection[Any], schema: str, query: str, args: Any) -> str:
    admin.execute(f'SET search_path TO "{schema}"')
    rows = admin.execute("EXPLAIN " + query, args).fetchall()
    return "\n".join(r[0] for r in rows)


def _batch(n: int, tag: str) -> list[Message]:
    return [Message.user(f"{tag} message {i} " + "words " * 20) for i in range(n)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CuttingProxy:
    """A TCP relay in front of PostgreSQL that can swallow the reply to one COMMIT
    (the server committed, the client never hears it) or go down and come back."""

    def __init__(self, url: str) -> None:
        conninfo, _ = split_postgres_url(url)
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
        self.upstream = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        user, db = params.get("user") or "postgres", params.get("dbname") or "postgres"
        self.url_template = f"postgresql://{user}@127.0.0.1:{{port}}/{db}?sslmode=disable"
        self.port = 0
        self.cut_next_commit = threading.Event()
        self.cuts = 0
        self._listener: socket.socket | None = None
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """A URL that reaches the server through this proxy (plain text, so it can see COMMIT)."""
        return self.url_template.format(port=self.port)

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            _hang_up(s)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._socks += [client, server]
            state = {"commit_sent": False}
            for src, dst, up in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, up, state), daemon=True).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, up: bool, state: dict[str, bool]
    ) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if up and self.cut_next_commit.is_set() and b"COMMIT\x00" in data:
                state["commit_sent"] = True
            if not up and state["commit_sent"] and b"COMMIT\x00" in data:
                self.cut_next_commit.clear()
                self.cuts += 1
                break  # the server has committed; the client never learns it
            try:
                dst.sendall(data)
            except OSError:
                break
        _hang_up(src)
        _hang_up(dst)


def _hang_up(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


@contextlib.contextmanager
def proxied_store(**options: str) -> Iterator[tuple[CuttingProxy, Store]]:
    """A store reaching PostgreSQL through a ``CuttingProxy``, in a schema of its own."""
    proxy = CuttingProxy(require_postgres())
    proxy.start()
    try:
        with fresh_schema(proxy.url, **options) as (store_url, _):
            store = open_store(store_url)
            try:
                yield proxy, store
            finally:
                store.close()
    finally:
        proxy.stop()


def _append_worker(url: str, session_id: str, worker: int, count: int) -> int:
    """Runs in a child process: ``count`` single-message appends into one session."""
    store = open_store(url)
    try:
        for i in range(count):
            store.append_messages(session_id, [Message.user(f"worker {worker} append {i}")])
    finally:
        store.close()
    return count


# -- URLs (no server needed) --------------------------------------------------------


def test_url_options_are_split_and_the_password_never_shown() -> None:
    url = "postgresql://bob:s3cr%40t@db.example:6543/app?schema=abc&pool_size=2&sslmode=disable"
    conninfo, options = split_postgres_url(url)
    assert options == {"schema": "abc", "pool_size": "2"}
    assert conninfo == "postgresql://bob:s3cr%40t@db.example:6543/app?sslmode=disable"
    shown = redact_url(url)
    assert "s3cr" not in shown and "***" in shown and "db.example:6543" in shown


@given(
    password=st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40
    ),
    host=st.sampled_from(["db.example", "127.0.0.1", "[::1]"]),
)
def test_redacted_url_never_contains_the_password(password: str, host: str) -> None:
    secret = "Qz7" + password  # a prefix no other part of the URL contains
    url = f"postgresql://alice:{quote(secret, safe='')}@{host}:5432/app?schema=abc"
    shown = redact_url(url)
    assert quote(secret, safe="") not in shown and secret not in shown
    assert shown == f"postgresql://alice:***@{host}:5432/app?schema=abc"


@pytest.mark.parametrize(
    "query",
    ["schema=Bad-Name", "schema=x%3Bdrop", "schema=1abc", "pool_size=0", "pool_size=x"],
)
def test_bad_store_options_are_usage_errors(query: str) -> None:
    with pytest.raises(UsageError):
        PostgresStore.from_url(f"postgresql://postgres@127.0.0.1:{_closed_port()}/test?{query}")


# -- the planner --------------------------------------------------------------------


def test_tail_list_and_prefix_queries_are_served_by_indexes() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        store = open_store(store_url)
        store.close()
        with _admin(url) as admin:
            admin.execute(f'SET search_path TO "{schema}"')
            admin.execute(
                "INSERT INTO sessions (id, agent, created_at, updated_at) "
                "SELECT 's' || lpad(i::text, 6, '0'), 'agent' || (i % 10), "
                "now() - i * interval '1 second', now() - i * interval '1 second' "
                "FROM generate_series(1, 4000) AS i"
            )
            for session_of_row in ("'s000007'", "'s' || lpad((10 + i % 40)::text, 6, '0')"):
                admin.execute(
                    "INSERT INTO messages (session_id, seq, id, role, created_at, tokens, body, "
                    f"search_text) SELECT {session_of_row}, i, md5(i::text), 'user', now(), 1, "
                    "'{}', 'text ' || i FROM generate_series(1, 5000) AS i"
                )
            # nine in ten are subagents of the first hundred (issue 22): the top-level page
            admin.execute(
                "UPDATE sessions SET parent_id = 's' || lpad((1 + i % 100)::text, 6, '0') "
                "FROM generate_series(1, 4000) AS i "
                "WHERE id = 's' || lpad(i::text, 6, '0') AND i > 400"
            )
            admin.execute("ANALYZE sessions")
            admin.execute("ANALYZE messages")
            plans = {
                "top-level": (
                    _explain(admin, schema, LIST_TOP_SQL, {"limit": 20, "offset": 40}),
                    "sessions_top",
                ),
                "top-level by agent": (
                    _explain(
                        admin,
                        schema,
                        LIST_TOP_BY_AGENT_SQL,
                        {"agent": "agent3", "limit": 20, "offset": 0},
                    ),
                    "sessions_top_by_agent",
                ),
                "tail": (
                    _explain(
                        admin, schema, TAIL_SQL, {"sid": "s000007", "before": 10**9, "limit": 50}
                    ),
                    "messages_by_seq",
                ),
                "read": (
                    _explain(
                        admin, schema, READ_SQL, {"sid": "s000007", "after": 2000, "limit": 1000}
                    ),
                    "messages_by_seq",
                ),
                "list": (
                    _explain(admin, schema, LIST_SQL, {"limit": 20, "offset": 40}),
                    "sessions_by_updated",
                ),
                "list by agent": (
                    _explain(
                        admin,
                        schema,
                        LIST_BY_AGENT_SQL,
                        {"agent": "agent3", "limit": 20, "offset": 0},
                    ),
                    "sessions_by_agent",
                ),
                "prefix": (
                    _explain(
                        admin, schema, RESOLVE_PREFIX_SQL, {"low": "s00012", "high": "s00013"}
                    ),
                    "sessions_pkey",
                ),
            }
    for name, (plan, index) in plans.items():
        assert "Seq Scan" not in plan, f"{name} scans the table:\n{plan}"
        assert "Index" in plan and index in plan, f"{name} does not use {index}:\n{plan}"


# -- concurrency and crashes --------------------------------------------------------


def test_concurrent_writers_in_eight_processes_leave_no_gap_and_no_duplicate() -> None:
    url = require_postgres()
    workers, each = 8, 200
    with fresh_schema(url) as (store_url, _):
        store = open_store(store_url)
        sid = store.create_session(title="shared").id
        # forkserver, preloaded: eight clean children without eight interpreter start-ups
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        with ctx.Pool(workers) as pool:
            done = pool.starmap(_append_worker, [(store_url, sid, w, each) for w in range(workers)])
        assert sum(done) == workers * each
        stored = store.read_messages(sid)
        info = store.session_info(sid)
        store.close()
    assert [m.seq for m in stored] == list(range(1, workers * each + 1))
    assert len({m.id for m in stored}) == workers * each
    texts = {m.text for m in stored}
    assert texts == {f"worker {w} append {i}" for w in range(workers) for i in range(each)}
    for w in range(workers):  # each writer's own appends keep their order
        mine = [m.text for m in stored if m.text.startswith(f"worker {w} ")]
        assert mine == [f"worker {w} append {i}" for i in range(each)]
    assert info.message_count == info.last_seq == workers * each


def test_connection_cut_mid_append_is_resent_and_leaves_exactly_one_copy() -> None:
    """The append's connection is terminated with 299 rows of the batch inserted: the
    store resends it on a new connection (which waits on the same row), and once that
    row is free the batch is stored once, the caller never hearing of the cut."""
    url = require_postgres()
    app = "tlcut" + uuid.uuid4().hex[:12]
    with fresh_schema(url, application_name=app) as (store_url, schema):
        store = open_store(store_url)
        session = store.create_session()
        session.append(Message.user("before"))
        batch = _batch(400, "cut")
        outcome: dict[str, BaseException | None] = {}
        with _admin(url) as admin, _admin(url) as blocker:
            # an uncommitted row holding the 300th message's id makes the append wait
            # there, with 299 rows of the batch already inserted in its transaction
            blocker.execute("BEGIN")
            blocker.execute(f'SET LOCAL search_path TO "{schema}"')
            blocker.execute(
                "INSERT INTO messages (session_id, seq, id, role, created_at, tokens, body, "
                "search_text) VALUES (%s, 1000000, %s, 'user', now(), 0, '{}', '')",
                (session.id, batch[299].id),
            )

            def append() -> None:
                try:
                    store.append_messages(session.id, batch)
                    outcome["error"] = None
                except BaseException as exc:
                    outcome["error"] = exc

            thread = threading.Thread(target=append)
            thread.start()
            waiting = (
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event_type = 'Lock' AND pid <> %s"
            )
            pid = _wait_for(admin, waiting, (app, 0))
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            _wait_for(admin, waiting, (app, pid))  # the resend, waiting on the same row
            blocker.execute("ROLLBACK")
            thread.join()
        assert outcome == {"error": None}
        again = store.append_messages(session.id, batch)
        stored = store.read_messages(session.id)
        store.close()
    assert [m.seq for m in again] == list(range(2, 402))
    assert [m.seq for m in stored] == list(range(1, 402))
    assert [m.id for m in stored[1:]] == [m.id for m in batch]


def test_retry_waiting_behind_the_original_append_returns_its_copies() -> None:
    """The original is still in flight (its connection is gone, its transaction is
    not): the retry waits for the row lock, then must see the rows it committed."""
    url = require_postgres()
    app = "tlwait" + uuid.uuid4().hex[:12]
    with fresh_schema(url, application_name=app) as (store_url, schema):
        store = open_store(store_url)
        sid = store.create_session().id
        batch = _batch(20, "inflight")
        result: list[Message] = []
        with _admin(url) as admin, _admin(url) as original:
            original.execute("BEGIN")
            original.execute(f'SET LOCAL search_path TO "{schema}"')
            original.execute("SELECT 1 FROM sessions WHERE id = %s FOR NO KEY UPDATE", (sid,))
            with original.cursor() as cur:
                cur.executemany(
                    "INSERT INTO messages (session_id, seq, id, role, created_at, tokens, body, "
                    "search_text) VALUES (%s, %s, %s, %s, %s, 0, %s, %s)",
                    [
                        (sid, i + 1, m.id, m.role, m.created_at, encode_message(m).decode(), m.text)
                        for i, m in enumerate(batch)
                    ],
                )
            original.execute(
                "UPDATE sessions SET last_seq = 20, message_count = 20 WHERE id = %s", (sid,)
            )
            thread = threading.Thread(
                target=lambda: result.extend(store.append_messages(sid, batch))
            )
            thread.start()
            _wait_for(
                admin,
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event_type = 'Lock'",
                (app,),
            )
            original.execute("COMMIT")
            thread.join()
        assert store.count_messages(sid) == 20
        store.close()
    assert [m.id for m in result] == [m.id for m in batch]
    assert [m.seq for m in result] == list(range(1, 21))


def test_an_unreadable_row_is_reported_with_where_and_skipped() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        store = open_store(store_url)
        sid = store.create_session().id
        store.append_messages(sid, _batch(3, "corrupt"))
        with _admin(url) as admin:
            admin.execute(
                f'UPDATE "{schema}".messages SET body = %s WHERE seq = 2', ('{"role": "nobody"}',)
            )
        with pytest.warns(CorruptRecordWarning, match=f"{sid} seq 2"):
            assert [m.seq for m in store.read_messages(sid)] == [1, 3]
        with pytest.warns(CorruptRecordWarning):
            assert [m.seq for m in store.tail(sid, 5)] == [3, 1]
        store.close()


def test_reply_to_commit_lost_is_resent_and_returns_the_stored_copies() -> None:
    with proxied_store() as (proxy, store):
        session = store.create_session()
        batch = _batch(50, "ack")
        proxy.cut_next_commit.set()
        retried = store.append_messages(session.id, batch)  # resent: the stored copies
        assert proxy.cuts == 1
        assert store.count_messages(session.id) == 50
        stored = store.read_messages(session.id)
    assert [m.id for m in retried] == [m.id for m in batch]
    assert [m.seq for m in retried] == list(range(1, 51))
    assert [m.id for m in stored] == [m.id for m in batch]


def test_a_checkpoint_whose_commit_reply_is_lost_is_resent_and_stored_once() -> None:
    """The resend of a checkpoint on an expected predecessor finds itself stored (same
    stamp) and returns it, rather than a conflict with itself or a second copy."""
    with proxied_store() as (proxy, store):
        sid = store.create_session().id
        store.append_messages(sid, _batch(4, "cp"))
        first = store.add_checkpoint(sid, covers_up_to=2, summary="1", expect_previous=None)
        proxy.cut_next_commit.set()
        second = store.add_checkpoint(sid, covers_up_to=4, summary="2", expect_previous=first.id)
        assert proxy.cuts == 1
        stored = store.list_checkpoints(sid)
    assert stored == [first, second]


def test_terminated_connections_are_replaced_on_the_next_call() -> None:
    url = require_postgres()
    app = "tlterm" + uuid.uuid4().hex[:12]
    with fresh_schema(url, application_name=app, pool_size="3") as (store_url, _):
        store = open_store(store_url)
        sid = store.create_session().id
        # grow the pool to several connections, then kill them all
        threads = [
            threading.Thread(target=store.append_messages, args=(sid, [Message.user(str(i))]))
            for i in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with _admin(url) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (app,),
            ).fetchone()
            assert killed is not None and killed[0] >= 1
            _wait_for(
                admin,
                "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity "
                "WHERE application_name = %s)",
                (app,),
            )
        assert store.count_messages(sid) == 6
        store.append_messages(sid, [Message.user("after")])
        assert [m.text for m in store.tail(sid, 1)] == ["after"]
        store.close()


def test_connections_terminated_while_appending_never_reach_the_caller(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 9: another connection terminates the store's backends every few
    milliseconds while a loop appends two-message batches and reads the tail. No error
    reaches the caller, every batch is stored once in order, and psycopg's reports of
    the replaced connections stay off stderr and out of the log."""
    url = require_postgres()
    app = "tlkill" + uuid.uuid4().hex[:12]
    caplog.set_level(logging.INFO)  # the root logger: what an app's basicConfig would show
    with fresh_schema(url, application_name=app) as (store_url, _):
        store = open_store(store_url)
        sid = store.create_session().id
        stop = threading.Event()
        terminated: list[int] = []

        def terminate() -> None:
            with _admin(url) as admin:
                while not stop.wait(TERMINATE_EVERY):
                    # the statement, limited to this test's connections so that
                    # other tests using the same database are left alone
                    row = admin.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND application_name = %s",
                        (app,),
                    ).fetchone()
                    terminated.append(row[0] if row else 0)

        errors: list[BaseException] = []
        sent: list[str] = []
        killer = threading.Thread(target=terminate)
        killer.start()
        try:
            deadline = time.monotonic() + TERMINATE_FOR
            while time.monotonic() < deadline:
                texts = [f"append {len(sent)}", f"append {len(sent) + 1}"]
                batch = prepare_messages(None, [Message.user(t) for t in texts])
                while True:  # a caller's own retry, so that the counts below stay exact
                    try:
                        store.append_messages(sid, batch)
                        store.tail(sid, 2)
                        break
                    except StoreUnavailable as exc:
                        errors.append(exc)
                sent += texts
        finally:
            stop.set()
            killer.join()
        stored = store.read_messages(sid)
        store.close()
    figures = (
        f"{sum(terminated)} connections terminated in {len(terminated)} rounds, "
        f"{len(sent)} messages sent, {len(stored)} stored, {len(errors)} errors surfaced"
    )
    print(figures)
    assert sum(terminated) >= 15, figures  # the loop really ran into terminations
    assert errors == [], figures
    assert [m.text for m in stored] == sent, figures  # nothing lost, nothing twice
    assert [m.seq for m in stored] == list(range(1, len(sent) + 1))
    noise = [r for r in caplog.records if r.name.startswith("psycopg")]
    assert noise == [], [r.getMessage() for r in noise[:5]]
    assert capsys.readouterr().err == ""


def test_asking_for_psycopg_logs_brings_the_connection_reports_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The reports are filtered, not lost: a level set on psycopg's logger shows them."""
    url = require_postgres()
    app = "tlask" + uuid.uuid4().hex[:12]
    with fresh_schema(url, application_name=app) as (store_url, _):
        store = open_store(store_url)
        sid = store.create_session().id
        caplog.set_level(logging.WARNING, logger="psycopg.pool")
        with _admin(url) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (app,),
            )
            _wait_for(
                admin,
                "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity "
                "WHERE application_name = %s)",
                (app,),
            )
        assert store.session_info(sid).id == sid
        store.close()
    assert any("discarding closed connection" in r.getMessage() for r in caplog.records)


def test_server_gone_is_store_unavailable_and_the_store_recovers() -> None:
    with proxied_store(pool_timeout="1") as (proxy, store):
        sid = store.create_session().id
        proxy.stop()
        with pytest.raises(StoreUnavailable) as gone:
            store.session_info(sid)
        assert f"127.0.0.1:{proxy.port}" in str(gone.value)
        assert "refused" in str(gone.value)
        proxy.start()  # same port
        assert store.session_info(sid).id == sid
        store.append_messages(sid, [Message.user("back")])
        assert store.count_messages(sid) == 1


# -- opening --------------------------------------------------------------------------


def test_unreachable_server_wrong_user_and_unknown_database_are_clear() -> None:
    url = require_postgres()
    port = _closed_port()
    with pytest.raises(StoreUnavailable) as refused:
        open_store(f"postgresql://postgres@127.0.0.1:{port}/test")
    assert f"127.0.0.1:{port}" in str(refused.value) and "refused" in str(refused.value)

    conninfo, _ = split_postgres_url(url)
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    host, dbport = params.get("host", "127.0.0.1"), params.get("port", "5432")
    user = "nosuchuser" + uuid.uuid4().hex[:8]
    with pytest.raises(StoreUnavailable) as wrong_user:
        open_store(f"postgresql://{user}:hunter2secret@{host}:{dbport}/test")
    message = str(wrong_user.value)
    assert user in message and "hunter2secret" not in message
    assert "hunter2secret" not in repr(wrong_user.value.__cause__)

    db = "nosuchdb" + uuid.uuid4().hex[:8]
    with pytest.raises(StoreUnavailable) as no_db:
        open_store(f"postgresql://{params.get('user', 'postgres')}@{host}:{dbport}/{db}")
    assert db in str(no_db.value) and "does not exist" in str(no_db.value)


def test_schema_too_new_and_foreign_schemas_are_refused() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        open_store(store_url).close()
        _set_version(url, schema, SCHEMA_VERSION + 1)
        with pytest.raises(SchemaTooNew, match="upgrade threadline"):
            open_store(store_url)
    with fresh_schema(url) as (store_url, schema):
        admin_sql(url, f'CREATE SCHEMA "{schema}"', f'CREATE TABLE "{schema}".invoices (id int)')
        with pytest.raises(NotAThreadlineStore, match="invoices"):
            open_store(store_url)
        with _admin(url) as admin:
            admin.execute(f'DROP TABLE "{schema}".invoices')
        open_store(store_url).close()  # an empty schema is fine: it becomes a store


def test_many_stores_opening_a_new_schema_at_once_migrate_it_once() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, schema):
        errors: list[BaseException] = []
        stores: list[PostgresStore] = []

        def opener() -> None:
            try:
                stores.append(PostgresStore.from_url(store_url))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=opener) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        ids = {s.create_session().id for s in stores}
        assert stores[0].list_sessions().total == len(ids) == 6
        for s in stores:
            s.close()
        with _admin(url) as admin:
            meta = dict(admin.execute(f'SELECT key, value FROM "{schema}".threadline_meta'))
    assert meta == {"app": "threadline", "schema_version": str(SCHEMA_VERSION)}


# -- behaviour that depends on the server -------------------------------------------


def test_attach_lock_is_shared_across_stores_and_a_dead_holder_is_taken_over() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, _):
        first, second = open_store(store_url), open_store(store_url)
        live = LockHolder.current()
        sid = first.create_session(lock=live).id
        other = LockHolder(pid=live.pid + 1, host="elsewhere")
        with pytest.raises(SessionLocked):
            second.acquire_lock(sid, other)
        dead = LockHolder(pid=2**22 + 12345, host=live.host)  # above pid_max: never alive
        first.release_lock(sid, live)
        first.acquire_lock(sid, dead)
        taken = second.acquire_lock(sid, other)
        assert second.lock_holder(sid) == taken and first.lock_holder(sid) == taken
        first.close()
        second.close()


def test_search_is_parameterised_and_indexes_only_a_bounded_prefix() -> None:
    url = require_postgres()
    with fresh_schema(url) as (store_url, _):
        store = open_store(store_url)
        session = store.create_session()
        huge = " ".join(f"w{i}" for i in range(400_000))  # a 2.7 MB tool output
        session.append(
            [
                Message.user("find the 'quoted'); DROP TABLE sessions; -- needle"),
                Message.user(huge + " lastword"),
            ]
        )
        hits = store.search("'); DROP TABLE sessions; --")
        assert [h.seq for h in hits] == [1]
        assert store.search("needle\x00")[0].snippet.count("[needle]") == 1
        assert [h.seq for h in store.search("w12")] == [2]
        assert store.search("lastword") == []  # beyond the indexed prefix
        assert store.read_messages(session.id)[1].text.endswith("lastword")
        assert store.list_sessions().total == 1
        store.close()
