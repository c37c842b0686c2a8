"""Session databases: agsh's ``sessions.db`` (fixture built from agsh's documented
schema) and the OpenAI Agents SDK's ``SQLiteSession`` (real databases made by the SDK),
found by a directory walk, one session per session id, synced like any source."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from typer.testing import CliRunner

from threadline import open_store
from threadline.cli.app import app
from threadline.interop.importers import IMPORT_LIMIT_ENV, detect_format, import_sessions
from threadline.interop.responses_format import messages_to_items
from threadline.interop.sync import Source, Syncer, SyncStatus, find_sources

runner = CliRunner()

# agsh's schema as its documentation gives it (seed 003): three tables
AGSH_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
                       locked_by TEXT, metadata TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                       session_id TEXT NOT NULL REFERENCES sessions(id),
                       role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE tool_outputs (session_id TEXT NOT NULL, name TEXT NOT NULL, content TEXT NOT NULL,
                           created_at TEXT NOT NULL, PRIMARY KEY (session_id, name));
"""
S1 = "550e8400-e29b-41d4-a716-446655440000"
S2 = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
AGSH_ROWS: list[tuple[str, str, Any, str]] = [
    (S1, "user", "How do I implement a binary search tree?", "2026-03-14T11:00:00Z"),
    (
        S1,
        "assistant",
        [
            {"type": "text", "text": "Let me look at your code."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "bst.rs"}},
        ],
        "2026-03-14T11:00:05Z",
    ),
    (
        S1,
        "tool_results",
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "struct Node;"}],
        "2026-03-14T11:00:06Z",
    ),
    (S1, "assistant", "Here is a BST sketch: ...", "2026-03-14T11:00:09Z"),
    (S2, "user", "Fix the login page CSS", "2026-03-13T09:30:00Z"),
    (S2, "assistant", "[1, 2] is what I'd keep.", "2026-03-13T09:30:04Z"),
]


def make_agsh(path: Path, rows: list[tuple[str, str, Any, str]] = AGSH_ROWS) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(AGSH_SCHEMA)
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, NULL, NULL)",
            (S1, "2026-03-14T11:00:00Z", "2026-03-14T12:00:00Z"),
        )
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, '4242', NULL)",
            (S2, "2026-03-13T09:30:00Z", "2026-03-13T09:31:00Z"),
        )
        db.execute(
            "INSERT INTO tool_outputs VALUES (?, 'notes', 'scratch text', '2026-03-14T11:00:07Z')",
            (S1,),
        )
        add_agsh_rows(db, rows)


def add_agsh_rows(db: sqlite3.Connection, rows: list[tuple[str, str, Any, str]]) -> None:
    for sid, role, content, at in rows:
        text = content if isinstance(content, str) else json.dumps(content)
        db.execute(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
            (sid, role, text, at),
        )


TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "use tool"}]},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_w",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21C"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny and 21C.", "annotations": []}],
    },
]
FOLLOW_UP: list[dict[str, Any]] = [
    {"role": "user", "content": "And tomorrow?"},
    {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Rain.", "annotations": []}],
    },
]


def add_items(db: Path, session_id: str, items: list[dict[str, Any]]) -> None:
    session = SQLiteSession(session_id, db)
    try:
        asyncio.run(session.add_items(items))  # type: ignore[arg-type]
    finally:
        session.close()


# -- agsh ---------------------------------------------------------------------------


