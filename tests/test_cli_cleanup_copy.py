"""``threadline cleanup`` and ``threadline sessions copy``: output, prompts, exit codes."""

from __future__ import annotations

import base64
import io
import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from threadline import ImagePart, Message, open_store
from threadline.cli import cleanup_cmd
from threadline.cli.app import app
from threadline.cli.copy_cmd import redact
from threadline.config import CONFIG_DIR_ENV, CONFIG_ENV
from threadline.messages import utcnow
from threadline.store.checks import format_ts
from threadline.store.locks import LockHolder
from threadline.store.retention import session_bytes

runner = CliRunner()


def run(url: str, *args: str, input: str | None = None) -> Any:
    return runner.invoke(app, ["--store", url, *args], input=input)


@pytest.fixture(autouse=True)
def no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read the real user's settings file."""
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "config"))


def use_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    """Write ``text`` to a settings file and point ``CONFIG_ENV`` at it."""
    config = tmp_path / "threadline.toml"
    config.write_text(text)
    monkeypatch.setenv(CONFIG_ENV, str(config))
    return config


def age(db: Path, sid: str, days: float) -> None:
    """Pretend a session was last updated ``days`` ago (test set-up only)."""
    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE sessions SET updated_at = ? WHERE id = ?",
            (format_ts(utcnow() - timedelta(days=days)), sid),
        )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Three sessions: two old (100 and 40 days), one fresh."""
    path = tmp_path / "store.db"
    store = open_store(f"sqlite://{path}")
    for sid, agent in (("old-0001", "coder"), ("old-0002", "writer"), ("new-0001", "coder")):
        s = store.create_session(id=sid, agent=agent, model="gpt-4o")
        s.append([Message.user(f"hello from {sid} " * 50), Message.assistant("ok")])
    store.close()
    age(path, "old-0001", 100)
    age(path, "old-0002", 40)
    return path


def url_of(db: Path) -> str:
    return f"sqlite://{db}"


def remaining(db: Path) -> list[str]:
    store = open_store(url_of(db))
    try:
        return sorted(i.id for i in store.list_sessions().items)
    finally:
        store.close()


# -- cleanup ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "90"], "has no unit"),
        (["--older-than", "3 fortnights"], "unknown unit"),
        (["--max-storage", "lots"], "cannot read size"),
        (["--max-storage", "0MB"], "more than zero"),
    ],
)
def test_cleanup_bad_rules_are_usage_errors(db: Path, args: list[str], message: str) -> None:
    result = run(url_of(db), "cleanup", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("threadline: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1
    assert remaining(db) == ["new-0001", "old-0001", "old-0002"]


def test_cleanup_dry_run_shows_and_deletes_nothing(db: Path) -> None:
    result = run(url_of(db), "cleanup", "--older-than", "30d", "--dry-run")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "old-0001" in out and "old-0002" in out and "new-0001" not in out
    assert "age" in out and "kB" in out
    assert "dry run: would delete 2 sessions" in out
    assert remaining(db) == ["new-0001", "old-0001", "old-0002"]


def test_cleanup_refuses_without_a_terminal_or_yes(db: Path) -> None:
    result = run(url_of(db), "cleanup", "--older-than", "90d")
    assert result.exit_code == 2
    assert "refusing to delete 1 session" in result.stderr and "--yes" in result.stderr
    assert remaining(db) == ["new-0001", "old-0001", "old-0002"]


def test_cleanup_with_yes_deletes_and_says_what_it_freed(db: Path) -> None:
    result = run(url_of(db), "cleanup", "--older-than", "90d", "--yes")
    assert result.exit_code == 0, result.stderr
    assert "old-0001" in result.stdout
    assert "deleted 1 session, freed " in result.stdout
    assert remaining(db) == ["new-0001", "old-0002"]


def test_cleanup_asks_on_a_terminal(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threadline.cli.state.stdin_is_interactive", lambda: True)
    declined = run(url_of(db), "cleanup", "--older-than", "30d", input="n\n")
    assert declined.exit_code == 1 and "nothing deleted" in declined.stderr
    assert remaining(db) == ["new-0001", "old-0001", "old-0002"]
    accepted = run(url_of(db), "cleanup", "--older-than", "30d", input="y\n")
    assert accepted.exit_code == 0, accepted.stderr
    assert "Delete 2 sessions" in accepted.stdout
    assert remaining(db) == ["new-0001"]


def test_cleanup_agent_filter(db: Path) -> None:
    result = run(url_of(db), "cleanup", "--older-than", "30d", "--agent", "writer", "--yes")
    assert result.exit_code == 0, result.stderr
    assert remaining(db) == ["new-0001", "old-0001"]


def test_cleanup_storage_cap_deletes_oldest_first(db: Path) -> None:
    store = open_store(url_of(db))
    cap = session_bytes(store, "new-0001") + session_bytes(store, "old-0002")
    store.close()
    result = run(url_of(db), "cleanup", "--max-storage", str(cap), "--yes")
    assert result.exit_code == 0, result.stderr
    assert "storage" in result.stdout and "in all: 3 sessions" in result.stdout
    assert "deleted 1 session" in result.stdout
    assert remaining(db) == ["new-0001", "old-0002"]


def test_cleanup_never_deletes_a_locked_session(db: Path) -> None:
    store = open_store(url_of(db))
    store.acquire_lock("old-0001", LockHolder(pid=31337, host="far-away.example"))
    store.close()
    result = run(url_of(db), "cleanup", "--older-than", "30d", "--yes")
    assert result.exit_code == 0, result.stderr
    assert "skipping old-0001: locked by pid 31337 on far-away.example" in result.stdout
    assert "deleted 1 session" in result.stdout
    assert remaining(db) == ["new-0001", "old-0001"]


def test_cleanup_without_rules_says_so(db: Path) -> None:
    result = run(url_of(db), "cleanup")
    assert result.exit_code == 0
    assert "no retention rules" in result.stdout and "[session]" in result.stdout
    assert remaining(db) == ["new-0001", "old-0001", "old-0002"]


def test_cleanup_uses_the_configured_rules(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = use_settings(tmp_path, monkeypatch, "[session]\nretention_days = 60\n")
    result = run(url_of(db), "cleanup", "--yes")
    assert result.exit_code == 0, result.stderr
    assert f"using the settings in {config}" in result.stdout
    assert "not updated for 60d" in result.stdout
    assert remaining(db) == ["new-0001", "old-0002"]


def test_cleanup_bad_settings_file_is_a_config_error(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = use_settings(tmp_path, monkeypatch, "[session]\nretention_days = -1\n")
    result = run(url_of(db), "cleanup")
    assert result.exit_code == 2
    assert str(config) in result.stderr and "session.retention_days" in result.stderr


def test_cleanup_nothing_to_delete(db: Path) -> None:
    result = run(url_of(db), "cleanup", "--older-than", "1000d")
    assert result.exit_code == 0
    assert "nothing to delete" in result.stdout


def test_cleanup_of_a_large_store_shows_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.db"
    store = open_store(f"sqlite://{path}")
    for i in range(cleanup_cmd.LARGE_STORE + 5):
        store.create_session(id=f"s-{i:04d}").append(Message.user(f"message {i}"))
    store.close()
    bars = io.StringIO()
    terminal = Console(file=bars, force_terminal=True, width=100)
    monkeypatch.setattr(cleanup_cmd, "bar_console", lambda: terminal)
    result = run(f"sqlite://{path}", "cleanup", "--max-storage", "1B", "--yes")
    assert result.exit_code == 0, result.stderr
    assert "deleted 55 sessions" in result.stdout
    drawn = bars.getvalue()
    assert "Measuring sessions" in drawn and "Deleting sessions" in drawn


# -- sessions copy ---------------------------------------------------------------------------


def test_copy_between_backends_and_again(db: Path, tmp_path: Path) -> None:
    dest = f"jsonl://{tmp_path / 'moved'}"
    first = run(url_of(db), "sessions", "copy", "--to", dest)
    assert first.exit_code == 0, first.stderr
    assert "copied" in first.stdout and "3 sessions copied and verified" in first.stdout
    assert "6 messages appended" in first.stdout
    again = run(url_of(db), "sessions", "copy", "--to", dest)
    assert again.exit_code == 0, again.stderr
    assert "up to date" in again.stdout and "0 messages appended" in again.stdout
    listed = run(dest, "sessions", "list", "--json")
    assert '"total": 3' in listed.stdout


def test_copy_shows_progress_on_a_terminal(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bars = io.StringIO()
    terminal = Console(file=bars, force_terminal=True, width=100)
    monkeypatch.setattr(cleanup_cmd, "bar_console", lambda: terminal)
    result = run(url_of(db), "sessions", "copy", "--to", f"sqlite://{tmp_path / 'to.db'}")
    assert result.exit_code == 0, result.stderr
    assert "Copying" in bars.getvalue()


def test_copy_from_and_selected_sessions(db: Path, tmp_path: Path) -> None:
    dest = f"sqlite://{tmp_path / 'other.db'}"
    result = runner.invoke(
        app,
        ["sessions", "copy", "--from", url_of(db), "--to", dest, "-s", "old-00", "-s", "new-0001"],
    )
    assert result.exit_code == 2  # "old-00" matches two sessions
    assert "ambiguous" in result.stderr
    result = runner.invoke(
        app, ["sessions", "copy", "--from", url_of(db), "--to", dest, "-s", "old-0002"]
    )
    assert result.exit_code == 0, result.stderr
    assert remaining(tmp_path / "other.db") == ["old-0002"]


def test_copy_failure_exits_non_zero(db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    store = open_store(f"sqlite://{other}")
    store.create_session(id="old-0001", agent="coder").append(Message.user("not the same"))
    store.close()
    result = run(url_of(db), "sessions", "copy", "--to", f"sqlite://{other}")
    assert result.exit_code == 1
    assert "failed" in result.stdout
    assert "threadline: error: old-0001: the destination session differs" in result.stderr
    assert "1 of 3 sessions failed" in result.stderr
    assert "2 sessions copied and verified" in result.stdout


def test_copy_usage_errors(db: Path) -> None:
    same = run(url_of(db), "sessions", "copy", "--to", url_of(db))
    assert same.exit_code == 2 and "same store" in same.stderr
    missing = run(url_of(db), "sessions", "copy", "--to", "memory://", "-s", "nope-0000")
    assert missing.exit_code == 3 and "session not found" in missing.stderr
    no_to = run(url_of(db), "sessions", "copy")
    assert no_to.exit_code == 2


def test_copy_of_an_unknown_session_creates_no_destination(db: Path, tmp_path: Path) -> None:
    for dest in (tmp_path / "new.db", tmp_path / "jsonl-dir"):
        scheme = "sqlite" if dest.suffix == ".db" else "jsonl"
        missing = run(url_of(db), "sessions", "copy", "--to", f"{scheme}://{dest}", "-s", "nope")
        assert missing.exit_code == 3 and "session not found" in missing.stderr
        assert not dest.exists()


def test_redact_hides_passwords() -> None:
    assert (
        redact("postgresql://me:secret@db.example:5432/x")
        == "postgresql://me:***@db.example:5432/x"
    )
    assert redact("redis://:pw@127.0.0.1/0") == "redis://:***@127.0.0.1/0"
    assert redact("sqlite:///tmp/a.db") == "sqlite:///tmp/a.db"


def test_copy_does_not_carry_a_hostile_message_id_into_a_jsonl_store(tmp_path: Path) -> None:
    """An id stored before ids were checked (here: appended below ``Session.append``) is
    refused by the copy, and the JSONL destination writes nothing outside its directory."""
    src_url, dst_dir = f"sqlite://{tmp_path / 'src.db'}", tmp_path / "deep" / "er" / "dst"
    src = open_store(src_url)
    session = src.create_session(id="hostile-0001")
    session.append(Message.user("fine"))
    image = ImagePart(data=base64.b64encode(os.urandom(40_000)).decode(), media_type="image/png")
    hostile = Message.user([image], id="../../../../escaped", token_counts={"o200k": 1})
    src.append_messages(session.id, [hostile])
    src.close()
    result = runner.invoke(
        app, ["sessions", "copy", "--from", src_url, "--to", f"jsonl://{dst_dir}"]
    )
    assert result.exit_code == 1
    assert "hostile-0001" in result.stderr and "message id" in result.stderr
    assert [p.name for p in tmp_path.rglob("escaped*")] == []
    dst = open_store(f"jsonl://{dst_dir}")
    assert dst.read_messages("hostile-0001") == []  # the batch holding it is refused whole
