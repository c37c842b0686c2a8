"""A live ``threadline serve`` for the web session browser's tests, with seeded sessions.

The server is the real command (``python -m threadline.cli.app serve``) over a SQLite
file seeded before it starts: a session whose title, messages, tool calls, results
and checkpoint summary are hostile HTML and control characters, plain sessions to
page through, and a message with a rare word to search for. The one-time login link
is read from what the command prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.live_server import free_port, stop
from threadline import open_store
from threadline.messages import Message, ToolCall

TOKEN = "web-test-token-0123456789abcdef"
HOSTILE_TITLE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>\x1b[31m\u202eevil'
HOSTILE_TEXT = "hello <b>bold</b> \"><img src=x onerror=alert(3)> & 'quote' \x07bell\x1b[2J"
HOSTILE_ARGS = {"path": "</pre><script>alert(4)</script>", "note": "\"'><svg onload=alert(5)>"}
HOSTILE_RESULT = "<iframe src=javascript:alert(6)></iframe>\x00nul <style>*{}</style>"
HOSTILE_SUMMARY = "- summary <script>alert(7)</script> of the <em>first</em> turn"
SEARCH_WORD = "zanzibarquux"
SEARCH_TEXT = f"done; the word is [{SEARCH_WORD}-fum] <mark>not a match</mark>"
"""Brackets and markup of its own around the word: a page must tell them from its marks."""
PLAIN_SESSIONS = 7
STARTUP_SECONDS = 30


def seed(db: Path) -> dict[str, str]:
    """Sessions for the pages to show; returns their ids by role."""
    store = open_store(f"sqlite://{db}")
    try:
        plain = []
        for i in range(PLAIN_SESSIONS):
            s = store.create_session(title=f"plain session {i}", model="simulated/gpt-4o")
            s.append(Message.user(f"question number {i}"))
            plain.append(s.id)
        # a checkpoint of another session first: the store-wide id of the hostile
        # session's checkpoint is 2, its number within the session 1
        store.get_session(plain[0]).add_checkpoint(covers_up_to=1, summary="- a question")
        hostile = store.create_session(
            agent="coder", model="simulated/gpt-4o", title=HOSTILE_TITLE, metadata={}
        )
        call = ToolCall(id="call-1", name="read_file", arguments=HOSTILE_ARGS)
        hostile.append(
            [
                Message.user(HOSTILE_TEXT),
                Message.assistant("let me look", tool_calls=[call]),
                Message.tool(HOSTILE_RESULT, tool_call_id="call-1", name="read_file"),
                Message.assistant(SEARCH_TEXT),
            ]
        )
        hostile.add_checkpoint(covers_up_to=2, summary=HOSTILE_SUMMARY)
        hostile.append(Message.user("and after the checkpoint"))
        ids = {"hostile": hostile.id}
        ids.update({f"plain{i}": sid for i, sid in enumerate(plain)})
        return ids
    finally:
        store.close()


@dataclass
class LiveServer:
    base: str
    login_link: str
    ids: dict[str, str]
    proc: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)

    def login_cookie(self) -> str:
        """A browser login through the form (the link is single-use)."""
        r = httpx.post(
            self.base + "/login",
            data={"token": TOKEN, "next": "/"},
            headers={"Origin": self.base},
            timeout=10,
        )
        assert r.status_code == 303, r.text
        return str(r.cookies["threadline_session"])


def start(tmp: Path, seeder: Callable[[Path], dict[str, str]] = seed) -> Iterator[LiveServer]:
    """Seed (``seed``, or another ``seeder`` of the database file), start ``threadline
    serve``, wait for it, yield it, stop it."""
    ids = seeder(tmp / "web.db")
    yield from serve(tmp / "web.db", ids, cwd=tmp)


def serve(
    db: Path, ids: dict[str, str], *, cwd: Path, env: dict[str, str] | None = None
) -> Iterator[LiveServer]:
    """``threadline serve`` on the SQLite file ``db``, run in ``cwd`` (where it finds
    ``./agents``) with ``env`` added to the environment."""
    port = free_port()
    env = {**os.environ, "THREADLINE_CONFIG_DIR": str(cwd / "config"), **(env or {})}
    command = [sys.executable, "-m", "threadline.cli.app", "serve", "--port", str(port)]
    command += ["--store", f"sqlite://{db}", "--token", TOKEN]
    proc = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    output: list[str] = []
    link = None
    stopper = threading.Timer(STARTUP_SECONDS, proc.kill)  # a hung start fails, not hangs
    stopper.start()
    for line in proc.stdout:  # the link, then uvicorn's word that it listens
        output.append(line)
        found = re.search(r"(http://\S+/login\?code=\S+)", line)
        link = found.group(1) if found else link
        if "Uvicorn running on" in line:
            break
    stopper.cancel()
    if link is None or proc.poll() is not None:
        proc.kill()
        raise AssertionError("threadline serve did not start:\n" + "".join(output))
    stdout = proc.stdout

    def drain() -> None:  # uvicorn logs every request; never let the pipe fill
        for line in stdout:
            output.append(line)

    threading.Thread(target=drain, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    server = LiveServer(base, link, ids, proc, output)
    try:
        yield server
    finally:
        stop(proc, 10)
