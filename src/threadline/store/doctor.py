"""Checking a store for damage, and copying what is still readable out of a damaged one.

``check_store(store)`` reads every session through the ``Store`` protocol (its
details, every message, checkpoints, scratchpad, memo and lock), so each backend is
checked by the same reads an agent makes; a read that raises makes the session
*unreadable* (with why), and records a backend skips with a ``CorruptRecordWarning``
make it *damaged* but readable. Stale attach locks and stale compaction marks are
noted (both are taken over when next needed, so they are harmless). Then each
backend's own storage is checked where threadline can see it:

* SQLite: ``PRAGMA integrity_check`` on a read-only connection, the schema version,
  and, when the session table itself cannot be listed, the ids that can still be read
  from it directly.
* JSONL: files left without their session (a sidecar, checkpoints, scratchpad or
  media folder of a session that is gone), temporary files of an interrupted write,
  media files no line refers to, and lines set aside earlier in ``.corrupt`` files.
  Damaged lines and unfinished final batches are reported by the reads above.

``salvage(store, report, destination)`` copies every readable session (messages,
checkpoints, scratchpad and memo) into a new, empty store with
``store.copy.copy_sessions``; unreadable ones are left behind and named. Nothing
here writes to the store being checked.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from threadline.errors import StoreDamaged, ThreadlineError, UsageError
from threadline.store.checks import MAX_PAGE_SIZE, SESSION_ID_PATTERN, CorruptRecordWarning
from threadline.store.copy import CopyReport, copy_sessions
from threadline.store.locks import LockHolder
from threadline.store.protocol import COMPACTION_MARK_KEY, Store

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

READ_BATCH = 1000
"""Messages read per call while checking a session."""
MAX_PROBLEMS = 20
"""Problems kept per session and integrity errors kept per store; more are counted."""
_TEMP_FILE = re.compile(r"^\..+\.\d+\.[0-9a-f]{8}\.tmp$")
"""What ``jsonl_file.atomic_write`` names its temporary files."""
_MEDIA_REF = re.compile(rb'"media_ref":"([^"\\]+)"')
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


class Severity(StrEnum):
    DAMAGE = "damage"
    """Data that cannot be read, or storage that is not intact: ``doctor`` exits 8."""
    WARNING = "warning"
    """Harmless leftovers (a stale lock, an orphan file); worth knowing, nothing lost."""
    NOTE = "note"


class _AsFields:
    """A report whose JSON is its fields as they are."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(cast("DataclassInstance", self))


@dataclass(slots=True)
class Finding:
    severity: Severity
    kind: str
    """``integrity``, ``schema``, ``listing``, ``orphan``, ``stale-lock``, ``stale-mark``,
    ``set-aside``, ``temp-file``; ``doctor`` adds ``events`` and ``stale-cancel`` of the
    servers sharing a PostgreSQL or Redis store."""
    message: str
    session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "severity": self.severity.value,
            "kind": self.kind,
            "message": self.message,
            "session_id": self.session_id,
        }


@dataclass(slots=True)
class SessionHealth:
    """What reading one session found."""

    session_id: str
    readable: bool = True
    """Every read succeeded (records skipped with a warning still count as read)."""
    messages_read: int = 0
    message_count: int | None = None
    """What the store says it holds (``None`` when even that could not be read)."""
    checkpoints: int = 0
    problems: list[str] = field(default_factory=list)
    """Why it is unreadable, and each record skipped while reading it."""

    @property
    def damaged(self) -> bool:
        return not self.readable or bool(self.problems)

    @property
    def status(self) -> str:
        if not self.readable:
            return "unreadable"
        return "damaged" if self.problems else "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "status": self.status,
            "readable": self.readable,
            "messages_read": self.messages_read,
            "message_count": self.message_count,
            "checkpoints": self.checkpoints,
            "problems": self.problems,
        }


@dataclass(slots=True)
class SalvagedSession(_AsFields):
    session_id: str
    status: str
    """``salvaged``, ``partly salvaged`` (records the source could not read are missing)
    or ``failed``."""
    messages: int = 0
    checkpoints: int = 0
    error: str | None = None


@dataclass(slots=True)
class SalvageReport(_AsFields):
    destination: str
    sessions: list[SalvagedSession] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    """Sessions not copied because they could not be read."""


