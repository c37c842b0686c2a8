"""A full disk never acknowledges a memory write it did not store, on every memory backend.

Each backend that keeps memory on a disk (SQLite and JSONL in the store's file or
directory, PostgreSQL in its tables) is filled on a real 2 MiB tmpfs until a write
fails: that write must raise ``StoreUnavailable``, and every fact acknowledged before
it must be read back by a fresh handle once there is room again. (``memory://`` holds
nothing on disk; Redis has no memory backend, ``NotSupported``.) Mounting needs root:
elsewhere these skip with the reason, and under ``CI=true`` they fail instead. The
JSONL store is also run against a disk filled at the ``os.write`` level, which runs
anywhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES_URL, require, require_postgres
from threadline import open_store
from threadline.errors import StoreUnavailable
from threadline.memory import open_memory
from threadline.memory.core import Memory
from threadline.memory.jsonl import DIRECTORY, FILENAME

SCOPE = "agent:full"
DISK_SIZE = "2m"
ROOMY_SIZE = "64m"
MAX_FACTS = 2_000
"""Half as much again as 2 MiB holds (1,288 on JSONL): a disk that never fills fails the
test instead of looping on."""
PADDING = 300
"""Characters of each statement beyond its number (several facts per 4 KiB page)."""


def fill(memory: Memory) -> tuple[list[str], StoreUnavailable]:
    """Write facts until a write fails; the ids acknowledged and the failure."""
    acknowledged: list[str] = []
    for i in range(MAX_FACTS):
        try:
            fact = memory.write_fact(
                SCOPE, f"Person {i} keeps note {i}: " + "x" * PADDING, subject=f"Person {i}"
            )
        except StoreUnavailable as exc:
            return acknowledged, exc
        acknowledged.append(fact.id)
    pytest.fail(f"{MAX_FACTS} facts were acknowledged on a {DISK_SIZE} disk")


def readable(url: str) -> set[str]:
    """The facts a fresh store handle reads back."""
    store = open_store(url)
    memory = open_memory(store)
    try:
        return {f.id for f in memory.list_facts(SCOPE)}
    finally:
        memory.close()
        store.close()


def _mount(directory: Path, options: str) -> subprocess.CompletedProcess[str]:
    command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


@contextlib.contextmanager
def small_disk() -> Iterator[Path]:
    """A fresh directory on a tmpfs of ``DISK_SIZE``, unmounted afterwards. Outside the
    pytest temporary tree (which only root may enter), so a PostgreSQL server running as
    its own user can keep a tablespace there."""
    require(
        os.geteuid() == 0 and shutil.which("mount") is not None,
        "mounting a small tmpfs needs root and mount(8)",
    )
    directory = Path(tempfile.mkdtemp(prefix="threadline-full-disk-"))
    mounted = _mount(directory, f"size={DISK_SIZE},mode=0755")
    try:
        require(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.strip()}")
        yield directory
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)
        directory.rmdir()


def make_room(directory: Path) -> None:
    """Grow the tmpfs: the disk is no longer full, and nothing on it changed."""
    grown = _mount(directory, f"remount,size={ROOMY_SIZE}")
    assert grown.returncode == 0, grown.stderr


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
def test_a_full_disk_fails_the_write_and_keeps_every_acknowledged_fact(backend: str) -> None:
    with small_disk() as disk:
        url = f"sqlite://{disk / 'store.db'}" if backend == "sqlite" else f"jsonl://{disk / 'j'}"
        store = open_store(url)
        memory = open_memory(store)
        acknowledged, failure = fill(memory)
        assert acknowledged, "not one fact fitted"
        assert "space" in str(failure) or "full" in str(failure), failure
        memory.close()
        store.close()
        make_room(disk)
        stored = readable(url)
        assert set(acknowledged) <= stored, (
            f"{len(set(acknowledged) - stored)} of {len(acknowledged)} acknowledged facts lost"
        )
        if backend == "jsonl":
            assert (disk / "j" / DIRECTORY / FILENAME).read_bytes().endswith(b"\n")
        again = open_memory(open_store(url))  # and the store takes writes again
        later = again.write_fact(SCOPE, "Ana lives in Lisbon", subject="Ana")
        again.close()
        assert later.id in readable(url)


@contextlib.contextmanager
def postgres_tablespace(disk: Path) -> Iterator[str]:
    """A tablespace on ``disk`` (the server runs on this machine, as user postgres)."""
    import psycopg
    from psycopg import sql

    owner = pwd.getpwnam("postgres")
    os.chown(disk, owner.pw_uid, owner.pw_gid)
    name = "threadline_full_" + uuid.uuid4().hex[:10]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        try:
            conn.execute(
                sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                    sql.Identifier(name), sql.Literal(str(disk))
                )
            )
        except psycopg.Error as exc:
            require(False, f"PostgreSQL cannot keep a tablespace on {disk}: {exc}")
        try:
            yield name
        finally:
            conn.execute(sql.SQL("DROP TABLESPACE IF EXISTS {}").format(sql.Identifier(name)))


def test_a_full_disk_under_postgresql_fails_the_write_and_keeps_every_acknowledged_fact() -> None:
    """The server's disk fills (the memory tables live in a tablespace on the small
    tmpfs): PostgreSQL refuses to extend the table, the write raises, and what was
    acknowledged before is all there."""
    import psycopg
    from psycopg import sql

    require_postgres()
    schema = "tfull" + uuid.uuid4().hex[:12]
    url = f"{POSTGRES_URL}?schema={schema}"
    with small_disk() as disk, postgres_tablespace(disk) as space:
        try:
            store = open_store(url)
            memory = open_memory(store)  # creates the memory tables, then they move
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
                conn.execute(
                    sql.SQL("ALTER TABLE memory_records SET TABLESPACE {}").format(
                        sql.Identifier(space)
                    )
                )
                indexes = conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = %s "
                    "AND tablename = 'memory_records'",
                    (schema,),
                ).fetchall()
                for (index,) in indexes:
                    conn.execute(
                        sql.SQL("ALTER INDEX {} SET TABLESPACE {}").format(
                            sql.Identifier(index), sql.Identifier(space)
                        )
                    )
            acknowledged, failure = fill(memory)
            assert acknowledged, "not one fact fitted"
            assert "space left on device" in str(failure), failure
            memory.close()
            store.close()
            make_room(disk)
            stored = readable(url)
            assert set(acknowledged) <= stored
        finally:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


class FullDisk:
    """``os.write`` as a disk of ``capacity`` bytes holding only the memory file: a write
    stores what fits (a short write) and the next one fails with ``ENOSPC``."""

    def __init__(self, path: Path, capacity: int, write: Callable[[int, Any], int]) -> None:
        self.path, self.capacity, self._write = path, capacity, write

    def __call__(self, fd: int, data: Any) -> int:
        st = os.fstat(fd)
        try:
            ours = os.path.samestat(st, os.stat(self.path))
        except FileNotFoundError:
            ours = False
        if not ours:
            return self._write(fd, data)
        room = self.capacity - st.st_size
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._write(fd, bytes(data)[:room])


def test_jsonl_memory_on_a_disk_filled_at_the_write_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs anywhere: the short write a filling disk makes is completed or cut back, never
    acknowledged half-written (it was: 1,984 facts acknowledged, 1,524 readable)."""
    url = f"jsonl://{tmp_path / 'j'}"
    memory = open_memory(open_store(url))
    memory.write_fact(SCOPE, "Ana lives in Lisbon", subject="Ana")  # the file exists now
    path = tmp_path / "j" / DIRECTORY / FILENAME
    disk = FullDisk(path, path.stat().st_size + 200_000, os.write)
    monkeypatch.setattr(os, "write", disk)
    acknowledged, failure = fill(memory)
    assert "No space left on device" in str(failure)
    assert "nothing of this write was stored" in str(failure)
    monkeypatch.undo()
    assert path.read_bytes().endswith(b"\n")
    assert set(acknowledged) <= readable(url)
    assert set(acknowledged) <= {f.id for f in memory.list_facts(SCOPE)}  # the same handle
