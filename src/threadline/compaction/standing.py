"""Standing requirements: what the person asked for over a long run that still holds.

A run of many requests builds up a spec (a game's rules, a board's look, a script's
usage) one request at a time. Folding the older ones into "37 requests" loses it, so
the snapshot keeps each request that led to work as a short clause (the opening words
``progress`` keeps as its title), newest version of each:

* a later request **replaces** an earlier one only on evidence (``decisions.supersedes``):
  it shares the earlier one's subject *and* says it replaces ("instead", "go back to",
  "the other way", "revert"), or ends what the earlier one put off ("later" -> "now"),
  or restates the same subject with another value without building on it ("this
  highlight", "also", "still"). Topic overlap alone is a refinement: both hold;
* a bare undo ("undo the last change", "revert that") takes back the request before
  it, and holds nothing itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from threadline.compaction.decisions import (
    SHARED_TOPIC,
    asks_for_change,
    common_words,
    subject_words,
    supersedes,
    words_pattern,
)
from threadline.compaction.snapshot import clip_words, one_line, words


class Segment(Protocol):
    """What a requirement reads of a progress segment (``progress.Segment``): this module
    is called by ``progress``, so it names the fields, not the class."""

    start: int
    key: str
    title: str
    asks: str


LABEL = "Requirement"
CLAUSE_WORDS = 14
CLAUSE_MIN_WORDS = 9
CLAUSE_SCAN_CHARS = 1_500
"""A request's opening read for its clause (a pasted log after it is no requirement)."""
_SPEC = words_pattern(
    "should", "must", r"needs?\s+to", r"ha(?:s|ve)\s+to", r"I\s+want", "let['\u2019]?s", "make",
    "use", "add", "remove", "change", "implement", "keep", "update", "rewrite", "download",
    "instead", "only", "always", "never", r"can\s+still", r"ha(?:s|ve)\s+no",
)  # fmt: skip
"""A sentence that sets how something should be ("the cooldown should start at the top")."""
_SENTENCE = re.compile(r"(?<=[.!;])\s+|\s+(?=\d+[:)]\s)")

_BARE_UNDO = re.compile(
    r"(?i)^\W*(?:please\s+)?(?:undo|revert|roll\s*back)\b"
    r"(?:\s+(?:the|that|this|my|your))?(?:\s+(?:last|previous|latest))?"
    r"(?:\s+(?:change|edit|one|commit|step))?(?:\W*$|[\s,.;:]+(?:it|that|this)\b)"
)
"""An undo naming nothing but "the last change": it takes back the request before it."""


_EXAMPLE = re.compile(r"(?i)(?:\be\.?g\.?|\bfor\s+example|\bexample\b[^:\n]{0,40})\s*:")
"""Where the person starts pasting an example (output, a log): what follows is a quote."""


def clause(request: str) -> str | None:
    """The first sentence of a request that asks for something, clipped; None when none
    does (a bug report, a question). A pasted example and what follows it are left out."""
    own = _EXAMPLE.split(request[:CLAUSE_SCAN_CHARS], maxsplit=1)[0]
    sentences = _SENTENCE.split(one_line(own).rstrip(" …"))
    for at, sentence in enumerate(sentences):
        named = len(subject_words(sentence)) >= SHARED_TOPIC  # "let's implement it": no
        spec = asks_for_change(sentence) or _SPEC.search(sentence) is not None
        if words(sentence) >= 3 and spec and named and not sentence.rstrip().endswith("?"):
            text = sentence.strip()
            for more in sentences[at + 1 :]:  # a short one goes on with what it leads to
                if words(text) >= CLAUSE_MIN_WORDS:
                    break
                text = f"{text} {more.strip()}"
            return clip_words(text, CLAUSE_WORDS)
    return None


def requirements(segments: Sequence[Segment]) -> list[tuple[int, str]]:
    """(seq, clause) of the requests that still hold, oldest first."""
    asked = [(s.start, s.title, s.asks) for s in segments if not s.key and s.title]
    topics = [subject_words(f"{title} {asks}") for _, title, asks in asked]
    common = common_words(topics)  # the run's subject, not one spec's
    held: list[tuple[int, str, set[str], str]] = []
    for (seq, title, asks), said in zip(asked, topics, strict=True):
        if _BARE_UNDO.match(title):
            if held:
                held.pop()  # the change it takes back
            continue
        mine = said - common
        held = [h for h in held if not supersedes(h[1], h[2], title, mine)]
        held.append((seq, title, mine, asks))
    # a checkpoint written before ``asks`` was kept has only the title to go on
    return [(seq, text) for seq, title, _, asks in held if (text := asks or clause(title))]


def _flat(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def requirement_lines(
    segments: Sequence[Segment], *, budget: int, skip: set[int], said: Sequence[str] = ()
) -> list[str]:
    """The requirements as Current State lines, newest kept first within ``budget`` words;
    ``skip``: requests another line of the snapshot already names; ``said``: other bullets
    (Key Decisions) a requirement is not repeated from."""
    chosen: list[str] = []
    spent = 0
    known = [_flat(t) for t in said]
    for seq, title in reversed(requirements(segments)):
        flat = _flat(title)
        if seq in skip or any(flat and flat in k for k in known):
            continue
        line = f"{LABEL} (#{seq}): {title}"
        if spent + words(line) > budget:
            break
        chosen.insert(0, line)
        spent += words(line)
    return chosen


__all__ = ["LABEL", "clause", "requirement_lines", "requirements"]
