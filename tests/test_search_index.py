"""SQLite's full-text index catches up in batches (issue 12): searches still find every
appended message, a crash between an append and the indexing loses nothing, and a
store of the previous schema migrates."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Message, ToolCall
from threadline.errors import UsageError
from threadline.messages import TextPart
from threadline.store import sqlite as sqlite_store
from threadline.store.checks import format_ts
from threadline.store.encoding import encode_message, prepare_messages
from threadline.store.search_query import marked_snippet, parse_query, snippet
from threadline.store.sqlite import SQLiteStore


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


def test_appends_leave_a_backlog_until_a_search_or_close(tmp_path: Path) -> None:
    """Appends are plain inserts, however many wait; a search catches up first, and so
    does closing the store."""
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = store.create_session()
    s.append([Message.user(f"alpha {i}") for i in range(4)])
    assert store.index_backlog() == 4 and fts_rows(path) == 0  # not paid on the append
    s.append([Message.user(f"beta {i}") for i in range(1500)])
    assert store.index_backlog() == 1504 and fts_rows(path) == 0
    assert store.search("beta").total == 1500
    assert store.index_backlog() == 0 and fts_rows(path) == 1504
    s.append(Message.user("gamma"))
    assert store.index_backlog() == 1
    assert [h.seq for h in store.search("gamma")] == [1505]
    assert store.index_backlog() == 0
    assert store.update_search_index() == 0  # nothing left: a read, no write
    s.append([Message.user("delta"), Message.user("epsilon")])
    store.close()
    store.close()  # a second close is harmless
    assert fts_rows(path) == 1507  # indexed on close
    reader = SQLiteStore.from_url(f"sqlite://{path}?mode=ro")
    assert reader.index_backlog() == 0 and reader.search("epsilon").total == 1
    reader.close()  # a reader's close writes nothing


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
            "INSERT INTO messages_fts (rowid, text) "
            "SELECT rowid, threadline_index_text(body) FROM messages "
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


def test_long_messages_get_a_short_snippet(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    s = store.create_session()
    long_text = "filler " * 300 + "the Needle is here " + "more " * 300
    s.append([Message.user(long_text), Message.user("a short needle")])
    hits = {h.seq: h.snippet for h in store.search("needle")}
    assert hits[2] == "a short [needle]"
    assert hits[1].startswith("…") and hits[1].endswith("…")
    assert "the [Needle] is here" in hits[1] and len(hits[1]) < 200


def test_snippet_edges() -> None:
    assert snippet("short text", parse_query("text")) == "short [text]"
    assert snippet("no match at all", parse_query("zzz")) == "no match at all"
    assert snippet("x" * 500, parse_query("zzz")).endswith("…")
    assert snippet("see foo-bar here", parse_query("foo-bar")) == "see [foo]-[bar] here"
    assert snippet("nothing", parse_query("!!!")) == "nothing"
    assert snippet("a transcript", parse_query("transcr*")) == "a [transcript]"


@given(
    before=st.text(alphabet="ab []-<>x\n", max_size=80),
    after=st.text(alphabet="ab []-<>x\n", max_size=80),
)
@settings(max_examples=200, deadline=None)
def test_marks_find_exactly_the_bracketed_matches(before: str, after: str) -> None:
    """Brackets the text holds are never taken for a match: the marks cover each match
    and nothing else, and the snippet without the marks' brackets is the text shown."""
    text = f"{before} [spotter-fum] {after}"
    shown, marks = marked_snippet(text, parse_query("spotter-fum"))
    assert shown == snippet(text, parse_query("spotter-fum"))
    assert [shown[m.start : m.end] for m in marks][:2] == ["[spotter]", "[fum]"]
    plain, at = [], 0
    for m in marks:
        plain.append(shown[at : m.start] + shown[m.start + 1 : m.end - 1])
        at = m.end
    plain.append(shown[at:])
    assert "".join(plain).strip("…") in " ".join(text.split())
    assert "[spotter-fum]" in "".join(plain)


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
    assert again.index_backlog() == 0  # the index was rebuilt, every message in it
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


# -- schema 3: the index holds decoded text, fed from the body ------------------------


CODE_CALL = ToolCall(id="c1", name="bash", arguments={"cmd": "cd src\nzebrafish --check"})


