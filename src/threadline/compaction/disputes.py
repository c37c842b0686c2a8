"""Values the person later called redundant, wrong or unwanted.

A design the agent proposed leaves its names behind (a field, a file, a flag).
When the person then says "processedRecordIds is the same as
lastSyncedMessageUuid and it might be redundant" or "we don't need
`legacy_sync` any more", a snapshot that still lists those names as plain
values states an abandoned design as current. The person's sentence is kept
beside each name it mentions, in their words, so no one has to guess which of
two names "it" was.
"""

from __future__ import annotations

import re

from threadline.compaction.snapshot import clip_words, one_line
from threadline.compaction.values import extract_values

DISPUTE_WORDS = 16
"""The person's sentence is quoted in at most this many words."""
MAX_DISPUTED = 40
"""Names remembered; the oldest beyond this are forgotten."""
_DISMISSAL = re.compile(
    r"(?i)\b(?:redundant|unnecessary|not\s+needed|no\s+need\s+for|(?:don['\u2019]?t|do\s+not|"
    r"doesn['\u2019]?t)\s+need|get\s+rid\s+of|drop\s+(?:the\s+)?|remove\s+(?:the\s+)?|"
    r"bad\s+idea|is\s+wrong|isn['\u2019]?t\s+(?:right|needed|used)|not\s+used|no\s+longer|"
    r"instead\s+of|rather\s+than|same\s+as|duplicate[sd]?)\b"
)
"""Words that set a name aside: redundant, not needed, the same as another, replaced."""
_NAME = re.compile(r"`[^`\s]{2,80}`|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
"""A name in plain prose: a code span, a camelCase or a snake_case word."""
_KINDS = frozenset({"identifier", "path", "name"})
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def dismissed(text: str) -> dict[str, str]:
    """The names the person's ``text`` sets aside -> the sentence that does, clipped."""
    out: dict[str, str] = {}
    for sentence in _SENTENCE.split(text):
        if sentence.rstrip().endswith("?") or not _DISMISSAL.search(sentence):
            continue
        quote = clip_words(one_line(sentence.strip()), DISPUTE_WORDS)
        names = [v.text for v in extract_values(sentence) if v.kind in _KINDS]
        names += [m.group().strip("`") for m in _NAME.finditer(sentence)]
        for name in dict.fromkeys(names):
            out[name] = quote
    return out


def remember(book: dict[str, str], text: str) -> None:
    """Add what ``text`` sets aside to ``book`` (the newest word on a name wins)."""
    for name, quote in dismissed(text).items():
        book.pop(name, None)
        book[name] = quote
    while len(book) > MAX_DISPUTED:
        del book[next(iter(book))]


def note(book: dict[str, str], name: str) -> str | None:
    """The note a value bullet carries when the person set the name aside later."""
    quote = book.get(name)
    return f'the user later: "{quote}"' if quote else None


__all__ = ["dismissed", "note", "remember"]
