"""Redis backend quirks: atomic appends across processes, TTL, indexes, a server that goes away.

The protocol itself is covered for every backend by tests/conformance. Every test
here uses a key prefix of its own and deletes its keys at the end.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require_redis
from threadline import Message, open_store
from threadline.errors import (
    CorruptRecord,
    SessionLocked,
    SessionNotFound,
    StoreUnavailable,
    UsageError,
)
from threadline.store.encoding import prepare_messages
from threadline.store.locks import LockHolder
from threadline.store.redis import SCRIPTS, CorruptRecordWarning, RedisStore, parse_redis_url

WORKERS = 8
APPENDS_PER_WORKER = 200
EXPIRY_WAIT_SECONDS = 15.0
"""Generous upper bound for a 0.2 s TTL to take effect; the tests poll, never assert timing."""


def _raw(url: str) -> redis.Redis:
    return redis.Redis.from_url(parse_redis_url(url)[0])


def _keys(url: str, prefix: str) -> list[str]:
    return sorted(k.decode() for k in _raw(url).scan_iter(match=prefix + "*", count=1000))


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own; every key under it is deleted afterwards."""
    url = require_redis()
    tag = f"threadline-test:{uuid.uuid4().hex[:12]}:"
    yield tag
    raw = _raw(url)
    for key in raw.scan_iter(match=tag + "*", count=1000):
        raw.delete(key)


def _url(prefix: str, **options: str) -> str:
    query = "&".join([f"prefix={prefix}", *(f"{k}={v}" for k, v in options.items())])
    return f"{require_redis()}?{query}"


def _batch(*texts: str) -> list[Message]:
    return prepare_messages(None, [Message.user(t) for t in texts])


def _wait_until_gone(store: RedisStore, session_id: str) -> None:
    deadline = time.monotonic() + EXPIRY_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            store.session_info(session_id)
        except SessionNotFound:
            return
        time.sleep(0.05)
    pytest.fail(f"session {session_id} did not expire within {EXPIRY_WAIT_SECONDS} s")


# -- atomic appends under concurrency ---------------------------------------------------


def _append_worker(url: str, session_id: str, worker: int, count: int) -> None:
    store = open_store(url)
    for i in range(count):
        m = Message.user(f"worker {worker} message {i}", metadata={"w": worker, "i": i})
        store.append_messages(session_id, prepare_messages(None, [m]))
    store.close()


def test_concurrent_appends_into_one_session_have_no_gaps_or_duplicates(prefix: str) -> None:
    url = _url(prefix)
    store = open_store(url)
    sid = store.create_session(agent="swarm").id
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_append_worker, args=(url, sid, w, APPENDS_PER_WORKER))
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * WORKERS

    messages = store.get_session(sid).messages()
    total = WORKERS * APPENDS_PER_WORKER
    assert [m.seq for m in messages] == list(range(1, total + 1))
    pairs = [(m.metadata["w"], m.metadata["i"]) for m in messages]
    assert sorted(pairs) == [(w, i) for w in range(WORKERS) for i in range(APPENDS_PER_WORKER)]
    for w in range(WORKERS):  # each writer's own messages keep its order
        assert [i for ww, i in pairs if ww == w] == list(range(APPENDS_PER_WORKER))
    info = store.session_info(sid)
    assert info.message_count == info.last_seq == total
    assert info.total_tokens == sum(next(iter(m.token_counts.values())) for m in messages)


def test_a_resent_batch_is_stored_once_and_a_half_stored_one_is_refused(prefix: str) -> None:
    store = open_store(_url(prefix))
    sid = store.create_session().id
    batch = _batch("a", "b", "c")
    first = store.append_messages(sid, batch)
    again = store.append_messages(sid, batch)
    assert [m.seq for m in again] == [m.seq for m in first] == [1, 2, 3]
    assert [m.id for m in again] == [m.id for m in batch]
    assert store.count_messages(sid) == 3
    mixed = [batch[0], *_batch("new")]
    with pytest.raises(UsageError, match="partly stored"):
        store.append_messages(sid, mixed)
    assert store.count_messages(sid) == 3  # all or nothing


