"""The progress account: what the run did on each work item, in order, from its evidence.

A native compaction summary reads task by task: "spotter-dov.1: claimed, created
X and Y, fixed the compile errors, all 397 tests passed, closed; spotter-dov.2:
... 410 tests passed, closed; spotter-dov.3: changes so far, the current compile
error (file:line), what is still to do". A snapshot that only lists files and
open items leaves the next agent to guess which work is finished and where the
current one stands. The account is one segment per stretch of work:

* a work item becomes the current one when the run claims it (a tracker sets it
  in progress: ``bd update X --status in_progress``, ``TaskUpdate`` in progress,
  the todo list's in-progress item); it stays current, closed or not, until
  another is claimed (a commit made right after ``bd close`` belongs to it);
* where no item is in progress, each request a person makes opens a segment;
* each segment gathers the files changed while it was current (the trail's file
  tracker), the latest result line of each check it ran (a test runner's
  summary, a linter's verdict, a compiler's error with its file:line: the
  command output's own words, ``result_line`` / ``located_error``), the
  commits made (a commit a hook rejected is none), the closure with its reason,
  and the assistant's own word on what remains ("still need to ...").

The trail (``trail.py``) feeds it as it reads; it travels in the trail's
checkpoint metadata. ``reconcile`` renders it in Current State.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.decisions import ANSWERS, is_narration
from threadline.compaction.snapshot import clip_chars, clip_words, code_span, one_line, words
from threadline.compaction.standing import clause
from threadline.compaction.toolcalls import simple_commands

Shown = Callable[[str], str]
"""How a stored path is shown (relative to the session's working directory)."""
Made = Callable[[str, int], bool]
"""Whether the run created a file (it did not exist before) at or after a seq."""
MAX_SEGMENTS = 40
"""Segments remembered; the oldest go first."""
MAX_FILES = 24
MAX_CHECKS = 6
"""Commands whose latest result a segment remembers (the most recent)."""
MAX_COMMITS = 6
MAX_DEFS = 40
"""Editor calls whose definitions a segment keeps."""
SHOWN_DEFS = 6
"""Names said per clause ("added `a`, `b` (+3 more)")."""
LINE_CHARS = 200
SCANNED_OUTPUTS = 64
"""Outputs whose result line and located error are remembered: each compaction reads its
kept tail again (the trail's ``later``), so an agent that compacts every step would scan
its latest outputs, line by line with case-blind patterns, once per compaction."""
TITLE_WORDS = 14
REASON_WORDS = 18
REMAINS_WORDS = 30
REPORT_WORDS = 32
"""The assistant's own report of a stretch ("Added X; all 410 tests pass"), clipped."""
REPORT_MIN_WORDS = 12
ACCOUNT_WORDS = 230
"""Words the account of finished segments may spend in a snapshot; older segments beyond
it are named in one "Earlier" line."""
SHOWN_FILES = 5
FINISHED_CHECKS = 2
"""A finished stretch says how its last this-many commands' checks went (tests, linter)."""
TODO_SOURCE = "todo list"
TURNED_WORDS = 16
"""What the person said turning a plan step down, quoted in this many words."""
PROGRESS_HEADS = ("Done: ", "Worked on ")
"""How the account's lines for finished segments begin (a next compaction rebuilds them)."""

_HEADER = re.compile(
    r"(?i)^\W*(?:exit(?:ed\s+with)?\s+(?:code|status)|process exited|wall time:|chunk id:|"
    r"original token count:|output:\s*$|error: exit code)"
)
"""A line of the wrapper around a command's output: never its result."""
_COUNT = (
    r"\d[\d,]*\s+(?:tests?|doctests?|examples?|specs?|assertions?|passed|passing|failed|"
    r"failing|failures?|errors?|skipped|pending|problems?|warnings?|issues?|suggestions?)\b"
    r"(?![/\w-]|\.\w)"
)
_FINDINGS = (
    r"\d[\d,]*\s+(?:[a-z]+\s+){1,2}(?:problems?|warnings?|issues?|suggestions?|offen[cs]es?)"
    r"\b(?![/\w-]|\.\w)"
)
"""A linter's tally with its kind of finding between: "found 5 software design suggestions"."""
_SUMMARY = re.compile(rf"(?i)(?:^|[\s(,;:|])(?:{_COUNT}|{_FINDINGS})")
"""A test runner's or a checker's count line: "59 tests, 0 failures", "5 passed, 1 failed",
"Found 2 errors", "found 5 software design suggestions"."""
_VERDICT = re.compile(
    r"(?i)^\W*(?:all (?:\d+ )?(?:checks|tests|specs) (?:passed|pass)|no (?:issues|errors|problems)"
    r" found|success: no issues|build (?:succeeded|successful|failed)|compiled successfully|"
    r"found no (?:issues|errors|problems|offenses)|test result: \w+|tests? passed|"
    r"(?:ok|fail)\s+\S+\s+[\d.]+s\s*$|\d+ files? (?:left unchanged|would be reformatted|"
    r"reformatted|already formatted))"
)
"""A verdict line without counts: "All checks passed!", "Build succeeded"."""
_NONE_FOUND = re.compile(
    r"(?i)\b(?:found no (?:issues|errors|problems|offen[cs]es|warnings)|"
    r"no (?:issues|errors|problems|offen[cs]es) (?:found|detected))\b"
)
"""A checker's clean verdict inside its tally line: "71 mods/funs, found no issues."."""
_NONZERO_FAIL = re.compile(
    r"(?i)(?:^|[^\d])(?:[1-9][\d,]*)\s+(?:failed|failing|failures?|errors?)\b|"
    r"(?<!0 )\bfailed\b(?!\s*:?\s*0)"
)
_ERROR_START = re.compile(
    r"(?i)(?:^|\s)(?:error(?:\[\w+\]|\s+[A-Z]+\d+)?:|\*\* \(\w+\)|\w*(?:Error|Exception):|fatal:|"
    r"panic(?:ked)?\b|FAILED\b|FAIL:|E\s{2,}\S)"
)
"""The line a compiler or test runner opens a failure with."""
_LOCATION = re.compile(r"(?<![\w/.-])(?P<loc>[\w./~-]*[\w-]\.\w{1,8}(?::\d+(?::\d+)?|\(\d+,\d+\)))")
"""``lib/a.ex:171``, ``src/x.ts:12:5``, ``src/x.ts(12,5)``: where an error is."""
_READERS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "grep",
        "egrep",
        "rg",
        "ag",
        "sed",
        "awk",
        "ls",
        "find",
        "echo",
        "printf",
        "wc",
        "jq",
        "bd",
        "gh",
        "git",
        "curl",
        "which",
        "diff",
        "sleep",
        "cd",
        "pwd",
        "stat",
        "file",
        "tree",
        "du",
        "df",
        "env",
        "date",
        "ps",
        "cp",
        "mv",
        "mkdir",
        "rm",
        "touch",
        "chmod",
        "open",
        "kill",
        "xargs",
        "true",
    }
)
"""Programs that show text rather than check anything: a count in their output is data."""
_REMAINS = re.compile(
    r"(?i)\b(?:still\s+(?:need|needs|have|has)\s+to|next,?\s+(?:I|we)(?:['\u2019]ll|\s+will|"
    r"\s+need\s+to)|remaining(?:\s+(?:work|steps|tasks|items))?\s*:|left\s+to\s+do|"
    r"yet\s+to\s+(?:be\s+)?\w+|not\s+yet\s+(?:done|implemented|fixed|wired|tested|updated))"
)
"""The assistant saying what is left ("Still need to update the template")."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(*])|\n+")
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)


@functools.lru_cache(maxsize=SCANNED_OUTPUTS)
def result_line(text: str) -> str | None:
    """The line of a command's output that says how the check went: the last test-runner or
    checker summary ("14 doctests, 397 tests, 0 failures"), else the last verdict line
    ("All checks passed!"); None when the output has neither."""
    found: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or len(line) > LINE_CHARS or _HEADER.match(line):
            continue
        if _SUMMARY.search(line) or _VERDICT.match(line) or _NONE_FOUND.search(line):
            found = line
    return found


_FAIL_VERDICT = re.compile(r"(?i)^\W*fail(?:ed|ure|s)?\b(?!\s*[:=]?\s*0\b)")
"""A line that opens with the runner's failure verdict: Go's ``FAIL\tpkg\t1.7s``, pytest's
``FAILED tests/a.py::t``, ``FAIL: test_x`` (``Failures: 0`` is a clean tally)."""


_FAILED_CASE = re.compile(
    r"(?m)^[ \t]*(?:---[ \t]+)?FAIL(?:ED)?:?[ \t]+(?P<case>[^\s(]{3,}[^\n]*)$"
)
"""The line a runner names a failed test with: Go's ``--- FAIL: TestX (0.68s)``, pytest's
``FAILED tests/a.py::test_x - AssertionError``, jest's ``FAIL src/a.test.ts``."""


