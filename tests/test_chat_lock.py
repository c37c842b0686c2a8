"""``threadline chat`` in real processes: the attach lock between two of them, and a pty REPL.

The first process runs the interactive chat in a pseudo-terminal (real
prompt_toolkit, real Rich), the second is a script (``-m``). The model is
the OpenAI-compatible provider talking to the fake server in this process.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAI
from threadline import open_store

MODEL = "compatible/gpt-4o"
DEADLINE = 60.0
"""Seconds a process may take to reach a state before the test gives up (not a timing check)."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")
PTY_ROWS, PTY_COLS = 40, 160


@dataclass
class PtyProcess:
    """A child on a pseudo-terminal, with what it printed so far (ANSI stripped)."""

    proc: subprocess.Popen[bytes]
    master: int
    raw: bytearray = field(default_factory=bytearray)

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def _pump(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.raw += data
        return True

    def wait_for(self, pattern: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while not re.search(pattern, self.text, re.DOTALL):
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} in the output:\n{self.text}")
            if not self._pump(0.1) and self.proc.poll() is not None:
                raise AssertionError(
                    f"exited ({self.proc.returncode}) before {pattern!r}:\n{self.text}"
                )
        return self.text

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> int:
        deadline = time.monotonic() + DEADLINE
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._pump(0.1)
        while self._pump(0):  # drain what is left
            if not select.select([self.master], [], [], 0)[0]:
                break
        return self.proc.wait(timeout=DEADLINE)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeOpenAI]]:
    with FakeOpenAI() as srv:
        e = dict(os.environ)
        e.update(
            OPENAI_BASE_URL=srv.url,
            OPENAI_API_KEY="test",
            XDG_DATA_HOME=str(tmp_path / "data"),
            PROMPT_TOOLKIT_NO_CPR="1",
            TERM="xterm",
        )
        e.pop("THREADLINE_MODEL", None)
        yield e, srv


def command(url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "threadline.cli.app", "--store", url, "chat", *args]


def run_once(
    url: str, sid: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """One non-interactive ``chat -m hi`` on session ``sid`` (an id or a prefix)."""
    return subprocess.run(
        command(url, "--session", sid, "--model", MODEL, "--message", "hi"),
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=DEADLINE,
    )


def start_in_pty(cmd: list[str], env: dict[str, str], cwd: Path) -> PtyProcess:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", PTY_ROWS, PTY_COLS, 0, 0))
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    return PtyProcess(proc, master)


def test_second_attach_is_refused_until_the_holder_dies(
    env: tuple[dict[str, str], FakeOpenAI], sqlite_url: str, tmp_path: Path
) -> None:
    environ, fake = env
    store = open_store(sqlite_url)
    sid = store.create_session(agent="default", model=MODEL).id
    store.close()

    first = start_in_pty(command(sqlite_url, "--session", sid, "--model", MODEL), environ, tmp_path)
    try:
        first.wait_for(rf"session {sid} resumed")
        store = open_store(sqlite_url)
        holder = store.lock_holder(sid)
        store.close()
        assert holder is not None and holder.pid == first.proc.pid

        second = run_once(sqlite_url, sid[:8], environ, tmp_path)
        assert second.returncode == 4, second.stderr
        assert f"session {sid} is locked by pid {first.proc.pid}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1  # one clear line
        assert second.stdout == ""
        assert fake.request_count == 0
    finally:
        os.kill(first.proc.pid, signal.SIGKILL)  # no chance to release the lock
        first.proc.wait(timeout=DEADLINE)
        os.close(first.master)

    store = open_store(sqlite_url)
    stale = store.lock_holder(sid)
    store.close()
    assert stale is not None and stale.pid == first.proc.pid and stale.is_stale()

    fake.reply_text("taken over")
    third = run_once(sqlite_url, sid, environ, tmp_path)
    assert third.returncode == 0, third.stderr
    assert third.stdout == "taken over\n"
    store = open_store(sqlite_url)
    try:
        assert store.lock_holder(sid) is None  # released at exit
        assert [m.text for m in store.read_messages(sid)] == ["hi", "taken over"]
    finally:
        store.close()


def test_repl_in_a_terminal_prints_the_session_id_on_exit(
    env: tuple[dict[str, str], FakeOpenAI], sqlite_url: str, tmp_path: Path
) -> None:
    environ, fake = env
    fake.reply_text("Hi from the **fake** server.")
    child = start_in_pty(command(sqlite_url, "--model", MODEL), environ, tmp_path)
    try:
        # each line is typed once the prompt is back (raw mode): between prompts the
        # terminal is in cooked mode, where Ctrl-D would be taken by the line discipline
        child.wait_for(r"default>")
        child.send("/tokens\r")
        child.wait_for(r"per-turn token line on.*default>")
        child.send("hello there\r")
        text = child.wait_for(r"tokens: [\d,]+ msgs.*default>")
        created = re.search(r"session (\S+) created", text)
        assert created is not None
        sid = created.group(1)
        assert "Hi from the fake server." in text  # Markdown rendered
        store = open_store(sqlite_url)
        holder = store.lock_holder(sid)
        store.close()
        assert holder is not None and holder.pid == child.proc.pid
        child.send("\x04")  # Ctrl-D
        assert child.finish() == 0
    finally:
        if child.proc.poll() is None:
            os.kill(child.proc.pid, signal.SIGKILL)
            child.proc.wait(timeout=DEADLINE)
        os.close(child.master)
    assert re.search(rf"session {sid} \(resume: threadline chat --session {sid}\)", child.text)
    store = open_store(sqlite_url)
    try:
        assert store.lock_holder(sid) is None
        assert [m.text for m in store.read_messages(sid)] == [
            "hello there",
            "Hi from the **fake** server.",
        ]
        assert (tmp_path / "data" / "threadline" / "chat_history").read_text().count("hello") == 1
    finally:
        store.close()
