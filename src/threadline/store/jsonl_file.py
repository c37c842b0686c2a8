"""One JSONL session file: its line format, and reading it forwards and backwards.

This is the file-level half of the JSONL backend (``store/jsonl.py`` is the store).
A session file is a creation record on line 1, then one line per message::

    {"type":"message","seq":7,"id":"...","batch_last":8,"total_tokens":412,
     "stored_at":"2025-01-15T10:30:00.000000Z","message":{"role":"user",...}}

(on one line). ``batch_last`` is the last seq of the batch the line was written in:
a batch is *committed* once its closing line (``seq == batch_last``) is complete.
The committed part of a file ends after its last complete line, unless that line is
a valid message line with ``seq < batch_last``: then the run of lines of that batch
at the end is an unfinished append (a crash or, without the lock, a write in
progress) and not part of the session. A complete line that cannot be read is
corrupt: it is skipped, copied to ``<id>.jsonl.corrupt`` once, and keeps its seq
slot so that seqs are never reused. ``tail_state`` (backwards) and ``Index.extend``
(forwards) apply the same rule.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import uuid
import warnings
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, overload

from pydantic import ValidationError

from threadline.errors import CorruptRecord, InvalidMessage
from threadline.json_scan import loads_object
from threadline.messages import ImagePart, Message, Part
from threadline.stamps import utcnow
from threadline.store.checks import CorruptRecordWarning, format_ts
from threadline.store.encoding import encode_message

FORMAT_VERSION = 1
FIRST_READ_BLOCK = 4 * 1024
READ_BLOCK = 256 * 1024
"""Reading backwards starts with a small block (most lines are short) and doubles up to this."""
MAX_HEADER_BYTES = 16 * 1024 * 1024
"""A first line longer than this is not a creation record (guards against garbage files)."""
JSON_INDENT = 2

_PREFIX_RE = re.compile(
    rb'\{"type":"message","seq":(\d+),"id":"((?:[^"\\]|\\.)*)","batch_last":(\d+),'
    rb'"total_tokens":(\d+),"stored_at":"([^"]*)","message":\{'
)


# -- the line format --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    """The envelope of one message line (the message itself is decoded on demand)."""

    seq: int
    id: str
    batch_last: int
    total_tokens: int
    stored_at: str


def envelope(raw: bytes) -> Line | None:
    """The line's envelope, or None when it is not a readable message line.

    Lines we wrote match a fixed prefix and are read without a JSON parse; anything
    else (a hand edit, another tool's key order) gets the full parse.
    """
    m = _PREFIX_RE.match(raw)
    if m is not None and raw.endswith(b"}}"):
        raw_id = m.group(2)
        ident = json.loads(b'"' + raw_id + b'"') if b"\\" in raw_id else raw_id.decode()
        return Line(int(m.group(1)), ident, int(m.group(3)), int(m.group(4)), m.group(5).decode())
    record = loads_object(raw)
    if record is None or record.get("type") != "message":
        return None
    seq, last, tokens = record.get("seq"), record.get("batch_last"), record.get("total_tokens")
    if not (type(seq) is int and type(last) is int and type(tokens) is int and 1 <= seq <= last):
        return None
    if not isinstance(record.get("message"), dict):
        return None
    return Line(seq, str(record.get("id", "")), last, tokens, str(record.get("stored_at", "")))


def decode(raw: bytes) -> Message | str:
    """The stored message, or the reason it cannot be read."""
    record = loads_object(raw)
    if record is None:
        return "not a JSON object"
    if record.get("type") != "message" or type(record.get("seq")) is not int:
        return "not a message record"
    try:
        message = Message.model_validate(record.get("message"))
    except ValidationError as exc:
        return f"invalid message: {exc.errors()[0]['msg']}"
    message.seq = record["seq"]
    return message


MEDIA_INLINE_MAX = 32 * 1024
"""Base64 image data longer than this is written to ``<id>_media/`` instead of the line."""
MEDIA_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


def externalize_media(m: Message, paths: SessionPaths) -> Message:
    """A copy whose large inline images live in the media folder, written and fsynced
    first, so a line never points at a file that is not there.

    A file is named by the message's seq and the part's index (``7-0.png``): values the
    store assigns, so nothing a caller sends (a message id of ``../../x``) picks a path,
    and a retried append after a crash rewrites the same name.
    """
    if isinstance(m.content, str) or not any(
        isinstance(p, ImagePart) and p.data and len(p.data) > MEDIA_INLINE_MAX for p in m.content
    ):
        return m
    assert m.seq is not None, "the store assigns the seq before media is written"
    parts: list[Part] = []
    for i, p in enumerate(m.content):
        if not (isinstance(p, ImagePart) and p.data and len(p.data) > MEDIA_INLINE_MAX):
            parts.append(p)
            continue
        name = f"{m.seq}-{i}{MEDIA_EXTENSIONS.get(p.media_type or '', '.bin')}"
        paths.media.mkdir(exist_ok=True)
        try:
            data = base64.b64decode(p.data, validate=True)
        except binascii.Error as exc:  # prepare_messages refuses this; a direct append may not
            raise InvalidMessage(f"message {m.id}: image data is not base64 ({exc})") from exc
        atomic_write(paths.media / name, data)
        parts.append(p.model_copy(update={"data": None, "media_ref": f"{paths.media.name}/{name}"}))
    return m.model_copy(update={"content": parts})


def inline_media(m: Message, paths: SessionPaths) -> Message:
    """The message as it was appended: images moved to the media folder read back inline."""
    if isinstance(m.content, str):
        return m
    prefix = f"{paths.media.name}/"
    if not any(
        isinstance(p, ImagePart) and (p.media_ref or "").startswith(prefix) for p in m.content
    ):
        return m
    parts: list[Part] = []
    for p in m.content:
        ref = p.media_ref if isinstance(p, ImagePart) else None
        if ref is None or not ref.startswith(prefix) or "/" in ref[len(prefix) :]:
            parts.append(p)
            continue
        try:
            data = (paths.media / ref[len(prefix) :]).read_bytes()
        except OSError as exc:
            warnings.warn(
                f"{paths.jsonl}: message {m.seq} refers to missing media {ref} ({exc.strerror}); "
                "kept as a reference",
                CorruptRecordWarning,
                stacklevel=3,
            )
            parts.append(p)
            continue
        parts.append(
            p.model_copy(update={"media_ref": None, "data": base64.b64encode(data).decode()})
        )
    return m.model_copy(update={"content": parts})


def encode_line(m: Message, *, batch_last: int, total_tokens: int, stored_at: str) -> bytes:
    body = encode_message(m)
    try:
        ident = json.dumps(m.id, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"message id {m.id!r} is not valid UTF-8 text") from exc
    head = (
        f'{{"type":"message","seq":{m.seq},"id":'.encode()
        + ident
        + f',"batch_last":{batch_last},"total_tokens":{total_tokens},'
        f'"stored_at":"{stored_at}","message":'.encode()
    )
    return head + body + b"}\n"


def json_bytes(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=JSON_INDENT) + "\n").encode("utf-8")


# -- files ------------------------------------------------------------------------


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never a mix; survives a power loss."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


class _SessionFile:
    """One file of a session: its id with a fixed ending, in the session's folder, so the
    naming scheme is one table rather than a property per file."""

    __slots__ = ("ending",)

    def __init__(self, ending: str) -> None:
        self.ending = ending

    @overload
    def __get__(self, paths: None, owner: type | None = None) -> _SessionFile: ...
    @overload
    def __get__(self, paths: SessionPaths, owner: type | None = None) -> Path: ...
    def __get__(self, paths: SessionPaths | None, owner: type | None = None) -> Path | _SessionFile:
        if paths is None:  # looked up on the class itself
            return self
        return paths.dir / f"{paths.sid}{self.ending}"


@dataclass(frozen=True, slots=True)
class SessionPaths:
    """Every file of one session; ids are validated, so none can leave ``dir``."""

    sid: str
    agent: str
    dir: Path

    jsonl = _SessionFile(".jsonl")
    meta = _SessionFile(".meta.json")
    summary = _SessionFile("_summary.json")
    scratchpad = _SessionFile("_scratchpad.json")
    pending = _SessionFile(".alongside.json")
    """What an append writes with its batch (``store/alongside.py``), between the batch's
    commit and the sidecars' update."""
    corrupt = _SessionFile(".jsonl.corrupt")
    media = _SessionFile("_media")

    def leftovers(self) -> list[Path]:
        """Files that outlive the .jsonl only when a create or delete crashed."""
        return [self.meta, self.summary, self.scratchpad, self.pending, self.corrupt]


def forward_lines(f: IO[bytes], start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Complete lines starting in [start, end), with their offsets, without the newline."""
    f.seek(start)
    pos = start
    while pos < end:
        line = f.readline()
        if not line.endswith(b"\n"):
            return
        yield pos, line[:-1]
        pos += len(line)


def backward_lines(f: IO[bytes], start: int, end: int) -> Iterator[tuple[int, bytes, bool]]:
    """Lines of [start, end), newest first: (offset, bytes, complete).

    Only the first item can be incomplete: the bytes after the last newline, left by a
    write that never finished. Long lines are joined once, not re-copied per block.
    """
    pos = end
    pending: list[bytes] = []
    first = True
    block = FIRST_READ_BLOCK
    while pos > start:
        size = min(block, pos - start)
        block = min(block * 2, READ_BLOCK)
        pos -= size
        f.seek(pos)
        chunk = f.read(size)
        cut = chunk.rfind(b"\n")
        while cut >= 0:
            piece = chunk[cut + 1 :]
            if pending:
                piece += b"".join(reversed(pending))
                pending.clear()
            if not first:
                yield pos + cut + 1, piece, True
            elif piece:
                yield pos + cut + 1, piece, False
            first = False
            chunk = chunk[:cut]
            cut = chunk.rfind(b"\n")
        pending.append(chunk)
    rest = b"".join(reversed(pending))
    if rest or not first:
        yield start, rest, not first


# -- the committed end ------------------------------------------------------------


@dataclass(slots=True)
class State:
    """Where the committed part of a session file ends, and the counters there."""

    end: int
    last_seq: int = 0
    total_tokens: int = 0
    stored_at: str | None = None


def session_start(header: dict[str, Any]) -> tuple[int, int]:
    """``(last_seq, total_tokens)`` before the first message line: a fork's creation
    record says where its shared prefix ends; any other session starts at zero."""
    start = header.get("start")
    if not isinstance(start, dict):
        return 0, 0
    seq, tokens = start.get("last_seq"), start.get("total_tokens")
    ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (seq, tokens))
    return (seq, tokens) if ok else (0, 0)  # type: ignore[return-value]


def tail_state(f: IO[bytes], header_end: int, size: int, start: tuple[int, int] = (0, 0)) -> State:
    """Read backwards to the last committed line (see the module docstring); ``start``
    is where a session with no message lines stands (``session_start``)."""
    end: int | None = None
    open_batch: int | None = None
    corrupt_after = 0
    for offset, raw, complete in backward_lines(f, header_end, size):
        if not complete or not raw.strip():
            continue
        line = envelope(raw)
        if end is None:
            if line is not None and line.seq < line.batch_last:
                open_batch = line.batch_last
                continue
            end = offset + len(raw) + 1
        elif open_batch is not None:
            if line is not None and line.batch_last == open_batch:
                continue
            end, open_batch = offset + len(raw) + 1, None
        if line is None:
            corrupt_after += 1
            continue
        return State(end, line.seq + corrupt_after, line.total_tokens, line.stored_at)
    return State(header_end if end is None else end, start[0] + corrupt_after, start[1])


@dataclass(slots=True)
class Index:
    """What a forward scan learned about a session file; extended as the file grows.

    The ids make appends idempotent without re-reading the file; the offsets let a
    read jump to any seq.
    """

    ino: int
    scanned_to: int
    """The committed end, as far as scanned."""
    lines: int
    """Complete lines before ``scanned_to``, the creation record included."""
    last_seq: int = 0
    total_tokens: int = 0
    stored_at: str | None = None
    ids: dict[str, int] = field(default_factory=dict)
    offsets: array[int] = field(default_factory=lambda: array("q"))
    """``offsets[seq - 1 - base]``: where that message's line starts, or -1."""
    base: int = 0
    """The seq before the first message line (a fork's fork seq, else 0)."""

    def offset_of(self, seq: int) -> int:
        k = seq - 1 - self.base
        return self.offsets[k] if 0 <= k < len(self.offsets) else -1

    def commit(self, offset: int, line: Line | None) -> None:
        """Count one committed line; ``None`` is a corrupt line holding its seq slot."""
        if line is None:
            self.last_seq += 1
            seq = self.last_seq
        else:
            seq = self.last_seq = line.seq
            self.total_tokens, self.stored_at = line.total_tokens, line.stored_at
            self.ids.setdefault(line.id, seq)
        k = seq - 1 - self.base
        while len(self.offsets) < k:
            self.offsets.append(-1)
        if len(self.offsets) == k:
            self.offsets.append(offset if line is not None else -1)

    @property
    def state(self) -> State:
        return State(self.scanned_to, self.last_seq, self.total_tokens, self.stored_at)


# -- an open session file ---------------------------------------------------------


class SessionFile:
    """A session's .jsonl opened for one operation (the caller holds the session lock)."""

    def __init__(self, paths: SessionPaths, f: IO[bytes], set_aside: set[tuple[str, int, str]]):
        self.paths = paths
        self.f = f
        self._set_aside = set_aside
        """Lines this process already copied to ``.corrupt``: (session, offset, digest)."""
        self._header: tuple[dict[str, Any], int] | None = None

    def size(self) -> int:
        return os.fstat(self.f.fileno()).st_size

    def header(self) -> tuple[dict[str, Any], int]:
        """The creation record and where the first message line starts (read once: the
        creation record never changes)."""
        if self._header is not None:
            return self._header
        self.f.seek(0)
        first = self.f.readline(MAX_HEADER_BYTES)
        record = loads_object(first) if first.endswith(b"\n") else None
        if record is None or record.get("type") != "session" or record.get("id") != self.paths.sid:
            raise CorruptRecord(
                f"not a threadline session file: its first line is not the session record "
                f"for {self.paths.sid} (move the file aside or delete the session)",
                where=str(self.paths.jsonl),
            )
        self._header = record, len(first)
        return self._header

    def start(self) -> tuple[int, int]:
        """See ``session_start``."""
        return session_start(self.header()[0])

    def extend(self, index: Index) -> None:
        """Scan from ``index.scanned_to`` to the end, by the same rule as ``tail_state``."""
        run: list[tuple[int, Line]] = []
        run_start, run_lines = index.scanned_to, index.lines
        lines = index.lines
        for offset, raw in forward_lines(self.f, index.scanned_to, self.size()):
            lines += 1
            end = offset + len(raw) + 1
            if not raw.strip():
                if not run:
                    index.scanned_to, index.lines = end, lines
                continue
            line = envelope(raw)
            if run and (line is None or line.batch_last != run[0][1].batch_last):
                for off, pending in run:
                    index.commit(off, pending)
                run.clear()
            if line is not None and line.seq < line.batch_last:
                if not run:
                    run_start, run_lines = offset, lines - 1
                run.append((offset, line))
                continue
            for off, pending in run:
                index.commit(off, pending)
            run.clear()
            if line is None:
                self.set_aside(offset, raw, lines, "not a readable message line")
            index.commit(offset, line)
            index.scanned_to, index.lines = end, lines
        if run:
            index.scanned_to, index.lines = run_start, run_lines

    def repair(self, index: Index) -> None:
        """Set aside and cut off what a crashed append left after the committed end."""
        size = self.size()
        if size <= index.scanned_to:
            return
        self.f.seek(index.scanned_to)
        tail = self.f.read(size - index.scanned_to)
        offset = index.scanned_to
        for number, piece in enumerate(tail.split(b"\n"), start=index.lines + 1):
            if piece:
                reason = "uncommitted write of an interrupted append"
                self.set_aside(offset, piece, number, reason, warn=False)
            offset += len(piece) + 1
        warnings.warn(
            f"{self.paths.jsonl}:{index.lines + 1}: removed {len(tail)} bytes left by an "
            f"interrupted append (never acknowledged); copied to {self.paths.corrupt}",
            CorruptRecordWarning,
            stacklevel=5,
        )
        self.f.truncate(index.scanned_to)
        self.f.flush()
        os.fsync(self.f.fileno())

    def report_unfinished(self, end: int) -> None:
        """Warn about lines after the committed end ``end``: a batch whose closing line
        is missing or torn. Under the session lock no append is in progress, so this is
        an append that never finished or a final line damaged after it was written; the
        whole batch is left out either way, and the next append moves it to ``.corrupt``."""
        size = self.size()
        if size <= end:
            return
        self.f.seek(end)
        pos, lines, blank, last = end, 0, True, b""
        while pos < size:
            chunk = self.f.read(min(READ_BLOCK, size - pos))
            if not chunk:
                break
            lines, blank, last = lines + chunk.count(b"\n"), blank and not chunk.strip(), chunk
            pos += len(chunk)
        if blank:
            return  # only blank space after the last complete line
        lines += not last.endswith(b"\n")  # a torn last line has no newline
        count = f"{lines} line{'s' if lines != 1 else ''}"
        warnings.warn(
            f"{self.paths.jsonl}:{self.line_number(end)}: an unfinished batch ({count} at the "
            "end, whose closing line is missing or damaged) is left out of the session: an "
            "append that never finished, or a last line damaged after it was written; "
            f"the next append moves it to {self.paths.corrupt}",
            CorruptRecordWarning,
            stacklevel=5,
        )

    def line_number(self, offset: int) -> int:
        """Counted only when a corrupt line needs reporting."""
        here = self.f.tell()
        self.f.seek(0)
        count, pos = 0, 0
        while pos < offset:
            chunk = self.f.read(min(READ_BLOCK * 4, offset - pos))
            if not chunk:
                break
            count += chunk.count(b"\n")
            pos += len(chunk)
        self.f.seek(here)
        return count + 1

    def set_aside(
        self, offset: int, raw: bytes, line_no: int, reason: str, *, warn: bool = True
    ) -> None:
        """Warn (on every read that meets it) and copy the line to ``.corrupt`` (once)."""
        paths = self.paths
        if warn:
            warnings.warn(
                f"{paths.jsonl}:{line_no}: skipping a line that cannot be read ({reason}); "
                f"it is left in place and copied to {paths.corrupt}",
                CorruptRecordWarning,
                stacklevel=6,
            )
        digest = hashlib.sha256(raw).hexdigest()[:16]
        key = (paths.sid, offset, digest)
        if key in self._set_aside:
            return
        try:
            known = paths.corrupt.read_bytes().splitlines()
        except FileNotFoundError:
            known = []
        for entry in known:
            rec = loads_object(entry)
            if rec is not None and rec.get("offset") == offset and rec.get("sha256") == digest:
                self._set_aside.add(key)
                return
        record = {
            "line": line_no,
            "offset": offset,
            "sha256": digest,
            "reason": reason,
            "found_at": format_ts(utcnow()),
            "text": raw.decode("utf-8", "replace"),
        }
        try:
            with open(paths.corrupt, "ab") as out:
                out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError:
            return  # a read-only store: the line stays in place, and the warning said so
        self._set_aside.add(key)

    def _collect(self, offset: int, raw: bytes, out: list[Message]) -> None:
        decoded = decode(raw)
        if isinstance(decoded, Message):
            out.append(inline_media(decoded, self.paths))
        else:
            self.set_aside(offset, raw, self.line_number(offset), decoded)

    def read_backwards(
        self, header_end: int, end: int, *, after: int, before: int, limit: int | None
    ) -> list[Message]:
        """Newest first: messages with after < seq < before, at most ``limit``."""
        out: list[Message] = []
        for offset, raw, complete in backward_lines(self.f, header_end, end):
            if not complete or not raw.strip():
                continue
            line = envelope(raw)
            if line is not None and line.seq >= before:
                continue
            if line is not None and line.seq <= after:
                break
            self._collect(offset, raw, out)
            if limit is not None and len(out) >= limit:
                break
        return out

    def read_indexed(self, index: Index, lo: int, hi: int) -> list[Message]:
        """Oldest first: messages with lo <= seq <= hi, reading only their lines."""
        lo = max(lo, index.base + 1)
        start = next((o for s in range(lo, hi + 1) if (o := index.offset_of(s)) >= 0), -1)
        if start < 0:
            return []
        stop = next(
            (o for s in range(hi + 1, index.last_seq + 1) if (o := index.offset_of(s)) >= 0),
            index.scanned_to,
        )
        out: list[Message] = []
        for offset, raw in forward_lines(self.f, start, stop):
            if not raw.strip():
                continue
            line = envelope(raw)
            if line is None or lo <= line.seq <= hi:
                self._collect(offset, raw, out)
        return out