def is_tally(line: str) -> bool:
    """A count line ("1 failed, 4 passed"), as against a bare verdict (``FAIL\tpkg\t1.7s``)."""
    return _SUMMARY.search(line) is not None


def failed_case(text: str) -> str | None:
    """The first failed test a runner's output names, or None."""
    m = _FAILED_CASE.search(text)
    return clip_chars(m.group(0).strip(), LINE_CHARS) if m else None


def verdict_ok(line: str) -> bool:
    """Whether a result line reports success: it counts no failure and no error, and does not
    open with a failure verdict."""
    return (
        _NONZERO_FAIL.search(line) is None
        and _FAIL_VERDICT.match(line) is None
        and not re.search(r"(?i)\bbuild failed\b", line)
    )


@functools.lru_cache(maxsize=SCANNED_OUTPUTS)
def located_error(text: str) -> str | None:
    """The first error line of a failed run with where it is (``file:line``) when the output
    says: the error line itself when it holds the location, else the error line followed by
    the first location in the lines after it ("error: cannot invoke ... (lib/a.ex:171:53)");
    None when no error line names a location nearby."""
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if not line or _HEADER.match(line) or not _ERROR_START.search(line):
            continue
        if _LOCATION.search(line):
            return clip_chars(line, LINE_CHARS)
        for after in lines[i + 1 : i + 9]:
            m = _LOCATION.search(after)
            if m:
                return clip_chars(f"{line} ({m.group('loc')})", LINE_CHARS)
    return None


