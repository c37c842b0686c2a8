"""What each subagent was asked and what it reported, for Current State.

A line "Subagent `spawn_pi`: ✓ 8 of 8 tasks complete" tells the next agent nothing of
the work eight workers did. Each subagent outcome here is one task: its brief in a few
words (from the call's arguments: Claude Code's ``Task`` / ``Agent`` ``description``
or ``prompt``, Pi's ``spawn_pi`` ``tasks[].prompt``), the substance of its report (the
first meaningful line, never the tool's tally banner nor a courtesy), the files it says
it changed and the commits it made. A subagent that did not finish says so, with the
reason its tool gave.

Pi's ``spawn_pi`` answers with a tally; each subagent's own report rides in the
result's ``details`` and the importer keeps it per task (``pi_session``:
``metadata["subagent_reports"]``, ``{task, status, report}``; older imports kept only
the report strings).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.compaction.extractive import FENCED_CODE
from threadline.compaction.snapshot import clip_words, code_span, one_line
from threadline.compaction.values import extract_values
from threadline.messages import Message, ToolCall

SUBAGENT_REPORTS_KEY = "subagent_reports"
"""Tool result metadata an importer fills with the subagents' own reports (the same key as
``interop.pi_session.SUBAGENT_REPORTS_KEY``; compaction reads no importer)."""
MAX_OUTCOMES = 6
"""Outcomes remembered, the latest; a task run again replaces its earlier outcome."""
TASK_WORDS = 8
OUTCOME_WORDS = 14
_CHANGE = r"(?:changed|modified|created|edited|updated|wrote|written|added|deleted|removed|renamed)"
_FILES_HEADING = re.compile(
    rf"(?i)\bfiles?\b[^\n]{{0,40}}\b{_CHANGE}\b|\b{_CHANGE}\b[^\n]{{0,20}}\bfiles?\b|"
    r"^\s*#{1,6}\s*(?:changes|changes made)\s*$"
)
"""A heading over the list of files a report changed ("Files changed", "### Changes")."""
MAX_FILES = 6
BY_SUBAGENT = "changed by a subagent"
"""The action a file a subagent reported changing has in the artifact trail: the run's
change, not one of the agent's own calls."""
_CHANGE_LINE = re.compile(rf"(?i)^\W*{_CHANGE}\b")
"""A line that says it changed something ("Updated `src/a.ts` ...")."""
DONE_STATUSES = frozenset({"succeeded", "success", "completed", "complete", "done", "ok"})
"""A task's status that says it finished; any other (``parent_aborted``) did not."""
_FILLER = re.compile(
    r"(?i)^\W*(?:perfect|great|excellent|okay|ok|now|let me|i now have|i have now|i'll|alright)\b"
)
"""A report's opening courtesy ("Perfect! Now I have all the information I need.")."""
_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
"""A list item's marker."""
_REPORTED_COMMIT = re.compile(
    r"(?i)(?:^\[[^\]\s]+ |\bcommit(?:ted)?(?: as| in|:)?\s+`?)(?P<hash>[0-9a-f]{7,40})\b", re.M
)


@dataclass(slots=True)
class Outcome:
    """What a subagent was asked (``task``) and reported: its first words, the files it
    says it changed and the commits it made."""

    seq: int
    task: str
    said: str
    files: list[str]
    commits: list[str]

    def to_json(self) -> list[Any]:
        return [self.seq, self.task, self.said, self.files, self.commits]

    def line(self) -> str:
        head = f"Subagent {code_span(self.task)}"
        said = self.said.rstrip(".")
        parts = [f"{head}: {said}" if said else f"{head} finished"]
        if self.files:
            parts.append("changed " + ", ".join(code_span(f) for f in self.files[:MAX_FILES]))
        if self.commits:
            parts.append("committed " + ", ".join(code_span(c) for c in self.commits))
        return "; ".join(parts)


@dataclass(slots=True)
class _Run:
    """One subagent's report as a tool result gives it."""

    index: int | None
    status: str | None
    report: str


