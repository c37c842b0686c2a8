"""Time expressions: the windows a query or a turn talks about.

"in 2022", "last May", "May 2023", "8 May, 2023", "yesterday", "3 weeks ago",
"last year", "recently": each becomes a half-open window ``[start, end)`` in UTC,
relative to a reference time (the question's ``now``, or when a turn was said).
"before X" / "after X" open the window on one side; when X is not a date
("before the move") the window is left to a pivot event that search resolves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from threadline.memory.patterns import pattern_table

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
_YEAR = r"((?:19|20)\d\d)"
UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "few": 3,
    "couple of": 2,
}


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime | None
    end: datetime | None
    label: str

    def contains(self, when: datetime) -> bool:
        return (self.start is None or when >= self.start) and (self.end is None or when < self.end)

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return (self.start is None or end > self.start) and (self.end is None or start < self.end)


@dataclass(frozen=True, slots=True)
class TimeQuery:
    """What a query says about time: a window, and/or a pivot event to resolve."""

    window: Window | None
    pivot: str | None = None
    """"the move" in "before the move": an event whose time bounds the window."""
    direction: str | None = None
    """"before" or "after" (with ``pivot``)."""


def _day(y: int, m: int, d: int = 1) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def month_window(year: int, month: int) -> tuple[datetime, datetime]:
    start = _day(year, month)
    end = _day(year + 1, 1) if month == 12 else _day(year, month + 1)
    return start, end


def _count(text: str) -> int:
    return int(text) if text.isdigit() else NUMBER_WORDS.get(text, 1)


_PATTERNS = pattern_table(
    [
        (rf"\b(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH},? {_YEAR}\b", "dmy"),
        (rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? {_YEAR}\b", "mdy"),
        (r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b", "iso"),
        (rf"\b{_MONTH},? {_YEAR}\b", "my"),
        (rf"\b(last|this|next) {_MONTH}\b", "rel_month"),
        (r"\b(last|this|next|past) (week|month|year|weekend)\b", "rel_unit"),
        (
            r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of) "
            r"(day|week|month|year)s? ago\b",
            "ago",
        ),
        (r"\b(yesterday|today|tonight|tomorrow|recently|lately)\b", "word"),
        (rf"\b(?:in|during|since|by|before|after|of) {_YEAR}\b|\b{_YEAR}\b", "year"),
    ]
)


_FIGURATIVE_RE = re.compile(
    r"\b(?:feels?|felt|seems?|seemed|feeling)\s+like\s+(?:it\s+(?:was|is)\s+)?"
    r"(?:just\s+|only\s+)?yesterday\b|\blike\s+it\s+was\s+(?:just\s+|only\s+)?yesterday\b"
    r"|\b(?:born|happen)\s+yesterday\b|\b(?:like\s+)?there['’]?s\s+no\s+tomorrow\b"
    r"|\btomorrow\s+is\s+another\s+day\b"
)
"""A time word used as a figure of speech ("feels like just yesterday I put this dress
on", said of a wedding five years back): no date to stamp."""


def find_windows(text: str, now: datetime) -> list[Window]:
    """Every time expression in ``text``, as windows relative to ``now``; none for a time
    word in a figure of speech (``_FIGURATIVE_RE``)."""
    low = text.lower()
    out: list[Window] = []
    taken: list[tuple[int, int]] = [m.span() for m in _FIGURATIVE_RE.finditer(low)]
    for pattern, form in _PATTERNS:
        for m in pattern.finditer(low):
            if any(a <= m.start() < b or a < m.end() <= b for a, b in taken):
                continue
            window = _window(form, m, now)
            if window is not None:
                taken.append(m.span())
                out.append(window)
    return out


def _window(form: str, m: re.Match[str], now: datetime) -> Window | None:
    g = m.groups()
    label = m.group(0)
    try:
        if form in ("dmy", "mdy", "iso"):
            if form == "dmy":
                y, mo, d = int(g[2]), MONTHS[g[1]], int(g[0])
            elif form == "mdy":
                y, mo, d = int(g[2]), MONTHS[g[0]], int(g[1])
            else:
                y, mo, d = int(g[0]), int(g[1]), int(g[2])
            start = _day(y, mo, d)
            return Window(start, start + timedelta(days=1), label)
        if form == "my":
            return Window(*month_window(int(g[1]), MONTHS[g[0]]), label)
        if form == "rel_month":
            month = MONTHS[g[1]]
            year = now.year
            if g[0] == "last" and month >= now.month:
                year -= 1
            elif g[0] == "next" and month <= now.month:
                year += 1
            return Window(*month_window(year, month), label)
        if form == "rel_unit":
            return _relative_unit(g[0], g[1], now, label)
        if form == "ago":
            days = _count(g[0]) * UNITS[g[1]]
            center = now - timedelta(days=days)
            slack = timedelta(days=max(1, days // 4))
            return Window(center - slack, center + slack + timedelta(days=1), label)
        if form == "word":
            today = _day(now.year, now.month, now.day)
            if g[0] in ("today", "tonight"):
                return Window(today, today + timedelta(days=1), label)
            if g[0] == "yesterday":
                return Window(today - timedelta(days=1), today, label)
            if g[0] == "tomorrow":
                return Window(today + timedelta(days=1), today + timedelta(days=2), label)
            return Window(now - timedelta(days=30), None, label)
        if form == "year":
            year = int(g[0] or g[1])
            return Window(_day(year, 1), _day(year + 1, 1), label)
    except (ValueError, KeyError):
        return None
    return None


def _relative_unit(which: str, unit: str, now: datetime, label: str) -> Window:
    today = _day(now.year, now.month, now.day)
    step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
    if unit == "year":
        return Window(_day(now.year + step, 1), _day(now.year + step + 1, 1), label)
    if unit == "month":
        y, m = now.year, now.month + step
        if m < 1:
            y, m = y - 1, 12
        elif m > 12:
            y, m = y + 1, 1
        return Window(*month_window(y, m), label)
    monday = today - timedelta(days=today.weekday())
    start = monday + timedelta(weeks=step)
    if unit == "weekend":
        start += timedelta(days=5)
        return Window(start, start + timedelta(days=2), label)
    return Window(start, start + timedelta(days=7), label)


_BEFORE_AFTER = re.compile(r"\b(before|after|since|until|prior to)\s+(.{2,60}?)(?:[?.!,;]|$)")


def parse_query(text: str, now: datetime) -> TimeQuery:
    """The time a query asks about: "in 2022" -> that year; "before the move" -> a pivot."""
    low = text.lower()
    m = _BEFORE_AFTER.search(low)
    if m:
        direction = "before" if m.group(1) in ("before", "until", "prior to") else "after"
        inner = find_windows(m.group(2), now)
        if inner:
            w = inner[0]
            if direction == "before":
                return TimeQuery(Window(None, w.start, m.group(0)))
            return TimeQuery(Window(w.end if m.group(1) != "since" else w.start, None, m.group(0)))
        return TimeQuery(None, pivot=m.group(2).strip(), direction=direction)
    windows = find_windows(low, now)
    return TimeQuery(windows[0] if windows else None)


def date_labels(text: str, when: datetime) -> list[str]:
    """ISO labels of the dates a turn refers to (``2023-05-07``, ``2023-05``, ``2022``)."""
    out: list[str] = []
    for w in find_windows(text, when):
        if w.start is None or w.end is None:
            continue
        days = (w.end - w.start).days
        if days <= 1:
            out.append(w.start.date().isoformat())
        elif days <= 31:
            out.append(w.start.strftime("%Y-%m"))
        elif days <= 366:
            out.append(str(w.start.year))
    return list(dict.fromkeys(out))


def label_window(label: str) -> tuple[datetime, datetime] | None:
    """The window an ISO label from ``date_labels`` stands for."""
    try:
        parts = [int(p) for p in label.split("-")]
    except ValueError:
        return None
    if len(parts) == 3:
        start = _day(*parts)
        return start, start + timedelta(days=1)
    if len(parts) == 2:
        return month_window(parts[0], parts[1])
    if len(parts) == 1:
        return _day(parts[0], 1), _day(parts[0] + 1, 1)
    return None
