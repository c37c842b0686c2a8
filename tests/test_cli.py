"""The ``threadline`` command: every command, its ``--json`` shape, prefixes, exit codes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.openai_chat import CHAT
from threadline import Message, ToolCall, open_store
from threadline.cli import errors as cli_errors
from threadline.cli.app import app
from threadline.errors import (
    AmbiguousSessionId,
    ContextOverflow,
    SessionLocked,
    SessionNotFound,
    ThreadlineError,
)
from threadline.store import SessionInfo
from threadline.store.locks import LockHolder

runner = CliRunner()


def run(url: str, *args: str, input: str | None = None, **kw: Any) -> Any:
    return runner.invoke(app, ["--store", url, *args], input=input, **kw)


def ok(url: str, *args: str, **kw: Any) -> Any:
    result = run(url, *args, **kw)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def js(url: str, *args: str) -> Any:
    return json.loads(ok(url, *args, "--json").stdout)


@pytest.fixture
def url(sqlite_url: str) -> str:
    """A store with two sessions: ``alpha-0001`` (coder, titled) and ``beta-0002`` (writer)."""
    store = open_store(sqlite_url)
    a = store.create_session(agent="coder", id="alpha-0001", title="First one")
    a.append(
        [
            Message.user("please find the rounding bug"),
            Message.assistant(
                "", tool_calls=[ToolCall(id="c1", name="grep", arguments={"q": "x"})]
            ),
            Message.tool("3 matches\nsecond line", tool_call_id="c1", name="grep"),
            Message.assistant("Found it in totals.py."),
        ]
    )
    a.add_checkpoint(covers_up_to=1, summary="## Current State\n- looking for the bug")
    a.scratchpad_write("plan", "- fix it")
    b = store.create_session(agent="writer", id="beta-0002")
    b.append([Message.user("draft a poem about rivers"), Message.assistant("Rivers run...")])
    store.close()
    return sqlite_url


def session_ids(url: str) -> list[str]:
    return [item["id"] for item in js(url, "sessions", "list")["items"]]


# -- sessions list -------------------------------------------------------------------


def test_list_table_shows_ids_titles_and_previews(url: str) -> None:
    out = ok(url, "sessions", "list").stdout
    assert "alpha-0001" in out and "beta-0002" in out
    assert "First one" in out  # title
    assert "draft a poem about rivers" in out  # preview of the untitled session
    assert "1-2 of 2 sessions" in out


def test_list_json_shape_and_order(url: str) -> None:
    data = js(url, "sessions", "list")
    assert set(data) == {"total", "offset", "limit", "items"}
    assert data["total"] == 2 and data["offset"] == 0 and data["limit"] == 20
    assert [i["id"] for i in data["items"]] == ["beta-0002", "alpha-0001"]  # newest first
    fields = {f.name for f in dataclasses.fields(SessionInfo)}
    assert set(data["items"][0]) == {*fields, "visible_count", "child_count"}
    alpha = data["items"][1]
    assert alpha["agent"] == "coder" and alpha["message_count"] == alpha["visible_count"] == 4
    assert alpha["total_tokens"] > 0 and alpha["created_at"].endswith("Z")


def test_list_filters_and_pages(url: str) -> None:
    assert [i["id"] for i in js(url, "sessions", "list", "--agent", "coder")["items"]] == [
        "alpha-0001"
    ]
    page = js(url, "sessions", "list", "-n", "1", "--offset", "1")
    assert page["total"] == 2 and [i["id"] for i in page["items"]] == ["alpha-0001"]
    assert "no sessions at offset 5" in ok(url, "sessions", "list", "--offset", "5").stdout


def test_list_empty_store(sqlite_url: str) -> None:
    open_store(sqlite_url).close()  # listing never creates a store (test_store_faults.py)
    assert "no sessions" in ok(sqlite_url, "sessions", "list").stdout
    assert js(sqlite_url, "sessions", "list") == {
        "total": 0,
        "offset": 0,
        "limit": 20,
        "items": [],
    }


def test_default_store_comes_from_the_environment(url: str) -> None:
    result = runner.invoke(app, ["sessions", "list", "--json"], env={"THREADLINE_STORE": url})
    assert result.exit_code == 0
    assert json.loads(result.stdout)["total"] == 2


# -- show, history, rename -------------------------------------------------------------


def test_show_text_and_json(url: str) -> None:
    out = ok(url, "sessions", "show", "alph").stdout  # a 4-character prefix
    assert "alpha-0001" in out and "coder" in out and "First one" in out
    assert "Lock: free" in out and "Checkpoints: 1" in out and "Scratchpad: plan" in out
    data = js(url, "sessions", "show", "alpha-0001")
    assert set(data) == {
        *("session", "fork", "forks", "children", "checkpoints", "lock", "scratchpad")
    }
    assert data["session"]["id"] == "alpha-0001" and data["lock"] is None
    assert data["fork"] is None and data["forks"] == [] and data["children"] == []
    assert data["session"]["parent_id"] is None
    assert data["scratchpad"] == ["plan"]
    (cp,) = data["checkpoints"]
    assert cp["covers_up_to"] == 1 and "looking for the bug" in cp["summary"]
    assert cp["number"] == 1  # numbered within the session


def test_show_reports_the_lock_holder(url: str) -> None:
    store = open_store(url)
    holder = store.acquire_lock("alpha-0001", LockHolder(pid=4242, host="elsewhere"))
    store.close()
    assert "held by pid 4242 on elsewhere" in ok(url, "sessions", "show", "alpha-0001").stdout
    lock = js(url, "sessions", "show", "alpha-0001")["lock"]
    assert lock["pid"] == holder.pid and lock["host"] == "elsewhere"


def test_history_renders_tool_calls_compactly(url: str) -> None:
    out = ok(url, "sessions", "history", "alpha-0001").stdout
    assert out.index("please find the rounding bug") < out.index("Found it in totals.py.")
    assert '→ grep {"q":"x"}' in out and "[c1]" in out
    assert "3 matches" in out and "(2 lines" in out  # a tool result: first line and size
    last_two = ok(url, "sessions", "history", "alpha-0001", "-n", "2").stdout
    assert "please find" not in last_two and "Found it" in last_two


def test_history_json_is_oldest_first(url: str) -> None:
    data = js(url, "sessions", "history", "alpha-0001", "-n", "3")
    assert data["session_id"] == "alpha-0001"
    assert [m["seq"] for m in data["items"]] == [2, 3, 4]
    assert data["items"][0]["tool_calls"][0]["name"] == "grep"


def test_history_shortens_long_messages_unless_full(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    s = store.create_session(id="long-0001")
    s.append([Message.user("A" * 5000 + "THE-END")])
    store.close()
    short = ok(sqlite_url, "sessions", "history", "long-0001").stdout
    assert "characters truncated" in short and "THE-END" in short
    full = ok(sqlite_url, "sessions", "history", "long-0001", "--full").stdout
    assert "truncated" not in full


def test_history_marks_a_failed_tool_result(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    s = store.create_session(id="err-0001")
    call = ToolCall(id="c9", name="bash", arguments={"cmd": "make"})
    s.append([Message.assistant("", tool_calls=[call])])
    s.append(
        [
            Message.tool(
                "make: *** [all] Error 2",
                tool_call_id="c9",
                name="bash",
                metadata={"is_error": True},
            )
        ]
    )
    s.append([Message.tool("ok", tool_call_id="c9", name="bash")])
    store.close()
    out = ok(sqlite_url, "sessions", "history", "err-0001").stdout
    failed, passed = out.split("#3")
    assert "bash ← [c9] error" in failed and "Error 2" in failed
    assert "error" not in passed


def test_rename_sets_and_clears_the_title(url: str) -> None:
    assert "renamed beta-0002: Rivers" in ok(url, "sessions", "rename", "beta", "Rivers").stdout
    assert js(url, "sessions", "show", "beta-0002")["session"]["title"] == "Rivers"
    ok(url, "sessions", "rename", "beta-0002", "")
    assert js(url, "sessions", "show", "beta-0002")["session"]["title"] is None


# -- delete -----------------------------------------------------------------------------


def test_delete_by_id_and_prefix(url: str) -> None:
    assert "deleted 1 session" in ok(url, "sessions", "delete", "alph").stdout
    assert session_ids(url) == ["beta-0002"]


def test_delete_is_all_or_nothing_when_an_id_is_unknown(url: str) -> None:
    result = run(url, "sessions", "delete", "alpha-0001", "nope-9999")
    assert result.exit_code == 3
    assert result.stderr.strip() == "threadline: error: session not found: nope-9999"
    assert sorted(session_ids(url)) == ["alpha-0001", "beta-0002"]


def test_delete_all_needs_yes_when_stdin_is_not_a_terminal(url: str) -> None:
    result = run(url, "sessions", "delete", "--all")
    assert result.exit_code == 2
    assert "not a terminal" in result.stderr and "--yes" in result.stderr
    assert len(session_ids(url)) == 2
    assert (
        "deleted 1 session"
        in ok(url, "sessions", "delete", "--all", "--agent", "writer", "--yes").stdout
    )
    assert session_ids(url) == ["alpha-0001"]
    assert "deleted 1 session" in ok(url, "sessions", "delete", "--all", "--yes").stdout
    assert session_ids(url) == []
    assert "no sessions to delete" in ok(url, "sessions", "delete", "--all").stdout


def test_delete_all_asks_on_a_terminal(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threadline.cli.state.stdin_is_interactive", lambda: True)
    declined = run(url, "sessions", "delete", "--all", input="n\n")
    assert declined.exit_code == 1 and "Delete all 2 sessions?" in declined.stdout
    assert len(session_ids(url)) == 2
    ok(url, "sessions", "delete", "--all", input="y\n")
    assert session_ids(url) == []


@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "delete"),
        ("sessions", "delete", "alpha-0001", "--all"),
        ("sessions", "delete", "alpha-0001", "--agent", "coder"),
    ],
)
def test_delete_usage_errors(url: str, args: tuple[str, ...]) -> None:
    result = run(url, *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("threadline: error: ")
    assert len(session_ids(url)) == 2


# -- search -----------------------------------------------------------------------------


def test_search_text_and_json(url: str) -> None:
    assert "alpha-0001" in ok(url, "sessions", "search", "rounding").stdout
    data = js(url, "sessions", "search", "poem rivers")
    assert data["query"] == "poem rivers"
    (hit,) = data["items"]
    assert set(hit) == {"session_id", "seq", "role", "snippet", "agent", "marks", "parent_id"}
    assert hit["session_id"] == "beta-0002" and hit["seq"] == 1 and hit["agent"] == "writer"
    assert js(url, "sessions", "search", "rivers", "--agent", "coder")["items"] == []
    assert "0 hits" in ok(url, "sessions", "search", "absent-word").stdout


def test_search_query_is_not_fts_syntax(url: str) -> None:
    # threadline's syntax (OR, phrases) is parsed; FTS5's (NEAR, parentheses) is text
    both = js(url, "sessions", "search", 'rounding OR "NEAR(')
    assert both["items"] == js(url, "sessions", "search", "rounding")["items"] != []
    assert js(url, "sessions", "search", "NEAR(rounding)")["items"] == []


# -- export and import ------------------------------------------------------------------


def test_export_markdown_to_default_file(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = ok(url, "sessions", "export", "alph")
    assert result.stdout.strip() == "session-alpha-0001.md"
    text = (tmp_path / "session-alpha-0001.md").read_text(encoding="utf-8")
    assert text.startswith("# First one") and "<details>" in text and "Tool call: grep" in text


def test_export_to_stdout_and_named_file(url: str, tmp_path: Path) -> None:
    out = ok(url, "sessions", "export", "alpha-0001", "-o", "-").stdout
    assert out.startswith("# First one") and "please find the rounding bug" in out
    target = tmp_path / "out.json"
    ok(url, "sessions", "export", "alpha-0001", "--format", "json", "-o", str(target))
    doc = json.loads(target.read_text(encoding="utf-8"))
    assert doc["format"] == "threadline.session" and len(doc["messages"]) == 4


def test_json_export_imports_back_losslessly(url: str, tmp_path: Path) -> None:
    target = tmp_path / "alpha.json"
    ok(url, "sessions", "export", "alpha-0001", "-f", "json", "-o", str(target))
    result = ok(url, "sessions", "import", str(target))
    new_id = result.stdout.strip()
    assert "\n" not in new_id and "imported 4 messages" in result.stderr
    store = open_store(url)
    try:
        old, new = store.get_session("alpha-0001"), store.get_session(new_id)
        assert (new.agent, new.title, new.message_count) == ("coder", "First one", 4)
        keep = {"role", "content", "tool_calls", "tool_call_id", "name", "created_at"}
        assert [m.model_dump(include=keep) for m in new.messages()] == [
            m.model_dump(include=keep) for m in old.messages()
        ]
        (cp,) = new.checkpoints()
        assert cp.covers_up_to == 1 and "looking for the bug" in cp.summary
    finally:
        store.close()


def test_import_openai_jsonl_with_agent_and_title(url: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in CHAT) + "\n", encoding="utf-8")
    new_id = ok(url, "sessions", "import", str(path), "--agent", "calc-bot", "--title", "Sums")
    sid = new_id.stdout.strip()
    info = js(url, "sessions", "show", sid)["session"]
    assert (info["agent"], info["title"], info["message_count"]) == ("calc-bot", "Sums", 5)
    history = js(url, "sessions", "history", sid)["items"]
    assert history[2]["tool_calls"][0]["arguments"] == {"expr": "2+2"}


# -- context ----------------------------------------------------------------------------


def test_context_report(url: str, tmp_path: Path) -> None:
    system = tmp_path / "system.txt"
    system.write_text("You are a careful coding agent.", encoding="utf-8")
    out = ok(url, "context", "alph", "--model", "gpt-4o", "--system", str(system)).stdout
    assert "Context Status" in out and "Context limit:    128,000 tokens" in out
    assert "System prompt" in out and "Recent messages" in out and "[█" in out
    assert "checkpoint #1: 1 message -> " in out  # the summary in use
    assert "In window:        3 messages (seq 2-4)" in out


def test_context_json(url: str, tmp_path: Path) -> None:
    system = tmp_path / "system.txt"
    system.write_text("Be brief.", encoding="utf-8")
    data = js(url, "context", "beta-0002", "--system", str(system), "--limit", "8000")
    assert set(data) == {"messages", "report"}
    assert [m["role"] for m in data["messages"]] == ["system", "user", "assistant"]
    assert data["messages"][0]["content"] == "Be brief."
    report = data["report"]
    assert report["limit"] == 8000 and report["response_reserve"] == 4096
    assert report["total_tokens"] <= report["limit"] - report["response_reserve"]
    assert {s["name"] for s in report["sections"]} >= {"system", "history"}


def test_checkpoints_are_numbered_within_their_session(sqlite_url: str) -> None:
    """Store-wide ids (1, 2, 3 across sessions) never reach a report: #1, #2 per session."""
    store = open_store(sqlite_url)
    other = store.create_session(id="other-0001")
    other.append([Message.user(f"o{i}") for i in range(4)])
    other.add_checkpoint(covers_up_to=2, summary="- the other session")  # id 1
    s = store.create_session(id="numb-0001")
    s.append([Message.user(f"question {i} " + "word " * 20) for i in range(12)])
    s.add_checkpoint(covers_up_to=4, summary="- first")  # id 2, #1
    s.add_checkpoint(covers_up_to=8, summary="- second")  # id 3, #2
    store.close()
    report = js(sqlite_url, "context", "numb")["report"]
    assert (report["checkpoint_id"], report["checkpoint_number"]) == (3, 2)
    assert report["newest_checkpoint_number"] == 2
    text = ok(sqlite_url, "context", "numb").stdout
    assert "Summary:          checkpoint #2: 8 messages" in text
    assert "#3" not in text and "checkpoint 3" not in text
    summary = next(x for x in report["sections"] if x["name"] == "summary")
    assert summary["detail"] == "covers seq 1-8"
    shown = js(sqlite_url, "sessions", "show", "numb")["checkpoints"]
    assert [(c["number"], c["id"]) for c in shown] == [(1, 2), (2, 3)]
    exported = json.loads(
        ok(sqlite_url, "sessions", "export", "numb", "-f", "json", "-o", "-").stdout
    )
    assert [(c["number"], c["id"]) for c in exported["checkpoints"]] == [(1, 2), (2, 3)]