def test_a_schema_2_store_migrates_to_decoded_text(tmp_path: Path) -> None:
    """A store as the previous version wrote it (schema 2: a ``text`` column holding
    tool arguments JSON-escaped, so ``zebrafish`` after a newline was ``nzebrafish``)."""
    path = tmp_path / "v2.db"
    sid = make_v1_store(path, ["plain words"])
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN")
    sqlite_store.m002_search_index_catches_up(con)
    con.execute("PRAGMA user_version = 2")
    (m,) = prepare_messages(None, [Message.assistant("", tool_calls=[CODE_CALL])])
    con.execute(
        "INSERT INTO messages (session_id, seq, id, role, created_at, tokens, body, text) "
        "VALUES (?, 2, ?, 'assistant', ?, 1, ?, ?)",
        (sid, m.id, format_ts(m.created_at), encode_message(m).decode(), m.search_text()),
    )
    con.execute("COMMIT")
    assert "nzebrafish" in con.execute("SELECT text FROM messages WHERE seq = 2").fetchone()[0]
    con.close()
    store = SQLiteStore(path)
    assert [h.seq for h in store.search("zebrafish")] == [2]
    assert [h.seq for h in store.search("plain")] == [1]
    assert store.index_backlog() == 0 and fts_rows(path) == 2  # indexed by the migration
    con = sqlite3.connect(path)
    assert "text" not in {r[1] for r in con.execute("PRAGMA table_info(messages)")}
    con.close()
    store.delete_session(sid)
    assert store.search("zebrafish") == [] and fts_rows(path) == 0
    fts_consistent(path)


def test_the_index_text_from_a_body_is_the_messages_own() -> None:
    """SQLite indexes from the stored body; the other backends from the message."""
    from threadline.store.search_query import body_pieces, message_pieces

    messages = [
        Message.assistant("see", tool_calls=[CODE_CALL, ToolCall(id="c2", name="x")]),
        Message.assistant("", tool_calls=[ToolCall(id="c3", name="y", raw_arguments="{bad")]),
        Message.user([TextPart(text="one"), TextPart(text="two 北京")]),
        Message.tool("out", tool_call_id="c1"),
    ]
    for m in messages:
        assert body_pieces(encode_message(m)) == message_pieces(m)
    assert body_pieces(b"not json") == [] and body_pieces(b"[1]") == []


WORDS = ["alpha", "alphabet", "beta", "Beta", "北", "京", "北京", "foo_bar", "x.y", "Ünï", "or"]
SEPARATORS = [" ", "\n", ", ", "-", "\\n", "/", ""]
text_st = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=6)
atom_st = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(["alph*", "bet*", '"alpha beta"', '"北京"', "-beta", "NOT alpha", "OR"]),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(text_st, min_size=1, max_size=6),
    query=st.lists(atom_st, min_size=1, max_size=4),
    in_args=st.booleans(),
)
def test_fts5_and_the_shared_matcher_agree(
    docs: list[list[tuple[str, str]]], query: list[str], in_args: bool
) -> None:
    """Whatever the text and the query, SQLite (FTS5 over the index text) finds exactly
    what the scanning backends' matcher finds, in the same order, with the same total."""
    from threadline.store.memory import MemoryStore

    texts = ["".join(w + sep for w, sep in doc) for doc in docs]
    messages = [
        Message.assistant("", tool_calls=[ToolCall(id="c", name="t", arguments={"a": t})])
        if in_args
        else Message.user(t)
        for t in texts
    ]
    q = " ".join(query)
    with tempfile.TemporaryDirectory() as tmp:
        lite = SQLiteStore(Path(tmp) / "s.db")
        results = []
        for store in (lite, MemoryStore()):
            store.create_session(id="s").append(messages)
            page = store.search(q, limit=200)
            results.append(([(h.seq, h.snippet) for h in page], page.total))
        lite.close()
    assert results[0] == results[1]


