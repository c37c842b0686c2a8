"""The files git lists: untracked ones (new, whatever tool wrote them), and every path a
status or a diff names.

A whole-file write (Pi's ``write``, a shell redirect) does not say whether the file
was there before; git's "untracked" does, so a file the run wrote and git calls
untracked is one the run created (``FileTracker.untracked``). The paths a status or
``diff --stat`` lists are the project's own spelling of them, which a misremembered
path in an earlier summary is read against (``FileTracker.known``).
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


_GIT_LISTING = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?(?:status|diff|show|stash|log|commit)\b")
_LISTED = tuple(
    re.compile(pattern)
    for pattern in (
        r"^\s+(?:modified|new file|deleted|renamed|both modified|typechange|copied):\s+"
        r"(?:\S+\s+->\s+)?(?P<path>\S+)$",  # ``git status``
        r"^[ MADRCUT?!]{2} (?:\S+ -> )?(?P<path>\S+)$",  # ``--short`` / ``--porcelain``
        r"^\s*(?P<path>[^\s|.][^\s|]*)\s+\|\s+(?:\d+|Bin)\b",  # ``--stat``, not ``.../x``
    )
)
"""A line of git's that lists one whole path."""


def git_listed_paths(command: str, output: str) -> list[str]:
    """Every path ``output`` (of a git status, diff, show, stash or log ``command``) lists."""
    if not _GIT_LISTING.search(command):
        return []
    found = untracked_paths(command, output)
    for line in output.splitlines():
        m = next((m for pattern in _LISTED if (m := pattern.match(line))), None)
        path = m.group("path").strip('"') if m is not None else ""
        if "/" in path or "." in path:
            found.append(path)
    return list(dict.fromkeys(p for p in found if not p.endswith("/")))


__all__ = ["git_listed_paths", "untracked_paths"]
