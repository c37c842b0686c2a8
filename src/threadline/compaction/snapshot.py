"""The structured state snapshot: five sections of ranked bullets, under a word limit.

A compaction replaces old messages with a snapshot an agent can act on, in the
shape the reference documents use::

    ## Files Modified
    ## Key Decisions
    ## Important Values
    ## Current State
    ## Pending Tasks

Each bullet carries a score. ``render`` keeps the whole snapshot under
``max_words`` by dropping the lowest-scored bullets (optionally giving each
section a guaranteed share first, so one busy section cannot crowd out the
others); within a section bullets appear highest score first. ``parse`` reads
a rendered snapshot (or a model's loosely formatted one) back into sections,
giving bullets scores that fall with their position, so a parsed snapshot
renders again in the same order. That is what makes compaction incremental:
the next summarizer starts from the previous snapshot, not the old messages.

Words are counted as whitespace-separated tokens holding at least one letter
or digit: Markdown markers (``##``, ``-``) do not count, a long path counts as
one word. The count is exact and additive over lines, so the limit is a hard
guarantee, not an estimate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from threadline.compaction.values import RetentionReport, Value, retention
from threadline.errors import UsageError

SectionName = Literal[
    "files_modified", "key_decisions", "important_values", "current_state", "pending_tasks"
]
SECTION_NAMES: tuple[SectionName, ...] = (
    "files_modified",
    "key_decisions",
    "important_values",
    "current_state",
    "pending_tasks",
)
SECTION_TITLES: dict[SectionName, str] = {
    "files_modified": "Files Modified",
    "key_decisions": "Key Decisions",
    "important_values": "Important Values",
    "current_state": "Current State",
    "pending_tasks": "Pending Tasks",
}
DEFAULT_MAX_WORDS = 600
"""The seeds' limit for a snapshot."""
EMPTY_BULLET = "(none)"

# Headings a model might use for each section (lower case, without punctuation).
SECTION_ALIASES: dict[str, SectionName] = {
    "files modified": "files_modified",
    "modified files": "files_modified",
    "files changed": "files_modified",
    "changed files": "files_modified",
    "files": "files_modified",
    "key decisions": "key_decisions",
    "decisions": "key_decisions",
    "decisions made": "key_decisions",
    "important values": "important_values",
    "key values": "important_values",
    "values": "important_values",
    "important data": "important_values",
    "current state": "current_state",
    "state": "current_state",
    "current status": "current_state",
    "status": "current_state",
    "pending tasks": "pending_tasks",
    "pending": "pending_tasks",
    "remaining tasks": "pending_tasks",
    "remaining work": "pending_tasks",
    "next steps": "pending_tasks",
    "todo": "pending_tasks",
    "to do": "pending_tasks",
    # the sections of Claude Code's compaction summary that map onto ours
    "primary request and intent": "current_state",
    "current work": "current_state",
    "optional next step": "current_state",
    "next step": "current_state",
    "errors and fixes": "key_decisions",
    "problem solving": "key_decisions",
}
OTHER_HEADINGS = frozenset(
    {
        "analysis",
        "summary",
        "key technical concepts",
        "files and code sections",
        "all user messages",
    }
)
"""Headings of other tools' summaries (Claude Code's) whose content is none of our sections:
the model's chronological analysis, code excerpts. Its "Primary Request and Intent" is
current state: the goal as that summary put it, which the session's first message may not
say (a session continued from an earlier one)."""
_EMPTY_MARKERS = frozenset({"none", "n/a", "na", "nothing", "none yet", "nothing yet", "-"})

_ALNUM = re.compile(r"[^\W_]")
_LINE_BREAKS = re.compile(r"\s*[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")
_HEADING = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:\d+[.)]\s*)?"
    r"(?P<title>[A-Za-z][A-Za-z /]*?)\s*(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*$"
)
_MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+(?P<text>.*)$")
_FENCE = re.compile(r"^\s*(?:```|~~~)")


def words(text: str) -> int:
    """Whitespace-separated tokens holding at least one letter or digit."""
    return sum(1 for token in text.split() if _ALNUM.search(token))


def one_line(text: str) -> str:
    """``text`` on a single line: line breaks (and the blanks around them) become one space.

    Spaces within a line are kept as they are, so a value such as an error line
    with aligned columns stays a verbatim substring.
    """
    return _LINE_BREAKS.sub(" ", text).strip()


