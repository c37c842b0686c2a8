"""The SQLite database files this process holds connections to, and the one way to read
a database file's bytes without breaking those connections' locks.

POSIX advisory locks belong to a process and a file, not to a descriptor: closing *any*
descriptor on a database file drops every lock the process holds on it (SQLite's "How To
Corrupt An SQLite Database File", section 2.2). SQLite's own connections share one
descriptor table per file and close nothing while a lock is held, so they are safe with
each other; a plain ``open()`` and ``close()`` is not. With its locks gone, a connection
in this process reads while another process checkpoints and resets the write-ahead log
under it: SQLite then reports "database disk image is malformed" for a file that is
whole, and a write through such a connection can damage it for real.

So every connection threadline keeps is registered here (``hold``) before it opens, and a
plain read of a database file (the header check of a fresh open, a format sniff) goes
through ``read_unheld``, which reads only while no registered connection holds the file,
under the same lock that registration takes: nothing can open between the check and the
close. A file that is held is known to be SQLite's; its damage is classified from the
engine's own errors instead. Connections opened by code outside threadline are not seen.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
"""Files SQLite keeps beside a database; a descriptor on them drops locks too."""

_lock = threading.RLock()
_held: Counter[str] = Counter()
"""Resolved path of each held database file -> how many connections hold it."""


def _key(path: Path) -> str:
    return os.path.realpath(path)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # a stat opens no descriptor
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _database_of(path: Path) -> str:
    """The database a path belongs to: itself, or the file a companion sits beside."""
    key = _key(path)
    for suffix in COMPANION_SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key


def is_held(path: Path) -> bool:
    """Whether a connection of this process holds ``path``'s database (the path itself,
    or the database a ``-wal`` / ``-shm`` / ``-journal`` file belongs to), by name or, for
    another name of the same file (a hard link), by identity."""
    with _lock:
        if not _held:
            return False
        key = _database_of(path)
        if key in _held:
            return True
        ident = _identity(key)
        return ident is not None and any(_identity(k) == ident for k in _held)


class Hold:
    """One connection's claim on a database file; ``release`` when it closes (also run
    when the owner is collected without closing)."""

    def __init__(self, owner: object, path: Path) -> None:
        self.key = _key(path)
        with _lock:
            _held[self.key] += 1
        self._finalizer = weakref.finalize(owner, _release, self.key)

    def release(self) -> None:
        self._finalizer()


def _release(key: str) -> None:
    with _lock:
        _held[key] -= 1
        if _held[key] <= 0:
            del _held[key]


def hold(owner: object, path: Path, check: Callable[[Path], T]) -> tuple[Hold, T | None]:
    """Register a connection ``owner`` is about to open on ``path``; first run ``check``
    (which may read the file with a plain descriptor) if, and only if, nothing in this
    process holds the file yet. Returns the hold and the check's result (``None`` when it
    did not run: the file is open here already, so it was SQLite's when that opened)."""
    with _lock:
        result = None if is_held(path) else check(path)
        return Hold(owner, path), result


def read_unheld(path: Path, read: Callable[[Path], T]) -> T | None:
    """``read(path)`` with a plain descriptor, unless a connection of this process holds
    the file (then ``None``, and nothing is opened)."""
    with _lock:
        if is_held(path):
            return None
        return read(path)
