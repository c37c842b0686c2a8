"""``threadline chat``: a conversation with slash commands through prompt_toolkit's pipe input.

The model is the real OpenAI-compatible provider talking to the local fake
server (``tests.fakes.FakeOpenAI``) over HTTP, so every turn goes through the
provider, the agent loop, the store, the builder and the compactor; the tests
then check what the store holds.
"""

from __future__ import annotations

import io
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from typer.testing import CliRunner

from tests.fakes import FakeOpenAI
from tests.fakes.cli_env import fake_openai_cwd
from threadline import Message, open_store
from threadline.agent import Agent, AgentConfig
from threadline.cli import chat as chat_module
from threadline.cli.app import app
from threadline.cli.chat import ChatController, LockKeeper, run_repl
from threadline.cli.slash import (
    COMMANDS,
    Outcome,
    ParsedCommand,
    SlashCompleter,
    command_names,
    dispatch,
    parse_command,
    tokens_line,
    unknown_hint,
)
from threadline.context.builder import ContextReport, Section
from threadline.llm.scripted import ScriptedChatModel
from threadline.store.locks import LockHolder

MODEL = "compatible/gpt-4o"
TOKENS_LINE = re.compile(
    r"tokens: [\d,]+ msgs \+ [\d,]+ tools \| context: [\d,]+ / 128,000 \(\d+%\)"
)
AGENT_YAML = """\
name: tester
model: openai/gpt-4o
system_prompt: You are a test agent.
summarizer: extractive
tools: [scratchpad_write, scratchpad_read, scratchpad_list]
context:
  min_recent_messages: 2
  preserve_user_turns: 1
  preserve_fill: false
"""
WAIT_SECONDS = 10.0
"""Upper bound for polling a background thread (a deadline, not a timed assertion)."""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAI]:
    """The fake OpenAI server, the env that points ``compatible/`` at it, and a temp cwd."""
    with fake_openai_cwd(monkeypatch, tmp_path, {"tester": AGENT_YAML}) as srv:
        yield srv