@dataclass(slots=True)
class DoctorReport:
    store: str
    sessions: list[SessionHealth] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    salvage: SalvageReport | None = None

    @property
    def damaged(self) -> bool:
        """Whether anything was found that loses or risks data (the exit status)."""
        return any(s.damaged for s in self.sessions) or any(
            f.severity is Severity.DAMAGE for f in self.findings
        )

    @property
    def readable(self) -> list[str]:
        return [s.session_id for s in self.sessions if s.readable]

    @property
    def unreadable(self) -> list[SessionHealth]:
        return [s for s in self.sessions if not s.readable]

    def add(
        self, severity: Severity, kind: str, message: str, session_id: str | None = None
    ) -> None:
        self.findings.append(Finding(severity, kind, message, session_id))

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "ok": not self.damaged,
            "sessions": [s.to_json() for s in self.sessions],
            "findings": [f.to_json() for f in self.findings],
            "salvage": self.salvage.to_json() if self.salvage is not None else None,
        }


ProgressFn = Callable[[int, int], None]
"""Told ``(sessions checked, sessions in all)`` as the check goes."""


# -- checking -----------------------------------------------------------------------


def check_store(store: Store, *, progress: ProgressFn | None = None) -> DoctorReport:
    """Check every session of ``store`` and the storage under it; see the module docstring."""
    report = DoctorReport(store=store.url)
    backend = _backend_checks(store)
    listed, skipped = _listed_ids(store, report)
    stored = backend.stored_ids(report) if backend is not None else None
    if stored is None:  # only the listing knows the sessions: what it skipped is damage
        report.findings.extend(Finding(Severity.DAMAGE, "listing", text) for text in skipped)
        ids = listed
    else:  # a session the listing skipped is checked, and so named, like the others
        ids = list(dict.fromkeys([*listed, *stored]))
    for done, sid in enumerate(ids, start=1):
        report.sessions.append(check_session(store, sid, report))
        if progress is not None:
            progress(done, len(ids))
    if backend is not None:
        backend.check(report, ids)
    return report


def _listed_ids(store: Store, report: DoctorReport) -> tuple[list[str], list[str]]:
    """The ids ``list_sessions`` returns, and the warnings of sessions it skipped."""
    ids: dict[str, None] = {}
    offset = 0
    with _collected() as skipped:
        try:
            while True:
                page = store.list_sessions(limit=MAX_PAGE_SIZE, offset=offset)
                ids.update(dict.fromkeys(i.id for i in page.items))
                offset += len(page.items)
                if not page.items or offset >= page.total:
                    break
        except ThreadlineError as exc:
            report.add(Severity.DAMAGE, "listing", f"the sessions cannot be listed: {exc}")
    return list(ids), skipped


def check_session(store: Store, session_id: str, report: DoctorReport) -> SessionHealth:
    """Read all of one session; what fails or is skipped goes into its ``problems``."""
    health = SessionHealth(session_id)
    with _collected() as skipped:
        try:
            info = store.session_info(session_id)
            health.message_count = info.message_count
            after = 0
            while True:
                page = store.read_messages(session_id, after_seq=after, limit=READ_BATCH)
                health.messages_read += len(page)
                if len(page) < READ_BATCH:
                    break
                after = page[-1].seq or after
            health.checkpoints = len(store.list_checkpoints(session_id))
            store.scratchpad_list(session_id)
            memo = store.get_memo(session_id)
            holder = store.lock_holder(session_id)
        except ThreadlineError as exc:
            health.readable = False
            why = exc.problem if isinstance(exc, StoreDamaged) else str(exc)  # no doctor hint
            health.problems.append(f"{type(exc).__name__}: {why}")
        except Exception as exc:  # a record decoded into something unexpected
            health.readable = False
            health.problems.append(f"unreadable ({type(exc).__name__}: {exc})")
    health.problems.extend(skipped[:MAX_PROBLEMS])
    if len(skipped) > MAX_PROBLEMS:
        health.problems.append(f"... and {len(skipped) - MAX_PROBLEMS} more skipped records")
    if not health.readable:
        return health
    if holder is not None and holder.is_stale():
        report.add(
            Severity.WARNING,
            "stale-lock",
            f"attach lock held by {holder}, who is gone or let the lease run out "
            "(the next attach takes it over)",
            session_id,
        )
    mark = memo.get(COMPACTION_MARK_KEY)
    stale = _stale_mark(mark)
    if stale is not None:
        report.add(
            Severity.WARNING,
            "stale-mark",
            f"compaction mark of {stale} left behind (the next compaction takes it over)",
            session_id,
        )
    return health