def is_check(command: str) -> bool:
    """Whether a shell command runs a check whose result line counts: its first program
    (after ``cd``) is not one that shows or searches text (``head x | python3 -c ...``
    inspects a file; ``mix test | tail`` runs the tests)."""
    for argv in simple_commands(command):
        prog = argv[0].rsplit("/", 1)[-1] if argv else ""
        if prog in ("cd", "export", "set", "source", ".", "sleep"):
            continue
        return bool(prog) and prog not in _READERS
    return False


def close_reason(command: str) -> str:
    """The reason a closing command gives (``bd close X --reason "..."``), if any."""
    for argv in simple_commands(command):
        for i, w in enumerate(argv):
            for name in ("--reason", "-r", "--comment", "-c"):
                if w == name and i + 1 < len(argv) and "\0" not in argv[i + 1]:
                    return argv[i + 1]
                if w.startswith(name + "=") and len(name) > 2:
                    return w.split("=", 1)[1]
    return ""


@dataclass(slots=True)
class Check:
    """The latest run of one command within a segment."""

    seq: int
    command: str
    line: str
    ok: bool

    def to_json(self) -> list[Any]:
        return [self.seq, self.command, self.line, self.ok]

    def said(self) -> str:
        return f"{code_span(self.command)} -> {code_span(self.line)}"


_SEGMENT_JSON = (
    "key",
    "title",
    "source",
    "start",
    "files",
    "checks",
    "commits",
    "closed",
    "reason",
    "remains",
    "note",
    "last",
    "deleted",
    "report",
    "turned",
    "asks",
    "ours",
    "delegated",
    "defs",
    "changed",
)
"""A segment's fields in its JSON, in order; the lists and checks are copied."""


