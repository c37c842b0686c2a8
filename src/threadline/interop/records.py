"""Reading helpers every format reader shares: what a parsed file holds, JSON Lines with
line numbers, source timestamps, and errors that name the record that failed.

JSON Lines are read record by record, not line by line: a capture tool that lost a
newline leaves two records glued on one physical line (read with
``json.JSONDecoder.raw_decode`` in a loop), and a writer killed mid-line leaves a torn
last line (no newline after it) or a torn fragment with the next record glued to it.
Each is kept as far as it is whole and counted in ``Parsed.repairs``
(``glued_records``, ``torn_last_line``, ``torn_record``); any other malformed line still
refuses the file, naming the line.

They live apart from ``importers`` so that a format module (``supyagent``, ``agsh``,
``agents_sdk``) can use them while ``importers`` dispatches to it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop.shapes import json_kind
from threadline.messages import Message


@dataclass(slots=True)
class Parsed:
    runs: list[list[Message]]
    info: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    repairs: Counter[str] = field(default_factory=Counter)
    """Damage to the file itself that reading went around (see the module docstring),
    by kind: reported once per file, with its first conversation."""
    extras: list[dict[str, Any]] = field(default_factory=list)
    """Per run, what is not a message: ``events``, ``compactions`` (with the index of
    the message they precede), ``free_form_calls``, run facts (a task id), and where a
    file holds several sessions of their own, each one's ``source_id``, ``model`` and
    ``started`` / ``updated`` times."""

    def extra(self, run: int) -> dict[str, Any]:
        while len(self.extras) <= run:
            self.extras.append({})
        return self.extras[run]


def load_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno, path=str(path)
        ) from exc


_DECODER = json.JSONDecoder()


def jsonl(
    text: str, path: Path, repairs: Counter[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for every JSON object in ``text``, one or more a line.

    Damage reading can go around is counted in ``repairs`` (see the module docstring);
    without a counter, or for any other damage, the line is refused.
    """
    lines = text.split("\n")
    last = max((n for n, line in enumerate(lines) if line.strip()), default=-1)
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        torn_tail = n - 1 == last and not text.endswith("\n") and repairs is not None
        for record in _records(line, n, path, repairs, torn_tail):
            yield n, record


def _records(
    line: str, n: int, path: Path, repairs: Counter[str] | None, torn_tail: bool
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    at = _skip_space(line, 0)
    while at < len(line):
        try:
            record, end = _DECODER.raw_decode(line, at)
        except json.JSONDecodeError as exc:
            resumed = _resume(line, at) if repairs is not None else None
            if resumed is not None:
                repairs["torn_record"] += 1  # type: ignore[index]
                at = resumed
                continue
            if torn_tail:
                repairs["torn_last_line"] += 1  # type: ignore[index]
                return found
            raise ImportFormatError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", line=n, path=str(path)
            ) from exc
        if not isinstance(record, dict):
            raise ImportFormatError(
                f"expected a JSON object, got {json_kind(record)}", line=n, path=str(path)
            )
        if found and repairs is None:
            raise ImportFormatError(
                f"invalid JSON: Extra data (column {at + 1})", line=n, path=str(path)
            )
        found.append(record)
        at = _skip_space(line, end)
    if len(found) > 1 and repairs is not None:
        repairs["glued_records"] += len(found) - 1
    return found


def _skip_space(line: str, at: int) -> int:
    while at < len(line) and line[at] in " \t\r":
        at += 1
    return at


def _resume(line: str, start: int) -> int | None:
    """Where whole records begin again after a torn fragment at ``start``: the first
    ``{`` from which the rest of the line reads as records, else None. A ``{`` right
    after ``:``, ``,`` or ``[`` opens a value nested in the torn record, not a record."""
    at = line.find("{", start + 1)
    while at != -1:
        before = line[start:at].rstrip(" \t\r")[-1:]
        if before not in (":", ",", "[") and _whole(line, at):
            return at
        at = line.find("{", at + 1)
    return None


def _whole(line: str, at: int) -> bool:
    while at < len(line):
        try:
            record, end = _DECODER.raw_decode(line, at)
        except json.JSONDecodeError:
            return False
        if not isinstance(record, dict):
            return False
        at = _skip_space(line, end)
    return True


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one: a field a record may lack."""
    return value if isinstance(value, Mapping) else {}


def timestamp(value: Any) -> datetime | None:
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def utc_iso(value: Any) -> str | None:
    """A time a source wrote in UTC (SQLite's ``CURRENT_TIMESTAMP`` has no offset) as
    ISO 8601 with its offset; None when it is not a time."""
    when = timestamp(value)
    return when.isoformat() if when is not None else None


def stamp(m: Message, when: Any, **metadata: Any) -> Message:
    created = timestamp(when)
    if created is not None:
        m.created_at = created
    m.metadata.update({k: v for k, v in metadata.items() if v is not None})
    return m


class Where:
    """Turns a failure inside one record into an ImportFormatError naming its line."""

    line: int | None

    def __init__(self, path: Path) -> None:
        self.path, self.line = path, None

    def __enter__(self) -> Where:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, ValidationError):
            detail = f"invalid message: {exc.errors()[0]['msg']}"
        elif isinstance(exc, KeyError):
            detail = f"missing field {exc}"
        elif isinstance(exc, TypeError | AttributeError):
            # which field held what is the reader's business; Python's words are not
            detail = "a record of an unexpected shape (a field holds the wrong kind of value)"
        elif isinstance(exc, InvalidMessage):
            detail = str(exc)
        else:
            return
        raise ImportFormatError(detail, line=self.line, path=str(self.path)) from exc
