"""A chat that remembers (issue 13, item 4), driven like ``tests/test_chat.py``: the REPL
reads prompt_toolkit's pipe input, the model is the real OpenAI-compatible provider
talking to the local fake server, and the tests check what was sent and stored.

Resuming keeps the session's model, agent and ``/tokens`` setting; Ctrl-C during a
streamed reply keeps the partial reply once and the next request stays valid;
``/delete`` asks; ``/compact FOCUS`` reaches the summarizer; new sessions get a
title from their first request (and from a title model in the background);
``/fork`` and ``/rewind`` go on in a fork; ``-m`` is ``--model``.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from typer.testing import CliRunner

from tests import test_chat
from tests.fakes import FakeOpenAI
from threadline import Message, open_store
from threadline.cli.app import app
from threadline.cli.chat import INTERRUPTED_KEY, ReplyRenderer

MODEL_A = "compatible/fake-model-a"
fake_server = test_chat.fake
repl = test_chat.chat_repl


@pytest.fixture
def fake(fake_server: FakeOpenAI) -> FakeOpenAI:
    """``tests/test_chat.py``'s: the fake server, the env pointing at it, agents/tester.yaml."""
    return fake_server


def invoke(url: str, *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, ["--store", url, "chat", *args], input=input)


def sent(request: Any) -> list[tuple[str, str]]:
    """(role, text) of each message a chat request carried."""
    out = []
    for m in request.json()["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        out.append((m["role"], content or ""))
    return out


def with_title_model(url: str, message: str) -> Any:
    return invoke(url, "-m", MODEL_A, "--title-model", "compatible/titler", "--message", message)


def only_session(url: str) -> Any:
    with open_store(url) as store:
        (info,) = store.list_sessions().items
        return info


# -- resuming keeps the model, agent and settings -----------------------------------------


def test_continue_keeps_the_sessions_model_and_agent(fake: FakeOpenAI, sqlite_url: str) -> None:
    fake.reply_text("first")
    first = invoke(sqlite_url, "tester", "-m", MODEL_A, "--message", "hello")  # -m is --model
    assert first.exit_code == 0, first.stderr
    assert fake.last_request.json()["model"] == "fake-model-a"

    fake.reply_text("second")
    again = invoke(sqlite_url, "-c", "--message", "more")  # no AGENT, no --model
    assert again.exit_code == 0, again.stderr
    assert "tester on compatible/fake-model-a" in again.stderr
    request = fake.last_request.json()
    assert request["model"] == "fake-model-a"
    assert sent(fake.last_request)[0] == ("system", sent(fake.last_request)[0][1])
    assert "You are a test agent." in sent(fake.last_request)[0][1]
    assert [t for r, t in sent(fake.last_request) if r != "system"] == [
        "hello",
        "first",
        "more",
    ]

    fake.reply_text("third")
    sid = only_session(sqlite_url).id
    other = invoke(sqlite_url, "-s", sid[:8], "--model", "compatible/other", "--message", "x")
    assert other.exit_code == 0, other.stderr
    assert fake.last_request.json()["model"] == "other"  # an explicit --model wins
    info = only_session(sqlite_url)
    assert info.agent == "tester" and info.message_count == 6


def test_an_explicit_agent_brings_its_own_model(fake: FakeOpenAI, sqlite_url: str) -> None:
    fake.reply_text("first")
    assert invoke(sqlite_url, "-m", MODEL_A, "--message", "hi").exit_code == 0
    sid = only_session(sqlite_url).id
    fake.reply_text("second")
    again = invoke(sqlite_url, "tester", "-s", sid[:8], "--message", "again")
    assert again.exit_code == 0, again.stderr
    assert fake.last_request.json()["model"] == "gpt-4o"  # tester's own, not the stored one


def test_a_stored_model_that_cannot_be_used_falls_back_with_a_note(
    fake: FakeOpenAI, sqlite_url: str
) -> None:
    """A ``threadline demo`` session is stored on ``simulated/gpt-4o``, which chat has no
    provider for: ``chat -c`` says so and goes on with the agent's model."""
    with open_store(sqlite_url) as store:
        store.create_session(model="simulated/gpt-4o").append(Message.user("from the demo"))
    fake.reply_text("hello again")
    result = invoke(sqlite_url, "-c", "--message", "go on")
    assert result.exit_code == 0, result.stderr
    assert "'simulated/gpt-4o' cannot be used" in result.stderr


def test_session_switch_in_the_repl_takes_the_sessions_model(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(sqlite_url) as store:
        old = store.create_session(agent="tester", model=MODEL_A, id="old-session-1")
        old.append([Message.user("earlier"), Message.assistant("before")])
    fake.reply_text("on model a")
    result = repl(sqlite_url, [], ["/session old-session-1", "go on"], monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "tester on compatible/fake-model-a" in result.stderr
    assert fake.last_request.json()["model"] == "fake-model-a"
    assert "on model a" in result.stdout


def test_tokens_setting_is_restored_on_resume(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_text("one", usage=(100, 2))
    first = repl(sqlite_url, ["-m", MODEL_A], ["hello", "/tokens"], monkeypatch)
    assert first.exit_code == 0, (first.stdout, first.stderr)
    assert "tokens:" not in first.stdout  # toggled on after the only turn
    fake.reply_text("two", usage=(120, 2))
    again = repl(sqlite_url, ["-c"], ["and again"], monkeypatch)
    assert again.exit_code == 0, (again.stdout, again.stderr)
    assert "tokens:" in again.stdout and "msgs +" in again.stdout


# -- Ctrl-C keeps the partial reply once ------------------------------------------------------


def test_ctrl_c_keeps_the_partial_reply_once_and_the_next_request_is_valid(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ReplyRenderer.chunk

    def press_ctrl_c(self: ReplyRenderer, piece: str) -> None:
        original(self, piece)
        if "STOP" in piece:
            raise KeyboardInterrupt

    monkeypatch.setattr(ReplyRenderer, "chunk", press_ctrl_c)
    fake.reply_text("Partial answer STOP and the part never shown.")
    fake.reply_text("A full answer.")
    lines = ["tell me", "then this"]
    result = repl(sqlite_url, ["-m", MODEL_A], lines, monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert result.stdout.count("Partial answer STOP") == 1
    assert "never shown" not in result.stdout
    assert "interrupted: the partial reply was kept" in result.stdout

    roles = [r for r, _ in sent(fake.last_request)]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(roles)), (
        f"two user messages in a row: {roles}"
    )
    assert ("assistant", "Partial answer STOP") in sent(fake.last_request)
    with open_store(sqlite_url) as store:
        session = store.get_session(only_session(sqlite_url).id)
        stored = [(m.role, m.text, m.metadata.get(INTERRUPTED_KEY)) for m in session.messages()]
    assert stored == [
        ("user", "tell me", None),
        ("assistant", "Partial answer STOP", True),
        ("user", "then this", None),
        ("assistant", "A full answer.", None),
    ]


def test_ctrl_c_before_any_text_still_answers_the_request(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def press_ctrl_c(self: ReplyRenderer, piece: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ReplyRenderer, "chunk", press_ctrl_c)
    fake.reply_text("never shown")
    result = repl(sqlite_url, ["-m", MODEL_A], ["tell me"], monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    with open_store(sqlite_url) as store:
        messages = store.get_session(only_session(sqlite_url).id).messages()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].metadata[INTERRUPTED_KEY] is True and messages[1].text.strip()


# -- /delete asks, /compact FOCUS, titles -----------------------------------------------------


def test_delete_without_an_id_asks_first(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_text("hi")
    result = repl(sqlite_url, ["-m", MODEL_A], ["hello", "/delete", "no", "/history"], monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "nothing deleted" in result.stdout
    assert only_session(sqlite_url).message_count == 2
    sid = only_session(sqlite_url).id
    gone = repl(sqlite_url, ["-s", sid], ["/delete", "yes"], monkeypatch)
    assert gone.exit_code == 0, (gone.stdout, gone.stderr)
    assert f"deleted session {sid}" in gone.stdout
    with open_store(sqlite_url) as store:
        assert store.list_sessions().total == 0


def test_compact_passes_the_focus_to_the_summarizer(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(sqlite_url) as store:
        session = store.create_session(agent="tester", model=MODEL_A, id="long-session-1")
        for i in range(6):  # ~30k tokens: more than a compaction keeps verbatim
            note = f"step {i}: the migration of table {i}. " + "column renamed. " * 1_500
            session.append([Message.user(note), Message.assistant("ok")])
    result = repl(sqlite_url, ["-s", "long-session-1"], ["/compact the migration"], monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    with open_store(sqlite_url) as store:
        checkpoint = store.latest_checkpoint("long-session-1")
    assert checkpoint is not None and checkpoint.metadata.get("focus") == "the migration"


def test_titles_come_from_the_first_request_then_the_title_model(
    fake: FakeOpenAI, sqlite_url: str
) -> None:
    fake.reply_text("Sure.")
    plain = invoke(sqlite_url, "-m", MODEL_A, "--message", "Fix the rounding bug in totals.py")
    assert plain.exit_code == 0, plain.stderr
    assert only_session(sqlite_url).title == "Fix the rounding bug in totals.py"
    assert fake.request_count == 1  # no title model: no extra request

    with open_store(sqlite_url) as store:
        store.delete_all()
    fake.reply_text("Sure.")
    fake.reply_text('"Rounding Bug Fix."')
    titled = with_title_model(sqlite_url, "Fix the rounding bug in totals.py")
    assert titled.exit_code == 0, titled.stderr
    assert titled.stdout == "Sure.\n"  # the title never reaches the output
    assert fake.last_request.json()["model"] == "titler"
    assert only_session(sqlite_url).title == "Rounding Bug Fix"


def test_a_failing_title_model_leaves_the_first_title(fake: FakeOpenAI, sqlite_url: str) -> None:
    fake.reply_text("Sure.")
    fake.fail(400)
    result = with_title_model(sqlite_url, "Plan the trip")
    assert result.exit_code == 0, result.stderr
    assert "threadline: error" not in result.stderr
    assert "the title model gave no title" in result.stderr  # said once, not silence
    assert only_session(sqlite_url).title == "Plan the trip"


@pytest.mark.parametrize(
    ("spec", "why"),
    [("nosuch/titler", "unknown provider"), ("openai/gpt-4o-mini", "OPENAI_API_KEY")],
)
def test_an_unusable_title_model_is_refused_before_the_chat(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, spec: str, why: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake.reply_text("Sure.")
    result = invoke(sqlite_url, "-m", MODEL_A, "--title-model", spec, "--message", "Plan it")
    assert result.exit_code == 2, result.stderr
    assert f"--title-model {spec!r} cannot be used" in result.stderr and why in result.stderr
    assert fake.request_count == 0


# -- /fork and /rewind ------------------------------------------------------------------------


def test_rewind_and_fork_go_on_in_a_fork(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text in ("answer one", "answer two", "answer two again", "after the fork"):
        fake.reply_text(text)
    lines = [
        "question one",
        "question two",
        "/rewind",
        "question two, differently",
        "/fork",
        "and on",
        "/rewind 9",
    ]
    result = repl(sqlite_url, ["-m", MODEL_A], lines, monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "undone: question two" in result.stdout
    assert "cannot rewind 9 user turns" in result.stdout
    # after /rewind the request left out the undone turn
    third = fake.requests[2]
    assert [t for r, t in sent(third) if r != "system"] == [
        "question one",
        "answer one",
        "question two, differently",
    ]
    with open_store(sqlite_url) as store:
        infos = {i.id: i for i in store.list_sessions().items}
        assert len(infos) == 3
        sessions = [store.get_session(sid) for sid in infos]
        root = next(s for s in sessions if s.fork is None)
        rewound = next(s for s in sessions if s.fork is not None and s.fork.parent == root.id)
        forked = next(s for s in sessions if s.fork is not None and s.fork.parent == rewound.id)
        assert [m.text for m in root.messages()] == [
            "question one",
            "answer one",
            "question two",
            "answer two",
        ]
        assert rewound.fork is not None and rewound.fork.seq == 2
        assert [m.text for m in forked.messages()][-2:] == ["and on", "after the fork"]
        assert [m.text for m in forked.messages()][:3] == [
            "question one",
            "answer one",
            "question two, differently",
        ]
        assert root.title == rewound.title == "question one"


def test_rewind_after_fork_sends_without_the_undone_turn(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/fork`` then ``/rewind``: the rewound session is a fork of a fork, made before
    the first fork's point; its next request held the undone turn (issue 32)."""
    for text in ("answer one", "answer two", "answer two again"):
        fake.reply_text(text)
    lines = ["question one", "question two", "/fork", "/rewind", "question two, differently"]
    result = repl(sqlite_url, ["-m", MODEL_A], lines, monkeypatch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "undone: question two" in result.stdout
    assert [t for r, t in sent(fake.requests[2]) if r != "system"] == [
        "question one",
        "answer one",
        "question two, differently",
    ]


def test_a_streamed_reply_stops_the_terminal_echoing_ctrl_c() -> None:
    """The live view redraws by moving up the lines it drew; a ``^C`` the terminal echoes
    moved the cursor on, so the partial reply showed twice after Ctrl-C. While a reply
    streams the terminal echoes nothing; after it (Ctrl-C included) it is as it was."""
    import io
    import pty
    import sys
    import termios

    from rich.console import Console

    master, slave = pty.openpty()
    stdin = os.fdopen(slave, "r", closefd=False)
    saved = sys.stdin
    try:
        sys.stdin = stdin
        before = termios.tcgetattr(slave)
        assert before[3] & termios.ECHO and before[3] & termios.ECHOCTL
        renderer = ReplyRenderer(Console(file=io.StringIO(), force_terminal=True, width=80))
        renderer.chunk("Partial answer")
        during = termios.tcgetattr(slave)[3]
        assert not during & termios.ECHO and not during & termios.ECHOCTL
        assert renderer.interrupt() == "Partial answer"
        assert termios.tcgetattr(slave) == before
    finally:
        sys.stdin = saved
        stdin.close()
        os.close(slave)
        os.close(master)
