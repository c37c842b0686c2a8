"""Other agents' sessions kept in step with a store: what ``threadline sessions import`` does.

A *source* is one conversation of one file, or of standard input. It is known by
its own id where it has one (a Claude Code or Codex session id, a subagent's
``<session>/agent-<id>``, an exported session's id), else by where it came from:
``file:<absolute path>`` (or ``stdin:sha256:<hash>``), with ``#run-N`` added in a
file of several conversations. That identity is kept in the session's metadata as
``source_id`` beside ``source_format``; threadline's session ids stay its own.

Syncing a source again finds its session by scanning session metadata through
``Store.list_sessions`` (no backend keeps an index of it). A file whose text hash
and path are the ones recorded is unchanged without being parsed. Otherwise it is
parsed, and when the messages imported before are still its first messages
(compared by fingerprint: role, record id and content, so a record edited since is
not taken for the one imported) only the messages after them are appended, with any
new native compactions as checkpoints. A source that no longer begins with what was
imported (a record edited or gone: the refusal names the first), or a session that
had messages added in threadline since, fails with a message saying so: guessing
would corrupt one or the other. Only a response still streaming when it was
imported may have grown since (more text or calls after what was stored).

Messages get ids derived from the source identity and their position, so a batch
sent twice (two syncs racing, a retry) is stored once: appends are idempotent on
ids. A session is dated by its source (``source_dates``: when the conversation began
and last changed, as the importer read them, also kept in metadata as
``source_created_at`` / ``source_updated_at``), and its batches are written at the
source's time, so re-importing leaves the dates as they are and a grown source moves
``updated_at`` to its new last message. A conversation that names its parent
(``interop/lineage.py``) is listed under that parent's session once both are here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from threadline.errors import (
    ImportFormatError,
    SessionNotFound,
    SourceChanged,
    ThreadlineError,
    UsageError,
)
from threadline.interop import openhands_v1
from threadline.interop.export import ImportedSession, exported_time
from threadline.interop.importers import (
    NotATranscript,
    SourceText,
    flag_chains,
    import_limit,
    read_bounded,
    read_source,
    repair_counts,
    sessions_from_source,
)
from threadline.interop.lineage import (
    COMPACTION,
    KIND_KEY,
    child_kind,
    compaction_title,
    parent_source_id,
    unlinked_compaction_title,
)
from threadline.messages import Message, TextPart
from threadline.store.checks import DEFAULT_AGENT, MAX_PAGE_SIZE, check_title, validate_agent
from threadline.store.encoding import prepare_messages
from threadline.store.protocol import Store
from threadline.store.session_info import EPOCH, SessionInfo

STDIN = "-"
"""The path argument that means standard input."""
SUFFIXES = (".jsonl", ".json", ".traj", ".db", ".sqlite", ".sqlite3")
"""Files a directory walk considers (databases: agsh, Agents SDK); aider's history is
found by its name."""
AIDER_HISTORY = ".aider.chat.history.md"
LAST_WRITTEN = (
    "source_sha256",
    "source_messages",
    "source_fingerprint",
    "source_checkpoints",
)
"""A session's import markers: written after its messages and checkpoints, in one
update, so a session that has them holds everything they count (see ``Syncer``)."""
_ID_NAMESPACE = uuid.UUID("6f0c9a52-1d7e-4c1b-9a43-2f5e8b7d0c11")
"""Namespace of the message ids derived from a source (see the module docstring)."""


class SyncStatus(StrEnum):
    NEW = "new"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    SKIPPED = "skipped"
    """Found by walking a directory but not a conversation (another JSON file, or one
    with no messages): passed over, not an error."""


@dataclass(slots=True)
class SyncResult:
    """What happened to one source."""

    source: str
    """The path as given or found, or ``-``."""
    status: SyncStatus
    run: int | None = None
    """Which conversation of a multi-conversation file (from 1); None in a file of one."""
    format: str | None = None
    source_id: str | None = None
    session_id: str | None = None
    title: str | None = None
    messages_added: int = 0
    checkpoints_added: int = 0
    repairs: dict[str, int] = field(default_factory=dict)
    """Repairs flagged on the messages this sync stored, by kind."""
    error: str | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    held: bool = False
    """The conversation's last reply (its last assistant message and what follows), which
    may still grow, was left for a later sync (``Syncer.sync_source(hold_reply=True)``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "run": self.run,
            "format": self.format,
            "status": self.status.value,
            "source_id": self.source_id,
            "session_id": self.session_id,
            "title": self.title,
            "messages_added": self.messages_added,
            "checkpoints_added": self.checkpoints_added,
            "repairs": dict(self.repairs),
            "error": self.error,
        }


