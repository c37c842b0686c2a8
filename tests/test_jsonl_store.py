"""What only the JSONL backend has: its files, and how it survives damage to them.

The Store protocol itself is checked by ``tests/conformance``; here: the layout a
person sees, lines that ``jq`` reads, corrupt and torn lines, a file replaced by
garbage, and processes killed with SIGKILL in the middle of appends.
"""

from __future__ import annotations

import base64
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import threading
import time
import uuid
import warnings
from collections import defaultdict
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from threadline import (
    CorruptRecord,
    ImagePart,
    InvalidMessage,
    Message,
    NotAThreadlineStore,
    SchemaTooNew,
    SessionNotFound,
    UsageError,
    open_store,
)
from threadline.store.encoding import prepare_messages
from threadline.store.jsonl import CorruptRecordWarning, JSONLStore, parse_jsonl_url

CUT_SAMPLE = 40
"""Cut points tested besides the line boundaries of the last batch."""
THREADS = 4
THREAD_APPENDS = 50


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> JSONLStore:
    return JSONLStore(root)


def session_file(root: Path, agent: str, sid: str, suffix: str = ".jsonl") -> Path:
    return root / "sessions" / agent / f"{sid}{suffix}"


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def fill(store: JSONLStore, sid: str, n: int, start: int = 1) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + n):
        out += store.append_messages(sid, prepare_messages(None, [Message.user(f"message {i}")]))
    return out


def corrupt_records(root: Path, agent: str, sid: str) -> list[dict[str, Any]]:
    path = session_file(root, agent, sid, ".jsonl.corrupt")
    if not path.exists():
        return []
    return [json.loads(line) for line in lines_of(path)]


def read_quietly(store: JSONLStore, sid: str) -> list[Message]:
    """Read, failing if any line was reported corrupt."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptRecordWarning)
        return store.read_messages(sid)


def read_past_unfinished(store: JSONLStore, sid: str, *, expected: bool = True) -> list[Message]:
    """Read, allowing only the report of an unfinished batch at the end (required when
    ``expected``): it is left out, but never silently."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CorruptRecordWarning)
        messages = store.read_messages(sid)
    texts = [str(w.message) for w in caught if issubclass(w.category, CorruptRecordWarning)]
    assert all("unfinished batch" in t for t in texts), texts
    assert texts or not expected
    return messages


# -- layout --------------------------------------------------------------------------


def test_layout_and_line_format(store: JSONLStore, root: Path) -> None:
    session = store.create_session(id="s1", agent="coder", title="Layout", metadata={"k": 1})
    session.append([Message.user("hello"), Message.assistant("hi there")])
    session.append(Message.user("again"))
    session.add_checkpoint(covers_up_to=2, summary="greetings")
    session.scratchpad_write("plan", "step 1")
    assert json.loads((root / "threadline.json").read_text())["app"] == "threadline"
    jsonl = session_file(root, "coder", "s1")
    records = [json.loads(line) for line in lines_of(jsonl)]
    header, *messages = records
    assert header["type"] == "session"
    assert (header["id"], header["agent"], header["title"]) == ("s1", "coder", "Layout")
    assert [r["type"] for r in messages] == ["message"] * 3
    assert [r["seq"] for r in messages] == [1, 2, 3]
    assert [r["batch_last"] for r in messages] == [2, 2, 3]
    assert [r["message"]["content"] for r in messages] == ["hello", "hi there", "again"]
    assert [r["id"] for r in messages] == [r["message"]["id"] for r in messages]
    assert messages[-1]["total_tokens"] == session.refresh().total_tokens
    meta = json.loads(session_file(root, "coder", "s1", ".meta.json").read_text())
    assert meta["title"] == "Layout"
    summary = json.loads(session_file(root, "coder", "s1", "_summary.json").read_text())
    assert [c["summary"] for c in summary["checkpoints"]] == ["greetings"]
    pad = json.loads(session_file(root, "coder", "s1", "_scratchpad.json").read_text())
    assert pad["entries"]["plan"]["content"] == "step 1"


