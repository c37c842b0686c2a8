"""Sessions into threadline: our JSON export, OpenAI chat logs, and other agents' transcripts.

This module finds which format a file is (:func:`detect_format`), reads it within the
import limit, hands its text to the format's reader (``_PARSERS``) and maps what the
reader returns to sessions. Each format has a module of its own: ``claude_code``,
``codex_rollout``, ``openhands_events`` (with ``openhands_v1`` and
``openhands_legacy``), ``gemini_cli``, ``chat_logs`` (OpenAI chat logs and Anthropic
Messages JSON), ``swe_agent``, ``aider_history``, ``opencode``, ``pi_session``,
``entire_transcript``, ``supyagent`` (JSONL + ``_summary.json``), ``agsh`` and
``agents_sdk`` (SQLite databases, via ``databases``). They share ``records`` and
``record_fields`` and never import this module.

Every reader is all-or-nothing: it parses the whole file into memory and
returns only when every record made sense, so a half-read file never reaches a
store. Input must be strict UTF-8; a bad byte or a malformed record raises
:class:`ImportFormatError` naming the line (and the byte offset for bad UTF-8).
Records a reader understands but that are not conversation (UI progress,
reasoning blobs, snapshots) are skipped and counted, never dropped silently:
the counts are in ``ImportedSession.metadata["skipped"]`` (Claude Code's
``progress`` lines by ``data.type``: an ``agent_progress`` line repeats a
subagent's message, which the subagent's own ``subagents/agent-*.jsonl`` holds).
Each format's module says what it reads and what it skips.

Real logs reuse tool-call ids (tau-bench, SWE-agent), so readers keep calls and
results in file order and leave pairing to :func:`threadline.messages.group_units`,
which pairs positionally among equal ids.

Our own JSON export is read by :func:`threadline.interop.export.from_json_export`,
next to the writer that defines it.

Readers return what the file holds, in order. :func:`import_sessions` then maps
each conversation to what a threadline session should hold, faithfully: the
source's own session id, times, model, working directory and git branch go in
session metadata; the title is the first genuine user request; a native
compaction (Claude Code's ``compact_boundary`` + ``isCompactSummary``, Codex's
``compacted``) becomes a checkpoint covering exactly what it summarised, so a
window never shows a summary beside the messages it replaces; environment
events (Claude Code ``system`` lines, OpenHands agent-state changes) are kept
in ``metadata["events"]``, never as invented tool calls; and broken tool
chains are kept as written but flagged in ``metadata["import_repair"]`` and
counted, never silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from threadline.errors import (
    ConfigError,
    ImportFormatError,
    ImportTooLarge,
    UsageError,
)
from threadline.interop import (
    agents_sdk,
    agsh,
    aider_history,
    bounds,
    chat_logs,
    claude_code,
    codex_rollout,
    databases,
    entire_transcript,
    gemini_cli,
    opencode,
    openhands_events,
    openhands_v1,
    pi_session,
    shapes,
    supyagent,
    swe_agent,
)
from threadline.interop.export import EXPORT_FORMAT, ImportedSession, from_json_export
from threadline.interop.record_fields import EVENT_TEXT_LENGTH as EVENT_TEXT_LENGTH
from threadline.interop.records import Parsed as _Parsed
from threadline.interop.records import jsonl as _jsonl
from threadline.interop.records import load_json as _load_json
from threadline.json_limits import MAX_JSON_DEPTH, nesting_too_deep
from threadline.messages import Message
from threadline.requests import first_request, request_text
from threadline.stamps import utcnow
from threadline.store import sqlite_files
from threadline.store.retention import parse_size

FORMATS = (
    "threadline",
    "openai",
    "openai-jsonl",
    "openai-runs",
    "claude-code",
    "codex",
    "swe-agent",
    "openhands",
    "gemini",
    "aider",
    "supyagent",
    "anthropic",
    "agsh",
    "agents-sdk",
    "opencode",
    "pi",
    "entire",
)
"""What :func:`detect_format` and a sync can answer (``agsh`` and ``agents-sdk`` are
SQLite databases, read by :func:`read_source`)."""

_CLAUDE_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
}
_CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}


TITLE_LENGTH = 80
"""Characters of the first request kept as a session title (cut at a word)."""
TITLE_SCAN = 4 * TITLE_LENGTH
"""Characters of the request read for its title, unless they are mostly whitespace."""
MAX_EVENTS = 1000
"""Environment events kept per session; more are counted in ``events_omitted``."""
_NO_MODEL = {"<synthetic>"}
"""Model names a tool writes on messages it made itself (Claude Code's notices)."""


class NotATranscript(ImportFormatError):
    """The file is in none of the :data:`FORMATS` (as opposed to one of them, malformed):
    a directory sync passes over such files instead of failing on them."""


# -- reading files ----------------------------------------------------------------


MAX_IMPORT_BYTES = 256 * 1024 * 1024
"""The most bytes one import reads, unless ``$THREADLINE_MAX_IMPORT_BYTES`` says more."""
IMPORT_LIMIT_ENV = "THREADLINE_MAX_IMPORT_BYTES"
READ_CHUNK = 1024 * 1024


def import_limit() -> int:
    """The most bytes an import reads: ``$THREADLINE_MAX_IMPORT_BYTES`` (a size such as
    ``1GiB`` or a number of bytes), else ``MAX_IMPORT_BYTES``."""
    raw = os.environ.get(IMPORT_LIMIT_ENV, "").strip()
    if not raw:
        return MAX_IMPORT_BYTES
    try:
        return parse_size(raw)
    except UsageError as exc:
        raise ConfigError(f"{IMPORT_LIMIT_ENV}={raw!r}: {exc}") from None


def read_bounded(stream: IO[bytes], limit: int, name: str) -> bytes:
    """All of ``stream`` if it holds at most ``limit`` bytes, else ``ImportTooLarge`` as
    soon as it is seen to hold more: an import is held in memory whole, and a device or
    a pipe (``/dev/zero``, ``yes |``) may never end."""
    chunks: list[bytes] = []
    total = 0
    while chunk := stream.read(min(READ_CHUNK, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_large(name, limit)
    return b"".join(chunks)


def _too_large(name: str, limit: int, size: int | None = None) -> ImportTooLarge:
    what = f"{size:,} bytes, more" if size is not None else "more"
    return ImportTooLarge(
        f"{what} than the import limit of {limit:,} bytes; set {IMPORT_LIMIT_ENV} "
        "(e.g. 1GiB) to import something this large",
        path=name,
    )


_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file, else ``ImportFormatError``
    saying what it is. Opened without blocking and checked on the open descriptor: a
    named pipe with no writer would hang ``open`` itself, and one that has a writer, or
    a device, may never end (standard input, ``-``, is where a stream is read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise ImportFormatError(
                f"{kind}, not a regular file: only files are imported (pipe a stream into "
                "`threadline sessions import -`)",
                path=str(path),
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_text(path: Path, max_bytes: int | None = None) -> str:
    """The file's text: at most ``max_bytes`` (default ``import_limit()``), strict
    UTF-8, and, for JSON, nested no deeper than ``MAX_JSON_DEPTH`` (the parser recurses,
    so this is checked before any parse, for every reader and every caller)."""
    limit = import_limit() if max_bytes is None else max_bytes
    # a regular file might be a database this process holds (a store's file or its -wal
    # beside a directory's transcripts): closing a descriptor on it drops its locks
    data = sqlite_files.read_unheld(path, lambda p: _read_bounded_file(p, limit))
    if data is None:
        raise ImportFormatError(
            "an SQLite file this process has open (a store's database or its -wal / -shm), "
            "not a transcript",
            path=str(path),
        )
    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{"):
        deep = nesting_too_deep(data)
        if deep is not None:
            raise ImportFormatError(
                f"JSON nests more than {MAX_JSON_DEPTH} levels deep", line=deep, path=str(path)
            )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportFormatError(
            f"invalid UTF-8 at byte offset {exc.start}", line=line, path=str(path)
        ) from exc
    return text.removeprefix("\ufeff")


def _read_source_text(path: Path) -> str:
    """A file's text, or an OpenHands V1 conversation directory's events (given as the
    directory or one of its event files) as one JSON array (``openhands_v1``)."""
    files = openhands_v1.conversation_files(path)
    if files is None:
        return _read_text(path)
    return openhands_v1.joined(files, _read_text, import_limit())


def _read_bounded_file(path: Path, limit: int) -> bytes:
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise _too_large(str(path), limit, size)  # refused before reading
        return read_bounded(f, limit, str(path))


# -- detection and dispatch ----------------------------------------------------------


def _classify(first: Any, whole: bool) -> str | None:
    if isinstance(first, list):
        head = first[0] if first else {}
        if isinstance(head, dict) and "traj" in head:
            return "openai-runs"
        if isinstance(head, dict) and ("action" in head or "observation" in head):
            return "openhands"
        if openhands_v1.is_event(head):
            return "openhands"
        if whole and _anthropic_messages(first):
            return "anthropic"
        return "openai" if isinstance(head, dict) and ("role" in head or not first) else None
    if not isinstance(first, dict):
        return None
    if first.get("format") == EXPORT_FORMAT:
        return "threadline"
    if whole and "history" in first and ("trajectory" in first or "info" in first):
        return "swe-agent"
    if whole and opencode.looks_like(first):
        return "opencode"
    if pi_session.looks_like(first):
        return "pi"
    if entire_transcript.looks_like(first):
        return "entire"
    if whole and "sessionId" in first and isinstance(first.get("messages"), list):
        return "gemini"
    if whole and isinstance(first.get("messages"), list):
        messages = first["messages"]
        anthropic = "system" in first and _only_turns(messages)
        return "anthropic" if anthropic or _anthropic_messages(messages) else "openai-runs"
    if isinstance(first.get("history"), list):
        return "openhands"
    kind = first.get("type") if isinstance(first.get("type"), str) else None
    if kind in _CODEX_TYPES and "payload" in first:
        return "codex"
    if supyagent.looks_like(first):
        return "supyagent"
    if kind in _CLAUDE_TYPES and ("sessionId" in first or "uuid" in first or "type" in first):
        return "claude-code"
    return "openai-jsonl" if "role" in first else None


_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}
"""Content blocks only the Messages API writes (Chat Completions has none of them)."""


def _only_turns(messages: list[Any]) -> bool:
    return all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in messages)


def _anthropic_messages(messages: list[Any]) -> bool:
    """Whether a message list is the Messages API's: only user / assistant turns, and a
    block only it writes (a plain-text conversation reads the same either way)."""
    if not _only_turns(messages):
        return False
    return any(
        isinstance(block, dict)
        and (block.get("type") in _ANTHROPIC_BLOCKS or isinstance(block.get("source"), dict))
        for m in messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
    )


def _detect(text: str, path: Path) -> str:
    head = text.lstrip()
    if not head:
        raise NotATranscript("empty: nothing to import", path=str(path))
    if head.startswith("# aider chat started at"):
        return "aider"
    if not head.startswith(("{", "[")):
        raise NotATranscript(
            "not a format threadline can import (neither JSON nor an aider chat history)",
            path=str(path),
        )
    try:
        data = json.loads(text)
        found = _classify(data, whole=True)
    except json.JSONDecodeError as exc:
        if not exc.msg.startswith("Extra data"):
            raise ImportFormatError(
                f"invalid JSON: {exc.msg}", line=exc.lineno, path=str(path)
            ) from exc
        _, data = next(_jsonl(text, path, Counter()))
        found = _classify(data, whole=False)
    if found is None:
        raise NotATranscript(
            f"not a conversation threadline can import: {shapes.describe(data)}", path=str(path)
        )
    return found


def detect_format(path: str | Path) -> str:
    """Which of :data:`FORMATS` the file at ``path`` is; ImportFormatError if none."""
    p = Path(path)
    if databases.is_database(p):
        return _parse_database(_read_database(p, None).database or b"", str(p))[0]
    return _detect(_read_source_text(p), p)


_PARSERS: dict[str, Callable[[str, Path], _Parsed]] = {
    "openai": chat_logs.parse_openai_runs,
    "openai-runs": chat_logs.parse_openai_runs,
    "openai-jsonl": chat_logs.parse_openai_jsonl,
    "claude-code": claude_code.parse,
    "codex": codex_rollout.parse,
    "swe-agent": swe_agent.parse,
    "openhands": openhands_events.parse,
    "gemini": gemini_cli.parse,
    "aider": aider_history.parse,
    "anthropic": chat_logs.parse_anthropic,
    "supyagent": lambda text, path: supyagent.parse(text, path, _read_companion(path)),
    "opencode": opencode.parse,
    "pi": pi_session.parse,
    "entire": entire_transcript.parse,
}


def _parse(path: str | Path, fmt: str | None = None) -> tuple[str, _Parsed]:
    p = Path(path)
    text = _read_source_text(p)
    fmt = fmt or _detect(text, p)
    if fmt == "threadline":
        raise ImportFormatError("a threadline export: read it with import_file()", path=str(p))
    return fmt, _PARSERS[fmt](text, p)


def _one(parsed: _Parsed, path: str | Path, hint: str) -> list[Message]:
    if len(parsed.runs) != 1:
        raise ImportFormatError(
            f"the file holds {len(parsed.runs)} conversations; read them with {hint}",
            path=str(path),
        )
    return parsed.runs[0]


def _one_conversation(fmt: str, runs_reader: str = "") -> Callable[[str | Path], list[Message]]:
    """The reader of a file in ``fmt`` holding one conversation; a file with several is an
    error that names ``runs_reader``, the reader of them all."""

    def read(path: str | Path) -> list[Message]:
        return _one(_parse(path, fmt)[1], path, runs_reader)

    read.__doc__ = f"The one conversation in a {fmt} file."
    return read


def read_transcript_runs(path: str | Path) -> list[list[Message]]:
    """Every conversation in a transcript file of any supported format."""
    return _parse(path)[1].runs


def read_transcript(path: str | Path) -> list[Message]:
    """The one conversation in a transcript file, format detected."""
    return _one(_parse(path)[1], path, "read_transcript_runs()")


def read_openai_runs(path: str | Path) -> list[list[Message]]:
    """A JSON array of messages (one run), of runs with ``traj``, or ``{"messages": [...]}``."""
    return _parse(path, "openai-runs")[1].runs


def read_openhands_runs(path: str | Path) -> list[list[Message]]:
    """One conversation per ``output.jsonl`` line (or one for a JSON array of events)."""
    return _parse(path, "openhands")[1].runs


read_claude_code = _one_conversation("claude-code")
read_codex = _one_conversation("codex")
read_openai_chat = _one_conversation("openai-runs", "read_openai_runs()")
read_swe_agent = _one_conversation("swe-agent")
read_openhands = _one_conversation("openhands", "read_openhands_runs()")
read_gemini = _one_conversation("gemini")
read_aider = _one_conversation("aider")


# -- sessions: what a store should hold ----------------------------------------------

_SESSION_FACTS = (
    "cwd",
    "git_branch",
    "git_commit",
    "version",
    "cli_version",
    "originator",
    "model_provider",
    "summaries",
    "exit_status",
    "model_stats",
    "source_agent",
)
"""Facts a reader found about the whole file that a session's metadata keeps."""


@dataclass(frozen=True, slots=True)
class SourceText:
    """A file or stream read once (size and UTF-8 checked), with the hash of its text.

    A sync compares the hash before parsing anything, and the parser then reads this
    same text: a pipe cannot be read twice, and a growing file must be hashed and
    parsed as one version. A SQLite database (agsh, the Agents SDK) is held as a
    consistent snapshot in ``database`` instead (``text`` is empty), and a supyagent
    session's ``_summary.json`` rides along in ``companion``; both are in the hash.
    """

    text: str
    name: str
    """How errors and reports name it: the path, or ``-`` for standard input."""
    sha256: str
    database: bytes | None = None
    companion: str | None = None


def read_source(path: str | Path, *, name: str | None = None) -> SourceText:
    """Read ``path`` for import; ``name`` replaces the path in errors (a spooled stdin)."""
    p = Path(path)
    try:
        if databases.is_database(p):
            return _read_database(p, name)
        text = _read_source_text(p)
        companion = _read_companion(p) if name is None else None
    except ImportFormatError as exc:
        if name is None:
            raise
        renamed = type(exc)(str(exc).replace(str(p), name, 1))
        renamed.line, renamed.path = exc.line, name
        raise renamed from exc
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    if companion is not None:
        digest.update(b"\0" + companion.encode("utf-8", "surrogatepass"))
    return SourceText(
        text=text, name=name or str(p), sha256=digest.hexdigest(), companion=companion
    )


def _read_database(p: Path, name: str | None) -> SourceText:
    limit = import_limit()
    # the snapshot takes in the write-ahead log too, so it counts against the limit
    wal = p.with_name(p.name + "-wal")
    size = p.stat().st_size + (wal.stat().st_size if wal.is_file() else 0)
    if size > limit:
        raise _too_large(str(p), limit, size)
    image = databases.snapshot(p)
    if len(image) > limit:
        raise _too_large(str(p), limit, len(image))
    digest = hashlib.sha256(image).hexdigest()
    return SourceText(text="", name=name or str(p), sha256=digest, database=image)


def _read_companion(p: Path) -> str | None:
    """A supyagent session's summary file, read with the session (see ``supyagent``)."""
    summary = supyagent.summary_path(p)
    if p.suffix != ".jsonl" or not summary.is_file():
        return None
    return _read_text(summary)


def sessions_from_source(source: SourceText, *, fresh_ids: bool = True) -> list[ImportedSession]:
    """Every conversation of a read source, mapped as the module docstring says.

    ``fresh_ids`` applies to threadline exports (see ``from_json_export``).
    """
    began = utcnow()
    where = Path(source.name)
    if source.database is not None:
        fmt, parsed = _parse_database(source.database, source.name)
    else:
        fmt = _detect(source.text, where)
        if fmt == "threadline":
            data = _load_json(source.text, where)
            return [_bounded(from_json_export(data, path=source.name, fresh_ids=fresh_ids))]
        if fmt == "supyagent":  # its summary was read (and hashed) with it
            parsed = supyagent.parse(source.text, where, source.companion)
        else:
            parsed = _PARSERS[fmt](source.text, where)
    return [_bounded(_session(fmt, parsed, i, began)) for i in range(len(parsed.runs))]


def _bounded(imported: ImportedSession) -> ImportedSession:
    """``imported`` within ``bounds``: usage counts out of range dropped (flagged
    ``bad_usage``, the values in ``usage_dropped``), over-long metadata texts cut (named
    in ``import_truncated``; a message's flagged ``metadata_truncated``)."""
    flagged = False
    for m in imported.messages:
        if m.usage is not None:
            m.usage, dropped = bounds.bad_usage(m.usage)
            if dropped:
                _flag(m, "bad_usage", usage_dropped=dropped)
                flagged = True
        if m.metadata:
            cut = bounds.cut_texts(m.metadata, bounds.MAX_MESSAGE_METADATA_TEXT)
            if cut:
                _flag(m, "metadata_truncated", import_truncated=cut)
                flagged = True
    cut = bounds.cut_texts(imported.metadata, bounds.MAX_SESSION_METADATA_TEXT)
    if cut:
        imported.metadata["import_truncated"] = cut
    imported.source_id = bounds.bounded_source_id(imported.source_id)
    if flagged:
        imported.repairs = repair_counts(imported.messages)
        imported.metadata["import_repairs"] = imported.repairs
    return imported


def _parse_database(image: bytes, name: str) -> tuple[str, _Parsed]:
    with databases.opened(image, name) as conn:
        tables = databases.columns(conn)
        for fmt, module in (("agsh", agsh), ("agents-sdk", agents_sdk)):
            if module.matches(tables):
                parsed = module.parse(conn, name, tables)
                if not parsed.runs:
                    raise NotATranscript(
                        f"no sessions with messages in this {fmt} database", path=name
                    )
                return fmt, parsed
    raise NotATranscript(
        "a SQLite database, but not an agsh or Agents SDK session database", path=name
    )


def import_sessions(path: str | Path, *, name: str | None = None) -> list[ImportedSession]:
    """One session per conversation in the file at ``path``, any supported format."""
    return sessions_from_source(read_source(path, name=name))


def import_file(path: str | Path, *, fresh_ids: bool = True) -> ImportedSession:
    """One session from a file: our JSON export, OpenAI chat JSON / JSONL, or a transcript.

    ``fresh_ids`` applies to threadline exports (see the module docstring);
    other formats always get new ids. A file holding several conversations is
    refused with a pointer to what imports them.
    """
    p = Path(path)
    sessions = sessions_from_source(read_source(p), fresh_ids=fresh_ids)
    if len(sessions) != 1:
        raise ImportFormatError(
            f"the file holds {len(sessions)} conversations; import them all (or one with "
            "--run N) with `threadline sessions import`, or read them with import_sessions()",
            path=str(p),
        )
    return sessions[0]


def _session(fmt: str, parsed: _Parsed, index: int, began: datetime) -> ImportedSession:
    info, extra = parsed.info, parsed.extra(index)
    messages, checkpoints, kept_before = _fold_compactions(
        parsed.runs[index], extra.get("compactions", [])
    )
    repairs = _flag_repairs(messages, free_form=extra.get("free_form_calls", set()))
    if index == 0 and parsed.repairs:  # damage to the file, reported once
        repairs = dict(sorted((Counter(repairs) + parsed.repairs).items()))
    metadata: dict[str, Any] = {"format": fmt}
    metadata.update({k: info[k] for k in _SESSION_FACTS if info.get(k) is not None})
    metadata.update(extra.get("facts", {}))
    if "cwd" not in metadata:  # where it ran: else the first directory its messages report
        cwd = next((c for m in messages if isinstance(c := m.metadata.get("cwd"), str) and c), None)
        if cwd:
            metadata["cwd"] = cwd
    times = {k: extra[k] for k in ("started", "updated") if extra.get(k)}
    created, updated = _source_times(messages, {**info, **times}, began)
    metadata.update(
        {k: v for k, v in (("source_created_at", created), ("source_updated_at", updated)) if v}
    )
    source_id = extra.get("source_id") or _own_id(fmt, info)
    if fmt == "claude-code" and info.get("agent_id") and info.get("session_id"):
        metadata["agent_id"] = info["agent_id"]
        metadata["parent_source_id"] = info["session_id"]  # a subagent's parent session
    events = [
        {**e, "after_message": kept_before[min(e["after_message"], len(kept_before) - 1)]}
        for e in extra.get("events") or []
    ]
    if events:
        metadata["events"] = events[:MAX_EVENTS]
        if len(events) > MAX_EVENTS:
            metadata["events_omitted"] = len(events) - MAX_EVENTS
    if parsed.skipped:
        metadata["skipped"] = dict(parsed.skipped)
    if repairs:
        metadata["import_repairs"] = repairs
    named = [
        m.model for m in messages if m.role == "assistant" and m.model and m.model not in _NO_MODEL
    ]
    model = named[-1] if named else info.get("model") or extra.get("model")
    return ImportedSession(
        messages=messages,
        title=extra.get("title") or session_title(messages),
        agent=fmt,
        model=model,
        metadata=metadata,
        checkpoints=checkpoints,
        source_id=source_id,
        source_format=fmt,
        run=index + 1,
        runs=len(parsed.runs),
        repairs=repairs,
    )


def _own_id(fmt: str, info: Mapping[str, Any]) -> str | None:
    """The id the source gave the conversation; a Claude Code subagent shares its
    parent's ``sessionId``, so its agent id is added."""
    found = {
        "claude-code": "session_id",
        "codex": "id",
        "gemini": "session_id",
        "pi": "session_id",
    }.get(fmt)
    own = info.get(found) if found else None
    if not isinstance(own, str) or not own:
        return None
    agent = info.get("agent_id") if fmt == "claude-code" else None
    return f"{own}/agent-{agent}" if isinstance(agent, str) and agent else own


def session_title(messages: Iterable[Message]) -> str | None:
    """The first genuine user request on one line, cut at a word: never a tool's wrapper,
    a caveat or a system reminder (``threadline.requests``)."""
    found = first_request(messages)
    text = request_text(found) if found is not None else None
    if not text:
        return None
    # the start of the text makes the title: a 30 MB request is not split whole (its
    # first TITLE_LENGTH characters, once over the limit, are the same either way)
    line = " ".join(text[:TITLE_SCAN].split())
    if len(line) <= TITLE_LENGTH and len(text) > TITLE_SCAN:
        line = " ".join(text.split())  # mostly whitespace so far: all of it
    if len(line) <= TITLE_LENGTH:
        return line
    cut = line[: TITLE_LENGTH - 1]
    space = cut.rfind(" ")
    if space > TITLE_LENGTH // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "\u2026"


def _iso(value: Any) -> str | None:
    """A source's own time as ISO 8601; a time without offset stays without one (aider
    writes local time), rather than being passed off as UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return None


def _source_times(
    messages: list[Message], info: Mapping[str, Any], began: datetime
) -> tuple[str | None, str | None]:
    """When the conversation began and last changed, by the source's own clock.

    A message stamped before this import began carries a time read from the file; one
    stamped later got the default (the format has no times), so it says nothing. The
    source's own start and update times, where it states them, come first.
    """
    stamped = sorted(m.created_at for m in messages if m.created_at < began)
    first = stamped[0].isoformat() if stamped else None
    last = stamped[-1].isoformat() if stamped else None
    return _iso(info.get("started")) or first, _iso(info.get("updated")) or last


def _fold_compactions(
    raw: list[Message], compactions: list[dict[str, Any]]
) -> tuple[list[Message], list[dict[str, Any]], list[int]]:
    """Native compactions as checkpoints covering exactly the messages they summarised.

    A Claude Code summary message leaves the history (its text becomes the checkpoint's
    summary): left in, a window would send it beside the messages it stands for. A
    Codex compaction was recorded with the index of the message it precedes. Also
    returns, per index into ``raw`` (and one past the end), how many kept messages
    precede it, for events placed by raw index.
    """
    at: defaultdict[int, list[dict[str, Any]]] = defaultdict(list)
    for c in compactions:
        at[int(c["before"])].append(c)
    kept: list[Message] = []
    checkpoints: list[dict[str, Any]] = []
    carry: dict[str, Any] = {}

    def add(summary: str, metadata: dict[str, Any]) -> None:
        checkpoints.append(
            {
                "covers_up_to": len(kept),
                "summary": summary,
                "metadata": {k: v for k, v in metadata.items() if v is not None},
            }
        )

    kept_before: list[int] = []
    for i, m in enumerate(raw):
        kept_before.append(len(kept))
        for c in at.pop(i, []):
            add(c["summary"], c["metadata"])
        if m.role == "user" and m.metadata.get("compact_summary"):
            boundary = m.metadata.get("compact_boundary") or {}
            add(
                m.text,
                {
                    "native": "claude-code",
                    "trigger": boundary.get("trigger"),
                    "pre_tokens": boundary.get("pre_tokens"),
                    "source_uuid": m.metadata.get("source_uuid"),
                    "source_created_at": _iso(boundary.get("at")) or m.created_at.isoformat(),
                },
            )
            if "cwd" in m.metadata:
                carry["cwd"] = m.metadata["cwd"]
            continue
        for key, value in carry.items():
            m.metadata.setdefault(key, value)
        carry = {}
        kept.append(m)
    for index in sorted(at):
        for c in at[index]:
            add(c["summary"], c["metadata"])
    kept_before.append(len(kept))
    return kept, checkpoints, kept_before


_CHAIN_REPAIRS = ("orphan_result", "unanswered_call")


def _flag(m: Message, kind: str, **details: Any) -> None:
    kinds = m.metadata.setdefault("import_repair", [])
    if kind not in kinds:
        kinds.append(kind)
    m.metadata.update(details)


def _flag_repairs(messages: list[Message], *, free_form: set[str]) -> dict[str, int]:
    """Flag what an import keeps as written but must not pass silently: arguments that
    should be JSON and are not (``malformed_arguments``, ids in ``malformed_calls``;
    the raw text is kept in ``raw_arguments``), and broken chains (``flag_chains``)."""
    for m in messages:
        bad = [c.id for c in m.tool_calls if c.raw_arguments is not None and c.id not in free_form]
        if bad:
            _flag(m, "malformed_arguments", malformed_calls=bad)
    flag_chains(messages)
    return repair_counts(messages)


def flag_chains(messages: list[Message]) -> None:
    """(Re)flag broken tool chains in oldest-first ``messages``: a result whose call is
    not open (``orphan_result``) and a call no result answers (``unanswered_call``, ids
    in ``unanswered_calls``). Pairing is the view's (``group_units``): among the results
    after an assistant message, by id, positionally among equal ids. Earlier chain flags
    are cleared first, so an appended batch can be flagged again against the message
    stored before it."""
    for m in messages:
        kinds = [k for k in m.metadata.get("import_repair") or [] if k not in _CHAIN_REPAIRS]
        m.metadata.pop("unanswered_calls", None)
        if kinds:
            m.metadata["import_repair"] = kinds
        else:
            m.metadata.pop("import_repair", None)
    owner: Message | None = None
    answered: list[bool] = []

    def close() -> None:
        if owner is not None:
            missing = [c.id for c, done in zip(owner.tool_calls, answered, strict=True) if not done]
            if missing:
                _flag(owner, "unanswered_call", unanswered_calls=missing)

    for m in messages:
        if m.role == "tool":
            calls = owner.tool_calls if owner is not None else []
            hit = next(
                (i for i, c in enumerate(calls) if not answered[i] and c.id == m.tool_call_id),
                None,
            )
            if hit is None:
                _flag(m, "orphan_result")
            else:
                answered[hit] = True
            continue
        close()
        owner, answered = None, []
        if m.role == "assistant" and m.tool_calls:
            owner, answered = m, [False] * len(m.tool_calls)
    close()


def repair_counts(messages: Iterable[Message]) -> dict[str, int]:
    """How many repairs the messages' ``import_repair`` flags record, by kind."""
    counts: Counter[str] = Counter()
    for m in messages:
        for kind in m.metadata.get("import_repair") or []:
            if kind == "unanswered_call":
                counts[kind] += len(m.metadata.get("unanswered_calls") or [])
            elif kind == "malformed_arguments":
                counts[kind] += len(m.metadata.get("malformed_calls") or [])
            else:
                counts[kind] += 1
    return dict(sorted(counts.items()))
