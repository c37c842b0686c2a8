"""Sessions as JSONL files that a person can read, grep, ``jq`` and version.

Layout under the store's root directory (``jsonl:///abs/dir`` or ``jsonl://rel/dir``)::

    threadline.json                 marker: which program and format made this directory
    sessions/<agent>/<id>.jsonl     line 1: the immutable creation record {"type": "session", ...}
                                    then one line per message {"type": "message", "seq": N, ...}
    sessions/<agent>/<id>.meta.json mutable metadata: title, model, metadata, parent,
                                    created_at, updated_at, memo, lock
    sessions/<agent>/<id>_summary.json     checkpoints (compaction summaries), oldest first
    sessions/<agent>/<id>_scratchpad.json  scratchpad entries
    sessions/<agent>/<id>.jsonl.corrupt    lines set aside because they could not be read
    .locks/                         one lock file per session, one for the whole store

The ideas behind it:

* **The .jsonl is the only source of truth for messages and counters.** Every message
  line carries its ``seq``, the ``batch_last`` seq of the batch it was written in, and
  the session's running ``total_tokens`` and ``stored_at`` after it. So a session's
  counters come from its last line (read backwards from the end), listing never reads a
  whole file, and an append costs one write and one ``fsync`` with no second file to
  keep consistent. Mutable metadata lives in the ``.meta.json`` sidecar, replaced
  atomically (temporary file, ``fsync``, ``os.replace``); without a sidecar, a session
  falls back to its creation record, so a bare ``.jsonl`` copied in from elsewhere
  shows up. A session exists exactly when its ``.jsonl`` exists.
* **A batch is committed when its closing line is complete.** A crash can leave a torn
  line or the first lines of a batch at the end of the file; reads leave that
  uncommitted tail out and say so (a ``CorruptRecordWarning`` naming the file and line:
  a last line damaged after it was written looks the same, and must not just make a
  session look shorter), and the next append sets it aside to ``.corrupt`` and truncates it,
  so a batch is all-or-nothing and new lines never glue onto a torn one.
* **Corrupt lines elsewhere (a hand edit) are left in place.** Reads skip them with a
  ``CorruptRecordWarning`` naming the file and line number, and a copy goes to
  ``.corrupt`` once. Such a line keeps its seq slot, so seqs are never reused. A file
  whose first line is not a session record raises ``CorruptRecord`` naming the file.
* **Every operation on a session holds its file lock** (``filelock``), so readers never
  see a half-written batch and writers in many processes never interleave. Creating and
  deleting sessions also hold the store lock, which keeps ids unique across agents.
* **Long sessions stay cheap where it matters.** ``tail`` and recent reads go backwards
  from the end of the file in blocks. Appends (which must know every stored message id
  to stay idempotent) and far-back reads use an in-process index of ids and line
  offsets, built by one forward scan the first time a process needs it and extended
  incrementally afterwards. The line format and that machinery live in
  ``store/jsonl_file.py``.
* ``message_count`` is the last seq: a corrupt line still counts, as it keeps its slot.
* **A session's parent** is in its sidecar (``parent``; the creation record has the
  one it was created with) and counts while that session exists, so a deleted parent's
  children are top-level. Listing top-level sessions or a session's children reads
  every session's sidecar, as every listing here does; a session written before
  parents were kept has its link in its metadata (a fork's point, ``parent_session``).

Search is a plain scan of the files (every word must occur, case-insensitively), fine
for the sizes this backend is for. Images whose base64 data exceeds 32 KiB are written
to ``<id>_media/`` (before the line that refers to them) and read back inline, so the
``.jsonl`` stays small enough to read; the folder is removed with its session.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import json
import os
import re
import shutil
import threading
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Unpack

import filelock

from threadline.errors import (
    CorruptRecord,
    NotAThreadlineStore,
    SchemaTooNew,
    SessionExists,
    SessionNotFound,
    StoreNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.json_scan import loads_object
from threadline.messages import Message
from threadline.stamps import utcnow
from threadline.store import core
from threadline.store.alongside import Alongside
from threadline.store.checkpoints import Checkpoint, ExpectPrevious, check_checkpoint
from threadline.store.checks import SESSION_ID_PATTERN, CorruptRecordWarning, format_ts, parse_ts
from threadline.store.encoding import Appending, primary_tokens
from threadline.store.jsonl_file import (
    FORMAT_VERSION,
    Index,
    Line,
    SessionFile,
    SessionPaths,
    State,
    atomic_write,
    encode_line,
    externalize_media,
    fsync_dir,
    json_bytes,
    tail_state,
)
from threadline.store.listing import ListRequest, SessionPage, children_counts
from threadline.store.locks import LockHolder
from threadline.store.search_query import SearchOptions, SearchPage, scan_store
from threadline.store.session_info import (
    FORK_KEY,
    NewSession,
    ScratchpadEntry,
    SessionChange,
    SessionInfo,
)

APP_ID = "threadline"
MARKER_NAME = "threadline.json"
SESSIONS_DIR = "sessions"
LOCKS_DIR = ".locks"
STORE_LOCK_NAME = "_store.lock"
"""Session ids start with a letter or digit, so this name can never be a session's lock."""
LOCK_TIMEOUT_SECONDS = 30.0
LOCK_POLL_SECONDS = 0.001
"""filelock polls; a short interval keeps many writers on one session from idling."""
BACKWARD_READ_LIMIT = 2000
"""``read_messages`` this close to the end reads backwards instead of building the index."""
MAX_CACHED_INDEXES = 64
"""Sessions whose index a process keeps; the least recently used is dropped first."""

