"""What the agent reported it built: the settled design, from its account at a turn's end.

A long run settles its design one request at a time ("cooldowns: 3 s at start, 10 s
after each move", "the game ends when a king is captured", "`generateLegalMoves` no
longer filters moves that leave the king in check"). The person's requests say what
they wanted; the agent's closing account of a turn that changed files says what the
code now does. Its lines that state behaviour (a condition, a number with its unit, an
absolute, "now", "no longer", a reason) are kept, one line each, newest first; a line
a later report restates on the same subject (the same distinctive words) gives way to
the later one, so what is kept is the design as last reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from threadline.compaction.decisions import (
    BUILT,
    CONTRAST,
    RATIONALE,
    RESTATED_TOPIC,
    common_words,
    subject_words,
    words_pattern,
)
from threadline.compaction.prose import FENCED_CODE, LIST_ITEM, sentences
from threadline.compaction.snapshot import clip_words, one_line

LINE_WORDS = 26
PER_REPORT = 2
"""Lines kept of one report: its most telling (``_telling``), not its whole list; of all
reports, ``MAX_LINES`` are kept, newest first."""
MAX_LINES = 6

_VALUE = re.compile(r"(?i)\b\d+(?:\.\d+)?\s*(?:s|ms|sec|secs|seconds?|minutes?|min|px|%|x)\b")
_TELLING = (
    (_VALUE,),
    (words_pattern("when", "whenever", "if", "unless", "once"),),
    (words_pattern("only", "never", "always", r"no\s+longer"), CONTRAST),
    (RATIONALE,),
)
"""What makes a line tell more: a value with its unit, a condition, an absolute, a reason."""
_STATES = words_pattern(
    "now", r"(?:ends?|ended|fires?|runs?|happens?)\s+when", "both", "every", "each", "all",
    r"(?:is|are)\s+(?:purely|still|disabled|enabled|unused)",
)  # fmt: skip
"""Besides what makes a line telling, words saying how the thing behaves now."""
_LOOKS = words_pattern(
    r"visual\w*", r"display\w*", r"render\w*", r"animat\w*", r"highlight\w*", r"overlays?",
    r"rings?", r"arrows?", "glow", r"shadows?", r"gradients?", r"colou?rs?", "clockwise",
    r"smooth\w*",
)  # fmt: skip
LOOKS_MIN = 2
"""A line naming this many of ``_LOOKS`` tells how the thing looks: it gives way to lines
on how it behaves."""
_NOT_DESIGN = re.compile(
    r"(?i)^(?:\W*(?:updated?|ran|run|verified|tested|tests?|all\s+tests|lint|build|"
    r"readme|docs?|documentation|to\s+use|usage|note|next|if\s+you|you\s+can|let\s+me|"
    r"want\s+me|should\s+I|reload|refresh|regenerated?|re-?run|open|try|adjust)\b)|\?\s*$"
)
"""Housekeeping, instructions to the person, offers and questions: no design."""


def _telling(line: str) -> int:
    return sum(any(p.search(line) for p in kind) for kind in _TELLING)


def _behaves(line: str) -> bool:
    """Whether a line says how the thing behaves, not only that something was touched."""
    return _telling(line) > 0 or _STATES.search(line) is not None


def report_lines(text: str) -> list[str]:
    """The lines of an agent's closing account that state what the built thing does, the
    most telling ``PER_REPORT`` of them, in the order said."""
    found = _design_lines(text)
    best = sorted(range(len(found)), key=lambda i: -_telling(found[i]))[:PER_REPORT]
    return [found[i] for i in sorted(best)]


def _design_lines(text: str) -> list[str]:
    prose = FENCED_CODE.sub("\n", text)
    out: list[str] = []
    for line in prose.splitlines():
        m = LIST_ITEM.match(line)
        said = [m.group("text")] if m else list(sentences(line))
        for part in said:
            part = one_line(part.replace("**", "")).strip()
            if part.endswith(":") or len(part.split()) < 4:
                continue
            if _NOT_DESIGN.search(part) or not _behaves(part):
                continue
            out.append(clip_words(part.rstrip("."), LINE_WORDS))
    return out


DOCUMENTS = (".md", ".markdown", ".txt", ".rst", ".adoc")
"""A turn that changed only these wrote a plan or notes: its account is no report of code."""
STYLES = (".css", ".scss", ".sass", ".less")
"""A turn that changed only style sheets tuned the look: no behaviour to report."""


def builds(path: str) -> bool:
    """Whether changing ``path`` builds behaviour (a document describes, a style sheet
    dresses)."""
    return not path.lower().endswith(DOCUMENTS + STYLES)


_CODE = re.compile(r"`([^`\n]{2,80})`")


def names(line: str) -> set[str]:
    """The code names a line quotes (``rules.js``, ``generateLegalMoves``)."""
    return {n.lower() for n in _CODE.findall(line)}


@dataclass(slots=True)
class Reports:
    """The report lines of a run, each with where it was said and what it is about."""

    lines: list[tuple[int, str, set[str]]] = field(default_factory=list)
    files: dict[int, set[str]] = field(default_factory=dict)
    """The names of the code files each report's turn changed, by the report's seq."""

    def add(self, seq: int, text: str, files: Sequence[str] = ()) -> None:
        for line in report_lines(text):
            self.lines.append((seq, line, subject_words(line)))
        self.files[seq] = {PurePosixPath(f).name.lower() for f in files}

    def asked(self, request: str) -> None:
        """A request naming a file a report's turn changed, or a code name its line quotes,
        asks to change what it built: the report no longer says how it stands."""
        named = subject_words(request)
        if not named:
            return
        stale = {
            seq for seq, line, _ in self.lines if named & (self.files.get(seq, set()) | names(line))
        }
        self.lines = [entry for entry in self.lines if entry[0] not in stale]

    def void_last(self) -> None:
        """The person turned down what the last report described: it no longer holds."""
        if self.lines:
            last = self.lines[-1][0]
            self.lines = [entry for entry in self.lines if entry[0] != last]

    def restated(self, seq: int, line: str, topics: set[str], common: set[str]) -> bool:
        """Whether a later report speaks of the same thing: it quotes a code name this
        line quotes, or shares ``RESTATED_TOPIC`` words not common to the whole run."""
        mine = names(line)
        for at, later, words_of in self.lines:
            if at <= seq:
                continue
            if mine & names(later) or len((topics & words_of) - common) >= RESTATED_TOPIC:
                return True
        return False

    def latest(self) -> list[tuple[int, str]]:
        """Without a line a later report restates, at most ``MAX_LINES``: first one line of
        each report, newest first, what it does before how it looks (``_LOOKS``); then the
        reports' other lines, likewise."""
        common = common_words([topics for _, _, topics in self.lines])
        kept = [
            (seq, line)
            for seq, line, topics in reversed(self.lines)
            if not self.restated(seq, line, topics, common)
        ]
        kept.sort(key=lambda entry: looks(entry[1]))  # stable: newest first within each
        firsts: dict[int, str] = {}
        for seq, line in kept:
            firsts.setdefault(seq, line)
        ordered = [*firsts.items(), *(e for e in kept if firsts.get(e[0]) != e[1])]
        return [(seq, f"{BUILT} (#{seq}): {line}") for seq, line in ordered[:MAX_LINES]]