def test_concurrent_lock_attempts_have_exactly_one_winner(prefix: str) -> None:
    store = open_store(_url(prefix))
    sid = store.create_session().id
    results: list[str] = []
    barrier = threading.Barrier(WORKERS)

    def attempt(n: int) -> None:
        holder = LockHolder(pid=n + 1, host=f"host-{n}")  # other hosts: never stale by pid
        barrier.wait()
        try:
            store.acquire_lock(sid, holder)
            results.append("won")
        except SessionLocked:
            results.append("locked")

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["locked"] * (WORKERS - 1) + ["won"]


# -- TTL ---------------------------------------------------------------------------------


def test_ttl_expiry_removes_the_session_and_its_index_entries(prefix: str) -> None:
    url = _url(prefix, ttl="60")
    store = RedisStore.from_url(url)
    doomed = store.create_session(agent="tmp", id="doomed-1")
    kept = store.create_session(agent="tmp", id="kept-1")
    assert 0 < (store.ttl(doomed.id) or 0) <= 60  # the store-wide default from the URL
    doomed.append(_batch("soon gone"))
    doomed.add_checkpoint(covers_up_to=1, summary="s")
    doomed.scratchpad_write("note", "x")
    store.set_ttl(kept.id, None)
    assert store.ttl(kept.id) is None
    store.set_ttl(doomed.id, 0.05)  # the last write: expiry runs from here

    _wait_until_gone(store, doomed.id)
    page = store.list_sessions()
    assert [s.id for s in page] == ["kept-1"] and page.total == 1
    assert store.list_sessions(agent="tmp").total == 1
    with pytest.raises(SessionNotFound):
        store.resolve_id("doom")
    with pytest.raises(SessionNotFound):
        store.tail(doomed.id, 5)
    left = _keys(url, prefix)
    assert not [k for k in left if "doomed-1" in k], left
    assert _raw(url).zrange(prefix + "expires", 0, -1) == []


def test_every_write_refreshes_the_ttl_of_all_the_session_keys(prefix: str) -> None:
    url = _url(prefix)
    store = RedisStore.from_url(url)
    s = store.create_session()
    s.append(_batch("one"))
    s.add_checkpoint(covers_up_to=1, summary="s")
    s.scratchpad_write("note", "x")
    assert store.ttl(s.id) is None
    store.set_ttl(s.id, 1000)
    raw = _raw(url)
    keys = [f"{prefix}{part}:{s.id}" for part in "smicpn"]
    assert all(900_000 < raw.pttl(k) <= 1_000_000 for k in keys)

    writes = [
        lambda: s.append(_batch("two")),
        lambda: s.set_memo({"a": 1}),
        lambda: s.rename("t"),
        lambda: store.update_session(s.id, metadata={"k": 1}),
        lambda: s.scratchpad_write("other", "y"),
        lambda: store.scratchpad_delete(s.id, "other"),
        lambda: s.add_checkpoint(covers_up_to=2, summary="s2"),
        lambda: store.release_lock(s.id, store.acquire_lock(s.id)),
    ]
    for write in writes:
        for k in keys:
            raw.pexpire(k, 5000)  # as if the session had aged
        write()
        assert all(raw.pttl(k) > 900_000 for k in keys), write
    store.set_ttl(s.id, 0)
    assert all(raw.pttl(k) == -1 for k in keys)


def test_an_expired_id_reused_by_another_agent_is_listed_only_there(prefix: str) -> None:
    store = RedisStore.from_url(_url(prefix))
    s = store.create_session(agent="old", id="reused-1")
    s.append(_batch("old message"))
    store.set_ttl(s.id, 0.05)
    _wait_until_gone(store, s.id)
    # nothing has listed yet, so the old index entries are still there when the id is reused
    new = store.create_session(agent="new", id="reused-1")
    assert new.message_count == 0 and store.read_messages("reused-1") == []
    assert store.list_sessions(agent="old").total == 0
    assert [x.id for x in store.list_sessions(agent="new")] == ["reused-1"]


# -- indexes, not scans -------------------------------------------------------------------


def _name(command: Any) -> str:
    return (command.decode() if isinstance(command, bytes) else str(command)).upper()


