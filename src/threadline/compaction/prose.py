"""The prose of a message, sentence by sentence: code, tagged blocks, tables and list markers
removed, so rules that read what someone said do not match inside code or output."""

from __future__ import annotations

import re
from collections.abc import Iterator

FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.S)
_TAGGED = re.compile(r"<([a-z]\w*-[\w-]+)>.*?</\1>", re.S)
_LINE_MARKER = re.compile(r"^\s*(?:#{1,6}\s+|[-*+\u2022]\s+|\d+[.)]\s+|>\s*)")
_CHECKBOX_LINE = re.compile(r"^\s*[-*+]\s*\[[ xX]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*])")
EMPHASIS = re.compile(r"\*\*|__")


def prose(text: str) -> str:
    """``text`` without fenced code and tagged blocks (``<system-reminder>`` and the like)."""
    return _TAGGED.sub(" ", FENCED_CODE.sub("\n", text))


LIST_ITEM = re.compile(
    r"^\s{0,3}(?:\*\*)?(?:[-*+\u2022]|\(?(?P<key>\d{1,2}|[A-H])[.)])(?:\*\*)?\s+(?P<text>\S.*)$"
)
"""A line of a list: a bullet, or a numbered or lettered item (``1. **Add**: ...``, ``B)
Split``) whose ``key`` says which."""


def sentences(text: str) -> Iterator[str]:
    """Sentences of the prose in ``text``: code, tables, checkboxes and list markers removed."""
    for line in prose(text).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("|") or _CHECKBOX_LINE.match(stripped):
            continue
        stripped = EMPHASIS.sub("", _LINE_MARKER.sub("", stripped))
        for sentence in _SENTENCE_END.split(stripped):
            if sentence.strip():
                yield sentence.strip()