@dataclass(slots=True)
class SyncReport:
    results: list[SyncResult] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        found = Counter(r.status for r in self.results)
        return {status.value: found[status] for status in SyncStatus}

    @property
    def messages_added(self) -> int:
        return sum(r.messages_added for r in self.results)

    @property
    def repairs(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.repairs)
        return dict(sorted(total.items()))

    @property
    def failures(self) -> list[SyncResult]:
        return [r for r in self.results if r.status is SyncStatus.FAILED]

    def to_json(self) -> dict[str, Any]:
        """The stable ``sessions import --json`` document."""
        return {
            "counts": self.counts(),
            "messages_added": self.messages_added,
            "repairs": self.repairs,
            "sources": [r.to_json() for r in self.results],
        }


# -- finding sources ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    path: Path | None
    """None for standard input."""
    found: bool = False
    """Found by walking a directory, so a file that is no conversation is skipped."""
    refused: str | None = None
    """Why a file found in a directory is not read (a link out of it, a link loop): the
    source fails with this, and the rest of the directory is imported."""

    @property
    def name(self) -> str:
        return STDIN if self.path is None else str(self.path)


def find_sources(args: Sequence[str]) -> list[Source]:
    """The files named (with a Claude Code session file, its ``subagents/`` beside it),
    every candidate file under the directories named (recursively), and ``-`` for
    standard input; all checked before anything is imported, so a typo
    imports nothing. A Claude Code subagent file (``<session>/subagents/``) comes after
    the files it may belong to, so its parent session exists when it is linked."""
    sources: list[Source] = []
    seen: set[Path] = set()
    for arg in args:
        if arg == STDIN:
            if any(s.path is None for s in sources):
                raise UsageError("'-' (standard input) can be given only once")
            sources.append(Source(None))
            continue
        path = Path(arg).expanduser()
        if path.is_dir():
            found = list(_walk(path))
            if not found:
                raise UsageError(
                    f"no files to import under {arg} (looked for {', '.join(SUFFIXES)} "
                    f"and {AIDER_HISTORY})"
                )
        elif path.exists():
            found = [source_of(path), *subagent_sources(path)]
        else:
            raise UsageError(f"no such file or directory: {arg}")
        for source in found:
            key = _resolved(source.path) if source.path else Path(STDIN)
            if key is None or key not in seen:  # a link loop is reported, not merged
                if key is not None:
                    seen.add(key)
                sources.append(source)
    return sorted(sources, key=lambda s: s.path is not None and s.path.parent.name == "subagents")


def subagent_sources(path: Path) -> list[Source]:
    """The subagents Claude Code keeps beside a session file (``<session>.jsonl`` and
    ``<session>/subagents/*.jsonl``), as a directory import of the folder finds them: a
    file import brings its subagents along."""
    folder = path.with_suffix("") / "subagents"
    if path.suffix != ".jsonl" or not folder.is_dir():
        return []
    return list(_walk(folder))


def source_of(path: Path, *, found: bool = False) -> Source:
    """The source a file belongs to: an OpenHands V1 event file's conversation
    directory, else the file itself."""
    events = openhands_v1.conversation_files(path)
    return Source(events[0].parent if events else path, found=found)


def sources_under(top: Path) -> list[Source]:
    """Every candidate under the directory ``top``, as a directory argument finds them
    (none is no error here: a watched folder may still be empty)."""
    return list(_walk(top))


def is_candidate(name: str) -> bool:
    """A file name a directory walk considers."""
    return name.endswith(SUFFIXES) or name.endswith(AIDER_HISTORY)