def test_agsh_sessions_import_one_per_session(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    make_agsh(db)
    assert detect_format(db) == "agsh"
    first, second = import_sessions(db)
    assert [s.source_format for s in (first, second)] == ["agsh", "agsh"]
    assert (first.source_id, second.source_id) == (S2, S1)  # oldest session first
    assert second.title == "How do I implement a binary search tree?"
    user, caller, result, answer = second.messages
    assert caller.tool_calls[0].arguments == {"path": "bst.rs"}
    assert (result.role, result.tool_call_id, result.name) == ("tool", "toolu_1", "read_file")
    assert result.text == "struct Node;" and answer.text == "Here is a BST sketch: ..."
    assert user.created_at.isoformat() == "2026-03-14T11:00:00+00:00"
    assert second.metadata["source_created_at"] == "2026-03-14T11:00:00+00:00"
    assert second.metadata["source_updated_at"] == "2026-03-14T12:00:00+00:00"
    assert second.metadata["agsh_scratchpad"] == [{"name": "notes", "chars": 12}]
    assert first.messages[1].text == "[1, 2] is what I'd keep."  # JSON-looking text stays text


def test_agsh_directory_sync_then_growth(tmp_path: Path) -> None:
    home = tmp_path / "share" / "agsh"
    home.mkdir(parents=True)
    db = home / "sessions.db"
    make_agsh(db)
    (tmp_path / "share" / "notes.sqlite").write_bytes(b"")  # not a database: skipped
    with sqlite3.connect(tmp_path / "share" / "other.db") as other:
        other.execute("CREATE TABLE t (x)")  # a database of something else: skipped
    store = open_store("memory://")
    report = Syncer(store).sync(find_sources([str(tmp_path / "share")]))
    assert report.counts()["new"] == 2 and report.counts()["skipped"] == 2
    assert report.counts()["failed"] == 0
    again = Syncer(store).sync(find_sources([str(tmp_path / "share")]))
    assert again.counts()["unchanged"] == 2 and again.messages_added == 0
    with sqlite3.connect(db) as live:
        add_agsh_rows(live, [(S2, "user", "Thanks!", "2026-03-13T09:35:00Z")])
    grown = Syncer(store).sync_source(Source(db))
    by_id = {r.source_id: r for r in grown}
    assert by_id[S2].status is SyncStatus.UPDATED and by_id[S2].messages_added == 1
    assert by_id[S1].status is SyncStatus.UNCHANGED


# -- Agents SDK ---------------------------------------------------------------------


def test_agents_sdk_database_maps_items_exactly(tmp_path: Path) -> None:
    db = tmp_path / "conversations.db"
    add_items(db, "user_123", TURN)
    add_items(db, "user_456", FOLLOW_UP)
    assert detect_format(db) == "agents-sdk"
    first, second = import_sessions(db)
    assert first.source_format == "agents-sdk"
    assert first.source_id == f"{db.resolve()}#user_123"
    assert second.source_id == f"{db.resolve()}#user_456"
    assert first.title == "What's the weather in Paris?"
    _user, caller, result, answer = first.messages
    assert caller.tool_calls[0].name == "get_weather" and result.name == "get_weather"
    assert caller.metadata["responses_items"][0]["item"]["type"] == "reasoning"
    assert answer.text == "Sunny and 21C."
    assert messages_to_items(first.messages) == TURN  # what the SDK stored, item for item
    assert first.metadata["source_created_at"].endswith("+00:00")


def test_agents_sdk_sync_reimport_and_growth_via_cli(tmp_path: Path) -> None:
    db = tmp_path / "agents" / "conversations.db"
    db.parent.mkdir()
    add_items(db, "user_123", TURN)
    url = f"sqlite://{tmp_path / 'store.db'}"
    done = runner.invoke(
        app, ["--store", url, "sessions", "import", "--json", str(tmp_path / "agents")]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["counts"]["new"] == 1
    again = runner.invoke(app, ["--store", url, "sessions", "import", "--json", str(db)])
    assert json.loads(again.stdout)["counts"]["unchanged"] == 1
    add_items(db, "user_123", FOLLOW_UP)
    grown = runner.invoke(app, ["--store", url, "sessions", "import", "--json", str(db)])
    (source,) = json.loads(grown.stdout)["sources"]
    assert (source["status"], source["messages_added"]) == ("updated", 2)
    messages = open_store(url).get_session(source["session_id"]).messages()
    assert messages_to_items(messages) == TURN + FOLLOW_UP


def test_a_database_on_stdin_imports(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    add_items(db, "s", FOLLOW_UP)
    url = f"sqlite://{tmp_path / 'store.db'}"
    done = runner.invoke(
        app, ["--store", url, "sessions", "import", "--json", "-"], input=db.read_bytes()
    )
    assert done.exit_code == 0, done.output
    (source,) = json.loads(done.stdout)["sources"]
    assert source["format"] == "agents-sdk" and source["source_id"] == "stdin#s"


def test_a_bad_item_is_refused_naming_the_session(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    add_items(db, "broken", [{"type": "function_call", "name": "f", "arguments": "{}"}])
    store = open_store("memory://")
    (result,) = Syncer(store).sync_source(Source(db))
    assert result.status is SyncStatus.FAILED
    assert "session 'broken'" in (result.error or "") and "call_id" in (result.error or "")
    assert store.list_sessions().total == 0


@pytest.mark.parametrize("named", [True, False])
def test_an_unknown_database_is_skipped_in_a_walk_and_refused_by_name(
    tmp_path: Path, named: bool
) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as other:
        other.execute("CREATE TABLE t (x)")
    sources = [Source(db)] if named else find_sources([str(tmp_path)])
    (result,) = Syncer(open_store("memory://")).sync(sources).results
    assert result.status is (SyncStatus.FAILED if named else SyncStatus.SKIPPED)
    assert "not an agsh or Agents SDK session database" in (result.error or "")


def test_a_database_whose_log_is_over_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot reads the write-ahead log too, so the limit counts it: a small main
    file with a large uncheckpointed log is not a way past the import limit."""
    db = tmp_path / "agsh.db"
    make_agsh(db)
    keep = sqlite3.connect(db)  # holds the log open so it is not checkpointed away
    keep.execute("PRAGMA journal_mode = WAL")
    keep.execute("PRAGMA wal_autocheckpoint = 0")
    with keep:
        keep.executemany(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
            [(S2, "user", "x" * 4000, "2026-03-13T09:31:00Z")] * 50,
        )
    wal = db.with_name(db.name + "-wal")
    assert wal.stat().st_size > db.stat().st_size
    monkeypatch.setenv(IMPORT_LIMIT_ENV, str(db.stat().st_size + 1000))
    (result,) = Syncer(open_store("memory://")).sync_source(Source(db))
    keep.close()
    assert result.status is SyncStatus.FAILED
    assert "import limit" in (result.error or "")


# -- hostile and large databases -------------------------------------------------------


def many_sessions(path: Path, kind: str, sessions: int) -> None:
    """``sessions`` sessions of two messages each, their rows interleaved."""
    ids = [f"s{i:06d}" for i in range(sessions)]
    with sqlite3.connect(path) as db:
        if kind == "agsh":
            db.executescript(AGSH_SCHEMA)
            db.executemany(
                "INSERT INTO sessions VALUES (?, ?, ?, NULL, NULL)",
                [(s, "2026-03-14T11:00:00Z", "2026-03-14T11:00:00Z") for s in ids],
            )
            rows = [
                (s, role, f"{role} {s}", "2026-03-14T11:00:00Z")
                for role in ("user", "assistant")
                for s in ids
            ]
            db.executemany(
                "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
                rows,
            )
        else:
            db.execute(
                "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "session_id TEXT NOT NULL, message_data TEXT NOT NULL)"
            )
            items = [
                (s, json.dumps({"role": role, "content": f"{role} {s}"}))
                for role in ("user", "assistant")
                for s in ids
            ]
            db.executemany(
                "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)", items
            )


def sqlite_steps(path: Path) -> int:
    """How much work SQLite does to read every session of the database (its virtual
    machine's instructions, in hundreds: a count, not a time)."""
    from threadline.interop import agents_sdk, agsh, databases

    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with databases.opened(databases.snapshot(path), str(path)) as conn:
        conn.set_progress_handler(count, 100)
        tables = databases.columns(conn)
        module = agsh if agsh.matches(tables) else agents_sdk
        assert len(module.parse(conn, str(path), tables).runs) > 0
    return steps[0]


@pytest.mark.parametrize("kind", ["agsh", "agents-sdk"])
def test_reading_a_database_is_linear_in_its_sessions(tmp_path: Path, kind: str) -> None:
    """Neither format indexes ``session_id``: looking each session up by a scan made
    reading quadratic (4,000 agsh sessions 12 s, 20,000 over 120 s). Four times the
    sessions must cost about four times the work, not sixteen."""
    small, large = tmp_path / "small.db", tmp_path / "large.db"
    many_sessions(small, kind, 200)
    many_sessions(large, kind, 800)
    ratio = sqlite_steps(large) / sqlite_steps(small)
    assert ratio < 6, f"4x the sessions took {ratio:.1f}x the work"
