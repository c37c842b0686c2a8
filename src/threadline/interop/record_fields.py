"""What several formats' readers make the same way from a source record: its content
as text, its token usage, the working directory stamped where it changes, and an
environment event as session metadata keeps it.

It sits beside ``records`` (below every format module and ``importers``), so that a
format module never imports ``importers``, which dispatches to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from threadline.interop.records import timestamp
from threadline.messages import Message, Part, TextPart, Usage

EVENT_TEXT_LENGTH = 500
"""Characters of an environment event's text kept in session metadata."""


def environment_event(kind: str, at: Any, after: int, **details: Any) -> dict[str, Any]:
    """An environment event as kept in session metadata: what, when, and how many
    messages came before it; long text clipped, empty details left out."""
    event: dict[str, Any] = {"event": kind, "after_message": after}
    when = timestamp(at)
    if when is not None:
        event["at"] = when.isoformat()
    for key, value in details.items():
        if isinstance(value, str):
            if value:
                event[key] = value[:EVENT_TEXT_LENGTH]
        elif value is not None:
            event[key] = value
    return event


def text_of(content: Any) -> str:
    """A record's content as text: a string as it is, anything else as JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def usage_of(raw: Any, **keys: str) -> Usage | None:
    """A source's token counts as :class:`Usage`, ``keys`` mapping ours to its names."""
    if not isinstance(raw, Mapping):
        return None
    values = {ours: raw.get(theirs) for ours, theirs in keys.items()}
    values = {k: v for k, v in values.items() if isinstance(v, int)}
    return Usage(**values) if values else None


def normalise(parts: list[Part]) -> str | list[Part]:
    """Message content: one text part as plain text, no parts as empty text."""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return parts if parts else ""


class Cwd:
    """Stamps the session's working directory on a message when it is new or has changed.

    Summarizers read ``metadata["cwd"]`` to show the agent's paths relative to
    the project; recording it only on change keeps the messages small.
    """

    def __init__(self) -> None:
        self.last: str | None = None

    def stamp(self, m: Message, cwd: Any) -> None:
        if isinstance(cwd, str) and cwd and cwd != self.last:
            m.metadata["cwd"] = cwd
            self.last = cwd