@dataclass(slots=True)
class Segment:
    """One stretch of work: on a tracked item (``key``) or after a request (``key`` empty)."""

    key: str
    title: str
    source: str
    start: int
    files: list[str] = field(default_factory=list)
    checks: dict[str, Check] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)
    closed: int | None = None
    reason: str = ""
    remains: str = ""
    note: str = ""
    """The assistant's words for the last change (``edit_note``)."""
    last: int = 0
    """The seq of the last thing it took in."""
    deleted: list[str] = field(default_factory=list)
    """Of ``files``, those it left deleted (``rm``, a deleting patch)."""
    report: str = ""
    """The assistant's latest report of what it did in this stretch, in its own words."""
    turned: str = ""
    """What the person said turning the step's approach down (a plan step only): the step
    is no longer the plan as written."""
    ours: list[str] = field(default_factory=list)
    """Files changed after the approach was ``turned`` down: they build the person's way,
    not the step as planned."""
    delegated: list[str] = field(default_factory=list)
    """Files subagents reported changing: the run's work, not the agent's own edits."""
    defs: list[list[Any]] = field(default_factory=list)
    """What its edits defined: ``[seq, added, removed, new tests]`` per editor call."""
    changed: int = 0
    """The seq of its latest file change."""
    asks: str = ""
    """Of a request's segment: the clause of the request that sets how something should be
    (``standing.clause``), for the standing requirements."""

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _SEGMENT_JSON}
        data.update(
            files=list(self.files),
            ours=list(self.ours),
            delegated=list(self.delegated),
            deleted=list(self.deleted),
            checks={t: c.to_json() for t, c in self.checks.items()},
            commits=list(self.commits),
            defs=[list(d) for d in self.defs],
        )
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Segment:
        seg = cls(str(data["key"]), str(data["title"]), str(data["source"]), int(data["start"]))
        seg.files = [str(f) for f in data.get("files") or []]
        seg.deleted = [str(f) for f in data.get("deleted") or []]
        seg.ours = [str(f) for f in data.get("ours") or []]
        seg.delegated = [str(f) for f in data.get("delegated") or []]
        for target, (seq, command, line, ok) in (data.get("checks") or {}).items():
            seg.checks[str(target)] = Check(int(seq), str(command), str(line), bool(ok))
        seg.commits = [str(c) for c in data.get("commits") or []]
        closed = data.get("closed")
        seg.closed = int(closed) if closed is not None else None
        seg.reason = str(data.get("reason") or "")
        seg.remains = str(data.get("remains") or "")
        seg.note = str(data.get("note") or "")
        seg.report = str(data.get("report") or "")
        seg.turned = str(data.get("turned") or "")
        seg.asks = str(data.get("asks") or "")
        seg.last = int(data.get("last") or seg.start)
        seg.defs = [
            [int(at), [str(n) for n in added], [str(n) for n in gone], int(tests)]
            for at, added, gone, tests in data.get("defs") or []
        ]
        seg.changed = int(data.get("changed") or 0)
        return seg

    @property
    def busy(self) -> bool:
        """Whether anything happened in it (files, checks, commits, a closure)."""
        return bool(
            self.files
            or self.ours
            or self.delegated
            or self.checks
            or self.commits
            or self.closed is not None
        )

    def name(self) -> str:
        """``spotter-dov.1`` (beads: title), or request #12 ("opening words")."""
        if not self.key:
            return f'request #{self.start} ("{self.title}")' if self.title else "work"
        if self.source == TODO_SOURCE and self.turned:
            return f'plan step "{self.title}": approach turned down by the user ("{self.turned}")'
        if self.source == TODO_SOURCE:
            return f'plan step "{self.title}"'
        title = f": {self.title}" if self.title and self.title != self.key else ""
        return f"{code_span(self.key)}{title} ({self.source})"

    def failing(self) -> list[Check]:
        """Checks whose latest run failed: no later run of the same command passed."""
        return [c for c in self.checks.values() if not c.ok]

    def latest_pass(self) -> Check | None:
        passed = [c for c in self.checks.values() if c.ok]
        return max(passed, key=lambda c: c.seq) if passed else None

    def facts(
        self,
        shown: Shown,
        *,
        detail: Shown | None = None,
        made: Made | None = None,
        files: int = SHOWN_FILES,
        current: bool = False,
    ) -> list[str]:
        """What the segment did, clause by clause (paths as ``shown`` gives them, each with
        what ``detail`` says of it, such as the definitions changed): for a finished one
        its last check as it went then, for the ``current`` one its latest passing check
        (its failures are said apart, while no later run passed)."""
        out = _file_clauses(self.files, self.deleted, self.start, shown, detail, made, files)
        if self.ours:  # after the turn-down: the person's way, not the step as planned
            ours = _file_clauses(self.ours, self.deleted, self.start, shown, detail, made, files)
            out.append("then, the user's way: " + ", ".join(ours))
        if self.delegated:
            theirs = _file_clauses(self.delegated, (), self.start, shown, detail, None, files)
            out.append("subagents " + ", ".join(theirs))
        if not current:  # a finished stretch: how its last checks went then
            last: list[Check] = []
            for c in sorted(self.checks.values(), key=lambda c: -c.seq):
                if not any(c.command.startswith(k.command + " ") for k in last):  # narrower
                    last.append(c)
            said = [
                c.said() + ("" if c.ok else " (failed)") for c in reversed(last[:FINISHED_CHECKS])
            ]
            if said:
                out.append(("last checks " if len(said) > 1 else "last check ") + "; ".join(said))
        else:
            out += _defs_clauses(self.defs)
            passed = self.latest_pass()
            if passed is not None:
                later = " (files changed after it)" if self.changed > passed.seq else ""
                out.append(f"last passing check {passed.said()}{later}")
        if self.commits:
            out.append("committed " + ", ".join(code_span(c) for c in self.commits[-3:]))
        return out