class _RecordingConnection(redis.Connection):
    """Records the name of every command sent, single or pipelined."""

    commands: ClassVar[list[str]] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.commands.append(_name(args[0]))
        super().send_command(*args, **kwargs)

    def pack_commands(self, commands: Any) -> Any:
        commands = list(commands)
        self.commands.extend(_name(c[0]) for c in commands)
        return super().pack_commands(commands)


def test_listing_tails_and_prefixes_use_indexes_never_key_scans(prefix: str) -> None:
    url = require_redis()
    pool = redis.ConnectionPool.from_url(url, connection_class=_RecordingConnection)
    client = redis.Redis(connection_pool=pool)
    store = RedisStore(client, prefix=prefix)
    recorded = _RecordingConnection.commands
    counts = []
    made = 0
    for size in (5, 60):
        while made < size:
            store.create_session(agent="ab"[made % 2]).append(_batch("x", "y"))
            made += 1
        recorded.clear()
        store.list_sessions(limit=10, offset=3)
        counts.append(len(recorded))
    assert counts[0] == counts[1]  # the cost of a page does not grow with the store

    recorded.clear()
    page = store.list_sessions(agent="a", limit=7)
    sid = page.items[0].id
    store.tail(sid, 1)
    store.read_messages(sid, after_seq=1)
    store.get_session(sid[:8])
    store.latest_checkpoint(sid)
    store.delete_all(force=True)
    assert recorded and not {"KEYS", "SCAN"} & set(recorded), recorded
    for name, source in SCRIPTS.items():  # nor do the scripts, which run inside the server
        assert "'KEYS'" not in source.upper() and "'SCAN'" not in source.upper(), name
    store.close()
    assert client.ping()  # a client the store did not create stays open
    client.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    limit=st.integers(-2, 40),
    before=st.one_of(st.none(), st.integers(-3, 40)),
    after=st.integers(-3, 40),
    read_limit=st.one_of(st.none(), st.integers(-1, 40)),
)
def test_tail_and_read_slices_match_a_plain_list(
    prefix: str, limit: int, before: int | None, after: int, read_limit: int | None
) -> None:
    """The slice script counts from whichever end of the list is nearer; check its arithmetic."""
    store = _slice_store(prefix)
    seqs = list(range(1, 31))
    below = [q for q in seqs if before is None or q < before]
    expected_tail = below[::-1][: max(limit, 0)]
    assert [m.seq for m in store.tail("slices", limit, before_seq=before)] == expected_tail
    above = [q for q in seqs if q > after]
    if read_limit is not None:  # a limit below zero reads none, as on every backend
        above = above[: max(read_limit, 0)]
    got = store.read_messages("slices", after_seq=after, limit=read_limit)
    assert [m.seq for m in got] == above


_SLICE_STORES: dict[str, RedisStore] = {}


def _slice_store(prefix: str) -> RedisStore:
    if prefix not in _SLICE_STORES:
        store = RedisStore.from_url(_url(prefix))
        store.create_session(id="slices").append(_batch(*(f"m{i}" for i in range(30))))
        _SLICE_STORES[prefix] = store
    return _SLICE_STORES[prefix]


# -- bad input and failures ---------------------------------------------------------------


def test_corrupt_bodies_are_skipped_with_a_warning_and_the_rest_kept(prefix: str) -> None:
    url = _url(prefix)
    store = open_store(url)
    sid = store.create_session().id
    store.append_messages(sid, _batch("one", "two", "three", "four"))
    raw = _raw(url)
    raw.lset(f"{prefix}m:{sid}", 1, "garbage")
    raw.lset(f"{prefix}m:{sid}", 2, b"\xff\xfe not utf-8")
    with pytest.warns(CorruptRecordWarning) as caught:
        assert [m.seq for m in store.tail(sid, 10)] == [4, 1]
    assert sorted(str(w.message).split(":")[0] for w in caught) == [
        f"skipping unreadable message {sid} seq {q}" for q in (2, 3)
    ]
    with pytest.warns(CorruptRecordWarning):
        assert [m.text for m in store.read_messages(sid)] == ["one", "four"]
    assert [m.seq for m in store.append_messages(sid, _batch("five"))] == [5]
    raw.rpush(f"{prefix}c:{sid}", "{not json")
    with pytest.warns(CorruptRecordWarning, match="checkpoint"):
        assert store.latest_checkpoint(sid) is None