def chat_repl(url: str, args: list[str], lines: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``threadline chat`` as if in a terminal, typing ``lines`` (then Ctrl-D)."""
    monkeypatch.setattr(chat_module, "stdin_is_interactive", lambda: True)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text("".join(line + "\r" for line in lines) + "\x04")
        return CliRunner().invoke(app, ["--store", url, "chat", *args])


# -- the conversation -----------------------------------------------------------------


def test_each_command_is_named_by_its_usage() -> None:
    """A command's name is its usage's first word, so /help and dispatch agree."""
    assert " ".join(command_names()) == (
        "help sessions session new delete rename export history context memory "
        "tokens fork rewind summarize compact quit exit"
    )
    for spec in COMMANDS:
        assert parse_command(spec.usage.split()[0] + " x") == ParsedCommand(spec.name, "x")


def test_conversation_with_slash_commands(
    fake: FakeOpenAI, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_tool_call(
        "scratchpad_write", {"name": "plan", "content": "fix the rounding bug"}, usage=(300, 20)
    )
    fake.reply_text("Noted the plan.", usage=(350, 5))
    fake.reply_text("The answer is **42**.", usage=(400, 7))
    fake.reply_text("Third reply.", usage=(450, 3))
    export = tmp_path / "out.md"
    lines = [
        "/tokens",
        "remember the plan for src/app/totals.py",
        "what is the answer?",
        "/rename Rounding work",
        "/history 3",
        "/context",
        "/bogus",
        "/usr/bin is slow",  # a path, not a command: sent to the model
        "/summarize",
        f"/export {export}",
        "/sessions",
        "/quit",
    ]
    result = chat_repl(sqlite_url, ["tester", "--model", MODEL], lines, monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out, err = result.stdout, result.stderr

    # what the terminal showed
    assert "per-turn token line on" in out
    assert len(TOKENS_LINE.findall(out)) == 3  # one per turn while /tokens is on
    assert "scratchpad_write" in out  # the tool call, shown as it ran
    assert "Noted the plan." in out and "The answer is 42." in out  # Markdown rendered
    assert "Context Status" in out and "Compaction Triggers" in out
    assert "unknown command /bogus" in out
    assert "Compacted" in out and "renamed session" in out and f"wrote {export}" in out

    # what the store holds
    store = open_store(sqlite_url)
    try:
        (info,) = store.list_sessions().items
        assert (info.agent, info.title, info.model) == ("tester", "Rounding work", MODEL)
        messages = store.read_messages(info.id)
        assert [m.role for m in messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert messages[0].text == "remember the plan for src/app/totals.py"
        assert messages[1].tool_calls[0].name == "scratchpad_write"
        assert messages[2].text.startswith("saved scratchpad note 'plan'")
        assert messages[6].text == "/usr/bin is slow"
        assert messages[3].usage is not None and messages[3].usage.input_tokens == 350
        assert all(m.model == "gpt-4o" for m in messages if m.role == "assistant")
        pad = store.scratchpad_read(info.id, "plan")
        assert pad is not None and pad.content == "fix the rounding bug"
        checkpoint = store.latest_checkpoint(info.id)
        assert checkpoint is not None and checkpoint.covers_up_to >= 4
        assert "src/app/totals.py" in checkpoint.summary  # exact values kept verbatim
        assert store.lock_holder(info.id) is None  # released on /quit
    finally:
        store.close()

    # the tool result went back to the model in the next request
    second = fake.requests[1].json()
    assert second["messages"][-1]["role"] == "tool"
    assert all(r.streaming for r in fake.requests)  # the REPL streams

    text = export.read_text()
    assert text.startswith("# Rounding work") and "what is the answer?" in text

    # session id on stderr: when created and again on exit
    assert err.count(info.id) == 3  # created, exit line (id twice: id and resume hint)
    assert f"session {info.id} created" in err
    assert re.search(rf"session {info.id} \(resume: threadline chat tester --session", err)


def test_switch_new_delete_and_a_locked_session(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(sqlite_url)
    old = store.create_session(agent="tester", model=MODEL, id="old-session-1")
    old.append([Message.user("earlier question"), Message.assistant("earlier answer")])
    # held by a live process on this host (our parent): attaching must fail
    busy = store.create_session(agent="tester", id="busy-session-1")
    store.acquire_lock(busy.id, LockHolder(pid=os.getppid(), host=LockHolder.current().host))
    store.close()
    fake.reply_text("Resumed and answered.")
    fake.reply_text("A fresh answer.")
    lines = [
        "/session old-",
        "/history",
        "follow-up",
        "/session busy-session-1",
        "/new",
        "something new",
        "/delete old-session-1",
        "/delete",
        "n",  # asked first: nothing deleted
        "/delete",
        "y",
        "/sessions",
    ]
    result = chat_repl(sqlite_url, ["tester", "--model", MODEL], lines, monkeypatch)  # ends: ^D
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out, err = result.stdout, result.stderr
    assert "earlier question" in out and "earlier answer" in out  # /history
    assert "Resumed and answered." in out and "A fresh answer." in out
    assert f"locked by pid {os.getppid()}" in out
    assert "session old-session-1 resumed (2 messages, tester on compatible/gpt-4o)" in err
    assert "left session old-session-1" in err
    created = re.search(r"session (\S+) created", err)
    assert created is not None
    new_id = created.group(1)
    assert f"left session {new_id}" in err  # /delete of the current session detaches first
    assert "deleted session old-session-1" in out and f"deleted session {new_id}" in out
    assert out.count("nothing deleted") == 1

    store = open_store(sqlite_url)
    try:
        assert [s.id for s in store.list_sessions().items] == ["busy-session-1"]
        holder = store.lock_holder("busy-session-1")
        assert holder is not None and holder.pid == os.getppid()  # untouched
    finally:
        store.close()
    assert fake.request_count == 2


def test_rename_before_the_first_message_titles_the_new_session(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_text("hi")
    lines = ["/history", "/rename Early title", "hello"]
    result = chat_repl(sqlite_url, ["tester", "--model", MODEL], lines, monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "no session yet" in result.stdout
    store = open_store(sqlite_url)
    try:
        (info,) = store.list_sessions().items
        assert info.title == "Early title" and info.message_count == 2
    finally:
        store.close()


def test_model_error_is_shown_and_the_repl_goes_on(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.fail(400, message="bad things")
    fake.reply_text("Recovered.")
    result = chat_repl(sqlite_url, ["tester", "--model", MODEL], ["first", "second"], monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "error:" in result.stdout and "bad things" in result.stdout
    assert "Recovered." in result.stdout


# -- non-interactive ---------------------------------------------------------------------


def test_message_option_prints_only_the_reply(fake: FakeOpenAI, sqlite_url: str) -> None:
    fake.reply_text("Just **this**.")
    result = CliRunner().invoke(
        app, ["--store", sqlite_url, "chat", "tester", "--model", MODEL, "--message", "hello"]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Just **this**.\n"
    created = re.search(r"session (\S+) created", result.stderr)
    assert created is not None
    assert not fake.last_request.streaming
    # -c resumes the agent's latest session; piped stdin is the message
    fake.reply_text("Second.")
    again = CliRunner().invoke(
        app, ["--store", sqlite_url, "chat", "tester", "--model", MODEL, "-c"], input="more\n"
    )
    assert again.exit_code == 0, again.stderr
    assert again.stdout == "Second.\n"
    assert (
        f"session {created.group(1)} resumed (2 messages, tester on compatible/gpt-4o)"
        in again.stderr
    )
    store = open_store(sqlite_url)
    try:
        (info,) = store.list_sessions().items
        assert [m.text for m in store.read_messages(info.id)] == [
            "hello",
            "Just **this**.",
            "more\n",
            "Second.",
        ]
    finally:
        store.close()


def test_empty_stdin_and_conflicting_options(fake: FakeOpenAI, sqlite_url: str) -> None:
    empty = CliRunner().invoke(
        app, ["--store", sqlite_url, "chat", "tester", "--model", MODEL], input="  \n"
    )
    assert empty.exit_code == 2 and "nothing to send" in empty.stderr
    both = CliRunner().invoke(app, ["--store", sqlite_url, "chat", "-c", "--new", "--message", "x"])
    assert both.exit_code == 2 and "at most one of" in both.stderr
    assert fake.request_count == 0


def test_missing_key_explains_the_setup(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("OPENAI_API_KEY", "THREADLINE_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(app, ["--store", sqlite_url, "chat", "--message", "hi"])
    assert result.exit_code == 7
    err = result.stderr
    assert err.startswith("threadline: error: no API key for openai")
    assert "OPENAI_API_KEY" in err and "--model ollama/llama3.1" in err
    assert len(err.splitlines()) > 3  # a real hint, not one line
    assert not (tmp_path / "store.db").exists()  # checked before the store is opened


def test_unreachable_local_server_explains_the_setup(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI() as srv:
        closed = srv.url  # the port is free again once the server stops
    monkeypatch.setenv("VLLM_BASE_URL", closed)
    result = CliRunner().invoke(
        app, ["--store", sqlite_url, "chat", "--model", "vllm/llama-3.1-8b", "--message", "hi"]
    )
    assert result.exit_code == 7
    assert "cannot reach the vllm server" in result.stderr and "vllm serve" in result.stderr


# -- the pieces -------------------------------------------------------------------------


def test_parse_command() -> None:
    assert parse_command("/help") == ParsedCommand("help", "")
    assert parse_command("  /Rename  My project  ") == ParsedCommand("rename", "My project")
    assert parse_command("/history 5") == ParsedCommand("history", "5")
    assert parse_command("/usr/bin is slow") is None
    assert parse_command("hello /help") is None
    assert parse_command("/") is None
    assert "did you mean /summarize" in unknown_hint("sumarize")
    assert "did you mean" not in unknown_hint("zzzz")


def test_every_handler_is_registered_once_under_distinct_names() -> None:
    from threadline.cli import slash

    handlers = {name for name in vars(slash) if name.startswith("cmd_")}
    assert sorted(spec.handler.__name__ for spec in COMMANDS) == sorted(handlers)
    names = [name for spec in COMMANDS for name in (spec.name, *spec.aliases)]
    assert len(names) == len(set(names)) == len(command_names())
    assert [spec.name for spec in COMMANDS][:2] == ["help", "sessions"]  # as written


@given(st.text(max_size=60))
def test_parse_command_never_raises_and_only_takes_slash_lines(text: str) -> None:
    parsed = parse_command(text)
    if parsed is None:
        return
    assert text.strip().lower().startswith("/" + parsed.name)
    assert parsed.args == parsed.args.strip()
    assert parsed.name.replace("-", "").replace("_", "").isalnum()


def test_completer_offers_commands_at_the_start_only() -> None:
    completer = SlashCompleter()

    def complete(text: str) -> list[str]:
        doc = Document(text, len(text))
        return [c.text for c in completer.get_completions(doc, CompleteEvent())]

    assert complete("/se") == ["/sessions", "/session"]
    assert complete("/comp") == ["/compact"]
    assert "/quit" in complete("/") and "/exit" in complete("/")
    assert complete("/session ab") == []
    assert complete("hello") == []


def test_tokens_line_format() -> None:
    report = ContextReport(
        model="gpt-4o",
        tokenizer="o200k_base",
        limit=200_000,
        response_reserve=4096,
        budget=150_000,
        total_tokens=57_450,
        strategy="stable",
        sections=[
            Section(name="system", tokens=1_000),
            Section(name="tools", tokens=12_450),
            Section(name="history", tokens=44_000),
        ],
    )
    assert tokens_line(report) == (
        "tokens: 45,000 msgs + 12,450 tools | context: 57,450 / 200,000 (29%)"
    )


def make_controller(store_url: str) -> tuple[ChatController, Console]:
    config = AgentConfig.model_validate(
        {"name": "unit", "model": "openai/gpt-4o", "summarizer": "extractive"}
    )
    agent = Agent(config, store=open_store(store_url), model=ScriptedChatModel(default="ok"))
    console = Console(record=True, width=100, file=io.StringIO())
    return ChatController(agent, console=console, err_console=console), console


def test_repl_loop_with_a_plain_reader(sqlite_url: str) -> None:
    controller, console = make_controller(sqlite_url)
    typed = iter(["", "hello", "/tokens", "again", "/quit", "never read"])
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(typed)

    try:
        run_repl(controller, read, prompt="unit> ")
        session = controller.session
        assert session is not None and session.refresh().message_count == 4
        holder = controller.store.lock_holder(session.id)
        assert holder is not None and holder.pid == os.getpid()  # attached while open
    finally:
        controller.close()
    assert len(prompts) == 5
    assert controller.store.lock_holder(session.id) is None
    text = console.export_text()
    assert f"session {session.id} created" in text
    assert len(TOKENS_LINE.findall(text)) == 1  # only "again" ran with /tokens on
    assert dispatch(controller, ParsedCommand("quit", "")) is Outcome.QUIT


def test_lock_keeper_renews_and_releases(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    session = store.create_session(agent="unit", lock=LockHolder.current())
    first = store.lock_holder(session.id)
    assert first is not None
    keeper = LockKeeper(store, session.id, first, interval=0.01).start()
    deadline = time.monotonic() + WAIT_SECONDS
    renewed = first
    while renewed.renewed_at == first.renewed_at and time.monotonic() < deadline:
        time.sleep(0.01)
        current = store.lock_holder(session.id)
        assert current is not None
        renewed = current
    keeper.stop()
    assert renewed.renewed_at > first.renewed_at
    assert renewed.started_at == first.started_at
    assert store.lock_holder(session.id) is None
    store.close()


def test_history_file_is_in_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert chat_module.history_file() == tmp_path / "threadline" / "chat_history"
    old = os.umask(0o022)  # the usual umask: files would be 0644
    try:
        history = chat_module.prompt_history()
        history.append_string("/context")
    finally:
        os.umask(old)
    path = tmp_path / "threadline" / "chat_history"
    assert "/context" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # what was typed is the user's alone


def test_text_that_is_not_utf8_is_refused_before_a_session_exists(
    fake: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    """Bytes on stdin that are not UTF-8 (Python reads them as surrogates) and such a
    --message are refused with a usage error; no session is left behind."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "threadline.cli.app", "--store", sqlite_url, "chat"]
    command += ["--model", MODEL]
    piped = subprocess.run(
        command,
        input=b"caf\xe9 ok\n",
        capture_output=True,
        env=dict(os.environ, PYTHONUTF8="1"),
        timeout=60,
        check=False,
    )
    assert piped.returncode == 2, piped.stderr
    assert piped.stderr.decode().strip() == "threadline: error: stdin is not UTF-8 text (byte 3)"
    given = CliRunner().invoke(
        app, ["--store", sqlite_url, "chat", "--model", MODEL, "--message", "caf\udce9"]
    )
    assert given.exit_code == 2 and "not valid UTF-8" in given.stderr
    assert "created" not in given.stderr
    assert fake.requests == []
    with open_store(sqlite_url) as store:
        assert store.list_sessions().total == 0