def _stale_mark(mark: object) -> LockHolder | None:
    """The holder of a compaction mark that is stale, else ``None``."""
    if not isinstance(mark, dict):
        return None
    try:
        holder = LockHolder.from_dict(mark.get("holder"))
    except ValueError:
        return None
    return holder if holder.is_stale() else None


@contextlib.contextmanager
def _collected() -> Iterator[list[str]]:
    """The ``CorruptRecordWarning`` texts raised inside the block, in order (once each)."""
    texts: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CorruptRecordWarning)
        yield texts
    for w in caught:
        if issubclass(w.category, CorruptRecordWarning):
            text = str(w.message)
            if text not in texts:
                texts.append(text)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


# -- backend storage ------------------------------------------------------------------


class _BackendChecks:
    def stored_ids(self, report: DoctorReport) -> list[str] | None:
        """Every session id the storage holds, read without the store's listing (which
        skips what it cannot read); ``None`` when the backend cannot tell."""
        return None

    def check(self, report: DoctorReport, ids: list[str]) -> None:
        """Findings about the storage itself."""


def _backend_checks(store: Store) -> _BackendChecks | None:
    from threadline.store.jsonl import JSONLStore
    from threadline.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        return _SQLiteChecks(store.path)
    if isinstance(store, JSONLStore):
        return _JSONLChecks(store.root)
    return None


class _SQLiteChecks(_BackendChecks):
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """Read-only; immutable where SQLite cannot make its -shm file (a read-only
        directory), as the store opens it (the store opened, so that was safe)."""
        uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
        con = sqlite3.connect(uri, uri=True)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            con.close()
            if "unable to open" not in str(exc):
                raise
            con = sqlite3.connect(uri + "&immutable=1", uri=True)
        try:
            yield con
        finally:
            con.close()

    def stored_ids(self, report: DoctorReport) -> list[str] | None:
        """Ids read from the session table row by row, as far as it can be read."""
        ids: list[str] = []
        try:
            with self._connection() as con:
                for row in con.execute("SELECT id FROM sessions ORDER BY rowid"):
                    ids.append(str(row[0]))
        except sqlite3.Error as exc:
            report.add(
                Severity.DAMAGE,
                "listing",
                f"the session table can be read only as far as {len(ids)} sessions: {exc}",
            )
        return ids

    def check(self, report: DoctorReport, ids: list[str]) -> None:
        from threadline.store.sqlite import SCHEMA_VERSION

        try:
            with self._connection() as con:
                version = con.execute("PRAGMA user_version").fetchone()[0]
                report.add(
                    Severity.NOTE,
                    "schema",
                    f"schema version {version} (this threadline writes {SCHEMA_VERSION})",
                )
                rows = [str(r[0]) for r in con.execute("PRAGMA integrity_check(100)")]
        except sqlite3.Error as exc:
            report.add(Severity.DAMAGE, "integrity", f"the integrity check stopped: {exc}")
            return
        lines = [line for row in rows for line in row.splitlines()]
        problems = [line for line in lines if line.strip() and not line.startswith("***")]
        if problems != ["ok"]:
            shown = "; ".join(problems[:MAX_PROBLEMS])
            more = (
                f" (and {len(problems) - MAX_PROBLEMS} more)"
                if len(problems) > MAX_PROBLEMS
                else ""
            )
            report.add(
                Severity.DAMAGE,
                "integrity",
                f"PRAGMA integrity_check found {len(problems)} problems: {shown}{more}",
            )