def _defs_clauses(defs: Sequence[Sequence[Any]]) -> list[str]:
    """``added `a`, `b`; removed `@c`; 13 new tests``: the net of a segment's edits (a name
    added then removed within it is neither)."""
    added: dict[str, None] = {}
    removed: dict[str, None] = {}
    tests = 0
    for _, made, gone, n in defs:
        for name in gone:
            if name in added:
                del added[name]  # added here and gone again
            else:
                removed[name] = None
        for name in made:
            if name in removed:
                del removed[name]  # taken out and put back: neither
            else:
                added[name] = None
        tests += n
    out = []
    for verb, names in (("added", list(added)), ("removed", list(removed))):
        if names:
            more = f" (+{len(names) - SHOWN_DEFS} more)" if len(names) > SHOWN_DEFS else ""
            out.append(f"{verb} " + ", ".join(code_span(n) for n in names[:SHOWN_DEFS]) + more)
    if tests > 0:
        out.append(f"{tests} new test" + ("s" if tests > 1 else ""))
    return out


def _file_clauses(
    files: Sequence[str],
    deleted: Sequence[str],
    start: int,
    shown: Shown,
    detail: Shown | None,
    made: Made | None,
    limit: int,
) -> list[str]:
    """``created `a`, changed `b` (+2 more files)``: the last ``limit`` of ``files`` by what
    happened to them (``made`` since ``start``, or left ``deleted``)."""
    out: list[str] = []
    if not files:
        return out
    listed = list(files[-limit:])
    gone = set(deleted)
    kept = [f for f in listed if f not in gone]
    for verb, group in (
        ("created", [f for f in kept if made and made(f, start)]),
        ("changed", [f for f in kept if not (made and made(f, start))]),
        ("deleted", [f for f in listed if f in gone]),
    ):
        if group:
            names = ", ".join(
                code_span(shown(f)) + (f" ({d})" if detail and (d := detail(f)) else "")
                for f in group
            )
            out.append(f"{verb} {names}")
    more = len(files) - limit
    if more > 0:
        out[-1] += f" (+{more} more files)"
    return out


