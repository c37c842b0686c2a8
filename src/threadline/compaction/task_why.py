"""What a task's description says the work must honour: the reason it gives ("## Why
This Task Is Necessary", "Motivation:"), for an approach to the task to carry as its why
(judges found approaches listed without one), and its rules ("## No-gos", "Non-goals",
"Architecture Constraints"), which bind the work as the person's own words do."""

from __future__ import annotations

import re

from threadline.compaction.prose import sentences
from threadline.compaction.snapshot import clip_words
from threadline.compaction.verdicts import topic_words

WHY_WORDS = 32
"""A reason is quoted in at most this many words."""
SHARED_WORDS = 2
"""Content words an approach must share with a reason to be the approach it explains."""

_WHY_HEADING = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*|\*\*)?(?:why(?:[ \t]+[\w ]{0,40})?|motivation|rationale|"
    r"problem(?:[ \t]+statement)?|background)[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$"
)
"""A heading on a line of its own that opens a description's reason."""
_NEXT_HEADING = re.compile(r"(?m)^[ \t]*(?:#{1,6}[ \t]+\S|[A-Z][A-Z ]{3,}$|\*\*[^*]+\*\*[ \t]*$)")


def stated_why(text: str) -> str | None:
    """The first sentence under a description's "Why" heading, or None."""
    m = _WHY_HEADING.search(text)
    if m is None:
        return None
    body = text[m.end() :]
    end = _NEXT_HEADING.search(body)
    body = body[: end.start()] if end else body
    first = next(iter(sentences(" ".join(body.split()))), "").strip()
    return clip_words(first, WHY_WORDS) if len(first.split()) >= 4 else None


_RULES_HEADING = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*|\*\*)?(?:no[- ]?gos?|non[- ]?goals|"
    r"(?:[a-z]+[ \t]+){0,2}(?:constraints|guardrails)|out[ \t]+of[ \t]+scope|"
    r"do[ \t]+not|don['\u2019]?ts)"
    r"[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$"
)
"""A heading on a line of its own that opens a description's rules."""
_ITEM = re.compile(r"^[ \t]*(?:[-*+\u2022]|\d+[.)])[ \t]+(?P<text>\S.*)$")
RULE_WORDS = 20
MAX_RULES = 2
"""Rules kept of one description: the snapshot's decisions have room for few."""


def stated_rules(text: str) -> list[str]:
    """The list items under a description's "No-gos" (or "Constraints") heading, clipped."""
    m = _RULES_HEADING.search(text)
    if m is None:
        return []
    body = text[m.end() :]
    end = _NEXT_HEADING.search(body)
    items = [
        i.group("text")
        for line in (body[: end.start()] if end else body).splitlines()
        if (i := _ITEM.match(line))
    ]
    return [clip_words(" ".join(i.split()), RULE_WORDS) for i in items[:MAX_RULES]]


def with_why(approach: str, why: str | None) -> str:
    """``approach`` with the reason its task states, when they speak of the same things."""
    if why is None or len(topic_words(approach) & topic_words(why)) < SHARED_WORDS:
        return approach
    return f"{approach} (why: {why})"


__all__ = ["stated_rules", "stated_why", "with_why"]
