"""Memory for the JSONL store: one append-only file in the store's directory.

``<root>/memory/records.jsonl`` holds one line per write transaction
(``{"rows": [...]}``): a line is complete or it is not there, so a crash mid-write
loses only the unacknowledged transaction, and the torn tail is cut before the
next write. A write the disk cannot hold whole (``ENOSPC``: ``os.write`` stores what
fits) is cut back to the last whole line and raises ``StoreUnavailable``.
Each write holds ``records.lock`` (a file lock, as the store's sessions do) and is
fsynced before it returns. Readers load the file into the in-process records once
and then read only what other processes appended.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import filelock

from threadline.errors import StoreUnavailable
from threadline.memory.inmemory import DictRecords
from threadline.memory.records import ANYWHERE, Row, Where
from threadline.store.checks import CorruptRecordWarning
from threadline.store.jsonl_file import fsync_dir

DIRECTORY = "memory"
FILENAME = "records.jsonl"
LOCK_NAME = "records.lock"
LOCK_TIMEOUT_SECONDS = 60.0


def _row(data: dict[str, Any]) -> Row:
    return Row(
        str(data["kind"]),
        str(data["id"]),
        str(data["scope"]),
        str(data["key"]),
        str(data["key2"]),
        dict(data["body"]),
        str(data.get("text", "")),
    )


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``: ``os.write`` may write part of it (a disk filling up
    writes what fits, then the next call fails with ``ENOSPC``)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # not seen from regular files; never loop on it
            raise OSError(errno.EIO, "the write stored nothing")
        view = view[written:]


class JSONLRecords:
    """``Records`` in an append-only JSONL file, served from an in-process copy."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.dir = root / DIRECTORY
        self.path = self.dir / FILENAME
        self.read_only = read_only
        self._mem = DictRecords()
        self._offset = 0
        self._mutex = threading.RLock()
        self._batch: list[Row] | None = None
        self._lock = filelock.FileLock(str(self.dir / LOCK_NAME))

    # -- the file ------------------------------------------------------------------

    def _catch_up(self) -> None:
        """Load the complete lines appended since the last read (by anyone)."""
        with self._mutex:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                return
            if size < self._offset:  # replaced underneath us: read it again whole
                self._mem, self._offset = DictRecords(), 0
            if size == self._offset:
                return
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(size - self._offset)
            end = data.rfind(b"\n") + 1
            for number, line in enumerate(data[:end].splitlines()):
                if not line.strip():
                    continue
                try:
                    rows = [_row(r) for r in json.loads(line)["rows"]]
                except (ValueError, KeyError, TypeError) as exc:
                    warnings.warn(
                        f"{self.path}: skipped an unreadable memory record "
                        f"(line {number + 1} after byte {self._offset}): {exc}",
                        CorruptRecordWarning,
                        stacklevel=2,
                    )
                    continue
                for row in rows:
                    self._mem.load(row)
            self._offset += end

    def _append(self, rows: Sequence[Row]) -> None:
        line = json.dumps(
            {
                "rows": [
                    {
                        "kind": r.kind,
                        "id": r.id,
                        "scope": r.scope,
                        "key": r.key,
                        "key2": r.key2,
                        "body": r.body,
                        "text": r.text,
                    }
                    for r in rows
                ]
            },
            ensure_ascii=False,
        ).encode("utf-8")
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size > self._offset:  # a torn tail left by a crashed writer: cut it
                os.ftruncate(fd, self._offset)
            try:
                write_all(fd, line + b"\n")
                os.fsync(fd)
            except OSError:
                # a full disk (or a failed fsync) leaves part of the line: cut it, so the
                # file ends with the last whole line and this write is not acknowledged
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, self._offset)
                raise
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.dir)
        self._offset += len(line) + 1

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self.read_only:
            raise StoreUnavailable(
                f"store {self.dir.parent} is read-only: memory cannot be written"
            )
        with self._mutex:
            if self._batch is not None:
                yield
                return
            try:
                self.dir.mkdir(exist_ok=True)
                self._lock.acquire(timeout=LOCK_TIMEOUT_SECONDS)
            except (OSError, filelock.Timeout) as exc:
                raise StoreUnavailable(f"memory in {self.dir}: {exc}") from exc
            try:
                self._catch_up()
                self._batch = []
                with self._mem.transaction():
                    yield
                    if self._batch:
                        try:
                            self._append(self._batch)
                        except OSError as exc:
                            raise StoreUnavailable(
                                f"memory in {self.dir}: {exc.strerror or exc}; "
                                "nothing of this write was stored"
                            ) from exc
            finally:
                self._batch = None
                self._lock.release()

    # -- records -------------------------------------------------------------------

    def put(self, rows: Sequence[Row]) -> None:
        if not rows:
            return
        with self.transaction():
            self._mem.put(rows)
            assert self._batch is not None
            self._batch += rows

    def get(self, kind: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        self._catch_up()
        return self._mem.get(kind, ids)

    def find(self, kind: str, where: Where = ANYWHERE) -> list[dict[str, Any]]:
        self._catch_up()
        return self._mem.find(kind, where)

    def lexical(
        self, words: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        self._catch_up()
        return self._mem.lexical(words, scopes, limit)

    def close(self) -> None:
        """No file stays open between calls."""
