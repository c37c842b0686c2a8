"""A tool call the person turned down, and the words they typed when they did.

Agent tools ask before running some calls; a "no" comes back as the call's
result, not as a user message. Claude Code writes "The user doesn't want to
proceed with this tool use. The tool use was rejected (eg. if it was a file
edit, the new_string was NOT written to the file)..." and, when the person
typed an answer instead, "...To tell you how to proceed, the user said:" and
their words; OpenCode "The user rejected permission to use this specific tool
call" (and "with the following feedback: ..."); Codex "patch rejected by user".
Two things follow from the
record, whatever the tool: the call did nothing (a rejected edit is no edit),
and the words after "the user said:" are the person's turn (a request, and a
correction of what the call was about to do).
"""

from __future__ import annotations

import re

_REJECTED = re.compile(
    r"(?i)\A\W*(?:error:\s*)?(?:the\s+user\s+doesn['\u2019]?t\s+want\s+to\s+"
    r"(?:proceed\s+with\s+this\s+tool\s+use|take\s+this\s+action)|"
    r"user\s+rejected\s+(?:the\s+)?tool\s+use|"
    r"the\s+user\s+rejected\s+permission\s+to\s+use\s+this\b|"
    r"(?:patch|exec\s+command|command|tool\s+call)\s+rejected\s+by\s+(?:the\s+)?user)"
)
"""The opening of a result that says the person turned the call down."""
_SAID = re.compile(
    r"(?i)\b(?:the\s+user\s+said|with\s+the\s+following\s+feedback):[ \t]*\n?(?P<words>.+)",
    re.S,
)
"""Where the person's own words start."""
REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S)
"""A harness's reminder block: no one's words (``requests`` strips it from requests too)."""
SCAN_CHARS = 600
"""The marker is at the opening of the result: a file that quotes it is no rejection."""


def rejected(text: str) -> bool:
    """Whether a tool result says the person turned the call down (it did nothing)."""
    return _REJECTED.match(text[:SCAN_CHARS]) is not None


def rejection_words(text: str) -> str | None:
    """What the person typed when turning the call down; None when the result is no
    rejection or they typed nothing (a bare "no")."""
    if not rejected(text):
        return None
    said = _SAID.search(text)
    if said is None:
        return None
    words = REMINDER.sub("", said.group("words")).strip()
    return words or None


__all__ = ["REMINDER", "rejected", "rejection_words"]