def test_a_key_of_the_wrong_type_is_a_clear_error_that_spares_the_rest(prefix: str) -> None:
    url = _url(prefix)
    store = open_store(url)
    good = store.create_session(id="good-1")
    bad = store.create_session(id="bad-1")
    good.append(_batch("safe"))
    raw = _raw(url)
    raw.delete(f"{prefix}m:{bad.id}")
    raw.set(f"{prefix}m:{bad.id}", "garbage")
    with pytest.raises(CorruptRecord, match="wrong type"):
        store.tail(bad.id, 5)
    with pytest.raises(CorruptRecord):
        store.append_messages(bad.id, _batch("refused"))
    assert store.session_info(bad.id).message_count == 0
    raw.delete(f"{prefix}s:{bad.id}")
    raw.set(f"{prefix}s:{bad.id}", "garbage")
    with pytest.warns(CorruptRecordWarning, match="bad-1"):
        assert [s.id for s in store.list_sessions()] == ["good-1"]
    assert [m.text for m in store.read_messages(good.id)] == ["safe"]


def test_unreachable_server_or_bad_password_is_store_unavailable() -> None:
    require_redis()
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1/0"):
        open_store("redis://127.0.0.1:1/0?prefix=x:")
    with pytest.raises(StoreUnavailable, match="credentials"):
        open_store(f"redis://nobody:wrong@127.0.0.1:6379/0?prefix={uuid.uuid4().hex}:")
    with pytest.raises(UsageError, match="ttl"):
        open_store("redis://127.0.0.1:6379/0?ttl=soon")


class _Proxy:
    """A TCP relay to the real server that the test can cut, like a server going away."""

    def __init__(self, port: int = 0) -> None:
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.running = True
        self.cut_next_reply = False
        """Swallow the next reply and drop that connection: the command ran, its answer is lost."""
        self.cut_reply_to: bytes | None = None
        """Set ``cut_next_reply`` when a request containing these bytes goes by."""
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.running:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", 6379))
            self.sockets += [client, upstream]
            for a, b, replies in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(a, b, replies), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while data := src.recv(65536):
                if not replies and self.cut_reply_to is not None and self.cut_reply_to in data:
                    self.cut_reply_to = None
                    self.cut_next_reply = True
                if replies and self.cut_next_reply:
                    self.cut_next_reply = False
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.running = False
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def test_a_server_that_goes_away_mid_run_is_store_unavailable_then_recovers(prefix: str) -> None:
    require_redis()
    proxy = _Proxy()
    port = proxy.port
    store = open_store(f"redis://127.0.0.1:{port}/0?prefix={prefix}")
    sid = store.create_session().id
    store.append_messages(sid, _batch("before"))
    proxy.stop()
    batch = _batch("during")
    for call in (
        lambda: store.append_messages(sid, batch),
        lambda: store.tail(sid, 5),
        lambda: store.list_sessions(),
        lambda: store.acquire_lock(sid),
    ):
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}"):
            call()
    proxy = _Proxy(port)
    try:
        store.append_messages(sid, batch)  # the caller's retry
        store.append_messages(sid, batch)  # and another: still one copy
        assert [m.text for m in store.read_messages(sid)] == ["before", "during"]
        proxy.cut_next_reply = True  # the append runs, its reply is lost, redis-py resends
        cut = _batch("cut")
        assert [m.seq for m in store.append_messages(sid, cut)] == [3]
        assert not proxy.cut_next_reply
        assert [m.text for m in store.read_messages(sid)] == ["before", "during", "cut"]
        store.add_checkpoint(sid, covers_up_to=2, summary="first")  # the script is loaded now
        proxy.cut_next_reply = True
        assert store.add_checkpoint(sid, covers_up_to=3, summary="once").id == 2
        assert not proxy.cut_next_reply
        assert [c.summary for c in store.list_checkpoints(sid)] == ["first", "once"]
        # the compare-and-set scripts themselves, their replies lost and resent
        store.append_messages(sid, _batch("more"))
        proxy.cut_reply_to = b"EVALSHA"
        third = store.add_checkpoint(sid, covers_up_to=4, summary="cas", expect_previous=2)
        assert third.id == 3 and proxy.cut_reply_to is None and not proxy.cut_next_reply
        proxy.cut_reply_to = b"EVALSHA"  # the resent swap finds its own memo: refused...
        assert not store.replace_memo(sid, {}, {"n": 1})
        assert proxy.cut_reply_to is None and store.get_memo(sid) == {"n": 1}
        # ...and update_memo decides again on it: the mark recognises its own token
        mark = {"token": "mine"}
        proxy.cut_reply_to = b"EVALSHA"
        took = store.get_session(sid).update_memo(
            lambda m: None if m.get("mark") == mark else {**m, "mark": mark}
        )
        assert took == {"n": 1, "mark": mark} and proxy.cut_reply_to is None
        assert [c.summary for c in store.list_checkpoints(sid)] == ["first", "once", "cas"]
    finally:
        store.close()
        proxy.stop()


