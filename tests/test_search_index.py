"""SQLite's full-text index catches up in batches (issue 12): searches still find every
appended message, a crash between an append and the indexing loses nothing, and a
store of the previous schema migrates."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from threadline import Message, ToolCall
from threadline.store import sqlite as sqlite_store
from threadline.store.base import encode_message, format_ts, prepare_messages
from threadline.store.sqlite import SQLiteStore, plain_snippet


@pytest.fixture(autouse=True)
def _estimated_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_TOKENIZER", "estimate")


def fts_rows(path: Path) -> int:
    """Rows in the full-text index itself (not the content table)."""
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0])
    finally:
        con.close()


def fts_consistent(path: Path) -> None:
    """FTS5's own check of the index against the content table (rank 1: with content)."""
    con = sqlite3.connect(path)
    try:
        con.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        con.close()


def test_search_right_after_each_append_finds_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    s = store.create_session(agent="a")
    for i in range(30):
        s.append(Message.user(f"note number{i} about zebra{i}"))
        hits = store.search(f"zebra{i}")
        assert [(h.session_id, h.seq) for h in hits] == [(s.id, i + 1)]
        assert hits[0].snippet == f"note number{i} about [zebra{i}]"
    assert len(store.search("note", limit=200)) == 30
    assert store.index_backlog() == 0
    fts_consistent(tmp_path / "s.db")


def test_appends_leave_a_backlog_until_a_search_or_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "INDEX_BACKLOG_ROWS", 10)
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = store.create_session()
    s.append([Message.user(f"alpha {i}") for i in range(4)])
    assert store.index_backlog() == 4 and fts_rows(path) == 0  # not paid on the append
    s.append([Message.user(f"beta {i}") for i in range(6)])  # 10 waiting: indexed now
    assert store.index_backlog() == 0 and fts_rows(path) == 10
    s.append(Message.user("gamma"))
    assert store.index_backlog() == 1
    assert [h.seq for h in store.search("gamma")] == [11]
    assert store.index_backlog() == 0
    assert store.update_search_index() == 0  # nothing left: a read, no write


CRASHING_WRITER = """
import os, sys
from threadline import Message
from threadline.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
s = store.get_session(sys.argv[2])
s.append([Message.user(f"orphan{i} before the crash") for i in range(5)])
os._exit(0)  # no close, no catch-up: the process dies right after the append
"""


def test_crash_between_append_and_indexing_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = store.create_session()
    s.append(Message.user("indexed before"))
    assert store.search("before")  # indexed now
    store.close()
    env = {"THREADLINE_TOKENIZER": "estimate", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(path), s.id], check=True, env=env)
    reopened = SQLiteStore(path)
    assert reopened.index_backlog() == 5  # recomputed from the marker
    hits = reopened.search("before", limit=50)
    assert sorted(h.seq for h in hits) == [1, 2, 3, 4, 5, 6]
    assert [h.seq for h in reopened.search("orphan3")] == [5]
    assert fts_rows(path) == 6  # each message indexed once
    fts_consistent(path)


def test_a_catch_up_that_fails_half_way_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = store.create_session()
    s.append([Message.user(f"kappa {i}") for i in range(3)])

    def index_then_die(con: sqlite3.Connection) -> int:
        con.execute(
            "INSERT INTO messages_fts (rowid, text) SELECT rowid, text FROM messages "
            "WHERE rowid > (SELECT indexed_upto FROM search_index)"
        )
        raise KeyboardInterrupt  # dies before the marker moves

    monkeypatch.setattr(store, "_index_pending", index_then_die)
    with pytest.raises(KeyboardInterrupt):
        store.update_search_index()
    monkeypatch.undo()
    assert store.index_backlog() == 3 and fts_rows(path) == 0  # rolled back together
    assert len(store.search("kappa")) == 3
    assert fts_rows(path) == 3
    fts_consistent(path)


