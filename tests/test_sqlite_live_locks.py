"""Nothing touches a live database file but SQLite (DESIGN invariant 10).

Closing any descriptor on a database file drops every POSIX lock the process holds on
it. These tests watch the locks themselves (from another process, with ``F_GETLK``)
and run the shape that broke before: a long-lived process that opens the store again
and again, keeping its handles, while CLI imports and compactions run beside it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.cli_server import CliServer
from tests.conftest import TRANSCRIPTS, require_shared
from threadline import Message, open_store
from threadline.interop import databases, importers
from threadline.store import sqlite_files
from threadline.store.sqlite import SQLiteStore

SHARED_LOCK_RANGE = (0x40000002, 510)
"""SQLite's shared-lock bytes in a database file: a WAL connection keeps a read lock
there for as long as it is open (that is how the last one to close knows it is last)."""

PROBE = r"""
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
lk = struct.pack("hhqqi", fcntl.F_WRLCK, 0, int(sys.argv[2]), int(sys.argv[3]), 0)
kind, _, _, _, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, lk))
print(pid if kind != fcntl.F_UNLCK else 0)
"""


def lock_holder_pid(path: Path) -> int:
    """The pid holding a lock on the file's shared-lock bytes, asked from another process
    (asking from this one would need a descriptor here: the very thing under test)."""
    start, length = SHARED_LOCK_RANGE
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), str(start), str(length)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def held_store(path: Path) -> SQLiteStore:
    store = SQLiteStore(path)
    store.create_session()
    store.list_sessions()
    assert lock_holder_pid(path) == os.getpid(), "an open WAL connection holds a read lock"
    return store


def test_opening_the_store_again_keeps_the_first_handles_locks(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    first = held_store(path)
    second = SQLiteStore(path)  # its header check would open and close a descriptor
    assert lock_holder_pid(path) == os.getpid()
    second.close()
    assert lock_holder_pid(path) == os.getpid()
    first.close()
    assert lock_holder_pid(path) == 0
    assert not sqlite_files.is_held(path)


def test_memory_tables_and_a_closed_handle_keep_the_others_locks(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = held_store(path)
    memory = open_store(f"sqlite://{path}")  # a third connection, opened and closed
    memory.close()
    assert lock_holder_pid(path) == os.getpid()
    assert sqlite_files.is_held(path)
    store.close()


def test_a_fresh_file_is_still_checked_before_sqlite_opens_it(tmp_path: Path) -> None:
    from threadline.errors import NotAThreadlineStore, StoreDamaged

    foreign = tmp_path / "notes.db"
    foreign.write_bytes(b"not a database at all, " * 200)
    with pytest.raises(NotAThreadlineStore):
        SQLiteStore(foreign)
    cut = tmp_path / "cut.db"
    SQLiteStore(cut).close()
    cut.write_bytes(cut.read_bytes()[:1000])
    with pytest.raises(StoreDamaged, match="cut short"):
        SQLiteStore(cut)
    assert not sqlite_files.is_held(foreign) and not sqlite_files.is_held(cut)


def test_import_sniffing_a_held_database_opens_no_descriptor(tmp_path: Path) -> None:
    """A directory import can meet the store's own file and its -wal beside the
    transcripts: it must not peek at them with a plain descriptor."""
    path = tmp_path / "s.db"
    store = held_store(path)
    wal = path.with_name(path.name + "-wal")
    assert wal.exists()
    assert databases.is_database(path)  # SQLite's, known without a peek
    with pytest.raises(Exception, match="SQLite file this process has open"):
        importers.detect_format(wal)
    assert lock_holder_pid(path) == os.getpid()
    store.close()
    assert not databases.is_database(tmp_path / "missing.db")


def _round_source(template: str, tmp_path: Path, round_no: int) -> Path:
    """A real transcript under a new session id: a new source for the importer."""
    source = tmp_path / f"round-{round_no}.jsonl"
    [old_id] = {json.loads(line).get("sessionId") for line in template.splitlines()} - {None}
    source.write_text(template.replace(old_id, str(uuid.uuid4())), encoding="utf-8")
    return source


@pytest.mark.slow
def test_cli_writers_beside_a_long_lived_process_never_see_damage(tmp_path: Path) -> None:
    """The reproduction of issue 20: 50 rounds of {CLI import of a real transcript, CLI
    compact, open_store + read + append in this process, handles kept}. Each CLI run is a
    process of its own, forked from a server that imported the CLI once (``cli_server``):
    its descriptors, locks and connections are its own, as from a shell."""
    transcript = require_shared(TRANSCRIPTS / "claude-code" / "spotter-tool_heavy.jsonl")
    template = transcript.read_text(encoding="utf-8")
    url = f"sqlite://{tmp_path / 'store.db'}"
    env = dict(os.environ, THREADLINE_STORE=url)
    cli = CliServer("sessions", "compact", env=env)
    handles = [open_store(url)]
    ours = handles[0].create_session(agent="long-lived")
    imported: dict[str, int] = {}
    appended = 0
    with cli:
        for round_no in range(50):
            source = _round_source(template, tmp_path, round_no)
            done = cli.run(["sessions", "import", str(source), "--json"], env)
            assert done.returncode == 0, done.stderr
            [result] = json.loads(done.stdout)["sources"]
            assert result["status"] == "new", result
            imported[result["session_id"]] = result["messages_added"]
            # a one-turn tail: a history that fits is not compacted
            compacted = cli.run(["compact", result["session_id"], "--keep-turns", "1"], env)
            assert compacted.returncode == 0, compacted.stderr
            handle = open_store(url)  # never StoreDamaged
            handles.append(handle)
            stored = handle.session_info(result["session_id"]).message_count
            assert stored == result["messages_added"]
            handles[round_no % len(handles)].get_session(ours.id).append(
                [Message.user(f"round {round_no}")]
            )
            appended += 1
    for handle in handles:
        handle.close()
    with open_store(url) as store:
        for session_id, count in imported.items():
            assert store.session_info(session_id).message_count == count
            assert store.latest_checkpoint(session_id) is not None
        texts = [m.text for m in store.get_session(ours.id).messages()]
        assert texts == [f"round {i}" for i in range(appended)]
    con = sqlite3.connect(tmp_path / "store.db")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
