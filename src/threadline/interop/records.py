"""Reading helpers every format reader shares: what a parsed file holds, JSON Lines with
line numbers, source timestamps, and errors that name the record that failed.

They live apart from ``importers`` so that a format module (``supyagent``, ``agsh``,
``agents_sdk``) can use them while ``importers`` dispatches to it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.messages import Message


@dataclass(slots=True)
class Parsed:
    runs: list[list[Message]]
    info: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
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


def jsonl(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", line=n, path=str(path)
            ) from exc
        if not isinstance(record, dict):
            raise ImportFormatError(
                f"expected a JSON object, got {type(record).__name__}", line=n, path=str(path)
            )
        yield n, record


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
            detail = f"unexpected record shape ({exc})"
        elif isinstance(exc, InvalidMessage):
            detail = str(exc)
        else:
            return
        raise ImportFormatError(detail, line=self.line, path=str(self.path)) from exc