def test_every_line_reads_with_jq(store: JSONLStore, root: Path) -> None:
    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("jq is not installed (apt-get install -y jq)")
    session = store.create_session(id="jq-me")
    session.append([Message.user('quotes " and \\ and \n newline and 🦊'), Message.assistant("ok")])
    path = session_file(root, "default", "jq-me")
    out = subprocess.run([jq, "-c", ".", str(path)], capture_output=True, text=True, check=True)
    assert len(out.stdout.splitlines()) == 3
    seqs = subprocess.run(
        [jq, "-r", 'select(.type == "message") | .seq', str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert seqs.stdout.split() == ["1", "2"]
    first = subprocess.run(
        [jq, "-r", "select(.seq == 1) | .message.content", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert first.stdout == 'quotes " and \\ and \n newline and 🦊\n'


def test_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_jsonl_url("jsonl:///abs/dir") == Path("/abs/dir")
    assert parse_jsonl_url("jsonl://rel/dir") == Path("rel/dir")
    with pytest.raises(UsageError):
        parse_jsonl_url("jsonl://")
    with pytest.raises(UsageError):
        parse_jsonl_url("jsonl:///x?fsync=0")
    monkeypatch.chdir(tmp_path)
    store = open_store("jsonl://relative-store")
    store.create_session(id="here")
    assert (tmp_path / "relative-store" / "sessions" / "default" / "here.jsonl").exists()


def test_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(NotAThreadlineStore):
        JSONLStore(foreign)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(NotAThreadlineStore):
        JSONLStore(a_file)
    newer = tmp_path / "newer"
    JSONLStore(newer)
    (newer / "threadline.json").write_text('{"app": "threadline", "format": 99}')
    with pytest.raises(SchemaTooNew):
        JSONLStore(newer)


def test_missing_sidecar_falls_back_to_the_creation_record(store: JSONLStore, root: Path) -> None:
    store.create_session(id="bare", title="From header", model="gpt-4o", metadata={"a": 1})
    fill(store, "bare", 2)
    store.set_memo("bare", {"x": 1})
    session_file(root, "default", "bare", ".meta.json").unlink()
    info = JSONLStore(root).session_info("bare")
    assert (info.title, info.model, info.metadata, info.message_count) == (
        "From header",
        "gpt-4o",
        {"a": 1},
        2,
    )
    assert store.get_memo("bare") == {}
    store.rename_session("bare", "again")  # writes a new sidecar
    assert store.session_info("bare").title == "again"


# -- damage --------------------------------------------------------------------------


def test_corrupt_line_is_reported_with_its_number_and_set_aside(
    store: JSONLStore, root: Path
) -> None:
    store.create_session(id="c1")
    fill(store, "c1", 5)
    path = session_file(root, "default", "c1")
    lines = lines_of(path)
    lines[2] = b'{"type": "message", "seq": 2, "this is not json'  # line 3 holds seq 2
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.warns(CorruptRecordWarning, match=r"c1\.jsonl:3:"):
        got = store.read_messages("c1")
    assert [m.seq for m in got] == [1, 3, 4, 5]
    assert [m.text for m in got] == ["message 1", "message 3", "message 4", "message 5"]
    with pytest.warns(CorruptRecordWarning, match=r"c1\.jsonl:3:"):
        assert [m.seq for m in JSONLStore(root).tail("c1", 10)] == [5, 4, 3, 1]
    records = corrupt_records(root, "default", "c1")
    assert len(records) == 1  # set aside once, however often it is read
    assert records[0]["line"] == 3
    assert records[0]["text"] == lines[2].decode()
    assert lines_of(path)[2] == lines[2]  # left in place: nothing rewritten
    info = store.session_info("c1")
    assert info.last_seq == info.message_count == 5
    with pytest.warns(CorruptRecordWarning):
        stored = fill(store, "c1", 1, start=6)
    assert stored[0].seq == 6


def test_valid_json_that_is_not_a_message_is_corrupt(store: JSONLStore, root: Path) -> None:
    store.create_session(id="c2")
    fill(store, "c2", 3)
    path = session_file(root, "default", "c2")
    lines = lines_of(path)
    bogus = {
        "type": "message",
        "seq": 2,
        "id": "x",
        "batch_last": 2,
        "total_tokens": 1,
        "stored_at": "2025-01-01T00:00:00.000000Z",
        "message": {"role": "bogus"},
    }
    lines[2] = json.dumps(bogus).encode()
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.warns(CorruptRecordWarning, match="invalid message"):
        assert [m.seq for m in store.read_messages("c2")] == [1, 3]


def test_corrupt_last_line_keeps_its_seq(store: JSONLStore, root: Path) -> None:
    store.create_session(id="c3")
    fill(store, "c3", 3)
    path = session_file(root, "default", "c3")
    lines = lines_of(path)
    lines[-1] = b"hand-edited nonsense"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fresh = JSONLStore(root)
    assert fresh.session_info("c3").last_seq == 3  # the slot stays taken
    with pytest.warns(CorruptRecordWarning):
        assert [m.seq for m in fresh.read_messages("c3")] == [1, 2]
    with pytest.warns(CorruptRecordWarning):
        assert fill(fresh, "c3", 1, start=4)[0].seq == 4  # never reused


def test_torn_last_line_is_repaired_on_the_next_append(store: JSONLStore, root: Path) -> None:
    store.create_session(id="t1")
    fill(store, "t1", 3)
    path = session_file(root, "default", "t1")
    torn = path.read_bytes()[:-25]  # a crash in the middle of writing the last line
    path.write_bytes(torn)
    fresh = JSONLStore(root)
    assert [m.seq for m in read_past_unfinished(fresh, "t1")] == [1, 2]
    with pytest.warns(CorruptRecordWarning, match=r"t1\.jsonl:4: an unfinished batch \(1 line"):
        assert fresh.session_info("t1").last_seq == 2
    with pytest.warns(CorruptRecordWarning, match="interrupted append"):
        stored = fill(fresh, "t1", 1, start=4)
    assert stored[0].seq == 3
    records = [json.loads(line) for line in lines_of(path)]  # nothing glued together
    assert [r.get("seq") for r in records[1:]] == [1, 2, 3]
    assert [m.text for m in read_quietly(fresh, "t1")] == ["message 1", "message 2", "message 4"]
    (aside,) = corrupt_records(root, "default", "t1")
    assert aside["line"] == 4
    assert torn.endswith(aside["text"].encode())


def test_unfinished_batch_is_invisible_and_removed(store: JSONLStore, root: Path) -> None:
    store.create_session(id="b1")
    fill(store, "b1", 1)
    store.append_messages(
        "b1", prepare_messages(None, [Message.user(f"batch {i}") for i in range(3)])
    )
    path = session_file(root, "default", "b1")
    lines = lines_of(path)
    path.write_bytes(b"\n".join(lines[:4]) + b"\n")  # two of the batch's three lines survived
    fresh = JSONLStore(root)
    assert [m.seq for m in read_past_unfinished(fresh, "b1")] == [1]
    with pytest.warns(CorruptRecordWarning, match=r"b1\.jsonl:3: an unfinished batch \(2 lines"):
        assert [m.seq for m in fresh.tail("b1", 10)] == [1]
    with pytest.warns(CorruptRecordWarning, match="unfinished batch"):
        assert fresh.session_info("b1").message_count == 1
    with pytest.warns(CorruptRecordWarning):
        assert fill(fresh, "b1", 1, start=9)[0].seq == 2
    assert [m.text for m in read_quietly(fresh, "b1")] == ["message 1", "message 9"]
    assert [r["line"] for r in corrupt_records(root, "default", "b1")] == [3, 4]


def test_garbage_file_raises_corrupt_record_and_others_still_work(
    store: JSONLStore, root: Path
) -> None:
    store.create_session(id="bad", agent="a")
    store.create_session(id="good", agent="a")
    fill(store, "bad", 2)
    fill(store, "good", 2)
    path = session_file(root, "a", "bad")
    path.write_bytes(random.Random(7).randbytes(5000))
    for call in (
        lambda: store.session_info("bad"),
        lambda: store.tail("bad", 5),
        lambda: store.read_messages("bad"),
        lambda: store.append_messages("bad", prepare_messages(None, [Message.user("x")])),
        lambda: store.get_memo("bad"),
    ):
        with pytest.raises(CorruptRecord, match=r"bad\.jsonl"):
            call()
    assert [m.seq for m in store.read_messages("good")] == [1, 2]
    with pytest.warns(CorruptRecordWarning, match="bad"):
        page = store.list_sessions()
    assert [s.id for s in page] == ["good"]
    store.delete_session("bad")  # an unreadable session can still be deleted
    with pytest.raises(SessionNotFound):
        store.session_info("bad")
    assert not path.exists()


def _cut_points(committed: int, full: bytes, sample: int, rnd: random.Random) -> list[int]:
    """Each line boundary of the last batch (and its neighbours), plus a random sample."""
    edges = [committed] + [i + 1 for i in range(committed, len(full)) if full[i : i + 1] == b"\n"]
    near = {c + d for c in edges for d in range(-2, 3) if committed <= c + d < len(full)}
    rest = [c for c in range(committed, len(full)) if c not in near]
    return sorted(near | set(rnd.sample(rest, min(sample, len(rest)))))


def test_a_cut_anywhere_in_the_last_batch_loses_only_that_batch(root: Path) -> None:
    """Where a crash can stop the last write: the batch is all or nothing, then repaired."""
    store = JSONLStore(root)
    store.create_session(id="cut")
    fill(store, "cut", 2)
    path = session_file(root, "default", "cut")
    committed = path.read_bytes()
    store.append_messages("cut", prepare_messages(None, [Message.user(f"b{i}") for i in range(3)]))
    full = path.read_bytes()
    for cut in _cut_points(len(committed), full, CUT_SAMPLE, random.Random(5)):
        path.write_bytes(full[:cut])
        fresh = JSONLStore(root)
        kept = read_past_unfinished(fresh, "cut", expected=cut > len(committed))
        assert [m.text for m in kept] == ["message 1", "message 2"], cut
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptRecordWarning)
            assert fresh.session_info("cut").last_seq == 2
            assert fresh.append_messages("cut", [Message.user("next")])[0].seq == 3
        assert path.read_bytes().startswith(committed)
        assert [m.seq for m in read_quietly(fresh, "cut")] == [1, 2, 3]


@pytest.mark.parametrize("keep", [0, 10], ids=["empty", "half-header"])
def test_truncated_file(store: JSONLStore, root: Path, keep: int) -> None:
    store.create_session(id="cut")
    fill(store, "cut", 2)
    path = session_file(root, "default", "cut")
    path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(CorruptRecord, match=r"cut\.jsonl"):
        store.read_messages("cut")


# -- reading without reading everything --------------------------------------------------


def test_listing_and_tail_do_not_read_whole_files(store: JSONLStore, root: Path) -> None:
    """A corrupt early line goes unnoticed by reads that should never reach it."""
    store.create_session(id="long")
    batch = 50
    for b in range(60):
        msgs = [Message.user(f"m {b * batch + i}") for i in range(batch)]
        store.append_messages("long", prepare_messages(None, msgs))
    path = session_file(root, "default", "long")
    lines = lines_of(path)
    lines[5] = b"corrupted early line"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fresh = JSONLStore(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptRecordWarning)
        (info,) = fresh.list_sessions().items
        assert info.message_count == 3000
        assert [m.seq for m in fresh.tail("long", 3)] == [3000, 2999, 2998]
        assert [m.seq for m in fresh.tail("long", 2, before_seq=2900)] == [2899, 2898]
        assert [m.seq for m in fresh.read_messages("long", after_seq=2995)] == [
            2996,
            2997,
            2998,
            2999,
            3000,
        ]
    with pytest.warns(CorruptRecordWarning, match=":6:"):
        assert len(fresh.read_messages("long")) == 2999


# -- SIGKILL ------------------------------------------------------------------------------

BIG_WRITE_CHANCE = 0.05
"""Large writes are the ones a kill can cut short (a small write() is never torn)."""
BIG_WRITE_BYTES = 4 * 2**20
AIMED_EVERY = 3
"""Every third kill is aimed at a large write, announced by the child just before it."""
AIM_WINDOW_SECONDS = 0.03
BIG_ANNOUNCE = b"+"
WAVES = 8
CHILDREN_PER_WAVE = 3
"""8 waves x 3 children = 24 kills, each at a random moment of its own."""
MAX_ACKS_BEFORE_KILL = 30
CRASH_SEED = 20240229


def crash_child(root: str, sid: str, seed: int, big_chance: float, acks: Connection) -> None:
    """Append random batches forever, acknowledging each one after append returns."""
    store = JSONLStore(root)
    rnd = random.Random(seed)
    while True:
        n, tag = rnd.randint(1, 4), uuid.uuid4().hex
        big = rnd.random() < big_chance
        size = BIG_WRITE_BYTES // n if big else rnd.randint(1, 4000)
        batch = [Message.user("x" * size, metadata={"b": tag, "k": k, "n": n}) for k in range(n)]
        if big:
            acks.send_bytes(BIG_ANNOUNCE)
        stored = store.append_messages(sid, batch)
        acks.send_bytes(" ".join(f"{m.seq}:{m.id}" for m in stored).encode())  # one write


def _receive_until_killed(
    rnd: random.Random, proc: BaseProcess, receive: Connection, aimed: bool
) -> list[bytes]:
    """Acks received before and after a SIGKILL at a random (or aimed) moment."""
    got: list[bytes] = []
    with contextlib.suppress(EOFError):  # EOF: the child died by itself (checked below)
        if aimed:
            while (msg := receive.recv_bytes()) != BIG_ANNOUNCE:
                got.append(msg)
            time.sleep(rnd.uniform(0, AIM_WINDOW_SECONDS))
        else:
            for _ in range(rnd.randint(0, MAX_ACKS_BEFORE_KILL)):
                got.append(receive.recv_bytes())
            time.sleep(rnd.uniform(0, 0.01))
    proc.kill()
    proc.join()
    assert proc.exitcode == -signal.SIGKILL, f"the child exited with {proc.exitcode}"
    with contextlib.suppress(EOFError):
        while True:  # everything sent before the kill was acknowledged
            got.append(receive.recv_bytes())
    return [m for m in got if m != BIG_ANNOUNCE]


def _check_session(store: JSONLStore, sid: str, acked: dict[str, int]) -> None:
    messages = read_past_unfinished(store, sid, expected=False)  # a kill may leave one
    assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
    by_id = {m.id: m.seq for m in messages}
    assert len(by_id) == len(messages)
    missing = {i: s for i, s in acked.items() if by_id.get(i) != s}
    assert missing == {}, f"acknowledged messages lost or moved: {missing}"
    batches: dict[str, list[Message]] = defaultdict(list)
    for m in messages:
        batches[m.metadata["b"]].append(m)
    for parts in batches.values():  # every batch whole, or not there at all
        assert [m.metadata["k"] for m in parts] == list(range(parts[0].metadata["n"]))
        assert [m.seq for m in parts] == list(
            range(parts[0].seq or 0, (parts[0].seq or 0) + len(parts))
        )


@pytest.mark.slow
def test_sigkill_during_appends_loses_nothing_acknowledged(store: JSONLStore, root: Path) -> None:
    rnd = random.Random(CRASH_SEED)
    sids = [store.create_session(agent="crash").id for _ in range(CHILDREN_PER_WAVE)]
    acked: dict[str, dict[str, int]] = {sid: {} for sid in sids}
    kills = kills_started = 0
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])  # children start in milliseconds
    for _ in range(WAVES):
        children = []
        for sid in sids:
            aimed = kills_started % AIMED_EVERY == AIMED_EVERY - 1
            kills_started += 1
            chance = 1 / MAX_ACKS_BEFORE_KILL if aimed else BIG_WRITE_CHANCE
            receive, send = ctx.Pipe(duplex=False)
            args = (str(root), sid, rnd.randrange(10**9), chance, send)
            proc = ctx.Process(target=crash_child, args=args)
            proc.start()
            send.close()
            children.append((sid, proc, receive, aimed))
        for sid, proc, receive, aimed in children:
            got = _receive_until_killed(rnd, proc, receive, aimed)
            receive.close()
            kills += 1
            for line in got:
                for pair in line.decode().split():
                    seq, _, mid = pair.partition(":")
                    acked[sid][mid] = int(seq)
        fresh = JSONLStore(root)  # as a new process would see the files
        for sid in sids:
            _check_session(fresh, sid, acked[sid])
    assert kills >= 20
    assert sum(len(a) for a in acked.values()) > 0
    for sid in sids:  # a last append repairs any torn tail; then every line is JSON
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptRecordWarning)
            last = Message.user("after the crashes", metadata={"b": "final", "k": 0, "n": 1})
            store.append_messages(sid, [last])
        for line in lines_of(session_file(root, "crash", sid)):
            json.loads(line)
        _check_session(JSONLStore(root), sid, acked[sid])