class _JSONLChecks(_BackendChecks):
    def __init__(self, root: Path) -> None:
        self.root = root

    def stored_ids(self, report: DoctorReport) -> list[str] | None:
        from threadline.store.jsonl import SESSIONS_DIR

        return sorted(
            p.name[: -len(".jsonl")]
            for p in (self.root / SESSIONS_DIR).glob("*/*.jsonl")
            if _SESSION_ID.fullmatch(p.name[: -len(".jsonl")])
        )

    def check(self, report: DoctorReport, ids: list[str]) -> None:
        from threadline.store.jsonl import SESSIONS_DIR
        from threadline.store.jsonl_file import FORMAT_VERSION, SessionPaths

        report.add(Severity.NOTE, "schema", f"JSONL format {FORMAT_VERSION}")
        sessions = self.root / SESSIONS_DIR
        if not sessions.is_dir():
            return
        for agent_dir in sorted(p for p in sessions.iterdir() if p.is_dir()):
            names = {p.name for p in agent_dir.iterdir()}
            sids = {n[: -len(".jsonl")] for n in names if n.endswith(".jsonl")}
            for name in sorted(names):
                path = agent_dir / name
                if _TEMP_FILE.match(name):
                    report.add(
                        Severity.WARNING,
                        "temp-file",
                        f"{path}: left by a write that was interrupted (safe to delete)",
                    )
                    continue
                owner = _owner(name)
                if owner is None or name.endswith(".jsonl"):
                    continue
                if owner not in sids:
                    what = "media folder" if name.endswith("_media") else "file"
                    report.add(
                        Severity.WARNING,
                        "orphan",
                        f"{path}: {what} of session {owner}, which does not exist "
                        "(left by an interrupted create or delete; safe to delete)",
                    )
                elif name.endswith(".jsonl.corrupt"):
                    count = sum(1 for line in path.read_bytes().splitlines() if line.strip())
                    report.add(
                        Severity.NOTE,
                        "set-aside",
                        f"{path}: {count} unreadable line(s) set aside earlier",
                        owner,
                    )
            for sid in sorted(sids):
                self._orphan_media(report, SessionPaths(sid, agent_dir.name, agent_dir))

    def _orphan_media(self, report: DoctorReport, paths: Any) -> None:
        media: Path = paths.media
        if not media.is_dir():
            return
        referenced = {
            ref.decode("utf-8", "replace").rsplit("/", 1)[-1]
            for ref in _MEDIA_REF.findall(paths.jsonl.read_bytes())
        }
        for file in sorted(media.iterdir()):
            if file.name not in referenced and not _TEMP_FILE.match(file.name):
                report.add(
                    Severity.WARNING,
                    "orphan",
                    f"{file}: media no message refers to (left by an append that did not "
                    "finish; safe to delete)",
                    paths.sid,
                )


def _owner(name: str) -> str | None:
    """The session a JSONL store file belongs to, from its name."""
    for suffix in (".jsonl.corrupt", ".meta.json", "_summary.json", "_scratchpad.json", "_media"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    if name.endswith(".jsonl"):
        return name[: -len(".jsonl")]
    return None


# -- salvage --------------------------------------------------------------------------


def salvage(
    store: Store,
    report: DoctorReport,
    destination: Store,
    *,
    progress: Callable[[Any], None] | None = None,
) -> SalvageReport:
    """Copy every readable session of ``store`` into ``destination``, which must hold no
    sessions yet (a salvage never merges into a store in use). Sessions the check found
    unreadable are left behind and named in the result."""
    if destination.url == store.url:
        raise UsageError("the salvage destination must be a new store, not the damaged one")
    if destination.list_sessions(limit=1).total:
        raise UsageError(
            f"the salvage destination {destination.url} already holds sessions; "
            "give the URL of a new, empty store"
        )
    result = SalvageReport(destination=destination.url)
    result.left_behind = [s.session_id for s in report.unreadable]
    readable = report.readable
    if readable:
        copied = copy_sessions(store, destination, session_ids=readable, progress=progress)
        result.sessions = _salvaged(copied, report)
    report.salvage = result
    return result


def _salvaged(copied: CopyReport, report: DoctorReport) -> list[SalvagedSession]:
    health = {s.session_id: s for s in report.sessions}
    out = []
    for c in copied.sessions:
        if c.ok:
            status = "salvaged"
        elif c.dest_messages and health[c.session_id].problems:
            status = "partly salvaged"  # the copy holds what could be read
        else:
            status = "failed"
        out.append(
            SalvagedSession(
                session_id=c.session_id,
                status=status,
                messages=c.dest_messages,
                checkpoints=c.dest_checkpoints,
                error=c.error if status != "salvaged" else None,
            )
        )
    return out


__all__ = [
    "DoctorReport",
    "Finding",
    "SalvageReport",
    "SalvagedSession",
    "SessionHealth",
    "Severity",
    "check_session",
    "check_store",
    "salvage",
]