class Progress:
    """Segments of work in order; the last one is the current one."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    @property
    def current(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def _start(self, key: str, title: str, source: str, seq: int) -> Segment:
        seg = Segment(key, clip_words(one_line(title), TITLE_WORDS), source, seq, last=seq)
        cur = self.current
        if cur is not None and not cur.key and not cur.busy:
            self.segments.pop()  # a request nothing was done for yet: the next one takes over
        self.segments.append(seg)
        if len(self.segments) > MAX_SEGMENTS:
            del self.segments[: len(self.segments) - MAX_SEGMENTS]
        return seg

    def _here(self, seq: int) -> Segment:
        cur = self.current
        if cur is None:
            cur = self._start("", "", "request", seq)
        cur.last = seq
        return cur

    # -- what the trail feeds it

    def request(self, seq: int, text: str) -> None:
        """A person's request: a segment of its own unless a tracked item is in progress."""
        cur = self.current
        if cur is not None and cur.key and cur.closed is None:
            return  # the request is about the item being worked on
        # a reply to the agent's questions on a request nothing was done for yet takes that
        # request's place (``_start``): what was asked is the request's, not the reply's
        waiting = cur is not None and not cur.key and not cur.busy and ANSWERS.match(text)
        carried = cur.asks if waiting and cur is not None else ""
        seg = self._start("", text, "request", seq)
        seg.asks = carried or clause(text) or ""

    def turned_down(self, words_said: str) -> None:
        """The person turned down a call of the plan step in progress and said why: the step
        as the plan worded it is not what they want."""
        cur = self.current
        if cur is not None and cur.source == TODO_SOURCE and cur.closed is None:
            cur.turned = clip_words(one_line(words_said), TURNED_WORDS)

    def claimed(self, key: str, title: str, source: str, seq: int) -> None:
        """A tracker set ``key`` in progress."""
        cur = self.current
        tracked = cur is not None and cur.closed is None and cur.source != TODO_SOURCE
        if source == TODO_SOURCE and tracked and cur is not None and cur.key:
            return  # a todo step of the tracked item being worked on
        if cur is not None and cur.key == key and cur.closed is None:
            if title and not cur.title:
                cur.title = clip_words(one_line(title), TITLE_WORDS)
            return
        self._start(key, title, source, seq)

    def closed(self, key: str, seq: int, reason: str = "") -> None:
        """A tracker closed ``key``: its latest segment ends so (the current one stays
        current until another item is claimed)."""
        seg = next((s for s in reversed(self.segments) if s.key == key), None)
        if seg is None:
            return
        seg.closed = seq
        seg.last = max(seg.last, seq)
        if reason:
            seg.reason = clip_words(one_line(reason), REASON_WORDS)

    def touched(
        self,
        paths: list[str],
        seq: int,
        note: str | None = None,
        *,
        deleted: Sequence[str] = (),
        delegated: bool = False,
    ) -> None:
        """Files changed at ``seq`` (by subagents when ``delegated``); of them, ``deleted``
        are gone now."""
        seg = self._here(seq)
        files = seg.ours if seg.turned else seg.files  # after a turn-down: the person's way
        files = seg.delegated if delegated else files
        for path in paths:
            if path in files:
                files.remove(path)
            files.append(path)
            if path in deleted and path not in seg.deleted:
                seg.deleted.append(path)
            elif path not in deleted and path in seg.deleted:
                seg.deleted.remove(path)  # made again
        del files[:-MAX_FILES]
        seg.deleted = [f for f in seg.deleted if f in seg.files or f in seg.ours]
        if note:
            seg.note = note
        seg.changed = max(seg.changed, seq)

    def defined(self, seq: int, added: Sequence[str], removed: Sequence[str], tests: int) -> None:
        """An editor call at ``seq`` added and removed these definitions and ``tests`` tests."""
        seg = self._here(seq)
        seg.defs.append([seq, list(added), list(removed), tests])
        del seg.defs[:-MAX_DEFS]

    def untouch(self, path: str, at: int, last: int | None) -> None:
        """The change a call at ``at`` made to ``path`` did not happen: the stretch holding
        ``at`` no longer names the file, unless another change (``last``, the file's latest
        change left) falls in it too."""
        seg = next((s for s in reversed(self.segments) if s.start <= at), None)
        if seg is None:
            return
        seg.defs = [d for d in seg.defs if d[0] != at]  # what it defined was not made either
        if not (last is None or last < seg.start):
            return
        for files in (seg.files, seg.ours, seg.delegated):
            if path in files:
                files.remove(path)

    def checked(
        self, target: str, command: str, line: str, ok: bool, seq: int, *, settles: Any = None
    ) -> None:
        """The result line of a check ``command`` (``target``: what it runs) at ``seq``; a
        passing run drops the failures ``settles(target)`` says it settles (a wider run)."""
        seg = self._here(seq)
        if ok and settles is not None:  # a wider run passing settles the narrower failures
            self.settle(settles)
        seg.checks.pop(target, None)
        seg.checks[target] = Check(seq, clip_chars(command, 120), clip_chars(line, LINE_CHARS), ok)
        while len(seg.checks) > MAX_CHECKS:
            seg.checks.pop(next(iter(seg.checks)))

    def settle(self, settles: Callable[[str], bool]) -> None:
        """A clean run (with or without a result line) settles the failed runs of the
        commands ``settles`` names, in every segment."""
        for seg in self.segments:
            for old in [t for t, c in seg.checks.items() if not c.ok and settles(t)]:
                del seg.checks[old]

    def committed(self, made: str, seq: int) -> None:
        seg = self._here(seq)
        seg.commits.append(clip_words(made, 12))
        del seg.commits[:-MAX_COMMITS]

    def said(self, text: str, seq: int) -> None:
        """The assistant's prose: the latest sentence on what remains, for the current
        segment."""
        cur = self.current
        if cur is None:
            return
        prose = _FENCED.sub(" ", text)
        report = _report(prose)
        if report:
            cur.report = report
            cur.last = max(cur.last, seq)  # the stretch runs to its report
        for sentence in reversed(_SENTENCE.split(prose)):
            if _REMAINS.search(sentence) and words(sentence) >= 4:
                said = clip_words(sentence.strip(" -*#"), REMAINS_WORDS)
                cur.remains = f"(#{seq}) {said}"  # dated: later work may have done it
                return

    # -- carried in checkpoint metadata

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.segments]

    @classmethod
    def from_json(cls, data: Any) -> Progress:
        progress = cls()
        for item in data if isinstance(data, list) else []:
            if isinstance(item, Mapping):
                progress.segments.append(Segment.from_json(item))
        return progress


