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
from dataclasses import dataclass, field

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
_NOT_DESIGN = re.compile(
    r"(?i)^(?:\W*(?:updated?|ran|run|verified|tested|tests?|all\s+tests|lint|build|"
    r"readme|docs?|documentation|to\s+use|usage|note|next|if\s+you|you\s+can|let\s+me|"
    r"want\s+me|should\s+I)\b)|\?\s*$"
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


def builds(path: str) -> bool:
    """Whether changing ``path`` builds something (a document only describes it)."""
    return not path.lower().endswith(DOCUMENTS)


_CODE = re.compile(r"`([^`\n]{2,80})`")


def names(line: str) -> set[str]:
    """The code names a line quotes (``rules.js``, ``generateLegalMoves``)."""
    return {n.lower() for n in _CODE.findall(line)}


@dataclass(slots=True)
class Reports:
    """The report lines of a run, each with where it was said and what it is about."""

    lines: list[tuple[int, str, set[str]]] = field(default_factory=list)

    def add(self, seq: int, text: str) -> None:
        for line in report_lines(text):
            self.lines.append((seq, line, subject_words(line)))

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
        """Newest first, without a line a later report restates, at most ``MAX_LINES``."""
        common = common_words([topics for _, _, topics in self.lines])
        kept = [
            (seq, f"{BUILT} (#{seq}): {line}")
            for seq, line, topics in reversed(self.lines)
            if not self.restated(seq, line, topics, common)
        ]
        return kept[:MAX_LINES]


__all__ = ["DOCUMENTS", "Reports", "builds", "report_lines"]
