"""A source is imported all or nothing, whenever the import is killed.

A process killed between two store writes (each write is atomic, so that is every
instant that matters) is reproduced exactly: the import runs in a child process
that ends itself with ``os._exit`` (no cleanup runs, as under ``kill -9``) just
before its n-th write, for every n. After each, every source's session either
holds everything its import markers count, or has no markers (an import cut
short); the next import completes it, and a session never reads as ``unchanged``
while it lacks what it was imported with. ``bench/stress_kill.py --import-kills``
does the same with real SIGKILLs at random instants over the whole shared
transcripts directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import open_store
from threadline.interop.sync import LAST_WRITTEN, Syncer, SyncStatus, find_sources
from threadline.store.fork import all_sessions

SOURCES = [
    "claude-code/codemie-session-624a4a58-compacted.jsonl",  # one native compaction
    "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl",  # one too
    "claude-code/spotter-tool_heavy.jsonl",
]
CRASHING_IMPORT = """
import os, sys
from threadline import open_store
from threadline.interop.sync import Syncer, find_sources
url, folder, crash_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(url)
writes = 0
for name in ("create_session", "append_messages", "add_checkpoint", "update_session",
             "rename_session", "delete_session"):
    real = getattr(store, name)
    def counted(*args, _real=real, **kwargs):
        global writes
        writes += 1
        if writes == crash_at:
            os._exit(137)  # killed between two writes: nothing after this runs
        return _real(*args, **kwargs)
    setattr(store, name, counted)
Syncer(store).sync(find_sources([folder]))
print(writes)
"""


def crash_after(url: str, folder: Path, writes: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CRASHING_IMPORT, url, str(folder), str(writes + 1)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def state(url: str) -> dict[str, tuple[bool, int, int]]:
    """Per source id: (markers written, messages stored, checkpoints stored)."""
    store = open_store(url)
    try:
        out = {}
        for info in all_sessions(store):
            key = info.metadata["source_id"]
            assert key not in out, f"two sessions for {key}"
            marked = all(k in info.metadata for k in LAST_WRITTEN)
            out[key] = (marked, info.last_seq, len(store.list_checkpoints(info.id)))
            if marked:  # what the markers count is there (and, mid-update, more)
                assert info.metadata["source_messages"] <= info.last_seq, key
                assert info.metadata["source_checkpoints"] <= out[key][2], key
        return out
    finally:
        store.close()


def complete(url: str, folder: Path) -> dict[str, tuple[bool, int, int]]:
    store = open_store(url)
    try:
        report = Syncer(store).sync(find_sources([str(folder)]))
    finally:
        store.close()
    assert not report.failures, [r.error for r in report.failures]
    return state(url)


def copy_sources(folder: Path, *, halves: bool = False) -> None:
    """The sources (only the first half of each file's lines with ``halves``)."""
    folder.mkdir(exist_ok=True)
    for name in SOURCES:
        target = folder / name.replace("/", "-")
        if halves:
            lines = (TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines(keepends=True)
            target.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
        else:
            shutil.copyfile(TRANSCRIPTS / name, target)


@pytest.mark.parametrize("phase", ["first import", "grown sources"])
def test_a_killed_import_leaves_each_source_complete_or_unmarked(
    tmp_path: Path, phase: str
) -> None:
    require_shared(TRANSCRIPTS)
    folder = tmp_path / "sources"
    copy_sources(folder)
    reference = complete(f"sqlite://{tmp_path / 'reference.db'}", folder)
    assert sum(cp for _, _, cp in reference.values()) >= 2  # checkpoints are in play
    crash_at, finished = 0, False
    while not finished:
        url = f"sqlite://{tmp_path / f'crash-{crash_at}.db'}"
        if phase == "grown sources":
            copy_sources(folder, halves=True)
            complete(url, folder)
            copy_sources(folder)
        run = crash_after(url, folder, crash_at)
        finished = run.returncode == 0
        assert finished or run.returncode == 137, run.stderr
        for key, (marked, stored, checkpoints) in state(url).items():
            if marked and phase == "first import":
                assert (stored, checkpoints) == reference[key][1:], key
        assert complete(url, folder) == reference, f"after a kill before write {crash_at + 1}"
        crash_at += 1
    assert crash_at > 2 * len(SOURCES), "the import made fewer writes than it has sources"


def test_a_session_that_lacks_what_its_markers_count_is_repaired(tmp_path: Path) -> None:
    """Left by an import that wrote its markers first and was killed (0 of 205 messages;
    a lost compaction checkpoint): it was `unchanged` for good, now it is completed."""
    require_shared(TRANSCRIPTS)
    folder = tmp_path / "sources"
    copy_sources(folder)
    url = f"sqlite://{tmp_path / 'store.db'}"
    reference = complete(f"sqlite://{tmp_path / 'reference.db'}", folder)
    store = open_store(url)
    Syncer(store).sync(find_sources([str(folder)]))
    damaged = {}
    for info in all_sessions(store):
        copy = store.create_session(
            agent=info.agent, model=info.model, title=info.title, metadata=info.metadata
        )
        if info.metadata["source_checkpoints"]:  # the messages, not the checkpoint
            kept = [m.model_copy(update={"seq": None}) for m in store.read_messages(info.id)]
            copy.append(kept)
        store.delete_session(info.id)
        damaged[info.metadata["source_id"]] = copy.id
    store.close()
    store = open_store(url)
    report = Syncer(store).sync(find_sources([str(folder)]))
    store.close()
    assert {r.status for r in report.results} == {SyncStatus.UPDATED}
    assert {r.session_id for r in report.results} == set(damaged.values())
    assert state(url) == reference
    again = open_store(url)
    rerun = Syncer(again).sync(find_sources([str(folder)]))
    again.close()
    assert {r.status for r in rerun.results} == {SyncStatus.UNCHANGED}


def test_the_cli_reports_a_repair(tmp_path: Path) -> None:
    """The report of the import that completes a cut-short session says so (updated)."""
    require_shared(TRANSCRIPTS)
    folder = tmp_path / "sources"
    copy_sources(folder)
    url = f"sqlite://{tmp_path / 'store.db'}"
    run = crash_after(url, folder, 1)  # the first session created, nothing in it
    assert run.returncode == 137
    cli = [sys.executable, "-c", "from threadline.cli.app import main; main()"]
    done = subprocess.run(
        [*cli, "--store", url, "sessions", "import", str(folder), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)["counts"]
    assert counts["updated"] == 1 and counts["new"] == len(SOURCES) - 1
