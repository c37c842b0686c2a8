"""``threadline sessions sync --watch`` follows a folder while a transcript grows (issue 36).

The watcher runs as a real process; the test waits on its status lines (a deadline is
only a guard against a hang), writes the transcript as an agent would, a line at a
time with one line left half-written for a while, and stops it with Ctrl-C.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import open_store
from threadline.interop.sync import Source, Syncer
from threadline.interop.watch import Follower, agent_folders, unfinished

TRANSCRIPT = TRANSCRIPTS / "claude-code/spotter-tool_heavy.jsonl"
FIRST = 17
"""Lines there at the start: up to a tool result; line 18 is the user's next request."""
NEXT_REPLY = 26
"""The index of line 27, which begins the assistant's next reply (so the one before it,
held while it could grow, is complete)."""
GUARD = 120.0
"""Seconds before a missing status line fails the test (a hang, not a timing)."""
LAUNCH = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('threadline.cli.app', run_name='__main__')"
)
"""``python -m threadline.cli.app``, answering Ctrl-C even when the test runner was started
as a background job, whose children inherit an ignored SIGINT from the shell."""


class Watcher:
    """A ``sessions sync --watch`` process and its stdout, line by line."""

    def __init__(self, url: str, folder: Path, *extra: str) -> None:
        command = [sys.executable, "-c", LAUNCH, "--store", url, "sessions"]
        self.process = subprocess.Popen(
            [*command, "sync", "--watch", str(folder), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, pattern: str) -> re.Match[str]:
        """The next status line matching ``pattern`` (earlier ones are kept in ``seen``)."""
        while True:
            try:
                line = self.lines.get(timeout=GUARD)
            except queue.Empty:
                pytest.fail(f"no line matching {pattern!r} after {self.seen}")
            if line is None:
                pytest.fail(f"the watcher ended before {pattern!r}: {self.seen}")
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found

    def stop(self, signum: int = signal.SIGINT) -> int:
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"the watcher did not stop on signal {signum}: {self.seen}")


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    require_shared(TRANSCRIPT)
    lines = TRANSCRIPT.read_text(encoding="utf-8").splitlines(keepends=True)
    folder = tmp_path / "projects" / "-home-me-app"
    folder.mkdir(parents=True)
    (folder / "session.jsonl").write_text("".join(lines[:FIRST]), encoding="utf-8")
    yield tmp_path / "projects", lines


