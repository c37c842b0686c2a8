"""SQLite backend quirks: the file, its schema, bad input, and crash safety.

The protocol itself is covered for every backend by tests/conformance.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from threadline import (
    InvalidMessage,
    InvalidSessionId,
    Message,
    MessageTooLarge,
    NotAThreadlineStore,
    SchemaTooNew,
    SessionLocked,
    StoreUnavailable,
    open_store,
)
from threadline.store.checks import MAX_MESSAGE_BYTES
from threadline.store.locks import LockHolder
from threadline.store.sqlite import SCHEMA_VERSION, SQLiteStore


def test_example_from_the_issue(tmp_path: Path) -> None:
    from threadline import ContextPolicy, ToolCall, build_context

    store = open_store(f"sqlite://{tmp_path}/t.db")
    s = store.create_session(agent="coder")
    s.append(
        [
            Message.user("hi"),
            Message.assistant("", tool_calls=[ToolCall(id="c1", name="grep", arguments={"q": 1})]),
            Message.tool("3 matches", tool_call_id="c1"),
        ]
    )
    assert [m.seq for m in s.messages()] == [1, 2, 3]
    w = build_context(
        s,
        model="gpt-4o",
        system_prompt="You are...",
        policy=ContextPolicy(context_limit=8000, response_reserve=1000),
    )
    assert w.messages[0].role == "system" and len(w.messages) == 4
    assert w.tokens <= 7000 and w.budget < 7000
    assert w.to_openai()[2]["tool_calls"][0]["function"]["name"] == "grep"
    assert w.to_anthropic()["messages"][0]["role"] == "user"
    assert store.get_session(s.id).id == s.id
    assert store.list_sessions().total == 1
    store.delete_session(s.id)
    assert store.list_sessions().total == 0


def test_wal_and_durability_settings(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    con = sqlite3.connect(tmp_path / "s.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store._con.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    relaxed = SQLiteStore.from_url(f"sqlite://{tmp_path}/n.db?synchronous=normal")
    assert relaxed._con.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_the_database_file_threadline_creates_is_private(tmp_path: Path) -> None:
    """Created 0600 like exports and the server token (SQLite alone makes it 0644, and
    its -wal and -shm files take the database file's mode); an existing file keeps its
    own mode."""
    old = os.umask(0o022)
    try:
        store = SQLiteStore(tmp_path / "new.db")
        store.create_session().append(Message.user("a secret"))
        made = list(tmp_path.glob("new.db*"))
        assert {p.name for p in made} >= {"new.db", "new.db-wal"}
        assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in made} == {
            p.name: 0o600 for p in made
        }
        store.close()
        shared = tmp_path / "shared.db"
        shared.touch(mode=0o640)
        SQLiteStore(shared).close()
        assert stat.S_IMODE(shared.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_not_a_database(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(NotAThreadlineStore):
        open_store(f"sqlite://{garbage}")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(NotAThreadlineStore, match="did not create"):
        open_store(f"sqlite://{other}")


def test_newer_schema_refused_and_data_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    s = open_store(f"sqlite://{path}").create_session()
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(SchemaTooNew, match="upgrade"):
        open_store(f"sqlite://{path}")
    con = sqlite3.connect(path)
    assert con.execute("SELECT id FROM sessions").fetchone()[0] == s.id


def test_unwritable_location(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable):
        open_store(f"sqlite://{blocker}/sub/store.db")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_store(f"sqlite://{path}").close()
    path.chmod(0o444)
    with pytest.raises(StoreUnavailable):
        open_store(f"sqlite://{path}").create_session()


def test_bad_messages_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    s = open_store(f"sqlite://{tmp_path}/s.db").create_session()
    s.append(Message.user("kept"))
    with pytest.raises(InvalidMessage, match="UTF-8"):
        s.append([Message.user("fine"), Message.user("bad \udcff surrogate")])
    with pytest.raises(MessageTooLarge):
        s.append(Message.tool("x" * (MAX_MESSAGE_BYTES + 1), tool_call_id="c"))
    assert [m.text for m in s.messages()] == ["kept"]
    for bad in ["../etc", "a/b", "x\x00y", "", "-lead", "a" * 129]:
        with pytest.raises(InvalidSessionId):
            s.store.get_session(bad)


def test_tool_result_without_its_call_is_refused(tmp_path: Path) -> None:
    from threadline import ToolCall

    s = open_store(f"sqlite://{tmp_path}/s.db").create_session()
    with pytest.raises(InvalidMessage, match="no matching tool call"):
        s.append([Message.user("q"), Message.tool("result", tool_call_id="nobody")])
    s.append(Message.assistant("", tool_calls=[ToolCall(id="c9", name="grep")]))
    s.append(Message.tool("answer", tool_call_id="c9"))  # call in an earlier batch: fine
    assert [m.role for m in s.messages()] == ["assistant", "tool"]


def test_second_process_cannot_attach(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/s.db"
    s = open_store(url).create_session()
    code = (
        "import sys, time; from threadline import open_store\n"
        f"st = open_store({url!r}); st.acquire_lock({s.id!r})\n"
        "print('locked', flush=True); time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(SessionLocked, match=f"pid {child.pid}"):
            s.store.acquire_lock(s.id)
        child.kill()
        child.wait()
        # the holder died: its lock is stale on this host and is taken over
        holder = s.store.acquire_lock(s.id)
        assert holder.pid == os.getpid()
    finally:
        child.kill()


def test_expired_lease_from_another_host_is_taken_over(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path}/s.db")
    s = store.create_session()
    far = LockHolder(pid=1, host="elsewhere", lease_seconds=0.05)
    store.acquire_lock(s.id, far)
    with pytest.raises(SessionLocked):
        store.acquire_lock(s.id, LockHolder(pid=2, host="elsewhere-too"))
    time.sleep(0.1)
    assert store.acquire_lock(s.id).pid == os.getpid()


CHILD = """
import sys
from threadline import Message, open_store
store = open_store(sys.argv[1])
s = store.get_session(sys.argv[2])
i = 0
while True:
    i += 1
    batch = [Message.user(f"m{i}-a " + "x" * (i % 500)), Message.assistant(f"m{i}-b")]
    stored = s.append(batch)
    print(stored[-1].seq, flush=True)
"""


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_append(tmp_path: Path) -> None:
    """Kill a writer at random moments, 20+ times: every acknowledged seq survives."""
    url = f"sqlite://{tmp_path}/crash.db"
    sid = open_store(url).create_session(agent="crash").id
    rng = random.Random(7)
    acknowledged = 0
    for _ in range(22):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, sid], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # wait until the child is really appending
        time.sleep(rng.uniform(0.0, 0.15))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        seqs = [int(x) for x in (first + out).split()]
        if seqs:
            acknowledged = max(acknowledged, seqs[-1])
        store = open_store(url)
        msgs = store.get_session(sid).messages()
        got = [m.seq for m in msgs]
        assert got == list(range(1, len(got) + 1)), "gap or disorder after a crash"
        assert len(got) >= acknowledged, "an acknowledged append was lost"
        assert len(got) % 2 == 0, "a batch was torn"
        assert store.session_info(sid).message_count == len(got)
        store.close()
    assert acknowledged > 20


def test_four_slash_absolute_url_opens_the_file(tmp_path: Path) -> None:
    """``sqlite:////abs/path.db`` (SQLAlchemy's spelling) is the same file as three slashes."""
    four = open_store(f"sqlite:///{tmp_path}/s.db")  # tmp_path is absolute: four slashes
    sid = four.create_session(agent="a").id
    four.close()
    assert open_store(f"sqlite://{tmp_path}/s.db").get_session(sid).id == sid
