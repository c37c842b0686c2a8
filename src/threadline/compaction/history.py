"""A carried-forward summary's state is history: what it said held at its own moment.

A compaction over an earlier checkpoint (threadline's own, or a summary another
tool wrote, such as Claude Code's ``isCompactSummary``) reads that summary's
"current work", "next step" and "pending" as of the point it covers. The newer
messages decide the present: a todo list written since is the agent's whole
plan now (the earlier summary's steps are superseded; an item of a tracker,
named by its id, stays until the tracker closes it), and a command that ran
clean since means a failure the summary reported ("compilation errors") is
behind it. So a state line carried from the earlier summary is dropped when the
newer span shows the present (a newer todo list, or a newer clean run for a line
about a failure); otherwise it stays, marked with the point it dates from, below
the newer state. A pending step carried from it is dropped when a newer todo
list supersedes it, and a decision or finding of it that reports a failure ("still
seeing compilation errors") is dropped once a command ran clean after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from threadline.compaction.snapshot import clip_words, heading_title
from threadline.compaction.trail import Trail
from threadline.compaction.values import extract_values

HISTORY_WORDS = 40
"""A carried state line is quoted by its opening this many words."""
KEY_CHARS = 80
"""Lines are matched to the earlier summary's by the opening of their normalised text (a
rendered line may be clipped)."""
_FAILURE = re.compile(
    r"(?i)\b(?:errors?|fail(?:s|ed|ing|ure)?|broken|does(?:n['\u2019]?t| not) (?:compile|build)|"
    r"won['\u2019]?t (?:compile|build)|conflicts?|panic(?:s|ked)?|crash(?:es|ed)?)\b"
)
"""Words of a line that reports something failing."""
_NOW = re.compile(
    r"(?i)\b(?:still|currently|remains?|remaining|persists?|persisting|keeps?|"
    r"there\s+(?:are|is)|(?:is|are)\s+(?:failing|broken))\b"
)
"""Words that say a failure holds at the time of writing."""


INTENT_LINES = 3
"""Lines of the earlier summary's statement of the task carried forward."""
_INTENT_TITLES = re.compile(r"^(?:primary )?(?:request|requests|task|goal|intent)\b|\bintent$")
"""An earlier summary's statement of the task: Claude Code's "Primary Request and Intent"."""
_FILES_TITLES = re.compile(r"\bfiles?\b.*\b(?:modified|changed|code sections|touched|edited)\b")
"""An earlier summary's account of the files it changed: "Files and Code Sections", "Key
files modified"."""
_FILE_ENTRY = re.compile(
    r"^\s*(?:[-*+]|\d+[.)])?\s*(?:\*\*)?`?(?P<path>[\w.~-]+(?:/[\w.~-]+)*\.\w{1,10})`?(?:\*\*)?"
    r"\s*(?::|-|\u2014|$)(?P<rest>.*)$"
)
"""A line that opens with a file's path: ``- **`cmd/a/b.go`**``, ``- `b.go` - Added X``."""
_CHANGE_WORDS = re.compile(
    r"(?i)\b(?:add(?:ed|s)?|creat(?:ed|es)|modif(?:ied|ies)|updat(?:ed|es)|chang(?:ed|es)|"
    r"implement(?:ed|s)|fix(?:ed|es)|remov(?:ed|es)|renam(?:ed|es)|rewr(?:ote|itten)|"
    r"refactor(?:ed|s)|new file|replac(?:ed|es)|wir(?:ed|es)|"
    r"pass(?:es|ed)?\s+\S+(?:\s+\S+){0,2}\s+(?:to|through|into))\b"
)
"""Words that say a file was changed, as against read or examined."""
_FENCE_LINE = re.compile(r"^\s*(?:```|~~~)")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """The earlier summary's lines under each heading-shaped line (code fences left out)."""
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        if _FENCE_LINE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        title = (
            heading_title(line)
            if line.rstrip(" *_").endswith(":") or line.lstrip()[:1] == "#"
            else None
        )
        if title:
            out.append((title, []))
        else:
            out[-1][1].append(line)
    return out


def earlier_intent(text: str) -> list[str]:
    """The task as another tool's summary stated it ("Continue debugging the checkpoint ID
    reuse bug (ENT-112)", "Problem 2 (in progress): ..."): its first lines under a heading
    such as "Primary Request and Intent"; none for a snapshot of threadline's own."""
    for title, lines in _blocks(text):
        if _INTENT_TITLES.search(title):
            said = [ln.strip().lstrip("-*+ ").strip() for ln in lines]
            return [ln for ln in said if ln][:INTENT_LINES]
    return []


def earlier_files(text: str) -> list[str]:
    """The files another tool's summary says were changed, in its order: each path that
    opens an entry of its files section whose own words say it was changed (added,
    updated, implemented ...), as against read."""
    found: list[str] = []
    for title, lines in _blocks(text):
        if not _FILES_TITLES.search(title):
            continue
        path: str | None = None
        said = ""
        for line in [*lines, ""]:
            m = _FILE_ENTRY.match(line) if line else None
            if m is None and line and path is not None:
                said += " " + line
                continue
            if path is not None and _CHANGE_WORDS.search(said) and path not in found:
                found.append(path)
            path, said = (m.group("path"), m.group("rest")) if m else (None, "")
    return found


def carried(flat: str, earlier: Iterable[str]) -> bool:
    """Whether the normalised line ``flat`` is one of the earlier summary's (``earlier``,
    normalised the same way), or a clipped form of one."""
    key = flat.rstrip(" .\u2026")[:KEY_CHARS]
    return bool(key) and any(e[:KEY_CHARS].startswith(key) for e in earlier if e)


def superseded_step(text: str, evidence: Trail, since: int | None) -> bool:
    """A step of the summary written at ``since`` that a todo list written after it replaced:
    the list is the agent's whole plan now. A step naming a tracker's item (``shop-7q2.5``)
    is the tracker's to close, not the list's."""
    if since is None or evidence.todos is None or evidence.todos.seq <= since:
        return False
    return not any(v.kind == "id" for v in extract_values(text))


def stale_state(text: str, evidence: Trail, since: int | None) -> bool:
    """A state line of the summary written at ``since`` that the newer span overtook: a
    newer todo list is the plan now, and a failure it reports had a clean run after it."""
    if since is None:
        return False
    return superseded_step(text, evidence, since) or settled_failure(text, evidence, since)


def settled_failure(
    text: str, evidence: Trail, since: int | None, *, present: bool = False
) -> bool:
    """A line of the summary written at ``since`` that reports something failing ("compilation
    errors"), after which a command ran clean: no longer the case. With ``present``, only a
    line that says the failure holds now ("still seeing ...") counts: a decision's record of
    an error fixed ("Fixed the compile error by ...") stays true."""
    if since is None or evidence.last_clean <= since or _FAILURE.search(text) is None:
        return False
    return not present or _NOW.search(text) is not None


def as_history(text: str, since: int | None) -> str:
    """``text`` quoted as what held at ``since``."""
    quoted = clip_words(text, HISTORY_WORDS)
    return quoted if since is None else f"As of #{since} (earlier summary): {quoted}"


__all__ = [
    "as_history",
    "carried",
    "earlier_files",
    "earlier_intent",
    "settled_failure",
    "stale_state",
    "superseded_step",
]
