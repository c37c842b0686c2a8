"""The files ``git status`` lists as untracked: new files, whatever tool wrote them.

A whole-file write (Pi's ``write``, a shell redirect) does not say whether the file
was there before; git's "untracked" does, so a file the run wrote and git calls
untracked is one the run created (``FileTracker.untracked``).
"""

from __future__ import annotations

import re

_GIT_STATUS = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?status\b")
_SHORT = re.compile(r"^\?\? (?P<path>.+)$")
"""``git status --short`` / ``--porcelain``: ``?? path``."""
_HEADING = "Untracked files:"


def untracked_paths(command: str, output: str) -> list[str]:
    """The paths ``output`` (of ``command``) lists as untracked, when it ran ``git status``."""
    if not _GIT_STATUS.search(command):
        return []
    found: list[str] = []
    listing = False
    for line in output.splitlines():
        short = _SHORT.match(line.strip())
        if short:
            found.append(short.group("path"))
        elif line.strip() == _HEADING:
            listing = True
        elif listing and line.startswith(("\t", "        ")) and not line.strip().startswith("("):
            found.append(line.strip())
        elif listing and line.strip() and not line.strip().startswith("("):
            listing = False
    return [p.strip('"') for p in found if p.strip('"') and not p.endswith("/")]


__all__ = ["untracked_paths"]
