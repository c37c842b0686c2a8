"""Showing stored text safely, and the numbers, times and bars every face prints.

Stored text (titles, messages, tool output, names) is hostile until shown otherwise:
a title can hold ``\\x1b[2J``, a tool's captured output colour codes, a model's reply
a right-to-left override. ``printable`` is the one rule for showing such text: control
characters appear escaped (``\\x1b``), newlines and tabs stay where a layout wants
them. ``SafeConsole`` applies it to everything Rich renders. The CLI (``cli.render``)
and the web pages (``server.web``) both show text through this module, so a value
reads the same in a terminal and in a browser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

if TYPE_CHECKING:  # types only: the error lines of every command print through this module
    from threadline.store import SessionInfo, Store

BAR_WIDTH = 20
"""Cells in a usage bar, as in the reference ``/context`` output."""
BAR_FULL = "█"
BAR_EMPTY = "░"
PREVIEW_CHARS = 60
"""Characters of the first user message shown when a session has no title."""
PREVIEW_SCAN = 3
"""Messages read from the start of a session to find its preview."""

_BIDI_AND_SEPARATORS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_UNPRINTABLE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
"""What a terminal would act on rather than show: C0 and C1 controls (ESC starts every
escape sequence), DEL, and the Unicode marks that reorder or break lines."""
_UNPRINTABLE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
"""The same, and newline and tab too: for values that must stay on one line."""
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def printable(text: str, *, one_line: bool = False) -> str:
    """Stored text as a terminal may show it: control characters escaped (``\\x1b``),
    newlines and tabs kept unless ``one_line``. The single rule for human output."""
    return (_UNPRINTABLE_IN_LINE if one_line else _UNPRINTABLE).sub(_escaped, text)


class SafeConsole(Console):
    """A console that no stored text can make emit a control sequence.

    Every segment it renders, at every level (a table cell, a Markdown block, a live
    view), passes through ``printable``; Rich's own control segments (cursor moves of a
    live display) are left alone, and its styles are applied after, so colour still works.
    """

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _UNPRINTABLE.search(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment


def fmt_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def fmt_time(dt: datetime | None) -> str:
    """Local time to the minute, as people read a listing."""
    return "-" if dt is None else dt.astimezone().strftime("%Y-%m-%d %H:%M")


def fmt_pct(used: int, total: int) -> str:
    return f"{(used / total * 100) if total > 0 else 0.0:.0f}%"


def bar(used: float, total: float, *, width: int = BAR_WIDTH) -> str:
    """``[████████░░░░░░░░░░░░]``: the share ``used / total``, clamped to the bar."""
    share = 0.0 if total <= 0 else min(max(used / total, 0.0), 1.0)
    full = round(share * width)
    if used > 0 and full == 0:
        full = 1  # something is there; show it
    return "[" + BAR_FULL * full + BAR_EMPTY * (width - full) + "]"


def usage_line(label: str, used: int, total: int, *, label_width: int = 10) -> Text:
    """``Tokens:   45,000 / 128,000 (35%)`` with its bar on the next line.

    The reference ``/context`` output draws trigger progress this way; the
    compaction-trigger block reuses it.
    """
    head = f"{label + ':':<{label_width}}{used:,} / {total:,} ({fmt_pct(used, total)})"
    return Text(f"{head}\n{' ' * label_width}{bar(used, total)}")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 message``, ``2 messages``, ``2 entities``: counts read as English."""
    if many is None:
        many = (
            word[:-1] + "ies" if word[-2:-1] not in "aeiou" and word.endswith("y") else word + "s"
        )
    return f"{n:,} {word if n == 1 else many}"


def shorten(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: whitespace runs become one space, control
    characters are escaped first (so the cut counts what is shown)."""
    text = " ".join(printable(text).split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def session_preview(store: Store, info: SessionInfo) -> str:
    """The title, or the start of the first user message (read from the head only)."""
    if info.title:
        return printable(info.title, one_line=True)
    for m in store.read_messages(info.id, limit=PREVIEW_SCAN):
        if m.role == "user" and m.text.strip():
            return shorten(m.text, PREVIEW_CHARS)
    return ""