def _runs(result: Message) -> list[_Run]:
    """The subagents' own reports an importer kept beside the result's text."""
    found = result.metadata.get(SUBAGENT_REPORTS_KEY)
    runs: list[_Run] = []
    for r in found if isinstance(found, list) else []:
        if isinstance(r, str):
            runs.append(_Run(None, None, r))
        elif isinstance(r, Mapping) and isinstance(r.get("report"), str):
            index = r.get("task")
            status = r.get("status")
            runs.append(
                _Run(
                    index if isinstance(index, int) else None,
                    status if isinstance(status, str) else None,
                    r["report"],
                )
            )
    return runs


def _brief(task: Any) -> str:
    """What one task asked, in words (a dict's description or prompt, or the string)."""
    if isinstance(task, str):
        return task
    if isinstance(task, Mapping):
        for key in ("description", "prompt", "task", "instructions"):
            if isinstance(task.get(key), str) and task[key].strip():
                return str(task[key])
    return ""


def _briefs(call: ToolCall) -> list[str]:
    """Each task's brief: a call handing out several tasks (``tasks: [...]``), or one."""
    tasks = call.arguments.get("tasks")
    if isinstance(tasks, list) and tasks:
        return [_brief(t) for t in tasks]
    return [_brief(call.arguments)]


def _lines(text: str) -> list[str]:
    return [ln for ln in FENCED_CODE.sub("\n", text).splitlines() if ln.strip()]


_MARKUP = re.compile(r"\*\*|__|^#+\s*")
"""Bold marks and a heading's hashes: a report's first words are said plain."""


def _clean(line: str) -> str:
    return _MARKUP.sub("", _ITEM.sub("", line)).strip(" #*-")


_TALLY = re.compile(r"(?i)^\s*[\w-]+:\s*\S?\s*(?:incomplete\b|\d+ of \d+\b)")
"""A subagent tool's own tally banner (``spawn_pi: ✓ 8 of 8 tasks complete``)."""
_POINTER = re.compile(
    r"(?i)(?<=[.!;])\s+(?:here is|here are|here's|below is|see below)\b[^.]*\.?\s*$"
)
"""A closing pointer to the rest of the report ("Here is the full report.")."""
_SECTION_LABEL = re.compile(r"(?i)^(?:changes?|changed|summary)\s*:\s+")
"""A report's own section label before its first words ("Changes: Updated ...")."""


def _first_words(text: str) -> str:
    """The report's first meaningful line: not a heading of under four words, a label
    ending in a colon, a table row, the tool's tally nor a courtesy."""
    for ln in _lines(text):
        said = _clean(ln)
        if (
            len(said.split()) >= 4
            and not ln.lstrip().startswith("|")
            and not said.endswith(":")
            and not _FILLER.match(said)
            and not _TALLY.match(said)
        ):
            said = _SECTION_LABEL.sub("", said)
            return _POINTER.sub("", said).strip()
    return ""


_UNCHANGED = re.compile(
    r"(?i)\bno\s+(?:additional\s+|other\s+|further\s+)?(?:changes?|edits?)\b|"
    r"\b(?:not|never)\s+(?:been\s+)?(?:changed|edited|modified|touched)\b|"
    r"\bleft\s+(?:\w+\s+)?(?:unchanged|untouched|as\s+is)\b|"
    r"\brequired\s+no\b|\bnothing\s+to\s+change\b"
)
"""A line under "Changes" that names files the subagent left as they were ("Confirmed no
changes were needed in `src/domain.ts`", "`protocol.test.ts` required no changes"); a
change that kept something ("Reformatted `x.ts`, behaviour unchanged") is a change."""


_CLAUSE = re.compile(r"(?<=[;])\s+|(?<=\.)\s+(?=[A-Z`])")
"""Where a report's line goes on to another statement ("Updated `a.ts`; `b.ts` required no
changes."), so each clause is read for what it says of its files."""


