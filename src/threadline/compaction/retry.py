"""A retry the person asks for right after a failure carries the failure as its why ("try
again, but keep the default reasoning effort" after a batch that failed)."""

from __future__ import annotations

import re

from threadline.compaction.snapshot import clip_words

FAILURE_WORDS = 12
"""The failure is quoted in at most this many words (its first line)."""

_RETRY = re.compile(r"(?i)\b(?:try(?:ing)?\s+(?:it\s+|that\s+|this\s+)?again|retry|re-run|rerun)\b")
_FAILED = re.compile(
    r"(?i)\b(?:fail(?:ed|s|ure)?|errors?|incomplete|timed?\s*out|aborted|crash(?:ed)?|"
    r"exit(?:ed)?\s+(?:code|status)\s+[1-9])\b"
)


def retry_why(said: str, result: str | None, error: bool) -> str | None:
    """``(retry after: <first line of the failed result>)`` when ``said`` asks to try again and
    the last result before it failed (flagged, or saying so in its first line); else None."""
    if result is None or not _RETRY.search(said):
        return None
    first = next((line.strip() for line in result.splitlines() if line.strip()), "")
    if not first or not (error or _FAILED.search(first)):
        return None
    return f"(retry after: {clip_words(first, FAILURE_WORDS)})"


__all__ = ["retry_why"]
