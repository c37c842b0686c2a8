"""What an id is, from the words around it where a participant used it.

A bare ``UUID: 019aad50-...`` tells a resumed agent nothing; the person's "run
``python3 export_codex_session.py 019aad50-...``" says it is what that script takes,
and "in session ``891483b6-...``" says it is a session. ``id_label`` reads that from the
text the id first appears in: the command it is passed to (the program and script words
before it, flags skipped), else the plain noun right before it.
"""

from __future__ import annotations

import re

from threadline.compaction.decisions import words_pattern
from threadline.compaction.values import split_words

_FILLER = words_pattern(
    *split_words(
        "the a an in on of for to with and or is was are be it its this that these those at by "
        "from as id ids uuid hash number run use using called named see via into"
    )
)
"""Words before an id that say nothing of what it is."""
_SEPARATOR = re.compile(r"&&|\|\||[;|`(\"\n]|'(?!\w)|(?<!\w)'")
"""Where a simple command (or a quoted one inside prose) begins; an apostrophe is none."""
_SCRIPT = re.compile(r"^[\w./~-]+\.(?:py|js|mjs|cjs|ts|sh|rb|pl|php|go|exs?)$")
"""A script a person or agent runs with an id after it (``export_codex_session.py``)."""
_PROGRAM = re.compile(r"^[\w.-]+$")
"""The interpreter before that script (``python3``), not a word of prose ("be:")."""
_NOUN = re.compile(r"^[A-Za-z][A-Za-z_-]{2,24}$")
"""A plain word naming what the id is ("session", "conversation")."""


def id_label(text: str, value: str, *, command: bool = False) -> str:
    """What ``value`` is, as the words before it in ``text`` say: "passed to python3
    export.py" (``command``: ``text`` is a shell command, whose first words are the
    program), "session"; empty when they say nothing."""
    at = text.find(value)
    if at < 0:
        return ""
    while at and text[at - 1] in "`\"'":
        at -= 1  # the id quoted: its quotes begin no command
    head = _SEPARATOR.split(text[:at])[-1].split()
    while head and head[-1].startswith("-"):
        head.pop()  # ``-l 019aad50-...``: the script comes before its flags
    if not head:
        return ""
    if command:
        return f"passed to {' '.join(head[:2])}"
    if _SCRIPT.match(head[-1]):
        runs = head[-2:] if len(head) > 1 and _PROGRAM.match(head[-2]) else head[-1:]
        return f"passed to {' '.join(runs)}"
    noun = head[-1].rstrip(":=,")
    return noun.lower() if _NOUN.match(noun) and not _FILLER.fullmatch(noun) else ""


__all__ = ["id_label"]