def test_prefixes_isolate_stores_and_their_searches(prefix: str) -> None:
    a = open_store(_url(prefix + "a:"))
    b = open_store(_url(prefix + "b:"))
    a.create_session(id="same-id").append(_batch("in a"))
    b.create_session(id="same-id")
    assert a.count_messages("same-id") == 1 and b.count_messages("same-id") == 0
    assert a.list_sessions().total == b.list_sessions().total == 1
    assert [(h.session_id, h.seq) for h in a.search("in")] == [("same-id", 1)]
    assert b.search("in") == []  # a scan of its own prefix only
    assert a.url == _url(prefix + "a:")
    a.close()
    b.close()


def test_a_session_that_expires_is_not_forked(prefix: str) -> None:
    """Writes to a fork refresh only the fork's keys, so a parent with a TTL would
    expire under it and take the shared history: refused, with the way out named."""
    from threadline.errors import NotSupported
    from threadline.store.fork import fork_session

    store = RedisStore.from_url(_url(prefix))
    parent = store.create_session()
    parent.append(_batch("one"))
    store.set_ttl(parent.id, 1000)
    with pytest.raises(NotSupported, match="set_ttl"):
        fork_session(parent)
    store.set_ttl(parent.id, None)
    child = fork_session(parent)
    assert [m.text for m in child.messages()] == [m.text for m in parent.messages()]


def test_a_scratchpad_written_before_its_name_index_pages_from_one_built_then(
    prefix: str,
) -> None:
    """A pad an older threadline wrote has no name index (``n:<id>``): the first page,
    contents read or write builds it from the pad, with the session's TTL, and every
    later write keeps it."""
    url = _url(prefix)
    store = RedisStore.from_url(url)
    s = store.create_session()
    store.scratchpad_write_many(s.id, {f"c/{i:02d}": f"v{i}" for i in range(12)})
    store.set_ttl(s.id, 1000)
    raw = _raw(url)
    index = f"{prefix}n:{s.id}"
    assert raw.zcard(index) == 12
    raw.delete(index)  # as an older threadline left it
    page = store.scratchpad_page(s.id, prefix="c/", limit=3, before="c/10")
    assert [e.name for e in page] == ["c/09", "c/08", "c/07"]
    assert raw.zcard(index) == 12 and 900_000 < raw.pttl(index) <= 1_000_000
    raw.delete(index)
    store.scratchpad_write_many(s.id, {"c/99": "new", "c/00": "kept"}, keep_existing=True)
    assert store.scratchpad_contents(s.id, prefixes=["c/9"]) == {"c/99": "new"}
    assert store.scratchpad_contents(s.id, names=["c/00"]) == {"c/00": "v0"}
    raw.delete(index)
    assert store.scratchpad_delete(s.id, "c/05")
    assert raw.zcard(index) == 12
    assert [e.name for e in store.scratchpad_page(s.id, prefix="c/", limit=2)] == ["c/99", "c/11"]
    s.delete()
    assert not raw.exists(index)