def test_a_growing_transcript_is_followed(watched: tuple[Path, list[str]], tmp_path: Path) -> None:
    folder, lines = watched
    live = folder / "-home-me-app" / "session.jsonl"
    url = f"sqlite://{tmp_path / 'store.db'}"
    watcher = Watcher(url, folder, "--settle", "600")
    try:
        new = r"new (\S+): \d+ messages from .*session\.jsonl \(its last reply waits"
        sid = watcher.expect(new).group(1)
        watcher.expect(r"^synced: ")

        request = lines[FIRST]
        half = len(request) // 2
        with live.open("a", encoding="utf-8") as agent:
            agent.write(request[:half])  # the agent is mid-line
        watcher.expect(r"waiting: .*session\.jsonl \(its last line is still being written\)")
        with live.open("a", encoding="utf-8") as agent:  # the line, up to the next reply
            agent.write(request[half:] + "".join(lines[FIRST + 1 : NEXT_REPLY + 1]))
        watcher.expect(rf"updated {sid}: \d+ new messages from .*session\.jsonl")

        second = folder / "-home-me-app" / "second.jsonl"
        other = require_shared(TRANSCRIPTS / "claude-code/spotter-subagent-task.jsonl")
        second.write_text(other.read_text(encoding="utf-8"), encoding="utf-8")
        watcher.expect(r"new (\S+): \d+ messages from .*second\.jsonl")
    finally:
        code = watcher.stop()
    assert code == 0, watcher.seen
    watcher.expect(r"^stopped: 1 new, 1 updated, 0 failed; \d+ messages added while watching")

    # a one-off sync stores what the watch still held (last replies); then it is idempotent
    sync_again = [sys.executable, "-m", "threadline.cli.app", "--store", url, "sessions"]
    for _ in range(2):
        again = subprocess.run(
            [*sync_again, "sync", str(folder)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert again.returncode == 0, again.stderr
    assert "new " not in again.stdout and "updated " not in again.stdout
    assert "2 unchanged" in again.stdout

    # what was followed is what one import of the finished file gives: nothing lost or torn
    once = imported_once(live, tmp_path / "once.db")
    assert _shape(url, sid) == _shape(once)
    (part,) = json.loads(request)["message"]["content"]
    assert part["text"] in [text for _, text, _, _ in _shape(url, sid)]


def test_sigterm_stops_watching_as_ctrl_c_does(tmp_path: Path) -> None:
    """A watcher run as a service (or a background job, which ignores Ctrl-C) is stopped
    with SIGTERM: it ends with its summary and exit 0, not killed mid-import."""
    folder = tmp_path / "agents"
    folder.mkdir()
    watcher = Watcher(f"sqlite://{tmp_path / 'store.db'}", folder)
    watcher.expect(r"^synced: no sessions yet")
    assert watcher.stop(signal.SIGTERM) == 0, watcher.seen
    watcher.expect(r"^stopped: 0 new, 0 updated, 0 failed; 0 messages added while watching")


def test_an_unfinished_line_settles(watched: tuple[Path, list[str]], tmp_path: Path) -> None:
    """A file still for ``settle`` seconds is imported as it stands; its last line, when
    finished, arrives with the next change. The clock is the follower's own."""
    folder, lines = watched
    live = folder / "-home-me-app" / "session.jsonl"
    now = [0.0]
    store = open_store(f"sqlite://{tmp_path / 'store.db'}")
    try:
        follower = Follower(Syncer(store), [folder], settle=5.0, clock=lambda: now[0])
        (created,) = follower.catch_up(hold=False)
        sid = created.results[0].session_id
        assert sid is not None
        count = store.session_info(sid).message_count
        request = lines[FIRST]
        with live.open("a", encoding="utf-8") as agent:
            agent.write(request[:10])
        assert unfinished(live)
        (waiting,) = follower.changed([live])
        assert waiting.waiting and not waiting.results
        assert [c.changed for c in follower.changed([live])] == [False]  # said once
        now[0] = 4.9
        assert follower.due() == []
        now[0] = 10.0
        (settled,) = follower.due()
        assert settled.results[0].session_id == sid
        assert store.session_info(sid).message_count == count  # the torn line is not a message
        with live.open("a", encoding="utf-8") as agent:
            agent.write(request[10:])
        (finished,) = follower.changed([live])  # the reply it follows is stored: not held
        assert finished.results[0].messages_added == 1 and not finished.results[0].held
        assert store.session_info(sid).message_count == count + 1
        now[0] = 20.0
        assert follower.due() == []
    finally:
        store.close()


def test_changes_map_to_sources(tmp_path: Path) -> None:
    """Only candidate files count; a file that is no conversation is skipped quietly."""
    store = open_store(f"sqlite://{tmp_path / 'store.db'}")
    try:
        (tmp_path / "notes.txt").write_text("hello\n")
        (tmp_path / "config.json").write_text('{"theme": "dark"}')
        follower = Follower(Syncer(store), [tmp_path])
        assert follower.changed([tmp_path / "notes.txt", tmp_path / "gone.jsonl"]) == []
        (config,) = follower.changed([tmp_path / "config.json"])
        assert not config.changed and config.source == Source(tmp_path / "config.json", True)
    finally:
        store.close()


def test_default_folders_are_the_agents_that_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert agent_folders() == []
    (tmp_path / ".codex" / "sessions").mkdir(parents=True)
    (tmp_path / ".claude" / "projects").mkdir(parents=True)
    assert agent_folders() == [
        ("Claude Code", tmp_path / ".claude" / "projects"),
        ("Codex", tmp_path / ".codex" / "sessions"),
    ]
    command = [sys.executable, "-m", "threadline.cli.app", "--store"]
    url = f"sqlite://{tmp_path / 'store.db'}"
    done = subprocess.run(
        [*command, url, "sessions", "sync"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, HOME=str(tmp_path)),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"syncing {tmp_path / '.claude' / 'projects'} (Claude Code)",
        f"syncing {tmp_path / '.codex' / 'sessions'} (Codex)",
    ]


def imported_once(path: Path, db: Path) -> str:
    """A store holding one plain import of ``path`` (what following must end as)."""
    url = f"sqlite://{db}"
    store = open_store(url)
    try:
        Syncer(store).sync_source(Source(path))
    finally:
        store.close()
    return url


def _shape(store_url: str, sid: str | None = None) -> list[tuple[object, ...]]:
    store = open_store(store_url)
    try:
        if sid is None:
            (info,) = store.list_sessions().items
            sid = info.id
        return [
            (m.role, m.text, [c.model_dump(mode="json") for c in m.tool_calls], m.tool_call_id)
            for m in store.get_session(sid).messages()
        ]
    finally:
        store.close()


@pytest.mark.parametrize(
    "name", ["claude-code/spotter-tool_heavy.jsonl", "claude-code/spotter-subagent-task.jsonl"]
)
def test_followed_line_by_line_is_imported_whole(name: str, tmp_path: Path) -> None:
    """A transcript synced after every line it gains, as the watch does, ends as a
    one-off import of the finished file does: a reply whose blocks arrive as separate
    lines (text, then tool calls) is held until it is complete, not stored half."""
    lines = require_shared(TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines(True)
    folder = tmp_path / "projects"
    folder.mkdir()
    live = folder / "session.jsonl"
    live.write_text("", encoding="utf-8")
    now = [0.0]
    followed = f"sqlite://{tmp_path / 'followed.db'}"
    store = open_store(followed)
    try:
        follower = Follower(Syncer(store), [folder], settle=5.0, clock=lambda: now[0])
        for line in lines:
            with live.open("a", encoding="utf-8") as agent:
                agent.write(line)
            follower.changed([live])
        now[0] = 60.0
        follower.due()
    finally:
        store.close()
    once = imported_once(live, tmp_path / "once.db")
    assert _shape(followed) == _shape(once)


def test_bad_folders_are_refused_before_anything_is_imported(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    command = [sys.executable, "-m", "threadline.cli.app", "--store", url, "sessions", "sync"]
    (tmp_path / "real").mkdir()
    missing = str(tmp_path / "missing")
    cases = {
        f"not a directory: {missing}": [str(tmp_path / "real"), missing],
        "no agent session folders here": [],
    }
    for message, args in cases.items():
        done = subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, HOME=str(tmp_path / "home")),
            check=False,
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "store.db").exists()