_INTERJECTION = re.compile(
    r"(?i)^(?:perfect|great|excellent|good|done|nice|ok(?:ay)?|yes|right|got it|"
    r"you(?:['\u2019]re| are)\s+(?:absolutely\s+)?right)\b[^.!?]{0,40}[.!?-]*$"
)
"""A sentence that only reacts ("Perfect!", "You're absolutely right!")."""
_DONE_WORDS = re.compile(
    r"(?i)\b(?:I(?:['\u2019]ve|\s+have)|we(?:['\u2019]ve|\s+have)|added|created|implemented|"
    r"updated|fixed|removed|replaced|renamed|refactored|extracted|moved|integrated|wrote|"
    r"changed|converted|(?:all\s+)?\d+\s+tests?\s+pass(?:es|ed)?|compiles|(?:is|are)\s+now|"
    r"now\s+uses?)\b"
)
"""Words of a report of work done, not of looking around ("I see", "Let me check")."""


def _report(prose: str) -> str:
    """The assistant's report of work done, when ``prose`` opens with one (after a mere
    reaction such as "Perfect!"): its first sentences up to a list it introduces, on one
    line, clipped; empty for narration ("Let me check ..."), questions and findings."""
    sentences = [t.strip(" -*#") for t in _SENTENCE.split(prose) if t.strip(" -*#")]
    while sentences and _INTERJECTION.match(sentences[0]):
        sentences.pop(0)
    if not sentences or words(prose) < REPORT_MIN_WORDS or is_narration(sentences[0]):
        return ""
    first = sentences[0]
    if first.endswith("?") or not _DONE_WORDS.search(first):
        return ""
    kept: list[str] = []
    for sentence in sentences[:3]:
        ends = sentence.rstrip("`*_)").endswith((".", "!"))
        if is_narration(sentence) or (kept and not ends):
            break  # the next move, or a heading or list it introduces
        kept.append(sentence)
    return clip_words(one_line(" ".join(kept)).rstrip(":"), REPORT_WORDS)


# -- as a snapshot says it ----------------------------------------------------------------


def _as_is(path: str) -> str:
    return path


def segment_line(
    seg: Segment, shown: Shown = _as_is, made: Made | None = None, *, defs: bool = False
) -> str:
    """A finished (or paused) segment in one line (with what its edits defined: ``defs``)."""
    if seg.closed is None:
        head = f"Worked on {seg.name()}"
    else:  # a step built the person's way was not done as planned
        head = f"Closed {seg.name()}" if seg.ours else f"Done: {seg.name()}"
    span = f"#{seg.start}" + (f"-#{seg.closed}" if seg.closed is not None else f"-#{seg.last}")
    parts = [f"{head}, {span}"]
    parts += seg.facts(shown, made=made)
    if defs:
        parts += _defs_clauses(seg.defs)
    if seg.report and not seg.reason:  # a closing reason already says what was done
        parts.append(f"reported: {seg.report}")
    if seg.closed is not None:
        parts.append("closed" + (f": {seg.reason}" if seg.reason else ""))
    return "; ".join(parts)


