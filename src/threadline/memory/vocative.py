"""Who a turn calls by name, when no earlier turn says who is spoken to.

A conversation's first turn ("Gina, you won't believe it - I got mentored ...", "Hey
Gina! ...") names its listener; without it the name stays in the fact and "you" is
left unresolved (issue 37: "Gina, you won't believe it - Jon got mentored ...")."""

from __future__ import annotations

import re

from threadline.memory.rules import STOPWORDS
from threadline.memory.statements import CHATTER_WORDS, strip_opener

_GREETED_RE = re.compile(
    r"^(?:hey|hi|hello|heya|hiya|yo|morning|evening|thanks|thank\s+you|congrats|"
    r"congratulations|dear)[,!]?\s+([A-Z][a-z]{2,})\b(?!\s+(?-i:[A-Z]))(?=\s*[,!.:;-]|\s+you\b)",
    re.I,
)
"""A greeting before a name ("Hey Gina!", "Thanks Mel,")."""
_CALLED_RE = re.compile(r"^([A-Z][a-z]{2,})\s*[,!]\s+(?=you\b|your\b|guess\b|I\b)", re.I)
"""A name called at a turn's start, then words to that person ("Gina, you won't ...")."""


def called(text: str, speaker: str | None = None) -> str | None:
    """The name ``text`` calls its listener by at its start; None when it calls no one
    (or a word that is no name: "Wow, you ...", "Sure, I ...")."""
    opening = text.lstrip()
    m = _GREETED_RE.match(opening) or _CALLED_RE.match(opening)
    if m is None or not m[1][:1].isupper():
        return None
    name = m[1]
    low = name.lower()
    if low in STOPWORDS or low in CHATTER_WORDS or name == speaker:
        return None
    if strip_opener(f"{name}, x") != f"{name}, x":  # an interjection ("Yeah, you ...")
        return None
    return name
