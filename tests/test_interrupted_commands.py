"""Ctrl-C after part of a command's work was committed: the command says what stays
(the checkpoint written, with its number and id; the sessions imported so far, with
their ids) and exits 130. Each test runs the real CLI in a child process, which tells
the test (through a pipe) when it reached the point to interrupt at, and is sent a
real SIGINT there: no sleeping, no guessing when."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from threadline import Message, open_store

CHILD = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
ready = int(os.environ["READY_FD"])

def pause_here(note: bytes) -> None:
    os.write(ready, note + b"\\n")
    os.close(ready)
    signal.pause()  # the test's SIGINT lands here: KeyboardInterrupt

point = os.environ["PAUSE_AT"]
if point.endswith("-checkpoint"):
    from threadline.store import Session
    real_add = Session.add_checkpoint

    def add_checkpoint(self, *args, **kwargs):
        if point == "before-checkpoint":
            pause_here(b"writing")
        made = real_add(self, *args, **kwargs)
        pause_here(str(made.id).encode())
        return made

    Session.add_checkpoint = add_checkpoint
elif point.startswith("before-source-"):
    from threadline.interop.sync import Syncer
    real_sync = Syncer.sync_source
    calls = []

    def sync_source(self, source):
        calls.append(source)
        if len(calls) == int(point.removeprefix("before-source-")):
            pause_here(source.name.encode())
        return real_sync(self, source)

    Syncer.sync_source = sync_source

from threadline.cli.app import main
sys.argv = ["threadline", *sys.argv[1:]]
main()
"""


def interrupted(args: Sequence[str], pause_at: str, cwd: Path) -> tuple[str, int, str, str]:
    """Run ``threadline ARGS`` until it reaches ``pause_at``, send SIGINT, and return
    what it said it reached, its exit code, stdout and stderr."""
    read, write = os.pipe()
    env = {**os.environ, "READY_FD": str(write), "PAUSE_AT": pause_at, "COLUMNS": "200"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        cwd=cwd,
        env=env,
        pass_fds=(write,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            reached = pipe.readline().decode().strip()  # blocks until the point is reached
        assert reached, f"the child ended before {pause_at}: {child.communicate(timeout=60)}"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return reached, child.returncode, out, err


def long_session(url: str, checkpoint: bool = False) -> str:
    with open_store(url) as store:
        session = store.create_session(agent="default", model="openai/gpt-4o")
        for n in range(30):
            session.append([Message.user(f"step {n}: " + "x " * 50), Message.assistant("ok")])
        if checkpoint:
            session.add_checkpoint(covers_up_to=10, summary="an earlier summary")
        return session.id


def test_compact_interrupted_after_its_checkpoint_says_it_was_written(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 't.db'}"
    sid = long_session(url)
    reached, code, _, err = interrupted(
        ["--store", url, "compact", sid, "--keep-recent", "4"], "after-checkpoint", tmp_path
    )
    assert code == 130, err
    with open_store(url) as store:
        (checkpoint,) = store.list_checkpoints(sid)
    assert reached == str(checkpoint.id)
    assert "error: interrupted" not in err
    assert f"interrupted: checkpoint #1 (id {checkpoint.id}) was written" in err, err
    assert f"up to seq {checkpoint.covers_up_to} of session {sid}" in err


def test_compact_interrupted_before_its_checkpoint_says_none_was_written(tmp_path: Path) -> None:
    """The checkpoint of an earlier compaction is not taken for this one's."""
    url = f"sqlite://{tmp_path / 't.db'}"
    sid = long_session(url, checkpoint=True)
    _, code, _, err = interrupted(
        ["--store", url, "compact", sid, "--keep-recent", "4"], "before-checkpoint", tmp_path
    )
    assert code == 130, err
    with open_store(url) as store:
        assert len(store.list_checkpoints(sid)) == 1
    assert "interrupted: no checkpoint was written; the session is as it was" in err, err


def chat_file(path: Path, n: int) -> Path:
    lines = [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_directory_import_interrupted_lists_the_sessions_it_kept(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    for n in range(5):
        chat_file(folder / f"chat-{n}.jsonl", n)
    url = f"sqlite://{tmp_path / 't.db'}"
    reached, code, out, err = interrupted(
        ["--store", url, "sessions", "import", str(folder)], "before-source-4", tmp_path
    )
    assert code == 130, err
    assert reached.endswith("chat-3.jsonl")  # sources are taken in name order
    with open_store(url) as store:
        kept = {info.id for info in store.list_sessions().items}
    assert len(kept) == 3
    assert set(out.split()) == kept  # every session kept, by id, and only those
    assert "interrupted: after 3 of 5 sources" in err and "3 sessions listed above" in err, err