def current_line(
    seg: Segment,
    through: int,
    shown: Shown = _as_is,
    *,
    continued: bool = False,
    detail: Shown | None = None,
    made: Made | None = None,
) -> str:
    """The segment in progress where the summary ends: what it is, what was last done, what
    the run says remains. ``continued``: the messages kept after the summary go on with it
    (and close it), so it is not called in progress."""
    if continued:
        head = f"Worked on up to #{through} (this summary's end; the messages kept below go on"
        parts = [f"{head} with it): {seg.name()}, since #{seg.start}"]
    else:
        parts = [f"In progress: {seg.name()}, since #{seg.start}, still so at #{through} (the end)"]
    parts += seg.facts(shown, files=SHOWN_FILES + 3, current=True, detail=detail, made=made)
    if seg.note:
        parts.append(f"last change: {seg.note}")
    if seg.remains:
        at, _, said = seg.remains.partition(") ")
        parts.append(f"the assistant said at {at.lstrip('(')}: {said}" if said else seg.remains)
    return "; ".join(parts)


def latest_runs(progress: Progress) -> dict[str, Check]:
    """Each command's latest run over the whole account."""
    latest: dict[str, Check] = {}
    for seg in progress.segments:
        for target, check in seg.checks.items():
            if target not in latest or latest[target].seq <= check.seq:
                latest[target] = check
    return latest


def failing_checks(progress: Progress) -> list[Check]:
    """Every check whose latest run failed and that no later run passed (a passing run of
    the same or a wider command settles it, ``Progress.settle``), newest first: open work,
    whichever segment ran it."""
    return sorted((c for c in latest_runs(progress).values() if not c.ok), key=lambda c: -c.seq)


def unresolved(seg: Segment, later: Progress | None = None) -> list[Check]:
    """The segment's checks whose latest run failed and that no later run (in ``later``,
    the account extended by the messages kept after the cut) passed; newest first."""
    if later is not None:  # the same segment as the later messages left it
        seg = next((s for s in later.segments if (s.start, s.key) == (seg.start, seg.key)), seg)
    return sorted(seg.failing(), key=lambda c: -c.seq)


def in_progress(progress: Progress, through: int) -> Segment | None:
    """The segment still in progress at ``through``: the latest, when it is a work item not
    closed or a request something was done for."""
    segs = [s for s in progress.segments if s.start <= through]
    cur = segs[-1] if segs else None
    return cur if cur is not None and cur.closed is None and (cur.key or cur.busy) else None


def account(
    progress: Progress,
    through: int,
    shown: Shown = _as_is,
    *,
    made: Made | None = None,
    budget: int = ACCOUNT_WORDS,
) -> tuple[list[str], Segment | None]:
    """The chronological account of the segments up to ``through`` (lines, oldest first,
    within ``budget`` words: older segments beyond it folded into one "Earlier" line), and
    the segment still in progress there, if one is."""
    segs = [s for s in progress.segments if s.start <= through]
    if not segs:
        return [], None
    active = in_progress(progress, through)
    done = [s for s in (segs[:-1] if active is not None else segs) if s.busy or s.key]
    lines: list[str] = []
    spent = 0
    cut = 0
    for i in range(len(done) - 1, -1, -1):
        line = segment_line(done[i], shown, made, defs=i == len(done) - 1)
        if spent + words(line) > budget:
            cut = i + 1
            break
        lines.insert(0, line)
        spent += words(line)
    if cut:
        older = done[:cut]
        items = [
            code_span(s.key) if s.source != TODO_SOURCE else f'"{s.title}"' for s in older if s.key
        ]
        asked = [s for s in older if not s.key]
        parts = [
            ", ".join(items[-10:]) + (f" (+{len(items) - 10} more)" if len(items) > 10 else "")
        ]
        if len(asked) == 1:  # one request is named, not counted
            parts.append(asked[0].name())
        elif asked:
            parts.append(f"{len(asked)} requests (#{asked[0].start}-#{asked[-1].start})")
        lines.insert(
            0,
            f"Earlier work (#{older[0].start}-#{older[-1].last}): "
            + "; ".join(p for p in parts if p),
        )
    return lines, active


__all__ = [
    "ACCOUNT_WORDS",
    "PROGRESS_HEADS",
    "TODO_SOURCE",
    "Check",
    "Progress",
    "Segment",
    "account",
    "close_reason",
    "current_line",
    "failed_case",
    "failing_checks",
    "in_progress",
    "is_check",
    "is_tally",
    "latest_runs",
    "located_error",
    "result_line",
    "segment_line",
    "unresolved",
    "verdict_ok",
]