RESERVED = 3
"""Built lines Key Decisions keeps room for when the run has them, after the person's
standing rules: the design as built, which the person's requests alone do not state."""
_BUILT_AT = re.compile(rf"^{BUILT} \(#(\d+)\): ")


def built_at(text: str) -> int | None:
    """The seq of the report a ``Built (#n)`` line comes from; None for another line."""
    m = _BUILT_AT.match(text)
    return int(m.group(1)) if m else None


def reserved(
    lines: Sequence[str], requests: Iterable[tuple[int, str]]
) -> tuple[list[str], set[str]]:
    """Of Key Decisions ``lines``: the ``RESERVED`` Built lines to keep room for (in their
    order), and the Built lines a later request made ``stale`` (to leave out)."""
    asked = list(requests)
    gone = {t for t in lines if (at := built_at(t)) is not None and stale(t, at, asked)}
    kept = [t for t in lines if built_at(t) is not None and t not in gone]
    return kept[:RESERVED], gone


def looks(line: str) -> bool:
    """Whether a report line is about how the thing looks (``LOOKS_MIN`` of ``_LOOKS``)."""
    return len(_LOOKS.findall(line)) >= LOOKS_MIN


def stale(line: str, seq: int, requests: Iterable[tuple[int, str]]) -> bool:
    """Whether a request after the report (``seq``) names a code name the ``Built`` line
    quotes: it asked to change that, so the line may no longer say how it stands."""
    mine = names(line)
    return bool(mine) and any(at > seq and mine & subject_words(text) for at, text in requests)


__all__ = [
    "DOCUMENTS",
    "RESERVED",
    "STYLES",
    "Reports",
    "builds",
    "built_at",
    "looks",
    "report_lines",
    "reserved",
    "stale",
]