def clip_words(text: str, limit: int) -> str:
    """``text`` on one line, cut after ``limit`` words with an ellipsis when longer."""
    flat = one_line(text)
    if words(flat) <= limit:
        return flat
    kept: list[str] = []
    count = 0
    for token in flat.split(" "):
        if count >= limit:
            break
        kept.append(token)
        count += any(ch.isalnum() for ch in token)
    return " ".join(kept) + " \u2026"


def clip_chars(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary within ``limit`` characters with an
    ellipsis when longer."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    cut = line[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + " \u2026"


def code_span(text: str) -> str:
    """Inline code: in a fence one backtick longer than the longest run of backticks the
    text holds, as CommonMark allows (aider once created a file named ``Let's add it to
    the `App.css` file``), padded with a space where the text begins or ends with one;
    text with surrounding white space as is (it cannot be quoted faithfully)."""
    if not text or text.strip() != text:
        return text
    if "`" not in text:
        return f"`{text}`"
    fence = "`" * (max(len(run) for run in re.findall(r"`+", text)) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
"""An inline code span of any fence length; its text is group 2 (see ``span_text``)."""


def span_text(match: re.Match[str]) -> str:
    """The text a ``CODE_SPAN`` match quotes, without the padding a long fence adds."""
    text = match.group(2)
    if len(match.group(1)) > 1 and text.startswith(" ") and text.endswith(" ") and text.strip():
        return text[1:-1]
    return text


def code_spans(text: str) -> list[str]:
    """The contents of the code spans in ``text``, in order."""
    return [span_text(m) for m in CODE_SPAN.finditer(text)]


class Bullet(BaseModel):
    """One line of a section, with the score ``render`` ranks it by."""

    model_config = ConfigDict(frozen=True)

    text: str
    """Single-line text; newlines are collapsed on creation."""
    score: float = 0.0
    """Higher is more important; the lowest go first when the word limit bites."""

    @field_validator("text", mode="after")
    @classmethod
    def _single_line(cls, value: str) -> str:
        return one_line(value)


class Snapshot(BaseModel):
    """The five sections of a state snapshot, each a list of scored bullets."""

    model_config = ConfigDict(extra="ignore")

    files_modified: list[Bullet] = Field(default_factory=list)
    """Each file path and what was changed."""
    key_decisions: list[Bullet] = Field(default_factory=list)
    """Decisions made and their rationale."""
    important_values: list[Bullet] = Field(default_factory=list)
    """Exact paths, URLs, ids, error messages, configuration values."""
    current_state: list[Bullet] = Field(default_factory=list)
    """The task in progress, the last action, its result, the expected next step."""
    pending_tasks: list[Bullet] = Field(default_factory=list)
    """Remaining work items."""

    @field_validator(*SECTION_NAMES, mode="before")
    @classmethod
    def _coerce(cls, value: Any) -> Any:
        """Plain strings are accepted as bullets (score 0)."""
        if isinstance(value, list):
            return [Bullet(text=v) if isinstance(v, str) else v for v in value]
        return value

    def section(self, name: SectionName) -> list[Bullet]:
        bullets: list[Bullet] = getattr(self, name)
        return bullets

    def add(self, name: SectionName, text: str, score: float = 0.0) -> None:
        """Append a bullet to a section; empty text is ignored."""
        if text.strip():
            self.section(name).append(Bullet(text=text, score=score))

    def bullet_count(self) -> int:
        return sum(len(self.section(n)) for n in SECTION_NAMES)

    def render(
        self,
        max_words: int = DEFAULT_MAX_WORDS,
        *,
        shares: Mapping[SectionName, float] | None = None,
    ) -> str:
        """Markdown with every section present, at most ``max_words`` words.

        ``shares`` optionally guarantees each section a fraction of the words
        left after the headings; what a section leaves unused, and everything
        when ``shares`` is None, goes to the highest-scored bullets overall.
        """
        chosen = _select(self, max_words, shares or {})
        lines: list[str] = []
        for name in SECTION_NAMES:
            if lines:
                lines.append("")
            lines.append(f"## {SECTION_TITLES[name]}")
            kept = [b for i, b in _ranked(self.section(name)) if (name, i) in chosen]
            lines.extend(f"- {b.text}" for b in kept)
            if not kept:
                lines.append(f"- {EMPTY_BULLET}")
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        """Read a snapshot back from Markdown; see ``parse``."""
        return parse(text)


SKELETON_WORDS = sum(words(f"## {t}") for t in SECTION_TITLES.values()) + len(SECTION_NAMES) * (
    words(f"- {EMPTY_BULLET}")
)
"""Words of a snapshot with every section empty: the smallest ``max_words`` possible."""


def _ranked(bullets: Sequence[Bullet]) -> list[tuple[int, Bullet]]:
    """Bullets with their index, highest score first (ties keep their order)."""
    return sorted(enumerate(bullets), key=lambda ib: -ib[1].score)


class _Selection:
    """Bullets chosen under a word limit: ``shared`` gives each section its guaranteed
    share first, ``rest`` fills what is left by score. One rule for both ``render`` and
    those that must know beforehand what a section will show (``shown_by_share``)."""

    def __init__(self, snapshot: Snapshot, max_words: int) -> None:
        if max_words < SKELETON_WORDS:
            raise UsageError(
                f"max_words must be at least {SKELETON_WORDS} (the headings alone), got {max_words}"
            )
        self.room = max_words - SKELETON_WORDS
        self.chosen: set[tuple[SectionName, int]] = set()
        self.filled: set[SectionName] = set()
        self.costs: dict[tuple[SectionName, int], int] = {}
        self.candidates: list[tuple[float, int, int, SectionName]] = []
        for order, name in enumerate(SECTION_NAMES):
            for i, b in enumerate(snapshot.section(name)):
                cost = words(b.text)
                if cost:
                    self.costs[(name, i)] = cost
                    self.candidates.append((-b.score, order, i, name))
        self.candidates.sort()

    def _take(self, name: SectionName, i: int, limit: int) -> int:
        """Words spent taking bullet ``i`` of ``name`` if that stays within ``limit``."""
        empty = 0 if name in self.filled else words(f"- {EMPTY_BULLET}")
        extra = self.costs[(name, i)] - empty
        if extra > limit:
            return -1
        self.chosen.add((name, i))
        self.filled.add(name)
        return extra

    def shared(self, shares: Mapping[SectionName, float]) -> _Selection:
        """Each section in turn takes its best bullets within its share of the room left."""
        for name in SECTION_NAMES:
            quota = int(self.room * max(0.0, shares.get(name, 0.0)))
            if quota > 0:  # a section with a share never reads "(none)" for want of words:
                best = next((i for _, _, i, n in self.candidates if n == name), None)
                if best is not None:  # its best fits
                    quota = max(quota, self.costs[(name, best)])
            for _, _, i, section in self.candidates:
                if section != name or quota <= 0:
                    continue
                spent = self._take(name, i, min(quota, self.room))
                if spent >= 0:
                    quota -= spent
                    self.room -= spent
        return self

    def rest(self) -> set[tuple[SectionName, int]]:
        """The highest-scored bullets overall in the words the shares left."""
        for _, _, i, name in self.candidates:
            if (name, i) not in self.chosen:
                spent = self._take(name, i, self.room)
                if spent >= 0:
                    self.room -= spent
        return self.chosen


def _select(
    snapshot: Snapshot, max_words: int, shares: Mapping[SectionName, float]
) -> set[tuple[SectionName, int]]:
    return _Selection(snapshot, max_words).shared(shares).rest()


def shown_by_share(
    snapshot: Snapshot,
    name: SectionName,
    max_words: int,
    shares: Mapping[SectionName, float],
) -> list[str]:
    """The bullets of ``name`` that ``render(max_words, shares=shares)`` shows whatever
    is added later to the sections rendered after it: those its guaranteed share takes."""
    chosen = _Selection(snapshot, max_words).shared(shares).chosen
    return [b.text for i, b in enumerate(snapshot.section(name)) if (name, i) in chosen]


def heading_title(line: str) -> str | None:
    """The title of a heading-shaped line ("3. Files and Code Sections:" -> "files and code
    sections"), lower case, letters only; None for another line."""
    m = _HEADING.match(line)
    return re.sub(r"[^a-z /]", "", m.group("title").lower()).strip() if m else None


def _heading(line: str) -> tuple[bool, SectionName | None]:
    """Whether ``line`` is a heading, and the section it opens (None: not one of ours)."""
    title = heading_title(line)
    if title is not None:
        if title in SECTION_ALIASES:
            return True, SECTION_ALIASES[title]
        numbered = re.match(r"\s*(?:\*\*)?\d+[.)]", line) is not None
        if title in OTHER_HEADINGS or (numbered and line.rstrip(" *_").endswith(":")):
            return True, None  # "Analysis:", "3. Files and Code Sections:": not ours
    if _MARKDOWN_HEADING.match(line):
        return True, None
    return False, None


def parse(text: str) -> Snapshot:
    """Read a snapshot from Markdown, tolerating what models add around it.

    Headings may be ``#``-style, bold or ``Title:`` lines, with common aliases
    ("Next Steps" for Pending Tasks, ...). Bullets may use ``-``, ``*``, ``+``
    or numbers; an indented line continues the bullet above it; a plain line
    inside a section is a bullet of its own. Text before the first known
    heading and under unknown headings is ignored, as are ``(none)`` markers.
    Scores fall with position, so the parsed snapshot renders in its order.
    """
    sections: dict[SectionName, list[str]] = {n: [] for n in SECTION_NAMES}
    current: SectionName | None = None
    for raw in text.splitlines():
        if not raw.strip() or _FENCE.match(raw):
            continue
        is_heading, name = _heading(raw)
        if is_heading:
            current = name
            continue
        if current is None:
            continue
        bullets = sections[current]
        m = _BULLET.match(raw)
        if m:
            bullets.append(m.group("text"))
        elif raw[:1].isspace() and bullets:
            bullets[-1] += " " + raw.strip()
        else:
            bullets.append(raw)
    snapshot = Snapshot()
    for name, texts in sections.items():
        kept = [t for t in (one_line(t) for t in texts) if not _is_empty_marker(t)]
        for i, t in enumerate(kept):
            snapshot.add(name, t, score=(len(kept) - i) / len(kept))
    return snapshot


def _is_empty_marker(text: str) -> bool:
    return not text or text.strip("()[].* ").lower() in _EMPTY_MARKERS


MODEL_SUMMARIZERS = frozenset({"llm", "hybrid"})
"""The summarizers whose snapshot a model wrote: its prose is kept, the evidence laid over it."""


@dataclass(slots=True)
class SummaryResult:
    """What a summarizer returns: the snapshot, as text and as sections, and its accounting."""

    text: str
    """The rendered snapshot."""
    snapshot: Snapshot
    values: list[Value] = field(default_factory=list)
    """Important values extracted from the input, most important first."""
    retention: RetentionReport = field(default_factory=lambda: RetentionReport(0, 0))
    input_tokens: int | None = None
    """Tokens the summarizer read (None when it used no model)."""
    output_tokens: int | None = None
    summarizer: str = "extractive"
    unusable: str | None = None
    """Why a model's reply cannot stand as a snapshot (empty, no section), when it cannot."""

    @classmethod
    def counted(
        cls,
        text: str,
        snapshot: Snapshot,
        values: list[Value],
        *,
        summarizer: str,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> SummaryResult:
        """A result whose retention is counted: which of ``values`` ``text`` keeps verbatim."""
        return cls(
            text, snapshot, values, retention(values, text), input_tokens, output_tokens, summarizer
        )

    def rewritten(self, text: str, values: list[Value] | None = None) -> SummaryResult:
        """This summary with a new rendered ``text`` (and ``values``): same summarizer and
        cost, retention counted again."""
        return SummaryResult.counted(
            text,
            Snapshot.parse(text),
            self.values if values is None else values,
            summarizer=self.summarizer,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
        )

    @property
    def words(self) -> int:
        return words(self.text)


__all__ = [
    "CODE_SPAN",
    "DEFAULT_MAX_WORDS",
    "EMPTY_BULLET",
    "SECTION_NAMES",
    "SECTION_TITLES",
    "SKELETON_WORDS",
    "Bullet",
    "SectionName",
    "Snapshot",
    "SummaryResult",
    "clip_chars",
    "clip_words",
    "code_span",
    "code_spans",
    "heading_title",
    "one_line",
    "parse",
    "shown_by_share",
    "span_text",
    "words",
]
