"""Bad input at the command line: a clear one-line error, the documented exit code,
and nothing stored lost or half-written."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import Message, ToolCall, open_store
from threadline.cli.app import app
from threadline.errors import (
    ImportFormatError,
    InvalidSessionId,
    NotAThreadlineStore,
    SchemaTooNew,
    SessionLocked,
    SessionNotFound,
    StoreUnavailable,
)

runner = CliRunner()

ID_COMMANDS = [
    ("sessions", "show", "{}"),
    ("sessions", "history", "{}"),
    ("sessions", "rename", "{}", "title"),
    ("sessions", "delete", "{}"),
    ("sessions", "export", "{}", "-o", "-"),
    ("context", "{}"),
]


def run(url: str, *args: str, **kw: Any) -> Any:
    return runner.invoke(app, ["--store", url, *args], **kw)


def one_error_line(result: Any) -> str:
    """The whole of stderr, which must be exactly one ``threadline: error:`` line."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("threadline: error: ")
    return str(lines[0])


@pytest.fixture
def url(sqlite_url: str) -> str:
    store = open_store(sqlite_url)
    store.create_session(id="keep-0001", title="keep me").append([Message.user("precious")])
    store.close()
    return sqlite_url


def stored(url: str) -> list[tuple[str, int]]:
    store = open_store(url)
    try:
        return [(i.id, i.message_count) for i in store.list_sessions().items]
    finally:
        store.close()


# -- ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args", ID_COMMANDS)
def test_unknown_id_exits_3(url: str, args: tuple[str, ...]) -> None:
    result = run(url, *(a.replace("{}", "nope-0000") for a in args))
    assert result.exit_code == SessionNotFound.exit_code == 3
    assert one_error_line(result) == "threadline: error: session not found: nope-0000"
    assert stored(url) == [("keep-0001", 1)]


@pytest.mark.parametrize("args", ID_COMMANDS)
@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("../keep-0001", "path separator"),
        ("keep/0001", "path separator"),
        ("keep..0001", "'..'"),
        ("keep\x000001", "NUL"),
        ("keep 0001", "invalid"),
    ],
)
def test_ids_that_could_reach_a_path_exit_2(
    url: str, args: tuple[str, ...], bad: str, why: str
) -> None:
    result = run(url, *(a.replace("{}", bad) for a in args))
    assert result.exit_code == InvalidSessionId.exit_code == 2
    assert why in one_error_line(result)
    assert stored(url) == [("keep-0001", 1)]


def test_an_id_that_looks_like_an_option(url: str) -> None:
    result = run(url, "sessions", "show", "--", "-rf")  # past option parsing
    assert result.exit_code == 2 and "is invalid" in one_error_line(result)


# -- import ------------------------------------------------------------------------------


def test_malformed_import_line_names_the_line_and_imports_nothing(url: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        '{"role": "user", "content": "one"}\n'
        '{"role": "assistant", "content": "two"}\n'
        '{"role": "user", "content": "three"\n'
        '{"role": "assistant", "content": "four"}\n',
        encoding="utf-8",
    )
    result = run(url, "sessions", "import", str(path))
    assert result.exit_code == ImportFormatError.exit_code == 2
    line = one_error_line(result)
    assert f"{path}:3:" in line and "invalid JSON" in line
    assert result.stdout == ""
    assert stored(url) == [("keep-0001", 1)]


