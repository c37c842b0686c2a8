"""Faults and hostile input that stores used to meet silently or with misleading errors
(issue 9): stores opened without being created and read where they cannot be written,
URL options checked, damage named as damage, unfinished JSONL batches reported, no
orphan files after a failed create, PostgreSQL searches bounded by the server, and the
export command's output to a terminal or a missing directory."""

from __future__ import annotations

import errno
import hashlib
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import require_postgres
from tests.damage import overwrite_page_of, three_sessions
from threadline import (
    Message,
    NotAThreadlineStore,
    StoreDamaged,
    StoreNotFound,
    StoreUnavailable,
    open_store,
)
from threadline.cli.app import app
from threadline.store import jsonl as jsonl_module
from threadline.store.checks import MAX_SEARCH_QUERY_LENGTH, MAX_SEARCH_WORDS, CorruptRecordWarning

runner = CliRunner()

READ_COMMANDS = [
    ("sessions", "list"),
    ("sessions", "show", "abcd-0001"),
    ("sessions", "history", "abcd-0001"),
    ("sessions", "search", "hello"),
    ("sessions", "export", "abcd-0001", "-o", "-"),
    ("context", "abcd-0001"),
    ("doctor",),
]

READ_OUTPUT = ["kept", "kept", "hello back", "2 hits", "hello world", "2 messages", "no damage"]
"""What each of ``READ_COMMANDS`` shows of the store ``make_store`` writes."""


def run(url: str, *args: str, **kw: Any) -> Any:
    return runner.invoke(app, ["--store", url, *args], **kw)


def error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr
    return str(lines[0])


def tree(path: Path) -> dict[str, str]:
    """Every file under ``path`` with a hash of its bytes."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def make_store(url: str) -> None:
    store = open_store(url)
    store.create_session(id="abcd-0001", title="kept").append(
        [Message.user("hello world"), Message.assistant("hello back")]
    )
    store.close()


# -- opening without creating ------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_read_commands_never_create_a_store(
    tmp_path: Path, scheme: str, args: tuple[str, ...]
) -> None:
    target = tmp_path / "no" / "such" / ("x.db" if scheme == "sqlite" else "store")
    result = run(f"{scheme}://{target}", *args)
    assert result.exit_code == StoreNotFound.exit_code == 8, result.stderr
    assert "nothing was stored there yet" in error_line(result)
    assert list(tmp_path.iterdir()) == []  # no directory, no empty store


def test_copying_from_a_missing_store_creates_neither(tmp_path: Path) -> None:
    source, destination = tmp_path / "typo.db", tmp_path / "new.db"
    result = run(f"sqlite://{source}", "sessions", "copy", "--to", f"sqlite://{destination}")
    assert result.exit_code == 8 and "nothing was stored there yet" in error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_sqlite_file_is_not_a_store_to_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = run(f"sqlite://{empty}", "sessions", "list")
    assert result.exit_code == 8 and "holds no threadline store yet" in error_line(result)
    assert list(tmp_path.iterdir()) == [empty]
    assert empty.read_bytes() == b""


def test_sqlite_mode_ro_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    make_store(f"sqlite://{path}")
    url = f"sqlite://{path}?mode=ro"
    before = path.read_bytes()
    assert run(url, "sessions", "list").exit_code == 0
    store = open_store(url)
    assert [m.text for m in store.read_messages("abcd-0001")] == ["hello world", "hello back"]
    with pytest.raises(StoreUnavailable, match="read-only"):
        store.create_session()
    store.close()
    result = run(url, "sessions", "rename", "abcd-0001", "new title")
    assert result.exit_code == 8 and "read-only" in error_line(result)
    assert path.read_bytes() == before


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_read_commands_work_on_a_read_only_store(
    tmp_path: Path, scheme: str, request: pytest.FixtureRequest
) -> None:
    url = f"{scheme}://{tmp_path / ('s.db' if scheme == 'sqlite' else 'store')}"
    make_store(url)
    before = tree(tmp_path)
    read_only = request.getfixturevalue("read_only")
    for args, shown in zip(READ_COMMANDS, READ_OUTPUT, strict=True):
        done = read_only("--store", url, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert shown in done.stdout, (args, done.stdout)
    written = read_only("--store", url, "sessions", "rename", "abcd-0001", "t")
    assert written.returncode == 8, written.stderr
    assert tree(tmp_path) == before


def test_a_read_only_sqlite_store_whose_log_holds_changes(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SQLite needs a -shm file to read a write-ahead log; where it cannot make one, the
    error says so instead of reading the database without the changes in the log."""
    source = tmp_path / "src"
    source.mkdir()
    make_store(f"sqlite://{source / 's.db'}")
    con = sqlite3.connect(source / "s.db")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("UPDATE sessions SET title = 'in the log only'")
    con.commit()
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("s.db", "s.db-wal"):  # as a backup of a live store would take them
        shutil.copy(source / name, copy / name)
    con.close()
    read_only = request.getfixturevalue("read_only")
    done = read_only("--store", f"sqlite://{copy / 's.db'}", "sessions", "list")
    assert done.returncode == 8, done.stderr
    assert "write-ahead log holds changes" in done.stderr