def _files(text: str) -> list[str]:
    """Files from lines that say they changed, or from the list under a "Files changed"
    heading."""
    files: list[str] = []
    listing = False
    for line in FENCED_CODE.sub("\n", text).splitlines():
        if _FILES_HEADING.search(line) and not _ITEM.match(line):
            listing = True
            continue
        if listing and not _ITEM.match(line) and line.strip():
            listing = False
        if listing or _CHANGE_LINE.match(_clean(line)):
            for clause in _CLAUSE.split(line):
                if _UNCHANGED.search(clause):
                    continue
                for v in extract_values(clause):
                    path = v.text.strip("`")
                    if v.kind == "path" and "." in path.rsplit("/", 1)[-1] and path not in files:
                        files.append(path)
    return files


def resolved(name: str, known: Iterable[str]) -> str:
    """A file said with fewer directories than the run's own spelling of it, as the one
    path among ``known`` with that file name whose directories include the said ones in
    order: a subagent's bare ``domain.test.ts`` is ``test/unit/domain.test.ts``, an
    earlier summary's ``cli/a_test.go`` the ``cli/strategy/a_test.go`` git listed. A
    path ``known`` holds is kept, as is one two known paths would fit, or none."""
    said = name.replace("\\", "/").strip("/").split("/")
    paths = {p.replace("\\", "/") for p in known}
    if len(said) > 1 and "/".join(said) in paths:
        return name
    found = {p for p in paths if _fits(said, p.strip("/").split("/"))}
    return found.pop() if len(found) == 1 else name


def _fits(said: list[str], path: list[str]) -> bool:
    """Whether ``path`` names the file ``said`` names, with directories ``said`` left out."""
    if path[-1] != said[-1] or len(path) <= len(said):
        return False
    rest = iter(path[:-1])
    return all(part in rest for part in said[:-1])  # a subsequence, in order


def _paths(text: str) -> list[str]:
    return [v.text.strip("`") for v in extract_values(text) if v.kind == "path"]


def _outcome(seq: int, task: str, report: str, status: str | None, brief: str = "") -> Outcome:
    if status is not None and status.lower() not in DONE_STATUSES:
        why = _first_words(report) or report.strip()
        said = f"not finished ({status})" + (f": {why}" if why else "")
        return Outcome(seq, task, clip_words(one_line(said), OUTCOME_WORDS), [], [])
    lines = _lines(report)
    said = _first_words(report) or (lines[0].strip() if lines else "")  # a tally: no report
    said = clip_words(one_line(said), OUTCOME_WORDS)
    commits = list(dict.fromkeys(m.group("hash") for m in _REPORTED_COMMIT.finditer(report)))
    named = _paths(f"{brief}\n{report}")  # a bare name is the path its brief or report gave
    files = list(dict.fromkeys(resolved(f, named) for f in _files(report)))
    return Outcome(seq, task, said, files, commits)


def subagent_outcomes(call: ToolCall, result: Message, seq: int) -> list[Outcome]:
    """One outcome per subagent ``call`` ran, in its order: per task when the result holds
    each task's report, else one for the call's report (its text)."""
    briefs = _briefs(call)
    runs = _runs(result)
    if not runs:
        task = clip_words(briefs[0] or call.name, TASK_WORDS)
        return [_outcome(seq, task, result.text, None, briefs[0])]
    out: list[Outcome] = []
    for n, run in enumerate(runs):
        index = run.index if run.index is not None else n
        brief = briefs[index] if 0 <= index < len(briefs) and briefs[index] else call.name
        task = clip_words(brief, TASK_WORDS)
        out.append(_outcome(seq, task, run.report, run.status, brief))
    return out


def latest_outcomes(old: Sequence[Outcome], new: Sequence[Outcome]) -> list[Outcome]:
    """The latest ``MAX_OUTCOMES``; a task run again (the same brief) replaces its earlier
    outcome."""
    briefs = {o.task for o in new}
    kept = [o for o in old if o.task not in briefs]
    return [*kept, *new][-MAX_OUTCOMES:]


__all__ = [
    "BY_SUBAGENT",
    "MAX_OUTCOMES",
    "SUBAGENT_REPORTS_KEY",
    "Outcome",
    "latest_outcomes",
    "resolved",
    "subagent_outcomes",
]
