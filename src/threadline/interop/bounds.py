"""What an import keeps of the numbers and texts a source reports beside its conversation.

Reported token usage calibrates threadline's counts, and a session's metadata is read
with every listing of the store, so neither is stored as a hostile or broken file
gives it (10**40 tokens, a negative count, a 10 MB "working directory"). The
conversation itself is never cut: its size is the store's message limit.

* A usage count that is not a whole number from 0 to ``MAX_USAGE_TOKENS`` is dropped
  (the rest of that message's usage is kept); the importer flags the message.
* A text in a session's metadata longer than ``MAX_SESSION_METADATA_TEXT`` characters
  is cut to that length, and one in a message's metadata longer than
  ``MAX_MESSAGE_METADATA_TEXT``; the importer records where, and the length it had.
* A source id longer than ``MAX_SOURCE_ID_LENGTH`` (an application's own session id,
  say) is known by its SHA-256 instead, which keeps it distinct from every other.
"""

from __future__ import annotations

import hashlib
from typing import Any

from threadline.messages import Usage

MAX_USAGE_TOKENS = 10**9
"""No model call reports more tokens than this (windows hold a few million at most;
the largest count in the shared real transcripts is 238,363)."""
MAX_SESSION_METADATA_TEXT = 4096
"""A session's facts are paths, branches, ids and short event texts (126 characters at
most in the shared real transcripts)."""
MAX_MESSAGE_METADATA_TEXT = 1024 * 1024
"""A message's metadata may carry its model's thinking (41,305 characters at most in the
shared real transcripts)."""
MAX_SOURCE_ID_LENGTH = 512
SHOWN_CHARACTERS = 64
"""How much of a dropped usage value a message keeps (as text), to say what it was."""


def bad_usage(usage: Usage) -> tuple[Usage | None, dict[str, str]]:
    """``usage`` without the counts out of bounds (None if none is left), and those
    counts as text (cut after ``SHOWN_CHARACTERS``)."""
    dropped: dict[str, str] = {}
    kept: dict[str, Any] = {}
    for name in Usage.model_fields:
        value = getattr(usage, name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MAX_USAGE_TOKENS
        ):
            text = str(value)
            cut = len(text) > SHOWN_CHARACTERS
            dropped[name] = text[:SHOWN_CHARACTERS] + "…" if cut else text
        else:
            kept[name] = value
    if not dropped:
        return usage, {}
    return (usage.model_copy(update={n: None for n in dropped}) if kept else None), dropped


def cut_texts(metadata: dict[str, Any], limit: int) -> dict[str, int]:
    """Cut every text in ``metadata`` (nested too) longer than ``limit`` characters to
    ``limit``, in place; returns where each was (``a.b[2]``) and its length before."""
    cut: dict[str, int] = {}
    stack: list[tuple[Any, str]] = [(metadata, "")]
    while stack:
        item, where = stack.pop()
        entries: list[tuple[Any, Any, str]]
        if isinstance(item, dict):
            entries = [(item, k, f"{where}.{k}" if where else str(k)) for k in item]
        elif isinstance(item, list):
            entries = [(item, i, f"{where}[{i}]") for i in range(len(item))]
        else:
            continue
        for holder, key, path in entries:
            value = holder[key]
            if isinstance(value, str) and len(value) > limit:
                cut[path[:MAX_SOURCE_ID_LENGTH]] = len(value)
                holder[key] = value[:limit]
            elif isinstance(value, dict | list):
                stack.append((value, path))
    return cut


def bounded_source_id(source_id: str | None) -> str | None:
    if source_id is None or len(source_id) <= MAX_SOURCE_ID_LENGTH:
        return source_id
    digest = hashlib.sha256(source_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{digest}"
