"""A directory import meets hostile files: each fails as its own source, with the report.

JSON nested past the limit inside agsh and Agents SDK databases (the parser ended
in ``RecursionError``), a symbolic link loop (``RuntimeError``) and a link to a
file outside the directory: each is one failed source with a clear reason, the
rest of the directory is imported, and the exit code is 2 with the report (they
aborted the whole import with exit 1 and no report). Usage counts out of bounds and
huge metadata texts are dropped or cut, flagged as repairs (``interop/bounds.py``).
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
from threadline.interop.bounds import MAX_MESSAGE_METADATA_TEXT, MAX_SESSION_METADATA_TEXT
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


def claude_line(n: int, role: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": f"message {n}"}
    if role == "assistant":
        message.update(id=f"msg{n}", model="claude-sonnet-4-5", usage=extra.pop("usage", {}))
    return {"type": role, "uuid": f"u{n}", "sessionId": "s-1", "message": message, **extra}


def test_absurd_usage_and_huge_metadata_are_bounded(tmp_path: Path, sqlite_url: str) -> None:
    """10**40 tokens, a negative count and a 10 MB working directory were stored as
    given (usage calibrates counts; session metadata is read by every listing)."""
    huge = "/" + "d" * (10 * 1024 * 1024)
    lines = [
        claude_line(1, "user", cwd=huge),
        claude_line(
            2,
            "assistant",
            usage={"input_tokens": 10**40, "output_tokens": 12, "cache_read_input_tokens": -5},
        ),
        claude_line(3, "user"),
        claude_line(4, "assistant", usage={"input_tokens": 900, "output_tokens": 7}),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    code, report = imported(sqlite_url, str(path))
    assert code == 0
    assert report["repairs"] == {"bad_usage": 1, "metadata_truncated": 1}
    store = open_store(sqlite_url)
    (info,) = store.list_sessions().items
    messages = store.read_messages(info.id)
    store.close()
    first, bad, _, good = messages
    assert bad.usage is not None and bad.usage.output_tokens == 12
    assert (bad.usage.input_tokens, bad.usage.cached_tokens) == (None, None)
    assert bad.metadata["usage_dropped"] == {
        "input_tokens": str(10**40),
        "cached_tokens": "-5",
    }
    assert good.usage is not None and (good.usage.input_tokens, good.usage.output_tokens) == (
        900,
        7,
    )
    assert len(first.metadata["cwd"]) == MAX_MESSAGE_METADATA_TEXT
    assert first.metadata["import_truncated"] == {"cwd": len(huge)}
    assert len(info.metadata["cwd"]) == MAX_SESSION_METADATA_TEXT
    assert info.metadata["import_truncated"] == {"cwd": len(huge)}


def test_a_huge_session_id_in_a_database_is_known_by_its_hash(
    tmp_path: Path, sqlite_url: str
) -> None:
    sid = "u" * (5 * 1024 * 1024)
    db = tmp_path / "conversations.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, "
            "message_data TEXT)"
        )
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
            (sid, json.dumps({"role": "user", "content": "hello"})),
        )
    code, report = imported(sqlite_url, str(db))
    assert code == 0
    (source,) = report["sources"]
    assert source["source_id"].startswith("sha256:") and len(source["source_id"]) == 71
    store = open_store(sqlite_url)
    (info,) = store.list_sessions().items
    store.close()
    assert len(info.metadata["agents_sdk_session_id"]) == MAX_SESSION_METADATA_TEXT
    code, again = imported(sqlite_url, str(db))  # known again by the same id
    assert code == 0 and again["counts"]["unchanged"] == 1