def test_context_options_reach_the_policy(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    s = store.create_session(id="many-0001")
    s.append([Message.user(f"message number {i} " + "word " * 60) for i in range(60)])
    store.close()
    greedy = js(
        sqlite_url, "context", "many", "--limit", "3000", "--reserve", "500", "--strategy", "greedy"
    )["report"]
    assert greedy["strategy"] == "greedy" and greedy["response_reserve"] == 500
    assert 0 < greedy["included_messages"] < 60 and greedy["dropped_messages"] > 0
    stable = js(sqlite_url, "context", "many", "--limit", "3000", "--reserve", "500")["report"]
    assert stable["strategy"] == "stable"
    assert stable["included_messages"] <= greedy["included_messages"]  # low-water re-trim


def test_context_overflow_exits_5(url: str) -> None:
    result = run(url, "context", "alpha-0001", "--limit", "300", "--reserve", "290")
    assert result.exit_code == ContextOverflow.exit_code == 5
    assert result.stderr.startswith("threadline: error: ") and result.stderr.count("\n") == 1


# -- prefixes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "show", "{}"),
        ("sessions", "history", "{}"),
        ("sessions", "export", "{}", "-o", "-"),
        ("context", "{}"),
        ("sessions", "rename", "{}", "t"),
    ],
)
def test_unique_prefix_works_and_ambiguous_prefix_fails(
    sqlite_url: str, args: tuple[str, ...]
) -> None:
    store = open_store(sqlite_url)
    for sid in ("abcd-1", "abcd-2", "abce-3"):
        store.create_session(id=sid).append([Message.user("hi")])
    store.close()
    ok(sqlite_url, *(a.replace("{}", "abce") for a in args))
    result = run(sqlite_url, *(a.replace("{}", "abcd") for a in args))
    assert result.exit_code == AmbiguousSessionId.exit_code == 2
    assert "ambiguous" in result.stderr and "abcd-1" in result.stderr
    short = run(sqlite_url, *(a.replace("{}", "abc") for a in args))  # under 4 characters
    assert short.exit_code == SessionNotFound.exit_code == 3