# -- URL options and settings --------------------------------------------------------------

BAD_OPTIONS = [
    ("sqlite:///{tmp}/s.db?foo=bar", "unknown option 'foo'"),
    ("sqlite:///{tmp}/s.db?busy_timeout=-5", "busy_timeout"),
    ("sqlite:///{tmp}/s.db?busy_timeout=abc", "busy_timeout"),
    ("sqlite:///{tmp}/s.db?mode=bogus", "mode must be one of"),
    ("sqlite:///{tmp}/s.db?synchronous=off&synchronous=full", "'synchronous' twice"),
    ("redis://127.0.0.1:6379/abc", "database in a Redis URL is a number"),
    ("redis://127.0.0.1:6379/0?foo=bar", "unknown option 'foo'"),
    ("postgresql://postgres@127.0.0.1:5432/test?foo=bar", '"foo"'),
    ("postgresql://postgres@127.0.0.1:5432/test?search_timeout=0", "search_timeout"),
]


@pytest.mark.parametrize(("url", "words"), BAD_OPTIONS)
def test_bad_url_options_are_usage_errors(tmp_path: Path, url: str, words: str) -> None:
    result = run(url.format(tmp=str(tmp_path).lstrip("/")), "sessions", "rename", "abcd-0001", "t")
    assert result.exit_code == 2, result.stderr
    assert words in error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_tokenizer_setting_fails_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    make_store(url)
    monkeypatch.setenv("THREADLINE_TOKENIZER", "bogus")
    for args in [("sessions", "list"), ("sessions", "show", "abcd-0001")]:
        result = run(url, *args)
        assert result.exit_code == 2
        assert "THREADLINE_TOKENIZER='bogus'" in error_line(result)


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[str]:
    base = require_postgres()
    schema = "t" + uuid.uuid4().hex[:12]
    yield f"{base}?schema={schema}"
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_postgres_options_with_spaces_reach_libpq(pg_url: str) -> None:
    store = open_store(f"{pg_url}&options=-c%20statement_timeout%3D5000")
    try:
        with store._read() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SHOW statement_timeout").fetchone() == ("5s",)
    finally:
        store.close()


def _fill_for_search(url: str, *, messages: int, words: int) -> list[str]:
    vocabulary = [f"q{i:03d}" for i in range(MAX_SEARCH_WORDS)]
    store = open_store(url)
    session = store.create_session()
    body = " ".join(vocabulary[i % len(vocabulary)] for i in range(words))
    session.append([Message.user(body) for _ in range(messages)])
    store.close()
    return vocabulary