def _resolved(path: Path) -> Path | None:
    """Where ``path`` leads, links followed; None for a link loop (``resolve`` raises
    ``RuntimeError`` there on Python 3.11 and 3.12, ``OSError`` later)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return None


def _walk(top: Path) -> Iterator[Source]:
    """Candidate files under ``top``, and an OpenHands V1 conversation directory (one
    file per event) as one source. Symlinked directories are not followed; a symlinked
    file is followed only while it stays inside ``top`` (a link to a file elsewhere is
    refused, as is a link loop, each as its own failed source)."""
    inside = _resolved(top) or top
    for root, dirs, files in os.walk(top):
        dirs.sort()
        events = any(openhands_v1.EVENT_FILE.match(n) for n in files) and (
            openhands_v1.conversation_files(Path(root)) is not None
        )
        if events:
            yield Source(Path(root), found=True)
        for name in sorted(files):
            if events and openhands_v1.EVENT_FILE.match(name):
                continue
            if not is_candidate(name):
                continue
            path = Path(root) / name
            refused = None
            if path.is_symlink():
                target = _resolved(path)
                if target is None:
                    refused = "a symbolic link loop: not followed"
                elif not target.is_relative_to(inside):
                    refused = (
                        f"a symbolic link to {target}, outside {top}: not followed "
                        "(import that file by its own path to include it)"
                    )
            yield Source(path, found=True, refused=refused)


# -- syncing -------------------------------------------------------------------------


FINGERPRINT_VERSION = "v2:"
"""Prefixes a fingerprint of what is stored (see ``fingerprint``). A marker without it
was written before content counted (role, result id and record id only): the first
sync that meets one compares the stored messages themselves, once, and rewrites it."""


def _identity(m: Message) -> list[Any]:
    return [m.role, m.tool_call_id, m.metadata.get("source_uuid")]


def _content(m: Message) -> list[Any]:
    """What an import stores of a message: its parts (text, images, files) and calls."""
    return [
        [p.model_dump(mode="json") for p in m.parts],
        [c.model_dump(mode="json") for c in m.tool_calls],
    ]


def fingerprint(messages: Iterable[Message]) -> str:
    """What must stay the same for a re-read source to extend an import: per message its
    role, result id, source record id and content (parts and tool calls), so an edited
    record is seen, not taken as the one imported before."""
    digest = hashlib.sha256()
    for m in messages:
        key = [*_identity(m), *_content(m)]
        digest.update(json.dumps(key, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return FINGERPRINT_VERSION + digest.hexdigest()


def _grew(stored: Message, reread: Message) -> bool:
    """A response still streaming when it was imported: read again, it has more text or
    more calls after what was stored (the stored one is kept; the late calls' results
    are flagged as orphans, see ``flag_chains``). Checked anywhere in the session, not
    only at its end: a later sync may read the session again after more was appended."""
    calls = [c.model_dump(mode="json") for c in stored.tool_calls]
    return (
        stored.role == "assistant"
        and reread.text.startswith(stored.text)
        and [c.model_dump(mode="json") for c in reread.tool_calls[: len(calls)]] == calls
        and all(isinstance(p, TextPart) for p in stored.parts)
    )


def first_change(stored: Sequence[Message], reread: Sequence[Message]) -> int | None:
    """The index of the first stored message the re-read source no longer has as it was
    (another record, or the same record with other content), or None."""
    for i, (old, new) in enumerate(zip(stored, reread, strict=False)):
        if _identity(old) != _identity(new):
            return i
        if _content(old) != _content(new) and not _grew(old, new):
            return i
    return None if len(reread) >= len(stored) else len(reread)


def checkpoint_args(
    raw: object, message_count: int, where: str
) -> tuple[int, str, dict[str, Any] | None]:
    """An imported checkpoint's fields, checked before anything is written: it must lie
    within the imported messages (0 for a compaction before the first one)."""
    if not isinstance(raw, dict):
        raise ImportFormatError("a checkpoint must be an object", path=where)
    covers, summary, metadata = raw.get("covers_up_to"), raw.get("summary"), raw.get("metadata")
    if isinstance(covers, bool) or not isinstance(covers, int) or not 0 <= covers <= message_count:
        raise ImportFormatError(
            f"checkpoint covers_up_to {covers!r} is outside the {message_count} imported messages",
            path=where,
        )
    if not isinstance(summary, str) or (metadata is not None and not isinstance(metadata, dict)):
        raise ImportFormatError("a checkpoint needs a text summary", path=where)
    return covers, summary, metadata


@dataclass(slots=True)
class _Incoming:
    """One conversation read from a source on its way in: creating and updating
    a session take the same three things, so they travel together."""

    imported: ImportedSession
    facts: dict[str, Any]
    """The ``source_*`` metadata the session is stamped with (its id and format among them)."""
    where: str
    """The source's name, for errors."""

    @property
    def fmt(self) -> str:
        return str(self.facts["source_format"])

    @property
    def key(self) -> str:
        return str(self.facts["source_id"])


class SyncInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``Syncer.sync``: still an interrupt, carrying what was committed."""

    def __init__(self, report: SyncReport) -> None:
        super().__init__()
        self.report = report


class Syncer:
    """Imports sources into one store, or brings earlier imports up to date.

    ``agent`` and ``title`` apply to sessions this creates; ``run`` picks one
    conversation (from 1) of each file; ``stdin`` is what ``-`` reads. With
    ``new_version`` a source whose imported part changed (``SourceChanged``) is imported
    as a new session, ``source_previous_version`` naming the one it replaces; that one
    keeps its messages and stops being synced (its ``source_id`` gets ``#replaced``).
    """

    def __init__(
        self,
        store: Store,
        *,
        agent: str | None = None,
        title: str | None = None,
        run: int | None = None,
        stdin: IO[bytes] | None = None,
        new_version: bool = False,
    ) -> None:
        if run is not None and (isinstance(run, bool) or run < 1):
            raise UsageError(f"run must be 1 or more, got {run!r}")
        self.store = store
        self.new_version = new_version
        self.agent = validate_agent(agent) if agent is not None else None
        self.title = check_title(title)
        self.run = run
        self.stdin = stdin
        self._by_id: dict[tuple[str, str], SessionInfo] | None = None
        self._by_file: dict[tuple[str, str], list[SessionInfo]] = {}
        self._waiting: dict[tuple[str, str], set[str]] = {}
        """Sessions not yet under the parent they name, by that parent's source."""

    def sync(
        self,
        sources: Iterable[Source],
        *,
        progress: Callable[[Source, list[SyncResult]], None] | None = None,
    ) -> SyncReport:
        """Every source in turn; ``progress`` is told after each. Interrupted (Ctrl-C),
        it raises ``SyncInterrupted`` holding what the sources done so far became (a
        source cut short left nothing of its own: see ``_create``)."""
        report = SyncReport()
        try:
            for source in sources:
                results = self.sync_source(source)
                report.results.extend(results)
                if progress is not None:
                    progress(source, results)
        except KeyboardInterrupt as exc:
            raise SyncInterrupted(report) from exc
        return report

    def sync_source(self, source: Source, *, hold_reply: bool = False) -> list[SyncResult]:
        """One file or stdin: a result per conversation, or one failure for the file.

        With ``hold_reply`` a conversation's last reply (its last assistant message and
        what follows it) is left for a later sync: an agent writing its transcript may
        still add text or calls to it (Claude Code writes a reply's blocks as lines of
        their own, with tool results between them), and a stored message is not grown
        (see ``_grew``).

        Errors a file's content or the store raise become ``failed`` results (the CLI
        shows them); an interrupt or an unexpected bug propagates.
        """
        try:
            if source.refused is not None:
                raise ImportFormatError(source.refused, path=source.name)
            text = self._read(source)
            base = str(source.path.resolve()) if source.path is not None else STDIN
            unchanged = self._unchanged_by_hash(source, base, text.sha256)
            if unchanged is not None:
                return unchanged
            sessions = sessions_from_source(text)
        except NotATranscript as exc:
            return [_failed(source, exc, skip=source.found)]
        except (ThreadlineError, OSError) as exc:
            return [_failed(source, exc)]
        except RecursionError as exc:  # nesting no reader's check caught: this source's own
            deep = ImportFormatError(f"nests too deep to read ({exc})", path=source.name)
            return [_failed(source, deep)]
        if self.title is not None and self.run is None and len(sessions) > 1:
            problem = UsageError(
                f"--title names one conversation, but {source.name} holds {len(sessions)}; "
                "pick one with --run N"
            )
            return [_failed(source, problem)]
        if self.run is not None:
            if self.run > len(sessions):
                held = f"{len(sessions)} conversation{'s' if len(sessions) != 1 else ''}"
                problem = UsageError(f"{source.name} holds {held}; there is no run {self.run}")
                return [_failed(source, problem)]
            sessions = [sessions[self.run - 1]]
        results = []
        for imported in sessions:
            try:
                results.append(self._sync_one(source, text, base, imported, hold_reply))
            except (ThreadlineError, OSError) as exc:
                skip = source.found and not imported.messages
                results.append(_failed(source, exc, skip=skip, imported=imported))
        return results

    # -- reading

    def _read(self, source: Source) -> SourceText:
        if source.path is not None:
            return read_source(source.path)
        if self.stdin is None:
            raise UsageError("'-' reads standard input, but none was given")
        data = read_bounded(self.stdin, import_limit(), STDIN)  # a pipe may never end
        with tempfile.TemporaryDirectory(prefix="threadline-import-") as tmp:
            spooled = Path(tmp) / "stdin"
            spooled.write_bytes(data)  # through a file: every check of the reader applies
            return read_source(spooled, name=STDIN)

    # -- finding earlier imports

    def _index(self) -> dict[tuple[str, str], SessionInfo]:
        if self._by_id is None:
            self._by_id = {}
            offset = 0
            while True:
                page = self.store.list_sessions(limit=MAX_PAGE_SIZE, offset=offset)
                for info in page.items:
                    self._remember(info, replace=False)
                offset += len(page.items)
                if not page.items or offset >= page.total:
                    break
        return self._by_id

    def _remember(self, info: SessionInfo, *, replace: bool = True) -> None:
        meta, index = info.metadata, self._by_id
        fmt, sid = meta.get("source_format"), meta.get("source_id")
        if index is None or not isinstance(fmt, str) or not isinstance(sid, str):
            return  # not read yet: the first lookup reads the store, this one included
        if replace or (fmt, sid) not in index:
            index[(fmt, sid)] = info  # the most recently updated wins among duplicates
        parent = parent_source_id(meta)
        if parent is not None:
            waiting = self._waiting.setdefault((fmt, parent), set())
            if info.parent_id is None:
                waiting.add(info.id)
            else:
                waiting.discard(info.id)
        where, sha = meta.get("source_path"), meta.get("source_sha256")
        if isinstance(where, str) and isinstance(sha, str):
            same = self._by_file.setdefault((where, sha), [])
            same[:] = [i for i in same if i.id != info.id] + [info]

    def _unchanged_by_hash(self, source: Source, base: str, sha: str) -> list[SyncResult] | None:
        """Every wanted conversation of a file already imported from this path with this
        exact text: unchanged, without parsing it."""
        self._index()
        same = self._by_file.get((base, sha))
        if not same:
            return None
        runs = same[0].metadata.get("source_runs", 1)
        by_run = {i.metadata.get("source_run", 1): i for i in same}
        wanted = [self.run] if self.run is not None else list(range(1, int(runs) + 1))
        if any(r not in by_run or not self._holds_its_counts(by_run[r]) for r in wanted):
            return None  # parsed and synced: a damaged session is repaired there
        results = []
        for r in wanted:
            info = self._link_parent(by_run[r])
            results.append(
                SyncResult(
                    source=source.name,
                    status=SyncStatus.UNCHANGED,
                    run=r if int(runs) > 1 else None,
                    format=info.metadata.get("source_format"),
                    source_id=info.metadata.get("source_id"),
                    session_id=info.id,
                    title=info.title,
                )
            )
        return results

    def _holds_its_counts(self, info: SessionInfo) -> bool:
        """Whether the session holds at least what its markers say was imported (an
        import before markers were written last could record counts it never stored)."""
        meta = info.metadata
        messages, checkpoints = meta.get("source_messages"), meta.get("source_checkpoints", 0)
        if not isinstance(messages, int) or not isinstance(checkpoints, int):
            return False
        if info.last_seq < messages:
            return False
        return checkpoints == 0 or len(self.store.list_checkpoints(info.id)) >= checkpoints

    def _parent(self, metadata: dict[str, Any]) -> SessionInfo | None:
        """The session of the parent an imported conversation names, once imported."""
        fmt, parent = metadata.get("source_format"), parent_source_id(metadata)
        if not isinstance(fmt, str) or parent is None:
            return None
        return self._index().get((fmt, parent))

    def _link_parent(self, info: SessionInfo) -> SessionInfo:
        """A subagent imported before its parent is listed under it once the parent is
        here (a compaction summariser is titled after it then)."""
        if info.parent_id is not None:
            return info
        parent = self._parent(info.metadata)
        if parent is None or parent.id == info.id:
            return info
        title = None
        if child_kind(info.metadata) == COMPACTION and info.title == unlinked_compaction_title(
            info.metadata
        ):
            title = compaction_title(parent.title, parent.id)
        info = self.store.update_session(info.id, parent=parent.id, title=title)
        self._remember(info)
        return info

    def _adopt(self, fmt: str, key: str) -> None:
        """Sessions imported before their parent (another run, or earlier in this one)
        are listed under it once it is here."""
        for child in sorted(self._waiting.pop((fmt, key), set())):
            try:
                self._link_parent(self.store.session_info(child))
            except SessionNotFound:
                continue  # deleted since

    # -- writing

    def _sync_one(
        self,
        source: Source,
        text: SourceText,
        base: str,
        imported: ImportedSession,
        hold_reply: bool = False,
    ) -> SyncResult:
        fmt = imported.source_format or "threadline"
        key = imported.source_id or (
            f"file:{base}" if source.path is not None else f"stdin:sha256:{text.sha256[:16]}"
        )
        if imported.source_id is None and imported.runs > 1:
            key += f"#run-{imported.run}"
        facts = {
            "source_id": key,
            "source_format": fmt,
            "source_path": base,
            "source_sha256": text.sha256,
            "source_runs": imported.runs,
        }
        if imported.runs > 1:
            facts["source_run"] = imported.run
        existing = self._index().get((fmt, key))
        held = False
        if hold_reply:
            stored = existing.metadata.get("source_messages", 0) if existing is not None else 0
            cut = self._reply_start(imported, stored if isinstance(stored, int) else 0)
            if cut is not None:
                imported = dataclasses.replace(imported, messages=imported.messages[:cut])
                held = True
                facts["source_sha256"] = None  # so this text is read again, not "unchanged"
        result = SyncResult(
            source=source.name,
            status=SyncStatus.NEW,
            run=imported.run if imported.runs > 1 else None,
            format=fmt,
            source_id=key,
            title=imported.title,
            held=held,
        )
        job = _Incoming(imported, facts, where=text.name)
        if existing is None:
            self._create(job, result)
            return result
        try:
            self._update(existing, job, result)
        except SourceChanged:
            if not self.new_version:
                raise
            self._retire(existing, fmt, key)  # first: a crash then leaves a plain new import
            facts["source_previous_version"] = existing.id
            self._create(job, result)
        return result

    @staticmethod
    def _reply_start(imported: ImportedSession, stored: int) -> int | None:
        """Where the last reply (the last assistant message and what follows) begins,
        when it can be held: past what is stored already, after the first message, and
        no compaction covers it."""
        messages = imported.messages
        reply = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=0)
        covered = [c.get("covers_up_to") for c in imported.checkpoints if isinstance(c, dict)]
        if reply < max(stored, 1) or any(not isinstance(c, int) or c > reply for c in covered):
            return None
        return reply

    def _retire(self, info: SessionInfo, fmt: str, key: str) -> None:
        """An import replaced by a new version: it keeps its messages, but no longer
        stands for its source (no sync finds it by id or by file again)."""
        self.store.update_session(
            info.id, metadata={"source_id": f"{key}#replaced", "source_sha256": None}
        )
        index = self._index()
        if (fmt, key) in index and index[(fmt, key)].id == info.id:
            del index[(fmt, key)]
        for same in self._by_file.values():
            same[:] = [i for i in same if i.id != info.id]

    def _create(self, job: _Incoming, result: SyncResult) -> None:
        imported, facts, where, fmt, key = job.imported, job.facts, job.where, job.fmt, job.key
        messages = imported.messages
        if not messages:
            raise ImportFormatError("no messages to import", path=where)
        for i, m in enumerate(messages):
            m.id = _message_id(fmt, key, i)
        agent = self.agent or validate_agent(imported.agent or DEFAULT_AGENT)
        created, updated = source_dates(imported)
        # refuse before creating; written at the source's time, not the import's
        prepared = prepare_messages(imported.model, messages, at=updated)
        checkpoints = [checkpoint_args(c, len(prepared), where) for c in imported.checkpoints]
        metadata = {**imported.metadata, **facts}
        markers = {k: metadata.pop(k) for k in LAST_WRITTEN if k in metadata}
        markers.update(
            source_messages=len(messages),
            source_fingerprint=fingerprint(messages),
            source_checkpoints=len(checkpoints),
        )
        parent = self._parent(metadata)
        title = imported.title
        kind = child_kind(metadata)
        if kind is not None:
            metadata[KIND_KEY] = kind
        if kind == COMPACTION:
            title = (
                compaction_title(parent.title, parent.id)
                if parent is not None
                else unlinked_compaction_title(metadata)
            )
        session = self.store.create_session(
            agent=agent,
            model=imported.model,
            title=self.title if self.title is not None else title,
            metadata=metadata,
            created_at=created,
            updated_at=updated,
            parent=parent.id if parent is not None else None,
        )
        try:
            self.store.append_messages(session.id, prepared)
            for covers_up_to, summary, cp_metadata in checkpoints:
                self.store.add_checkpoint(
                    session.id, covers_up_to=covers_up_to, summary=summary, metadata=cp_metadata
                )
            # last: a session without them is an import cut short, completed next time
            info = self.store.update_session(session.id, metadata=markers)
        except BaseException:
            with contextlib.suppress(ThreadlineError):
                self.store.delete_session(session.id, force=True)  # all or nothing
            raise
        self._remember(info)
        self._adopt(fmt, key)
        result.session_id, result.title = info.id, info.title
        result.messages_added, result.checkpoints_added = len(prepared), len(checkpoints)
        result.repairs = dict(imported.repairs)

    def _update(self, info: SessionInfo, job: _Incoming, result: SyncResult) -> None:
        imported, facts, where, fmt, key = job.imported, job.facts, job.where, job.fmt, job.key
        meta = info.metadata
        result.session_id, result.title = info.id, info.title
        messages = imported.messages
        done = self._imported_count(info, messages, fmt, key, where)
        complete = done == meta.get("source_messages") and self._holds_its_counts(info)
        fresh = messages[done:]
        # beyond the latest stored one: a source may keep only its latest (supyagent)
        latest = self.store.latest_checkpoint(info.id)
        reached = latest.covers_up_to if latest is not None else -1
        checkpoints = [
            args
            for args in (checkpoint_args(c, len(messages), where) for c in imported.checkpoints)
            if args[0] > reached
        ]
        refresh = {k: v for k, v in imported.metadata.items() if k != "import_repairs"}
        refresh.update(facts)
        if complete and not fresh and not checkpoints:
            refresh["source_fingerprint"] = fingerprint(messages)  # an older marker: now
            changed = {k: v for k, v in refresh.items() if meta.get(k) != v}
            if changed:
                info = self.store.update_session(info.id, metadata=changed)
                self._remember(info)
            self._link_parent(info)
            result.status = SyncStatus.UNCHANGED
            return
        repairs: dict[str, int] = {}
        if fresh:
            before = self.store.tail(info.id, 1)
            window = [m.model_copy(deep=True) for m in before] + fresh
            flag_chains(window)  # against what is stored, not against the re-read source
            repairs = repair_counts(fresh)
            for i, m in enumerate(fresh, start=done):
                m.id = _message_id(fmt, key, i)
            _, updated = source_dates(imported)
            self.store.append_messages(info.id, prepare_messages(info.model, fresh, at=updated))
        for covers, summary, cp_metadata in checkpoints:
            self.store.add_checkpoint(
                info.id, covers_up_to=covers, summary=summary, metadata=cp_metadata
            )
        total = Counter(meta.get("import_repairs") or {})
        total.update(repairs)
        refresh.update(
            {
                "source_messages": len(messages),
                "source_fingerprint": fingerprint(messages),
                "source_checkpoints": len(self.store.list_checkpoints(info.id)),
                "import_repairs": dict(sorted(total.items())),
            }
        )
        # the markers (text hash, counts, fingerprint) last, in one write
        info = self.store.update_session(
            info.id,
            model=imported.model,
            metadata=refresh,
            title=imported.title if info.title is None else None,  # not a rename: no date
        )
        info = self._link_parent(info)
        self._remember(info)
        result.status = SyncStatus.UPDATED
        result.title = info.title
        result.messages_added, result.checkpoints_added = len(fresh), len(checkpoints)
        result.repairs = repairs

    def _imported_count(
        self, info: SessionInfo, messages: list[Message], fmt: str, key: str, where: str
    ) -> int:
        """How many of the source's first messages the session holds, checked to be
        them: by the markers when the session holds what they say and the source's first
        messages still fingerprint the same, else by reading the session (an import cut
        short, its messages known by the ids derived from the source; a record edited
        since; a marker of an older version) and comparing message by message."""
        meta = info.metadata
        marked = meta.get("source_messages")
        if isinstance(marked, int) and info.last_seq == marked:
            if len(messages) < marked:
                raise _no_longer_begins(info, where)
            if fingerprint(messages[:marked]) == meta.get("source_fingerprint"):
                return marked
        stored = self.store.read_messages(info.id)
        ours = 0
        for m in stored:
            if m.id != _message_id(fmt, key, ours):
                break
            ours += 1
        if ours < len(stored):
            raise UsageError(
                f"session {info.id} (imported from {where}) has had messages added since; "
                "not syncing into it"
            )
        changed = first_change(stored, messages)
        if changed is not None:
            raise _changed(info, where, stored[changed], messages, changed)
        return ours