def test_concurrent_stores_in_one_process_share_files(root: Path) -> None:
    """Two store objects on one directory see each other's writes at once."""
    a, b = JSONLStore(root), JSONLStore(root)
    sid = a.create_session().id
    fill(a, sid, 2)
    assert [m.seq for m in b.read_messages(sid)] == [1, 2]
    b.append_messages(sid, prepare_messages(None, [Message.user("from b")]))
    assert [m.text for m in a.tail(sid, 1)] == ["from b"]
    assert a.session_info(sid).last_seq == 3
    assert str(uuid.UUID(sid)) == sid
    assert os.path.exists(root / ".locks")


def test_evicted_indexes_are_rebuilt(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threadline.store.jsonl.MAX_CACHED_INDEXES", 2)
    store = JSONLStore(root)
    sids = [store.create_session().id for _ in range(4)]
    for round_ in range(3):
        for sid in sids:  # each append pushes another session's index out
            fill(store, sid, 1, start=round_ + 1)
    for sid in sids:
        assert [m.text for m in read_quietly(store, sid)] == ["message 1", "message 2", "message 3"]
        again = prepare_messages(None, [Message.user("retry me")])
        assert store.append_messages(sid, again) == store.append_messages(sid, again)


def test_threads_sharing_one_store(root: Path) -> None:
    store = JSONLStore(root)
    sid = store.create_session().id
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for i in range(THREAD_APPENDS):
                msg = Message.user(f"{worker}:{i}", metadata={"w": worker, "i": i})
                store.append_messages(sid, prepare_messages(None, [msg]))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    messages = read_quietly(JSONLStore(root), sid)
    assert [m.seq for m in messages] == list(range(1, THREADS * THREAD_APPENDS + 1))
    for w in range(THREADS):
        assert [m.metadata["i"] for m in messages if m.metadata["w"] == w] == list(
            range(THREAD_APPENDS)
        )


def test_large_images_live_in_the_media_folder_and_read_back_inline(tmp_path: Path) -> None:
    import base64

    from threadline import ImagePart, TextPart

    store = open_store(f"jsonl://{tmp_path / 'js'}")
    s = store.create_session(agent="media")
    big = base64.b64encode(os.urandom(60_000)).decode()
    small = base64.b64encode(b"tiny").decode()
    msg = Message.user(
        [
            TextPart(text="look"),
            ImagePart(data=big, media_type="image/png"),
            ImagePart(data=small, media_type="image/png"),
        ]
    )
    s.append(msg)
    media = list((tmp_path / "js").rglob(f"{s.id}_media/*"))
    assert [p.suffix for p in media] == [".png"]
    assert media[0].read_bytes() == base64.b64decode(big)
    line = (tmp_path / "js").rglob(f"{s.id}.jsonl").__next__().read_text()
    assert big not in line and small in line and f"{s.id}_media/" in line
    (back,) = open_store(f"jsonl://{tmp_path / 'js'}").get_session(s.id).messages()
    assert back.content == msg.content
    s.delete()
    assert not any((tmp_path / "js").rglob(f"{s.id}_media"))


# -- hostile ids and media ------------------------------------------------------------


def _big_image_message(message_id: str) -> Message:
    data = base64.b64encode(os.urandom(40_000)).decode()  # over the 32 KiB inline limit
    return Message.user([ImagePart(data=data, media_type="image/png")], id=message_id)


def _files_outside(tmp_path: Path, root: Path) -> list[Path]:
    return [p for p in tmp_path.rglob("*") if p.is_file() and root not in p.parents]


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_a_message_id_cannot_write_media_outside_the_store(
    tmp_path: Path, root: Path, kind: str
) -> None:
    store = JSONLStore(root)
    s = store.create_session(agent="media")
    escape = "../../../../escaped" if kind == "relative" else str(tmp_path / "abs-escaped")
    with pytest.raises(InvalidMessage, match="message id"):
        s.append(_big_image_message(escape))
    assert _files_outside(tmp_path, root) == []
    assert s.count() == 0


def test_media_files_are_named_by_seq_not_by_message_id(tmp_path: Path, root: Path) -> None:
    """Even an append that skips ``prepare_messages`` cannot pick a media path."""
    store = JSONLStore(root)
    s = store.create_session(agent="media")
    s.append(Message.user("first"))
    hostile = _big_image_message("../../../../escaped").model_copy(
        update={"token_counts": {"o200k": 1}}
    )
    (stored,) = store.append_messages(s.id, [hostile])
    assert _files_outside(tmp_path, root) == []
    media = root / "sessions" / "media" / f"{s.id}_media"
    assert sorted(p.name for p in media.iterdir()) == ["2-0.png"]
    assert store.read_messages(s.id, after_seq=1)[0].content == stored.content


def test_deleting_sessions_removes_their_media(root: Path) -> None:
    store = JSONLStore(root)
    one, two = store.create_session(agent="media"), store.create_session(agent="media")
    for s in (one, two):
        s.append(_big_image_message(str(uuid.uuid4())))
    media = [root / "sessions" / "media" / f"{s.id}_media" for s in (one, two)]
    assert all(m.is_dir() for m in media)
    store.delete_sessions([one.id])
    assert not media[0].exists() and media[1].is_dir()
    store.delete_all()
    assert not media[1].exists()