@pytest.mark.postgres
def test_a_postgres_store_of_schema_1_migrates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows written by schema 1 (search text JSON-escaped, parsed by PostgreSQL's own
    parser) get the decoded index text from their bodies."""
    import psycopg

    from tests.conformance.backends import cleanup_url, make_url
    from threadline import open_store
    from threadline.store import postgres

    url = make_url("postgres", Path("unused"))
    try:
        monkeypatch.setattr(postgres, "MIGRATIONS", postgres.MIGRATIONS[:1])
        monkeypatch.setattr(postgres, "SCHEMA_VERSION", 1)
        old = open_store(url)
        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
            # the session row as schema 1 has it (today's create also names its parent)
            conn.execute(
                f'INSERT INTO "{schema}".sessions (id, agent, created_at, updated_at) '
                "VALUES ('s', 'default', now(), now())"
            )
            batch = prepare_messages(None, [Message.assistant("", tool_calls=[CODE_CALL])])
            old.append_messages("s", batch)
            old.close()
            conn.execute(
                f'UPDATE "{schema}".messages SET search_text = %s', ('bash {"cmd":"cd src\\n"}',)
            )
        monkeypatch.undo()
        store = open_store(url)
        assert [(h.session_id, h.seq) for h in store.search("zebrafish")] == [("s", 1)]
        assert store.search('"src zebrafish"').total == 1
        store.close()
    finally:
        cleanup_url("postgres", url)


def test_the_search_command_pages_filters_and_totals(tmp_path: Path) -> None:
    from tests.test_cli import js, ok, run

    url = f"sqlite://{tmp_path / 's.db'}"
    store = SQLiteStore(tmp_path / "s.db")
    s = store.create_session(id="cli-session", model="gpt-4o")
    s.append([Message.user(f"transcript {i}") for i in range(5)])
    s.append(Message.assistant("", tool_calls=[CODE_CALL]))
    store.close()
    assert (
        "3-4 of 5 hits"
        in ok(url, "sessions", "search", "transcr*", "--offset", "2", "-n", "2").stdout
    )
    data = js(url, "sessions", "search", "zebrafish OR transcript", "--role", "assistant")
    assert (data["total"], data["offset"], [h["seq"] for h in data["items"]]) == (1, 0, [6])
    assert js(url, "sessions", "search", "transcript", "--model", "other")["total"] == 0
    assert js(url, "sessions", "search", "transcript", "--since", "2000-01-01")["total"] == 5
    assert js(url, "sessions", "search", "transcript", "--until", "2000-01-01")["total"] == 0
    assert "0 of 5 hits" in ok(url, "sessions", "search", "transcript", "--offset", "9").stdout
    for bad in (["--since", "yesterday"], ["--role", "robot"]):
        result = run(url, "sessions", "search", "transcript", *bad)
        assert result.exit_code == 2 and "threadline: error:" in result.stderr


def test_a_catch_up_indexes_every_handle_s_rows_from_their_bodies(tmp_path: Path) -> None:
    """Rows two handles appended are indexed from their bodies in one catch-up; deleting
    them all (which re-derives each text from the body) leaves a consistent, empty index,
    so the texts indexed and removed were the same."""
    path = tmp_path / "s.db"
    mine, other = SQLiteStore(path), SQLiteStore(path)
    a = mine.create_session(id="a")
    b = other.get_session(other.create_session(id="b").id)
    a.append([Message.user("kept ÉCOLE 北京 one"), Message.assistant("", tool_calls=[CODE_CALL])])
    b.append([Message.user("decoded 東京 two"), Message.user("decoded three")])
    a.append(Message.user("kept four नमस्ते"))
    a.append(Message.user("kept five"))
    assert mine.index_backlog() == 6 and fts_rows(path) == 0
    assert mine.update_search_index() == 6
    assert mine.index_backlog() == 0 and fts_rows(path) == 6
    for query, expected in [("kept", 3), ("decoded", 2), ("zebrafish", 1), ("京", 2)]:
        assert mine.search(query).total == expected, query
    assert mine.search("école").total == 1 and mine.search("नमस्ते").total == 1
    fts_consistent(path)
    mine.delete_sessions(["a", "b"])
    assert fts_rows(path) == 0
    fts_consistent(path)


def test_every_message_of_a_bulk_append_is_found(tmp_path: Path) -> None:
    """A large batch and single appends after it: each message is found by its own word,
    by a search on a reader (which indexes the backlog itself) and on this handle."""
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = store.create_session()
    count = 2345
    s.append([Message.user(f"bulk item{i}") for i in range(count - 45)])
    for i in range(count - 45, count):
        s.append(Message.user(f"bulk item{i}"))
    reader = SQLiteStore.from_url(f"sqlite://{path}?mode=ro")
    assert reader.search("bulk").total == count  # the reader indexes the backlog itself
    assert store.search("bulk").total == count
    assert store.index_backlog() == 0 and fts_rows(path) == count
    for i in range(0, count, 37):
        assert [h.seq for h in store.search(f"item{i}")] == [i + 1]


def test_search_options_are_checked(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    with pytest.raises(TypeError, match="limt"):
        store.search("x", limt=3)  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="role"):
        store.search("x", role="robot")
    with pytest.raises(UsageError, match="time zone"):
        store.search("x", since=datetime(2026, 1, 1))
    assert store.search("x", since=datetime(2026, 1, 1, tzinfo=UTC)).total == 0


def test_a_kept_text_is_used_only_for_its_very_body(tmp_path: Path) -> None:
    """Another handle deletes a session before the catch-up and stores a different
    message under the same ids and the same rowid: the text kept for the old body
    must not index the new one (a later delete would then corrupt the index)."""
    path = tmp_path / "s.db"
    mine, other = SQLiteStore(path), SQLiteStore(path)
    mine.create_session(id="s").append(Message.user("alpha words", id="m1"))
    other.delete_session("s")
    other.create_session(id="s").append(Message.user("beta words", id="m1"))
    assert mine.update_search_index() == 1
    assert mine.search("beta").total == 1 and mine.search("alpha").total == 0
    mine.delete_session("s")
    assert fts_rows(path) == 0
    fts_consistent(path)