AFRESH = (
    "threadline keeps what it imported: delete that session to import the source afresh, "
    "or import it with --new-version to keep both"
)


def _no_longer_begins(info: SessionInfo, where: str) -> SourceChanged:
    return SourceChanged(
        f"already imported as session {info.id}, but it no longer begins with the "
        f"messages imported then; {AFRESH}",
        path=where,
    )


def _changed(
    info: SessionInfo, where: str, stored: Message, messages: list[Message], index: int
) -> SourceChanged:
    """The refusal of a source whose imported part changed, naming the first change."""
    if index >= len(messages):
        return _no_longer_begins(info, where)
    record = stored.metadata.get("source_uuid")
    named = f"record {record} (message {index + 1})" if record else f"message {index + 1}"
    new = messages[index]
    if _identity(stored) != _identity(new):
        what = "is gone: another message stands in its place"
    elif stored.text != new.text:
        what = "has other text"
    elif stored.tool_calls != new.tool_calls:
        what = "has other tool calls"
    else:
        what = "has other content"
    return SourceChanged(
        f"already imported as session {info.id}, but it no longer begins with the messages "
        f"imported then: {named} {what}; {AFRESH}",
        path=where,
    )


def source_dates(imported: ImportedSession) -> tuple[datetime | None, datetime | None]:
    """When an imported conversation began and last changed, by its source's clock:
    what the file states (a threadline export's dates), else what the importer read from
    it (``source_created_at``: its stated start or first timed message;
    ``source_updated_at``: its stated update or last timed message). ``None`` where the
    source has no times: the store dates the session now."""
    meta = imported.metadata
    created = imported.created_at or exported_time(meta.get("source_created_at"))
    updated = imported.updated_at or exported_time(meta.get("source_updated_at"))
    if created is not None and created < EPOCH:
        created = None
    if updated is not None and updated < EPOCH:
        updated = None
    if created is not None and (updated is None or updated < created):
        updated = created  # none stated, or a source's clock that went back
    return created, updated


def _message_id(fmt: str, key: str, index: int) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"{fmt}\n{key}\n{index}"))


def _failed(
    source: Source,
    exc: BaseException,
    *,
    skip: bool = False,
    imported: ImportedSession | None = None,
) -> SyncResult:
    runs = imported.runs if imported is not None else 1
    return SyncResult(
        source=source.name,
        status=SyncStatus.SKIPPED if skip else SyncStatus.FAILED,
        run=imported.run if imported is not None and runs > 1 else None,
        format=imported.source_format if imported is not None else None,
        source_id=imported.source_id if imported is not None else None,
        error=str(exc) or type(exc).__name__,
        exception=exc,
    )