_ID_RE = re.compile(SESSION_ID_PATTERN)

__all__ = ["CorruptRecordWarning", "JSONLStore", "parse_jsonl_url"]


def parse_jsonl_url(url: str) -> Path:
    """``jsonl:///abs/dir`` or ``jsonl://relative/dir`` (no options)."""
    rest = url[len("jsonl://") :] if url.startswith("jsonl://") else url
    if "?" in rest:
        raise UsageError(f"the jsonl store takes no options: {url!r}")
    if not rest:
        raise UsageError(f"no directory in store URL {url!r} (expected jsonl:///path/to/dir)")
    return Path(rest).expanduser()


class JSONLStore(core.StoreCore):
    """Sessions as JSONL files under one directory; safe across threads and processes."""

    def __init__(self, root: str | Path, *, create: bool = True) -> None:
        self.root = Path(root)
        self.read_only = False
        """Opened with ``create=False`` where nothing can be written (a read-only mount):
        reads go on without file locks, since no writer can change the files either."""
        self.url = f"jsonl://{self.root}"
        self._sessions = self.root / SESSIONS_DIR
        self._locks = self.root / LOCKS_DIR
        self._mutex = threading.RLock()
        self._file_locks: dict[str, filelock.FileLock] = {}
        self._agents: dict[str, str] = {}
        self._indexes: dict[str, Index] = {}
        self._set_aside: set[tuple[str, int, str]] = set()
        self._open_root(create)

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> JSONLStore:
        return cls(parse_jsonl_url(url), create=create)

    def _open_root(self, create: bool) -> None:
        marker = self.root / MARKER_NAME
        try:
            if self.root.exists() and not self.root.is_dir():
                raise NotAThreadlineStore(f"{self.root} is a file, not a JSONL store directory")
            if not create and not marker.exists() and not self._sessions.is_dir():
                raise StoreNotFound(
                    f"no JSONL store at {self.root}: nothing was stored there yet, and this "
                    "opens a store without creating it (a command that writes creates it)"
                )
            if marker.exists():
                info = loads_object(marker.read_bytes())
                if info is None or info.get("app") != APP_ID:
                    raise NotAThreadlineStore(f"{marker} was not written by threadline")
                if int(info.get("format", 0)) > FORMAT_VERSION:
                    raise SchemaTooNew(
                        f"{self.root} uses JSONL format {info['format']}, newer than this "
                        f"threadline understands ({FORMAT_VERSION}); upgrade threadline"
                    )
            elif self.root.exists() and any(
                p.name not in (SESSIONS_DIR, LOCKS_DIR) for p in self.root.iterdir()
            ):
                raise NotAThreadlineStore(
                    f"{self.root} holds files threadline did not create (no {MARKER_NAME}); "
                    "point the jsonl store at an empty or threadline-made directory"
                )
            if not create:
                self.read_only = not self._can_lock()
                return
            self._sessions.mkdir(parents=True, exist_ok=True)
            self._locks.mkdir(parents=True, exist_ok=True)
            if not marker.exists():
                atomic_write(marker, json_bytes({"app": APP_ID, "format": FORMAT_VERSION}))
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the JSONL store at {self.root}: {exc}") from exc

    def _can_lock(self) -> bool:
        """Whether lock files can be made here; not on a read-only mount or directory."""
        try:
            self._locks.mkdir(exist_ok=True)
            os.close(os.open(self._locks / STORE_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return False
            raise
        return True

    def close(self) -> None:
        """Drop in-process caches; no file stays open between calls."""
        with self._mutex:
            self._indexes.clear()
            self._agents.clear()

    # -- plumbing ---------------------------------------------------------------------

    def _driver_error(self, exc: Exception) -> ThreadlineError | None:
        if isinstance(exc, filelock.Timeout):
            return StoreUnavailable(
                f"store {self.root} is busy: waited {LOCK_TIMEOUT_SECONDS:.0f} s "
                f"for {exc.lock_file}"
            )
        if isinstance(exc, OSError):
            return StoreUnavailable(f"store {self.root}: {exc}")
        return None

    def _file_lock(self, name: str) -> filelock.FileLock:
        lock = self._file_locks.get(name)
        if lock is None:
            lock = self._file_locks[name] = filelock.FileLock(str(self._locks / name))
        return lock

    @contextlib.contextmanager
    def _hold(self, name: str) -> Iterator[None]:
        if self.read_only:
            yield
            return
        lock = self._file_lock(name)
        lock.acquire(timeout=LOCK_TIMEOUT_SECONDS, poll_interval=LOCK_POLL_SECONDS)
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def _store_locked(self) -> Iterator[None]:
        with self._translate(), self._mutex, self._hold(STORE_LOCK_NAME):
            yield

    @contextlib.contextmanager
    def _locked(self, session_id: str) -> Iterator[SessionPaths]:
        """The session's files, with its lock held; ``SessionNotFound`` if it has none."""
        if not isinstance(session_id, str) or not _ID_RE.match(session_id):
            raise SessionNotFound(str(session_id))
        with self._translate(), self._mutex, self._hold(f"{session_id}.lock"):
            paths = self._find(session_id)
            if not self.read_only and paths.pending.exists():  # read-only: left for a writer
                self._settle(paths)
            yield paths

    def _settle(self, paths: SessionPaths) -> None:
        """What an append left to write with its batch (``SessionPaths.pending``), the
        session's lock held: written to the sidecars when the batch is committed in the
        .jsonl (the commit point: a crash after it keeps both), dropped when it is not
        (a crash before it keeps neither). Writing it twice writes the same."""
        try:
            pending = json.loads(paths.pending.read_bytes())
            with self._open(paths) as (sf, header_end):
                committed = self._state(sf, header_end).last_seq
            if committed >= int(pending["seq"]):
                extra = Alongside(pending["scratchpad"], pending["metadata"])
                self._write_alongside(paths, extra, pending.get("pad"))
            paths.pending.unlink()
            fsync_dir(paths.dir)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptRecord(f"unfinished append: {exc}", where=str(paths.pending)) from exc

    def _write_alongside(self, paths: SessionPaths, extra: Alongside, pad: str | None) -> None:
        """An append's companions, the session's lock held; the entries go to session
        ``pad`` (None: this one), under its lock too (taken after this one's)."""
        if extra.metadata:
            _, meta = self._with_meta(paths)
            meta["metadata"] = extra.merged(meta.get("metadata") or {})
            self._write_meta(paths, meta)
        if pad is None or pad == paths.sid:
            self._put_entries(paths, extra.scratchpad, keep_existing=False)
            return
        try:
            with self._locked(pad) as pad_paths:
                self._put_entries(pad_paths, extra.scratchpad, keep_existing=False)
        except SessionNotFound:  # deleted since the batch was written: its pad went with it
            pass

    def _find(self, sid: str) -> SessionPaths:
        agent = self._agents.get(sid)
        if agent is not None:
            paths = SessionPaths(sid, agent, self._sessions / agent)
            if paths.jsonl.exists():
                return paths
            self._forget(sid)
        for agent in self._agent_names():
            paths = SessionPaths(sid, agent, self._sessions / agent)
            if paths.jsonl.exists():
                self._agents[sid] = agent
                return paths
        raise SessionNotFound(sid)

    def _forget(self, sid: str) -> None:
        self._agents.pop(sid, None)
        self._indexes.pop(sid, None)

    def _agent_names(self) -> list[str]:
        try:
            names = os.listdir(self._sessions)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if _ID_RE.match(n) and (self._sessions / n).is_dir())

    def _agent_session_ids(self, agent: str) -> list[str]:
        try:
            names = os.listdir(self._sessions / agent)
        except FileNotFoundError:
            return []
        return [n[:-6] for n in names if n.endswith(".jsonl") and _ID_RE.match(n[:-6])]

    def _meta(self, paths: SessionPaths, header: dict[str, Any]) -> dict[str, Any]:
        """The sidecar, or defaults from the creation record when there is none."""
        try:
            raw = paths.meta.read_bytes()
        except FileNotFoundError:
            return {
                "title": header.get("title"),
                "model": header.get("model"),
                "metadata": header.get("metadata") or {},
                "updated_at": header.get("created_at"),
                "memo": {},
                "lock": None,
            }
        meta = loads_object(raw)
        if meta is None:
            raise CorruptRecord(
                "the metadata sidecar is not a JSON object (delete it to fall back to the "
                "session's creation record)",
                where=str(paths.meta),
            )
        return meta

    def _write_meta(self, paths: SessionPaths, meta: dict[str, Any]) -> None:
        atomic_write(paths.meta, json_bytes(meta))

    def _with_meta(self, paths: SessionPaths) -> tuple[dict[str, Any], dict[str, Any]]:
        with open(paths.jsonl, "rb") as f:
            header, _ = SessionFile(paths, f, self._set_aside).header()
        return header, self._meta(paths, header)

    # -- the index and the committed end ---------------------------------------------

    @contextlib.contextmanager
    def _open(self, paths: SessionPaths, mode: str = "rb") -> Iterator[tuple[SessionFile, int]]:
        """The session file, checked to be one, and where its first message line starts."""
        with open(paths.jsonl, mode) as f:
            sf = SessionFile(paths, f, self._set_aside)
            _, header_end = sf.header()
            yield sf, header_end

    def _index(self, sf: SessionFile, header_end: int, *, build: bool = True) -> Index | None:
        """This process's index of the file, brought up to date (built only if ``build``)."""
        st = os.fstat(sf.f.fileno())
        index = self._indexes.get(sf.paths.sid)
        if index is not None and (index.ino != st.st_ino or st.st_size < index.scanned_to):
            index = None  # replaced or cut short behind our back: start over
        if index is None:
            if not build:
                return None
            fork_seq, tokens = sf.start()
            index = Index(
                ino=st.st_ino,
                scanned_to=header_end,
                lines=1,
                last_seq=fork_seq,
                total_tokens=tokens,
                base=fork_seq,
            )
        if st.st_size > index.scanned_to:
            sf.extend(index)
        self._indexes.pop(sf.paths.sid, None)  # re-insert: the dict keeps recency order
        self._indexes[sf.paths.sid] = index
        while len(self._indexes) > MAX_CACHED_INDEXES:
            del self._indexes[next(iter(self._indexes))]
        return index

    def _state(self, sf: SessionFile, header_end: int) -> State:
        return self._committed(sf, header_end, self._index(sf, header_end, build=False))

    def _committed(self, sf: SessionFile, header_end: int, index: Index | None) -> State:
        """Where the committed part ends; a batch left unfinished after it is reported
        (not shown: a batch is all or nothing), so a session never just looks shorter."""
        if index is not None:
            state = index.state
        else:
            state = tail_state(sf.f, header_end, sf.size(), sf.start())
        sf.report_unfinished(state.end)
        return state

    # -- sessions -----------------------------------------------------------------------

    def _insert_session(self, new: NewSession, lock: LockHolder | None) -> SessionInfo:
        sid = new.id
        with self._store_locked(), self._hold(f"{sid}.lock"):
            with contextlib.suppress(SessionNotFound):
                self._find(sid)
                raise SessionExists(sid)
            if new.parent is not None:
                self._find(new.parent)
            paths = SessionPaths(sid, new.agent, self._sessions / new.agent)
            header = {
                "type": "session",
                "format": FORMAT_VERSION,
                "id": sid,
                "agent": new.agent,
                "model": new.model,
                "title": new.title,
                "created_at": new.created,
                "parent": new.parent,
                "metadata": new.metadata,
            }
            if new.start is not None:  # where a fork's own seqs and running totals begin
                header["start"] = {"last_seq": new.last_seq, "total_tokens": new.total_tokens}
            meta = {
                "id": sid,
                "agent": new.agent,
                "created_at": new.created,
                "title": new.title,
                "model": new.model,
                "parent": new.parent,
                "metadata": new.metadata,
                "updated_at": new.updated,
                "memo": {},
                "lock": lock.to_dict() if lock else None,
            }
            try:  # encode both before writing either
                first_line = json.dumps(header, ensure_ascii=False).encode() + b"\n"
                sidecar = json_bytes(meta)
            except UnicodeEncodeError as exc:
                raise UsageError(f"session {sid}: a field is not valid UTF-8 text: {exc}") from exc
            paths.dir.mkdir(parents=True, exist_ok=True)
            self._remove_files(paths)  # what a crashed create or delete may have left
            # the sidecar (and with it the lock) exists before the session becomes visible
            try:
                atomic_write(paths.meta, sidecar)
                atomic_write(paths.jsonl, first_line)
            except BaseException:
                self._undo_create(paths)
                raise
            self._agents[sid] = new.agent
            return self._info(paths)

    def _undo_create(self, paths: SessionPaths) -> None:
        """A create that failed part-way leaves nothing: no sidecar without its session
        file, and no agent directory it made empty."""
        with contextlib.suppress(OSError):
            paths.jsonl.unlink(missing_ok=True)
            paths.meta.unlink(missing_ok=True)
            paths.dir.rmdir()  # only when empty

    def _remove_files(self, paths: SessionPaths) -> None:
        for path in paths.leftovers():
            path.unlink(missing_ok=True)
        if paths.media.is_dir():
            shutil.rmtree(paths.media)

    def _info(self, paths: SessionPaths) -> SessionInfo:
        with open(paths.jsonl, "rb") as f:
            sf = SessionFile(paths, f, self._set_aside)
            header, header_end = sf.header()
            meta = self._meta(paths, header)
            state = self._state(sf, header_end)
        created = str(header.get("created_at") or meta.get("created_at"))
        updated = max(str(meta.get("updated_at") or created), state.stored_at or "")
        try:
            return SessionInfo(
                id=paths.sid,
                agent=paths.agent,
                model=meta.get("model"),
                title=meta.get("title"),
                created_at=parse_ts(created),
                updated_at=parse_ts(updated),
                message_count=state.last_seq,
                total_tokens=state.total_tokens,
                last_seq=state.last_seq,
                parent_id=self._parent(paths.sid, header, meta),
                metadata=meta.get("metadata") or {},
            )
        except ValueError as exc:
            raise CorruptRecord(
                f"unreadable session metadata: {exc}", where=str(paths.meta)
            ) from exc

    def _parent(self, sid: str, header: dict[str, Any], meta: dict[str, Any]) -> str | None:
        """The session this one is listed under, while that session exists (a deleted
        parent's children are top-level). A session written before parents were kept
        (no ``parent`` in its sidecar or creation record) has its link in its metadata:
        a fork's point, or an imported subagent's ``parent_session``."""
        if "parent" in meta:
            parent = meta["parent"]
        elif "parent" in header:
            parent = header["parent"]
        else:
            legacy = meta.get("metadata") or {}
            fork = legacy.get(FORK_KEY) if isinstance(legacy, dict) else None
            parent = fork.get("session") if isinstance(fork, dict) else None
            if parent is None and isinstance(legacy, dict):
                parent = legacy.get("parent_session")
        if not isinstance(parent, str) or parent == sid:
            return None
        if ".." in parent or not _ID_RE.match(parent):
            return None
        try:
            self._find(parent)
        except SessionNotFound:
            return None
        return parent

    def _matching_ids(self, id_or_prefix: str, *, prefix: bool) -> list[str]:
        with self._translate(), self._mutex:
            with contextlib.suppress(SessionNotFound):
                return [self._find(id_or_prefix).sid]
            if not prefix:
                return []
            return sorted(
                sid
                for agent in self._agent_names()
                for sid in self._agent_session_ids(agent)
                if sid.startswith(id_or_prefix)
            )

    def session_info(self, session_id: str) -> SessionInfo:
        with self._locked(session_id) as paths:
            return self._info(paths)

    def _list_page(self, request: ListRequest) -> SessionPage:
        """Reads each session's sidecar, first line and last lines, never a whole file
        (of every session: this backend keeps no index, see the module docstring)."""
        infos = self._all_infos(request.agent)
        return request.page([i for i in infos if request.admits(i)])

    def _count_children(self, parent_ids: list[str]) -> dict[str, int]:
        return children_counts(parent_ids, self._all_infos(None))

    def _all_infos(self, agent: str | None) -> list[SessionInfo]:
        """Every readable session, newest updated first; unreadable ones are reported."""
        infos: list[SessionInfo] = []
        with self._translate(), self._mutex:
            for name in [agent] if agent is not None else self._agent_names():
                for sid in self._agent_session_ids(name):
                    try:
                        with self._locked(sid) as paths:
                            infos.append(self._info(paths))
                    except SessionNotFound:
                        continue  # deleted while we listed
                    except CorruptRecord as exc:
                        warnings.warn(
                            f"not listing session {sid}: {exc}",
                            CorruptRecordWarning,
                            stacklevel=3,
                        )
        infos.sort(key=lambda i: i.id)
        infos.sort(key=lambda i: i.updated_at, reverse=True)
        return infos

    def _set_title(self, session_id: str, title: str | None, now: datetime) -> SessionInfo:
        with self._locked(session_id) as paths:
            _, meta = self._with_meta(paths)
            meta.update(title=title, updated_at=format_ts(now))
            self._write_meta(paths, meta)
            return self._info(paths)

    def _update_session(self, session_id: str, change: SessionChange) -> SessionInfo:
        with self._locked(session_id) as paths:
            header, meta = self._with_meta(paths)
            new_parent = change.new_parent(session_id, self._parent(session_id, header, meta))
            if new_parent is not None:
                self._find(new_parent)
                meta["parent"] = new_parent
            if change.model is not None:
                meta["model"] = change.model
            if change.title is not None:
                meta["title"] = change.title
            meta["metadata"] = change.merged(meta.get("metadata") or {})
            self._write_meta(paths, meta)
            return self._info(paths)

    def _delete(self, session_ids: list[str], check: Callable[[str, object], None]) -> int:
        """Refuses (deleting nothing) when ``check`` refuses any of them."""
        with self._store_locked():
            targets: list[str] = []
            for sid in session_ids:
                try:
                    with self._locked(sid) as paths:
                        self._check_lock(paths, check)
                        targets.append(sid)
                except SessionNotFound:
                    continue
            deleted = 0
            for sid in targets:
                with self._locked(sid) as paths:
                    self._check_lock(paths, check)
                    paths.jsonl.unlink()  # from here on the session does not exist
                    fsync_dir(paths.dir)
                    self._remove_files(paths)
                    self._forget(sid)
                    with contextlib.suppress(OSError):
                        paths.dir.rmdir()  # only when it was the agent's last session
                deleted += 1
        return deleted

    def _check_lock(self, paths: SessionPaths, check: Callable[[str, object], None]) -> None:
        try:
            _, meta = self._with_meta(paths)
            check(paths.sid, meta.get("lock"))
        except CorruptRecord:
            return  # an unreadable session (or lock record) can always be deleted

    def _session_ids(self, agent: str | None) -> list[str]:
        with self._store_locked():
            return [
                sid
                for name in (self._agent_names() if agent is None else [agent])
                for sid in self._agent_session_ids(name)
            ]

    # -- messages -----------------------------------------------------------------------

    def _append(self, session_id: str, batch: Appending) -> int | list[Message]:
        messages = batch.messages
        extra = batch.alongside
        with self._locked(session_id) as paths, self._open(paths, "r+b") as (sf, header_end):
            index = self._index(sf, header_end)
            assert index is not None
            sf.repair(index)
            if extra.expect is not None:
                header, _ = sf.header()
                created = header.get("created_at") or self._meta(paths, header).get("created_at")
                extra.expect.holds(session_id, parse_ts(str(created)), index.last_seq)
            if extra.pad_of is not None:  # SessionNotFound before anything is written
                if not _ID_RE.match(extra.pad_of):
                    raise SessionNotFound(extra.pad_of)
                self._find(extra.pad_of)
            if not batch.ids:  # the companions alone: one write each, nothing to commit
                self._write_alongside(paths, extra, extra.pad_of)
                return index.last_seq + 1
            if batch.ids[0] in index.ids:
                return self._stored_copies(sf, index, batch)
            ids = batch.ids
            if len(set(ids)) != len(ids) or any(i in index.ids for i in ids):
                raise batch.already_stored()
            seq, total = index.last_seq, index.total_tokens
            last = seq + len(messages)
            # the session's updated_at after this batch (never back: see ``later``)
            stored_at = max(format_ts(batch.at), index.stored_at or "")
            stored: list[Message] = []
            chunks: list[bytes] = []
            for m in messages:  # encode everything before writing anything
                seq += 1
                total += primary_tokens(m)
                sm = m.model_copy(deep=True, update={"seq": seq})
                line = externalize_media(sm, paths)
                chunks.append(
                    encode_line(line, batch_last=last, total_tokens=total, stored_at=stored_at)
                )
                stored.append(sm)
            if extra:  # written first, and settled once the batch is (see ``_settle``)
                pending = {
                    "seq": last,
                    "scratchpad": extra.scratchpad,
                    "metadata": extra.metadata,
                    "pad": extra.pad_of,
                }
                atomic_write(paths.pending, json_bytes(pending))
            f = sf.f
            f.seek(index.scanned_to)
            try:
                f.write(b"".join(chunks))
                f.flush()
                os.fsync(f.fileno())
            except OSError:
                with contextlib.suppress(OSError):
                    f.truncate(index.scanned_to)
                    paths.pending.unlink(missing_ok=True)
                raise
            offset = index.scanned_to
            for sm, chunk in zip(stored, chunks, strict=True):
                assert sm.seq is not None
                index.commit(offset, Line(sm.seq, sm.id, last, 0, stored_at))
                offset += len(chunk)
            index.total_tokens, index.scanned_to = total, offset
            index.lines += len(chunks)
            if extra:  # the batch is committed: its companions go to the sidecars
                self._settle(paths)
        return [m.model_copy(deep=True) for m in stored]

    def _stored_copies(self, sf: SessionFile, index: Index, batch: Appending) -> list[Message]:
        """A retried batch: the stored messages, or an error if only part of it is stored."""
        out: list[Message] = []
        for mid in batch.ids:
            seq = index.ids.get(mid)
            if seq is None:
                raise batch.partly_stored(mid)
            out.extend(sf.read_indexed(index, seq, seq))
        return out

    def _tail_range(self, session_id: str, limit: int, before_seq: int | None) -> list[Message]:
        with self._locked(session_id) as paths, self._open(paths) as (sf, header_end):
            index = self._index(sf, header_end, build=False)
            state = self._committed(sf, header_end, index)
            if index is None:  # read backwards from the end: no need to scan the whole file
                before = state.last_seq + 1 if before_seq is None else before_seq
                return sf.read_backwards(header_end, state.end, after=0, before=before, limit=limit)
            hi = index.last_seq if before_seq is None else min(before_seq - 1, index.last_seq)
            if hi < 1:
                return []
            return sf.read_indexed(index, max(1, hi - limit + 1), hi)[::-1]

    def _read_range(self, session_id: str, after_seq: int, limit: int | None) -> list[Message]:
        with self._locked(session_id) as paths, self._open(paths) as (sf, header_end):
            index = self._index(sf, header_end, build=False)
            state = self._committed(sf, header_end, index)
            if index is None:
                if state.last_seq - after_seq <= BACKWARD_READ_LIMIT:
                    found = sf.read_backwards(
                        header_end,
                        state.end,
                        after=after_seq,
                        before=state.last_seq + 1,
                        limit=None,
                    )[::-1]
                    return found if limit is None else found[:limit]
                index = self._index(sf, header_end)
                assert index is not None
            hi = index.last_seq if limit is None else min(index.last_seq, after_seq + limit)
            if hi <= after_seq:
                return []
            return sf.read_indexed(index, after_seq + 1, hi)

    # -- checkpoints --------------------------------------------------------------------

    def _checkpoints(self, paths: SessionPaths) -> list[Checkpoint]:
        try:
            raw = paths.summary.read_bytes()
        except FileNotFoundError:
            return []
        data = loads_object(raw)
        try:
            if data is None:
                raise ValueError("not a JSON object")
            return [Checkpoint.from_dict(c) for c in data.get("checkpoints", [])]
        except ValueError as exc:
            raise CorruptRecord(f"unreadable checkpoints: {exc}", where=str(paths.summary)) from exc

    def _add_checkpoint(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        session_id = new.session_id
        with self._locked(session_id) as paths:  # the session's file lock: one atomic step
            last = self._info(paths).last_seq
            existing = self._checkpoints(paths)
            stored = check_checkpoint(
                new,
                last_seq=last,
                latest=existing[-1] if existing else None,
                expect_previous=expect_previous,
            )
            if stored is not None:
                return stored
            cp = new.replace(id=max((c.id for c in existing), default=0) + 1)
            records = [c.to_dict() for c in [*existing, cp]]
            atomic_write(
                paths.summary, json_bytes({"session_id": session_id, "checkpoints": records})
            )
            return cp

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        checkpoints = self.list_checkpoints(session_id)
        return checkpoints[-1] if checkpoints else None

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        with self._locked(session_id) as paths:
            return self._checkpoints(paths)

    # -- scratchpad and memo ------------------------------------------------------------

    def _pad(self, paths: SessionPaths) -> dict[str, dict[str, Any]]:
        try:
            raw = paths.scratchpad.read_bytes()
        except FileNotFoundError:
            return {}
        data = loads_object(raw)
        if data is None or not isinstance(data.get("entries"), dict):
            raise CorruptRecord("unreadable scratchpad", where=str(paths.scratchpad))
        entries: dict[str, dict[str, Any]] = data["entries"]
        return entries

    def _entry(self, paths: SessionPaths, name: str, value: dict[str, Any]) -> ScratchpadEntry:
        try:
            return ScratchpadEntry.from_dict({"name": name, **value})
        except (TypeError, ValueError) as exc:
            raise CorruptRecord(f"unreadable entry {name!r}", where=str(paths.scratchpad)) from exc

    def _scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        with self._locked(session_id) as paths:
            pad = self._pad(paths)
            now = format_ts(utcnow())
            old = pad.get(name) or {}
            pad[name] = {
                "content": content,
                "created_at": old.get("created_at", now),
                "updated_at": now,
            }
            atomic_write(paths.scratchpad, json_bytes({"entries": pad}))
            return self._entry(paths, name, pad[name])

    def _scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], keep_existing: bool
    ) -> None:
        with self._locked(session_id) as paths:
            self._put_entries(paths, entries, keep_existing=keep_existing)

    def _put_entries(
        self, paths: SessionPaths, entries: dict[str, str], *, keep_existing: bool
    ) -> None:
        """Scratchpad entries, the session's lock held: one file written once, all or
        nothing; ``keep_existing`` leaves the entries that exist as they are."""
        if not entries:
            return
        pad = self._pad(paths)
        now = format_ts(utcnow())
        for name, content in entries.items():
            old = pad.get(name)
            if old is None or not keep_existing:
                created = now if old is None else old.get("created_at", now)
                pad[name] = {"content": content, "created_at": created, "updated_at": now}
        atomic_write(paths.scratchpad, json_bytes({"entries": pad}))

    def _scratchpad_contents(
        self, session_id: str, names: list[str], prefixes: list[str]
    ) -> dict[str, str]:
        with self._locked(session_id) as paths:  # the file read once
            pad = self._pad(paths)
            wanted = set(names)
            return {
                k: self._entry(paths, k, v).content
                for k, v in pad.items()
                if k in wanted or k.startswith(tuple(prefixes))
            }

    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None:
        with self._locked(session_id) as paths:
            value = self._pad(paths).get(name)
            return None if value is None else self._entry(paths, name, value)

    def _scratchpad_list(self, session_id: str, prefix: str) -> list[ScratchpadEntry]:
        with self._locked(session_id) as paths:
            pad = self._pad(paths)
            return [self._entry(paths, k, pad[k]) for k in sorted(pad) if k.startswith(prefix)]

    def scratchpad_delete(self, session_id: str, name: str) -> bool:
        with self._locked(session_id) as paths:
            pad = self._pad(paths)
            if pad.pop(name, None) is None:
                return False
            atomic_write(paths.scratchpad, json_bytes({"entries": pad}))
            return True

    def get_memo(self, session_id: str) -> dict[str, Any]:
        with self._locked(session_id) as paths:
            memo: dict[str, Any] = self._with_meta(paths)[1].get("memo") or {}
            return memo

    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None:
        with self._locked(session_id) as paths:
            _, meta = self._with_meta(paths)
            meta["memo"] = copy.deepcopy(memo)
            self._write_meta(paths, meta)

    def _swap_memo(
        self, session_id: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> bool:
        with self._locked(session_id) as paths:  # compare and set under the file lock
            _, meta = self._with_meta(paths)
            memo = decide(meta.get("memo") or {})
            if memo is None:
                return False
            meta["memo"] = copy.deepcopy(memo)
            self._write_meta(paths, meta)
            return True

    # -- locks ------------------------------------------------------------------------

    def _swap_lock(
        self, session_id: str, decide: Callable[[LockHolder | None], LockHolder | None]
    ) -> LockHolder | None:
        with self._locked(session_id) as paths:
            _, meta = self._with_meta(paths)
            current = _holder(meta)
            new = decide(current)
            if new is not current:
                meta["lock"] = new.to_dict() if new else None
                self._write_meta(paths, meta)
            return new

    def lock_holder(self, session_id: str) -> LockHolder | None:
        with self._locked(session_id) as paths:
            return _holder(self._with_meta(paths)[1])

    # -- search -----------------------------------------------------------------------

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """A scan with the shared matcher (``search_query.scan_store``); sessions that
        cannot be read are skipped (listing them reports why)."""
        return scan_store(self, query, options, self._all_infos, (SessionNotFound, CorruptRecord))


def _holder(meta: dict[str, Any]) -> LockHolder | None:
    """The session's attach lock from its sidecar."""
    return LockHolder.stored(meta.get("lock"), where=f"session {meta.get('id')}")