def test_postgres_search_near_the_limit_returns_in_time(pg_url: str) -> None:
    vocabulary = _fill_for_search(pg_url, messages=100, words=2000)
    store = open_store(pg_url)
    try:
        query = " ".join(vocabulary)  # every word matches every message
        query += " " + " ".join([vocabulary[0]] * ((MAX_SEARCH_QUERY_LENGTH - len(query)) // 5))
        assert MAX_SEARCH_QUERY_LENGTH - 10 < len(query) <= MAX_SEARCH_QUERY_LENGTH
        started = time.monotonic()
        assert len(store.search(query, limit=20)) == 20
        assert time.monotonic() - started < store.search_timeout  # type: ignore[attr-defined]
    finally:
        store.close()


def test_postgres_search_is_cancelled_by_the_server(pg_url: str) -> None:
    vocabulary = _fill_for_search(pg_url, messages=60, words=15_000)
    store = open_store(f"{pg_url}&search_timeout=0.01")
    try:
        # phrases make the server check the text of every message holding their words
        phrases = " ".join(f'"{vocabulary[i]} {vocabulary[i + 1]}"' for i in range(0, 31, 2))
        with pytest.raises(StoreUnavailable, match="the server cancelled it"):
            store.search(phrases, limit=200)
        with store._read() as conn:  # type: ignore[attr-defined]
            running = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                "AND query LIKE '%strpos%' AND pid <> pg_backend_pid()"
            ).fetchone()
        assert running == (0,)  # nothing left running on the server
        assert store.search("q000", limit=1)  # the connection is fine afterwards
    finally:
        store.close()


# -- SQLite: damage is named as damage -------------------------------------------------------


@pytest.mark.parametrize("cut", ["half", "mid-page", "header-only"])
def test_a_cut_sqlite_store_is_damaged_not_foreign(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "s.db"
    three_sessions(path)
    data = path.read_bytes()
    keep = {"half": len(data) // 2 // 4096 * 4096, "mid-page": len(data) // 2 + 100}
    path.write_bytes(data[: keep.get(cut, 100)] + (b"" if cut != "header-only" else b"\0" * 9))
    result = run(f"sqlite://{path}", "sessions", "list")
    assert result.exit_code == StoreDamaged.exit_code == 8
    line = error_line(result)
    assert "is damaged" in line and "threadline doctor" in line and "--salvage" in line
    assert "not a threadline store" not in line
    with pytest.raises(StoreDamaged):
        open_store(f"sqlite://{path}")  # nor is it written to


def test_a_foreign_file_is_still_foreign(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"Dear diary, " * 1000)
    with pytest.raises(NotAThreadlineStore, match="not an SQLite database"):
        open_store(f"sqlite://{path}")


def test_damaged_pages_are_named_and_stop_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    texts = three_sessions(path)
    overwrite_page_of(path, "bravo")
    result = run(f"sqlite://{path}", "sessions", "history", "sess-bravo", "-n", "100")
    assert result.exit_code == 8
    assert "is damaged: database disk image is malformed" in error_line(result)
    assert "--salvage" in result.stderr
    store = open_store(f"sqlite://{path}")
    assert [m.text for m in store.read_messages("sess-alpha")] == texts["sess-alpha"]
    store.create_session(id="before-damage-seen")  # nothing known to be wrong yet
    with pytest.raises(StoreDamaged):
        store.read_messages("sess-bravo")
    with pytest.raises(StoreDamaged, match="seen earlier"):
        store.get_session("sess-alpha").append(Message.user("into a damaged store"))
    store.close()


# -- JSONL ---------------------------------------------------------------------------------------


def test_jsonl_damaged_last_line_is_reported(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    chat = tmp_path / "chat.json"
    chat.write_text(
        '[{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},'
        ' {"role": "user", "content": "three"}]',
        encoding="utf-8",
    )
    imported = run(url, "sessions", "import", str(chat))
    assert imported.exit_code == 0, imported.stderr
    sid = imported.stdout.strip().splitlines()[-1]
    (path,) = (tmp_path / "store" / "sessions").rglob(f"{sid}.jsonl")
    path.write_bytes(path.read_bytes()[:-10])  # the import's closing line, damaged
    shown = run(url, "sessions", "show", sid)
    assert shown.exit_code == 0
    warning = f"threadline: warning: {path}:2: an unfinished batch (3 lines at the end"
    assert warning in shown.stderr, shown.stderr
    history = run(url, "sessions", "history", sid)
    assert "an unfinished batch" in history.stderr and "no messages" in history.stdout
    store = open_store(url)
    with pytest.warns(CorruptRecordWarning, match=r"\.jsonl:2: an unfinished batch"):
        assert store.read_messages(sid) == []


def test_jsonl_failed_create_leaves_no_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"jsonl://{tmp_path / 'store'}")
    sessions = tmp_path / "store" / "sessions"
    real = jsonl_module.atomic_write

    def full_disk(path: Path, data: bytes) -> None:
        if path.suffix == ".jsonl":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(jsonl_module, "atomic_write", full_disk)
    with pytest.raises(StoreUnavailable, match="No space left"):
        store.create_session(id="never-0001", agent="coder")
    assert list(sessions.rglob("*")) == []  # no orphan sidecar, no empty agent folder
    monkeypatch.setattr(jsonl_module, "atomic_write", real)
    assert store.create_session(id="never-0001", agent="coder").id == "never-0001"


# -- export ----------------------------------------------------------------------------------


def test_markdown_export_to_stdout_escapes_control_characters(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    store = open_store(url)
    session = store.create_session(id="ctrl-0001", title="title \x1b]0;owned\x07")
    session.append([Message.user("clear \x1b[2J screen\nnext line\tand tab \x9b31m")])
    store.close()
    shown = run(url, "sessions", "export", "ctrl-0001", "-o", "-")
    assert shown.exit_code == 0
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in shown.stdout
    assert "clear \\x1b[2J screen\nnext line\tand tab \\x9b31m" in shown.stdout
    written = run(url, "sessions", "export", "ctrl-0001", "-o", str(tmp_path / "out.md"))
    assert written.exit_code == 0
    assert "clear \x1b[2J screen" in (tmp_path / "out.md").read_text(encoding="utf-8")


def test_export_to_a_missing_directory_names_it(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    make_store(url)
    missing = tmp_path / "missing"
    result = run(url, "sessions", "export", "abcd-0001", "-o", str(missing / "x.md"))
    assert result.exit_code == 2
    line = error_line(result)
    assert f"the directory {missing} does not exist" in line and ".tmp" not in line
    assert not missing.exists()