def test_read_only_handle_finds_the_backlog(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writer = SQLiteStore(path)
    s = writer.create_session(agent="w")
    s.append(Message.user("old lambda words"))
    writer.search("lambda")  # indexed
    s.append([Message.user("new lambda words"), Message.user("only omega here")])
    reader = SQLiteStore.from_url(f"sqlite://{path}?mode=ro")
    assert reader.read_only and reader.index_backlog() == 2
    assert sorted(h.seq for h in reader.search("lambda")) == [1, 2]
    hit = reader.search("omega", agent="w")[0]
    assert (hit.seq, hit.snippet) == (3, "only [omega] here")
    assert reader.search("omega", agent="other") == []
    assert reader.index_backlog() == 2  # a reader never writes
    assert writer.index_backlog() == 2


def test_new_rows_stay_above_the_marker_after_the_newest_are_deleted(tmp_path: Path) -> None:
    """SQLite reuses the rowids of deleted newest rows; the marker says those are indexed."""
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    keep = store.create_session()
    keep.append(Message.user("keeper text"))
    gone = store.create_session()
    gone.append([Message.user(f"doomed {i}") for i in range(5)])
    assert store.search("doomed")  # indexed, marker at the newest rowid
    store.delete_session(gone.id)
    assert store.search("doomed") == []
    late = store.create_session()
    late.append([Message.user(f"latecomer {i}") for i in range(3)])
    assert store.index_backlog() == 3
    assert len(store.search("latecomer")) == 3
    assert store.search("doomed") == []
    fts_consistent(path)
    store.delete_session(late.id)  # deleting indexed and unindexed rows both work
    late2 = store.create_session()
    late2.append(Message.user("unindexed then deleted"))
    store.delete_session(late2.id)
    assert store.search("latecomer") == [] and store.search("unindexed") == []
    fts_consistent(path)


def test_tool_calls_are_searchable_after_catch_up(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    s = store.create_session()
    call = ToolCall(id="c1", name="grep_codebase", arguments={"pattern": "needle_xyz"})
    s.append([Message.assistant("", tool_calls=[call]), Message.tool("ok", tool_call_id="c1")])
    assert [h.seq for h in store.search("needle_xyz")] == [1]


def test_long_messages_get_a_plain_snippet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "MAX_FTS_SNIPPET_CHARS", 1000)
    store = SQLiteStore(tmp_path / "s.db")
    s = store.create_session()
    long_text = "filler " * 300 + "the Needle is here " + "more " * 300
    s.append([Message.user(long_text), Message.user("a short needle")])
    hits = {h.seq: h.snippet for h in store.search("needle")}
    assert hits[2] == "a short [needle]"
    assert hits[1].startswith("…") and hits[1].endswith("…")
    assert "the [Needle] is here" in hits[1] and len(hits[1]) < 200


def test_plain_snippet_edges() -> None:
    assert plain_snippet("short text", ["text"]) == "short [text]"
    assert plain_snippet("no match at all", ["zzz"]) == "no match at all"
    assert plain_snippet("x" * 500, ["zzz"]).endswith("…")
    assert plain_snippet("see foo-bar here", ["foo-bar"]) == "see [foo]-[bar] here"
    assert plain_snippet("nothing", ["!!!"]) == "nothing"


# -- migration from schema 1 ----------------------------------------------------------


def make_v1_store(path: Path, texts: list[str]) -> str:
    """A store as threadline wrote it before this change: schema 1, whose insert
    trigger indexed every message inside the append."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("BEGIN")
    sqlite_store.m001_initial(con)
    con.execute("PRAGMA user_version = 1")
    con.execute("INSERT INTO threadline_meta (key, value) VALUES ('app', 'threadline')")
    now = format_ts(Message.user("x").created_at)
    con.execute(
        "INSERT INTO sessions (id, agent, created_at, updated_at, message_count, last_seq) "
        "VALUES ('old-session', 'default', ?, ?, ?, ?)",
        (now, now, len(texts), len(texts)),
    )
    for seq, m in enumerate(prepare_messages(None, [Message.user(t) for t in texts]), 1):
        con.execute(
            "INSERT INTO messages (session_id, seq, id, role, created_at, tokens, body, text) "
            "VALUES ('old-session', ?, ?, 'user', ?, 1, ?, ?)",
            (seq, m.id, now, encode_message(m).decode(), m.search_text()),
        )
    con.execute("COMMIT")
    con.close()
    return "old-session"


def test_a_schema_1_store_migrates(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    sid = make_v1_store(path, ["ancient sigma", "ancient tau", "ancient upsilon"])
    assert fts_rows(path) == 3
    store = SQLiteStore(path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == sqlite_store.SCHEMA_VERSION
    triggers = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert triggers == {"messages_fts_delete"}  # the insert trigger is gone
    assert con.execute("SELECT indexed_upto FROM search_index").fetchone()[0] == 3
    con.close()
    assert store.index_backlog() == 0
    assert len(store.search("ancient")) == 3
    s = store.get_session(sid)
    s.append(Message.user("modern sigma"))
    assert sorted(h.seq for h in store.search("sigma")) == [1, 4]
    assert fts_rows(path) == 4
    store.delete_session(sid)
    assert store.search("sigma") == [] and fts_rows(path) == 0
    fts_consistent(path)


def test_the_migration_runs_again_harmlessly(tmp_path: Path) -> None:
    """A version number set back (by hand, or a restored backup's) re-runs the step."""
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = store.create_session()
    s.append(Message.user("first phi"))
    store.search("phi")
    s.append(Message.user("second phi"))  # waiting for the index
    store.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 1")
    con.close()
    again = SQLiteStore(path)
    assert again.index_backlog() == 1  # the marker kept its place
    assert sorted(h.seq for h in again.search("phi")) == [1, 2]
    assert fts_rows(path) == 2
    fts_consistent(path)


def test_search_while_another_writer_holds_the_lock(tmp_path: Path) -> None:
    """A search that cannot write the index now still finds the backlog."""
    path = tmp_path / "s.db"
    store = SQLiteStore.from_url(f"sqlite://{path}?busy_timeout=0")
    s = store.create_session()
    s.append(Message.user("psi text"))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        assert [h.seq for h in store.search("psi")] == [1]
        assert store.index_backlog() == 1
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert [h.seq for h in store.search("psi")] == [1]
    assert store.index_backlog() == 0
