"""A directory import meets hostile files: each fails as its own source, with the report.

JSON nested past the limit inside agsh and Agents SDK databases (the parser ended
in ``RecursionError``), a symbolic link loop (``RuntimeError``) and a link to a
file outside the directory: each is one failed source with a clear reason, the
rest of the directory is imported, and the exit code is 2 with the report (they
aborted the whole import with exit 1 and no report).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from threadline import open_store
from threadline.cli.app import app
from threadline.interop.importers import import_sessions
from threadline.json_limits import MAX_JSON_DEPTH

CHAT = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
DEEP = "[" * 50_000 + "]" * 50_000


def agsh_db(path: Path, content: str) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT, "
            "locked_by TEXT, metadata TEXT);"
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
            "content TEXT, created_at TEXT);"
        )
        db.execute("INSERT INTO sessions VALUES ('s1', '2026-01-01', '2026-01-01', NULL, NULL)")
        db.execute(
            "INSERT INTO messages (session_id, role, content, created_at) "
            "VALUES ('s1', 'user', ?, '2026-01-01')",
            (content,),
        )


def sdk_db(path: Path, data: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, "
            "message_data TEXT)"
        )
        db.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('u1', ?)", (data,)
        )


def imported(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["--store", url, "sessions", "import", *args, "--json"])
    assert result.stdout, (result.exit_code, result.stderr, result.exception)
    return result.exit_code, json.loads(result.stdout)


def failures(report: dict[str, Any]) -> dict[str, str]:
    return {
        Path(r["source"]).name: r["error"] for r in report["sources"] if r["status"] == "failed"
    }


@pytest.mark.parametrize("make", [agsh_db, sdk_db], ids=["agsh", "agents-sdk"])
def test_deep_json_in_a_database_fails_its_source(
    tmp_path: Path, sqlite_url: str, make: Any
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "chat.json").write_text(json.dumps(CHAT), encoding="utf-8")
    make(folder / "sessions.db", DEEP)
    code, report = imported(sqlite_url, str(folder))
    assert code == 2
    assert report["counts"]["new"] == 1 and report["counts"]["failed"] == 1
    assert f"nests more than {MAX_JSON_DEPTH} levels deep" in failures(report)["sessions.db"]
    with pytest.raises(Exception, match=f"nests more than {MAX_JSON_DEPTH}"):
        import_sessions(folder / "sessions.db")  # the library says the same


def test_links_out_of_the_directory_and_link_loops_fail_their_sources(
    tmp_path: Path, sqlite_url: str
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "chat.json").write_text(json.dumps(CHAT), encoding="utf-8")
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps([{"role": "user", "content": "not in the folder"}]))
    (folder / "out.json").symlink_to(secret)
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "same.json").symlink_to(folder / "chat.json")  # inside: the same source
    code, report = imported(sqlite_url, str(folder))
    assert code == 2
    failed = failures(report)
    assert set(failed) == {"out.json", "loop.jsonl"}
    assert f"a symbolic link to {secret}, outside {folder}: not followed" in failed["out.json"]
    assert "symbolic link loop" in failed["loop.jsonl"]
    assert report["counts"]["new"] == 1
    store = open_store(sqlite_url)
    texts = [m.text for s in store.list_sessions().items for m in store.read_messages(s.id)]
    store.close()
    assert texts == ["hello", "hi"]
    code, direct = imported(sqlite_url, str(folder / "out.json"))  # named: imported
    assert code == 0 and direct["counts"]["new"] == 1