# -- errors, warnings, entry point --------------------------------------------------------


def test_every_library_error_keeps_its_exit_code() -> None:
    def subclasses(cls: type[ThreadlineError]) -> list[type[ThreadlineError]]:
        return [cls] + [s for c in cls.__subclasses__() for s in subclasses(c)]

    for cls in subclasses(ThreadlineError):
        exc = cls.__new__(cls)
        assert cli_errors.exit_code_for(exc) == cls.exit_code
    assert SessionLocked.exit_code == cli_errors.EXIT_LOCKED
    assert cli_errors.exit_code_for(RuntimeError("x")) == cli_errors.EXIT_ERROR
    assert cli_errors.exit_code_for(KeyboardInterrupt()) == cli_errors.EXIT_INTERRUPTED


def test_unexpected_error_is_one_line_and_exit_1(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("threadline.store.sqlite.SQLiteStore.list_sessions", boom)
    result = run(url, "sessions", "list")
    assert result.exit_code == 1
    assert result.stderr == (
        "threadline: error: unexpected RuntimeError: boom second line "
        "(set THREADLINE_DEBUG=1 for a traceback)\n"
    )
    debug = run(url, "sessions", "list", env={"THREADLINE_DEBUG": "1"})
    assert debug.exit_code == 1
    assert "Traceback" in debug.stderr and debug.stderr.endswith(
        "threadline: error: unexpected RuntimeError: boom second line\n"
    )


def test_library_warnings_are_one_line(url: str) -> None:
    result = ok(url, "context", "beta-0002", "--model", "no-such-model-x1", "--limit", "8000")
    warning_lines = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warning_lines) == 1
    assert warning_lines[0].startswith("threadline: warning: model 'no-such-model-x1'")


def test_usage_errors_exit_2(url: str) -> None:
    assert run(url, "no-such-command").exit_code == 2
    assert run(url, "sessions", "list", "-n", "0").exit_code == 2
    assert run(url, "sessions", "list", "-n", "201").exit_code == 2
    assert run(url, "sessions", "show").exit_code == 2
    assert run(url, "context", "alpha-0001", "--strategy", "fastest").exit_code == 2


def test_help_and_version() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("sessions", "context", "demo"):
        assert command in result.stdout
    sessions_help = runner.invoke(app, ["sessions", "-h"]).stdout
    for command in ("list", "show", "history", "rename", "delete", "search", "export", "import"):
        assert command in sessions_help
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("threadline ")


def test_console_script_runs(url: str) -> None:
    script = Path(sys.executable).with_name("threadline")
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (package not installed)")
    done = subprocess.run(
        [str(script), "--store", url, "sessions", "list", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 2
    missing = subprocess.run(
        [str(script), "--store", url, "sessions", "show", "nope-0000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 3
    assert missing.stderr == "threadline: error: session not found: nope-0000\n"