def test_invalid_utf8_import_names_the_byte_and_imports_nothing(url: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    data = b'{"role": "user", "content": "fine"}\n{"role": "user", "content": "bad \xff\xfe"}\n'
    path.write_bytes(data)
    result = run(url, "sessions", "import", str(path))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "invalid UTF-8" in line and ":2:" in line
    offset = data.index(b"\xff")
    assert f"byte offset {offset}" in line
    assert stored(url) == [("keep-0001", 1)]


def test_import_of_a_missing_file_or_an_empty_directory_is_a_usage_error(
    url: str, tmp_path: Path
) -> None:
    missing = run(url, "sessions", "import", str(tmp_path / "absent.json"))
    assert missing.exit_code == 2 and "no such file or directory" in one_error_line(missing)
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a transcript", encoding="utf-8")
    result = run(url, "sessions", "import", str(empty))
    assert result.exit_code == 2 and "no files to import" in one_error_line(result)
    # a missing path among good ones imports nothing at all
    good = tmp_path / "chat.json"
    good.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    assert run(url, "sessions", "import", str(good), str(tmp_path / "absent.json")).exit_code == 2
    assert stored(url) == [("keep-0001", 1)]


def test_import_from_standard_input_reads_it_once(url: str) -> None:
    """The nesting check must not consume a stream the importer still has to read."""
    text = json.dumps([{"role": "user", "content": "through a pipe"}])
    result = run(url, "sessions", "import", "-", input=text)
    assert result.exit_code == 0, result.stderr
    assert (result.stdout.strip(), 1) in stored(url)


def test_import_with_a_bad_agent_name_creates_nothing(url: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    result = run(url, "sessions", "import", str(path), "--agent", "../etc")
    assert result.exit_code == 2 and "agent name" in one_error_line(result)
    assert stored(url) == [("keep-0001", 1)]


def test_tool_result_without_its_call_is_kept_and_left_out_of_the_view(
    url: str, tmp_path: Path
) -> None:
    path = tmp_path / "chat.jsonl"
    records = [
        {"role": "user", "content": "run it"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan output"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    result = run(url, "sessions", "import", str(path))
    assert result.exit_code == 0, result.stderr
    sid = result.stdout.strip()
    context = run(url, "context", sid, "--json")
    data = json.loads(context.stdout)
    # the agent's system prompt, then the history without the orphan result
    assert [m["role"] for m in data["messages"]] == ["system", "user", "assistant"]
    assert data["report"]["orphan_results"] == [2]
    assert "1 result(s) without their call left out" in run(url, "context", sid).stdout
    history = json.loads(run(url, "sessions", "history", sid, "--json").stdout)["items"]
    assert [m["role"] for m in history] == ["user", "tool", "assistant"]  # stored as given


def test_interrupted_tool_call_is_repaired_in_the_view(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    s = store.create_session(id="crash-0001")
    s.append(
        [
            Message.user("go"),
            Message.assistant("", tool_calls=[ToolCall(id="lost", name="run", arguments={})]),
        ]
    )
    store.close()
    data = json.loads(run(sqlite_url, "context", "crash", "--json").stdout)
    assert data["report"]["synthesized_results"] == ["lost"]
    assert data["messages"][-1]["role"] == "tool"
    assert "1 interrupted tool call(s)" in run(sqlite_url, "context", "crash").stdout


# -- files given to context ----------------------------------------------------------------


def test_system_prompt_file_that_is_not_utf8(url: str, tmp_path: Path) -> None:
    path = tmp_path / "system.txt"
    path.write_bytes(b"be nice \xc3\x28")
    result = run(url, "context", "keep-0001", "--system", str(path))
    assert result.exit_code == 2 and "not valid UTF-8" in one_error_line(result)


def test_tools_file_that_is_not_a_list_of_tools(url: str, tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text('{"name": "x"', encoding="utf-8")
    assert "is not JSON" in one_error_line(run(url, "context", "keep", "--tools", str(path)))
    path.write_text('{"name": "x"}', encoding="utf-8")
    result = run(url, "context", "keep", "--tools", str(path))
    assert result.exit_code == 2 and "JSON array" in one_error_line(result)


# -- stores that cannot be used ---------------------------------------------------------------


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    garbage = bytes(range(256)) * 64
    path.write_bytes(garbage)
    result = run(f"sqlite://{path}", "sessions", "list")
    assert result.exit_code == NotAThreadlineStore.exit_code == 8
    assert "is not a threadline store" in one_error_line(result)
    assert path.read_bytes() == garbage  # untouched


def test_an_sqlite_database_of_another_program(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
        con.execute("INSERT INTO accounts (owner) VALUES ('alice')")
    con.close()
    result = run(f"sqlite://{path}", "sessions", "list")
    assert result.exit_code == 8
    assert "did not create" in one_error_line(result) and "accounts" in result.stderr
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT owner FROM accounts").fetchall() == [("alice",)]
    con.close()


def test_a_database_from_a_newer_schema(url: str) -> None:
    path = url.removeprefix("sqlite://")
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 99")
    con.close()
    result = run(url, "sessions", "list")
    assert result.exit_code == SchemaTooNew.exit_code == 8
    line = one_error_line(result)
    assert "schema version 99" in line and "upgrade threadline" in line
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 1")
    con.close()
    assert stored(url) == [("keep-0001", 1)]  # nothing lost


def test_a_store_under_a_regular_file_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    result = run(f"sqlite://{blocker}/sub/store.db", "sessions", "delete", "--all", "--yes")
    assert result.exit_code == StoreUnavailable.exit_code == 8
    assert "cannot create the store's directory" in one_error_line(result)


def test_a_store_in_a_read_only_directory(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Creating a store where nothing can be written fails with one line (see the
    ``read_only`` fixture for how that is simulated as root)."""
    read_only = request.getfixturevalue("read_only")
    done = read_only("--store", f"sqlite://{tmp_path}/store.db", "sessions", "rename", "x", "t")
    assert done.returncode == 8, done.stderr
    assert done.stderr.startswith("threadline: error: ") and len(done.stderr.splitlines()) == 1
    assert "store.db" in done.stderr and not (tmp_path / "store.db").exists()


# -- a second process holds the lock -----------------------------------------------------------

HOLDER = """
import sys
from threadline import open_store
store = open_store(sys.argv[1])
store.acquire_lock(sys.argv[2])
print("locked", flush=True)
sys.stdin.read()
store.release_lock(sys.argv[2])
store.close()
"""


@pytest.fixture
def held(url: str) -> Iterator[subprocess.Popen[str]]:
    """A child process holding keep-0001's attach lock until its stdin closes."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, "keep-0001"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline().strip() == "locked"
        yield child
    finally:
        child.stdin.close()
        child.wait()


def test_delete_of_a_locked_session_exits_4(url: str, held: subprocess.Popen[str]) -> None:
    result = run(url, "sessions", "delete", "keep-0001")
    assert result.exit_code == SessionLocked.exit_code == 4
    assert f"locked by pid {held.pid}" in one_error_line(result)
    assert stored(url) == [("keep-0001", 1)]
    all_result = run(url, "sessions", "delete", "--all", "--yes")
    assert all_result.exit_code == 4
    assert stored(url) == [("keep-0001", 1)]
    shown = run(url, "sessions", "show", "keep-0001")
    assert f"held by pid {held.pid}" in shown.stdout


def test_delete_force_overrides_the_lock(url: str, held: subprocess.Popen[str]) -> None:
    result = run(url, "sessions", "delete", "keep", "--force")
    assert result.exit_code == 0, result.stderr
    assert stored(url) == []


# -- stored text on the terminal ---------------------------------------------------------------

ESCAPES = "\x1b[2J\x1b[31mEVIL\x07\u202e"
"""Clear the screen, turn red, ring the bell, reverse the line: what a title can carry."""


def no_raw_controls(result: Any) -> str:
    """Everything the command wrote, checked: no byte a terminal would act on."""
    out = result.stdout + result.stderr
    for char in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert char not in out, f"raw {char!r} in the output of a command"
    return str(out)


def test_control_characters_in_stored_text_are_shown_escaped(url: str) -> None:
    renamed = run(url, "sessions", "rename", "keep-0001", ESCAPES)
    assert renamed.exit_code == 0 and "\\x1b[2J\\x1b[31mEVIL" in no_raw_controls(renamed)
    store = open_store(url)
    call = ToolCall(id="call-1", name="sh\x1b[31m", arguments={"cmd": "\x1b]0;pwned\x07"})
    store.get_session("keep-0001").append(
        [
            Message.user("colour \x1b[32mgreen\x1b[0m here", model="gpt\x9b2J"),
            Message.assistant("", tool_calls=[call]),
            Message.tool("\x1b[1mPASSED\x1b[0m\nline two", tool_call_id="call-1", name="sh\x1b"),
        ]
    )
    store.close()
    commands = [
        ("sessions", "list"),
        ("sessions", "show", "keep-0001"),
        ("sessions", "history", "keep-0001"),
        ("sessions", "history", "keep-0001", "--full"),
        ("sessions", "search", "colour"),
    ]
    for args in commands:
        result = run(url, *args)
        assert result.exit_code == 0, (args, result.stderr)
        assert "\\x1b" in no_raw_controls(result), args
    no_raw_controls(run(url, "context", "keep-0001"))
    shown = json.loads(run(url, "sessions", "show", "keep-0001", "--json").stdout)
    assert shown["session"]["title"] == ESCAPES  # --json keeps the raw value
    history = json.loads(run(url, "sessions", "history", "keep-0001", "--json").stdout)
    assert history["items"][-1]["content"] == "\x1b[1mPASSED\x1b[0m\nline two"


def test_rich_markup_in_stored_text_prints_literally(url: str) -> None:
    assert run(url, "sessions", "rename", "keep-0001", "[bold red]x[/bold red]").exit_code == 0
    for args in (("sessions", "list"), ("sessions", "show", "keep-0001")):
        assert "[bold red]x[/bold red]" in run(url, *args).stdout


def test_a_real_transcript_with_captured_colour_codes_prints_escaped(url: str) -> None:
    name = "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"  # a command's output, colours and all
    path = require_shared(TRANSCRIPTS / "claude-code" / "spotter-8463c716" / name)
    imported = run(url, "sessions", "import", str(path))
    assert imported.exit_code == 0, imported.stderr
    sid = imported.stdout.strip()
    stored = run(url, "sessions", "history", sid, "-n", "1000", "--json").stdout
    assert "\\u001b[1m" in stored  # JSON's escape: the stored text holds a raw ESC
    result = run(url, "sessions", "history", sid, "--full", "-n", "1000")
    assert result.exit_code == 0
    assert "\\x1b[1m" in no_raw_controls(result)
