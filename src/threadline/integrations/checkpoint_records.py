"""The names a LangGraph thread's records have in its session's scratchpad
(checkpoints, channel values, pending writes, branch forks: see
``integrations/langgraph.py``), and how they are read back: kept apart from the
saver so that its module holds what LangGraph asks of it."""

from __future__ import annotations

import binascii
import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from threadline import json_scan
from threadline.store import Store
from threadline.store.session_info import ScratchpadEntry

PREFIX = "lg/"
PLAIN_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""A namespace, channel, task or version kept as it is in a scratchpad name."""


@functools.lru_cache(maxsize=4096)
def part(text: str) -> str:
    """One segment of a scratchpad name: ``=name`` when plain, else ``~`` and a hash
    (remembered: a thread's reads name the same channels and versions again)."""
    if PLAIN_NAME.fullmatch(text):
        return "=" + text
    return "~" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@functools.lru_cache(maxsize=4096, typed=True)
def version_part(version: Any) -> str:
    return part(json.dumps(version))


def typed(data: tuple[str, bytes]) -> list[str]:
    """A serde's ``(type, bytes)`` as JSON holds it (``base64.b64encode``'s text)."""
    return [data[0], binascii.b2a_base64(data[1], newline=False).decode("ascii")]


def untyped(data: list[str]) -> tuple[str, bytes]:
    """``typed`` undone (as ``base64.b64decode`` reads it, without its wrapping)."""
    return data[0], binascii.a2b_base64(data[1])


class ThreadPad:
    """What a thread's scratchpad holds: all of it, read in one call (``whole``), or
    one namespace's checkpoint records (``namespace``)."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store, self.session_id = store, session_id
        self.checkpoints: dict[str, dict[str, dict[str, Any]]] = {}
        """namespace -> checkpoint id -> record"""
        self.blobs: dict[str, str] | None = None
        """blob name -> its stored JSON, decoded only when read (None: not read yet)"""
        self.writes: dict[tuple[str, str], list[dict[str, Any]]] | None = None
        """(namespace, checkpoint id) -> write records (None: not read yet)"""
        self.names: dict[str, str] = {}
        """scratchpad name -> its raw content, of what was read (what a copy writes)"""
        self.branches: list[str] = []
        """the forks the thread's later branches live in (read by ``whole``)"""

    @classmethod
    def whole(cls, store: Store, session_id: str) -> ThreadPad:
        thread = cls(store, session_id)
        thread.blobs, thread.writes = {}, {}
        thread._take(store.scratchpad_list(session_id, prefix=PREFIX))
        return thread

    @classmethod
    def namespace(cls, store: Store, session_id: str, ns: str) -> ThreadPad:
        thread = cls(store, session_id)
        thread._take(store.scratchpad_list(session_id, prefix=f"{PREFIX}c/{part(ns)}/"))
        return thread

    def _take(self, entries: Iterable[ScratchpadEntry]) -> None:
        for entry in entries:
            name = entry.name
            self.names[name] = entry.content
            kind = name[len(PREFIX) : len(PREFIX) + 1]
            if kind == "b" and self.blobs is not None:
                self.blobs[name] = entry.content
                continue
            record = record_of(entry.content)
            if record is None:
                continue  # not ours to judge: skip what does not decode
            if kind == "c":
                self.checkpoints.setdefault(record["ns"], {})[record["id"]] = record
            elif kind == "w" and self.writes is not None:
                self.writes.setdefault((record["ns"], record["checkpoint"]), []).append(record)
            elif kind == "r":
                self.branches.append(record["id"])


Found = tuple[dict[str, Any], list[str] | None]
"""A checkpoint record, and its pending writes' stored records when they were read
with it (None: not read)."""


def newest_checkpoints(
    store: Store, session_id: str, ns: str, *, before: str | None = None, page: int = 1
) -> Iterator[Found]:
    """The checkpoint records of one namespace, newest (greatest id) first, each with
    its pending writes, read a page at a time from the end of the name index
    (``Store.scratchpad_page_beside``: a page and its writes in one read), so the latest
    costs one small read however long the thread is. ``before``: only ids below it.

    Plain ids are names in id order; a hashed one (``~``, after every ``=`` name) is
    not, so those few are read first and merged in by id."""
    prefix = f"{PREFIX}c/{part(ns)}/"
    beside = f"{WRITES}{part(ns)}/"
    hashed: list[Found] = []
    below: str | None = None
    if before is not None and part(before).startswith("="):
        below = checkpoint_name(ns, before)
        listed = store.scratchpad_list(session_id, prefix=prefix + "~")
        hashed = [(r, None) for r in map(record_of, (e.content for e in listed)) if r is not None]
        hashed.sort(key=_found_id, reverse=True)
    size = max(1, min(page, 256))
    while True:
        pairs, beside_pairs = store.scratchpad_page_beside(
            session_id, prefix=prefix, limit=size, before=below, beside=beside
        )
        filed = filed_writes(beside_pairs)
        for name, content in pairs:
            record = record_of(content)
            if record is None or (before is not None and str(record["id"]) >= before):
                continue
            found = (record, filed.get(beside + name[len(prefix) :] + "/", []))
            if name.startswith(prefix + "~"):
                hashed.append(found)  # only on a first page from the top
                hashed.sort(key=_found_id, reverse=True)
                continue
            while hashed and _found_id(hashed[0]) > str(record["id"]):
                yield hashed.pop(0)
            yield found
        if len(pairs) < size:
            break
        below = pairs[-1][0]
        size = min(size * 4, 256)
    yield from sorted(hashed, key=_found_id, reverse=True)


def latest_checkpoint(
    store: Store, session_id: str, ns: str, names: Sequence[str]
) -> tuple[Found | None, dict[str, str]]:
    """The namespace's latest checkpoint record with its pending writes, and the
    entries ``names`` (the values the reader expects it to read), in one read when the
    last name of the index is a plain id (no hashed one is then stored: those sort
    after it), else as ``newest_checkpoints`` reads it."""
    prefix = f"{PREFIX}c/{part(ns)}/"
    beside = f"{WRITES}{part(ns)}/"
    pairs, found = store.scratchpad_page_beside(
        session_id, prefix=prefix, limit=1, beside=beside, names=names
    )
    if not pairs:
        return None, found
    name, content = pairs[0]
    record = record_of(content)
    if record is None or not name.startswith(prefix + "="):
        return next(newest_checkpoints(store, session_id, ns), None), found
    return (record, filed_writes(found).get(beside + name[len(prefix) :] + "/", [])), found


def _found_id(found: Found) -> str:
    return str(found[0]["id"])


def filed_writes(contents: dict[str, str]) -> dict[str, list[str]]:
    """A checkpoint's writes prefix -> the stored pending writes under it, of
    ``contents`` (the entries of other kinds left out)."""
    writes: dict[str, list[str]] = {}
    for name, content in contents.items():
        if name.startswith(WRITES):
            writes.setdefault(name.rsplit("/", 2)[0] + "/", []).append(content)
    return writes


record_of = json_scan.loads_object
"""The record an entry holds, or None when it is no JSON object (not ours)."""


def checkpoint_name(ns: str, cid: str) -> str:
    return f"{PREFIX}c/{part(ns)}/{part(cid)}"


def blob_name(ns: str, channel: str, version: Any) -> str:
    return f"{PREFIX}b/{part(ns)}/{part(channel)}/{version_part(version)}"


def branch_name(session_id: str) -> str:
    return f"{PREFIX}r/{part(session_id)}"


WRITES = f"{PREFIX}w/"
"""What the names of pending writes start with."""


def writes_prefix(ns: str, cid: str) -> str:
    """What the names of a checkpoint's pending writes start with."""
    return f"{WRITES}{part(ns)}/{part(cid)}/"


def write_name(ns: str, cid: str, task_id: str, idx: int) -> str:
    return f"{writes_prefix(ns, cid)}{part(task_id)}/{idx}"
