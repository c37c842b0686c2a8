"""Fixes as decisions: what the agent changed to make a failing check pass, and why.

The commonest choice an agent makes comes without a "because": a check fails
(a test, a compiler, a linter), the agent changes a file, the same check
passes. The history shows the why (the error line) and the what (the files
changed between the failure and the clean run), so the decision can be stated
without inventing a reason: "Changed `a.ex` to fix `error: ...` (then `mix
test` passed)". A change with no clean run of the failing check after it is no
fix yet (the failure stays in the ledger's account instead).

The agent's own announcement of a fix ("Let me fix the credo nesting issue in
`build_tool_use_index`", in its text or its thinking) is read by
``announced_fix``; the caller makes it a decision once a call acts on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.carried import Carried
from threadline.compaction.snapshot import clip_chars, clip_words, code_span
from threadline.compaction.toolcalls import added_definitions, call_file_ops
from threadline.messages import ToolCall

MAX_FIXES = 12
"""Fixes remembered: the oldest beyond this are forgotten."""
MAX_FILES = 3
"""Files named in one fix line."""
ERROR_CHARS = 140
FIX_WORDS = 14
"""What an announced fix is about, in at most this many words."""


@dataclass(slots=True)
class Pending:
    """A check whose latest run failed, and the files changed since."""

    seq: int
    target: str
    error: str
    files: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Fix:
    """Files changed after a failed check, then the same check passing."""

    seq: int
    target: str
    error: str
    files: list[str]
    how: str = ""
    """A rerun's change of the command itself ("added `-f` to `git add`"), when no file
    changed."""

    def line(self, shown: Callable[[str], str] = lambda p: p) -> str:
        if self.how:
            error = code_span(clip_chars(self.error, ERROR_CHARS))
            return f"{self.how[:1].upper()}{self.how[1:]} to get past {error}"
        names = ", ".join(code_span(shown(f)) for f in self.files[:MAX_FILES])
        more = f" (+{len(self.files) - MAX_FILES} more)" if len(self.files) > MAX_FILES else ""
        error = code_span(clip_chars(self.error, ERROR_CHARS))
        return f"Changed {names}{more} to fix {error} (then {code_span(self.target)} passed)"

    def to_json(self) -> list[Any]:
        return [self.seq, self.target, self.error, list(self.files), self.how]


_LOCATED = re.compile(r"(?P<path>[\w.~/-]*\w\.\w{1,8})(?::\d+|\(\d+)")
"""A file an error line names with its line number (``src/a.ts:115:14``, ``a.cs(41,14)``)."""


def _fixed_files(error: str, changed: list[str]) -> list[str]:
    """The changed files the fix is credited to: when the error names files, only those of
    them that changed (none changed: the clean run came from something else, a fixer or a
    rerun, and no change of the agent's is claimed); else every file changed."""
    named = [m.group("path").lstrip("./") for m in _LOCATED.finditer(error)]
    if not named:
        return changed
    return [f for f in changed if any(f == n or f.endswith("/" + n) for n in named)]


@dataclass(slots=True)
class FixBook(Carried):
    """Failing checks waiting for a clean run, and the fixes found so far."""

    pending: dict[str, Pending] = field(default_factory=dict)
    fixes: list[Fix] = field(default_factory=list)

    def failed(self, target: str, error: str, seq: int) -> None:
        """A run of ``target`` failed with ``error``: changes after it may fix it."""
        self.pending.pop(target, None)  # the latest error is the one the next change fixes
        self.pending[target] = Pending(seq, target, error)
        while len(self.pending) > MAX_FIXES:
            self.pending.pop(next(iter(self.pending)))

    def changed(self, paths: Sequence[str]) -> None:
        """Files changed: each failing check waits with them."""
        for p in self.pending.values():
            for path in paths:
                if path not in p.files:
                    p.files.append(path)

    def passed(self, covers: Callable[[str], bool], seq: int) -> None:
        """A clean run settles the failing checks ``covers`` names; with files changed since
        the failure, that is a fix."""
        for target in [t for t in self.pending if covers(t)]:
            p = self.pending.pop(target)
            files = _fixed_files(p.error, p.files)
            if files:
                self.fixes.append(Fix(seq, p.target, p.error, files))
        del self.fixes[:-MAX_FIXES]

    def to_json(self) -> dict[str, Any]:
        return {
            "pending": [[p.seq, p.target, p.error, list(p.files)] for p in self.pending.values()],
            "fixes": [f.to_json() for f in self.fixes],
        }

    def load(self, data: Mapping[str, Any]) -> None:
        for seq, target, error, files in data.get("pending") or []:
            self.pending[str(target)] = Pending(int(seq), str(target), str(error), list(files))
        for seq, target, error, files, *how in data.get("fixes") or []:
            fix = Fix(int(seq), str(target), str(error), [str(f) for f in files])
            fix.how = str(how[0]) if how else ""
            self.fixes.append(fix)

    def rerun(self, failed: str, error: str, command: str, named: Sequence[str], seq: int) -> None:
        """``command`` ran clean where ``failed`` (the same run) had failed with ``error``
        whose output ``named`` these options: adding one of them is the fix ("added `-f` to
        `git add`"); other added options are no fix anyone was told of."""
        how = added_options(failed, command, named)
        if how is not None and error:
            self.fixes.append(Fix(seq, failed, error, [], how))
            del self.fixes[:-MAX_FIXES]


_SEGMENTS = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


_NAMED_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)(?![\w-])")
_ADVICE = re.compile(r"(?i)\b(?:use|pass|add|try|rerun|run\s+with|specify|hint)\b")


def named_options(output: str) -> list[str]:
    """Options a failed command's output advises ("hint: Use -f if you really want to add
    them", "try --force"): on lines that give advice, at most a few."""
    found: dict[str, None] = {}
    for line in output.splitlines()[:200]:
        if _ADVICE.search(line):
            found.update((m, None) for m in _NAMED_OPTION.findall(line))
    return list(found)[:8]


def added_options(failed: str, command: str, named: Sequence[str]) -> str | None:
    """ "added `-f` to `git add`" when ``command``'s first line has an option ``failed``'s
    has not and the failure's output advised it (``named_options``), else None."""
    before = set(failed.split("\n", 1)[0].split())
    for segment in _SEGMENTS.split(command.split("\n", 1)[0]):
        words = segment.split()
        new = [w for w in words if w in named and w not in before]
        if new:
            program = " ".join(w for w in words[:3] if not w.startswith("-"))
            return f"added {code_span(' '.join(new))} to {code_span(program)}"
    return None


_ANNOUNCED = re.compile(
    r"(?i)^(?:(?:now|next|first|then|ok(?:ay)?|good|so|also)\b[,!.:]?\s+)*"
    r"(?:let\s+me|let['\u2019]?s|I['\u2019]ll|I\s+will|I\s+need\s+to|we\s+need\s+to)\s+"
    r"(?:(?:also|now|first|quickly)\s+)?fix\s+(?P<what>.+)$"
)
"""The agent saying it will fix something ("Let me fix the credo nesting issue in X")."""
_NAMES_A_FAULT = (
    re.compile(
        r"(?i)\b(?:error|errors|issue|issues|warning|warnings|failure|failures|failing|bug|"
        r"nesting|crash|regression|problem|lint|credo|typo|test|tests|\w+(?:Error|Exception))\b"
    ),
    re.compile(r"`[^`]+`|\w[\w-]*(?:[./_:][\w-]+)+|\w+\(|\"[^\"]+\"|\b[A-Z][a-z]+[A-Z]\w*"),
)
"""What a fix is about must name a fault ("fix the compile error", not "fix up the docs")
and say which (a code span, a file or identifier, a call, a quote, a CamelCase name)."""
_REPORTED = re.compile(
    r"(?i)^(?:the\s+)?(?P<tool>[\w.-]+)\s+(?:(?:warning|error|issue)s?\s+)?"
    r"(?:(?:at|on)\s+line\s+\d+\s+)?(?:now\s+)?"
    r"(?:reports|flags|is\s+complaining\s+about|complains\s+about|warns\s+about|"
    r"is\s+warning\s+about|still\s+reports|is\s+about)\s+(?P<what>.+)$"
)
"""A check's complaint as the agent relays it ("Credo reports nesting too deep in `f`"):
the check's output may never reach the history (a hook ran it), the agent's words do."""
_TAIL = re.compile(
    r"(?i)(?:[,;]?\s+(?:and\s+then|then|and\s+(?:re-?)?run|before)\b.*|"
    r"\s+(?:first|now|too|as\s+well|quickly|next))$"
)
"""What follows the fault: the next step ("then compile"), or when ("first")."""


_LINTER = re.compile(
    r"(?i)^(?:credo|eslint|ruff|mypy|pyright|clippy|tsc|oxlint|biome|pylint|"
    r"flake8|rubocop|golangci-lint|dialyzer|compiler|linter|typecheck\w*|type-?checker)$"
)
"""A tool whose reports are faults by themselves ("credo reports ...")."""
HOW_NAMES = 2
"""Definitions named as the how of a fix."""


def fix_statement(fault: str, call: ToolCall, shown: Callable[[str], str] = lambda p: p) -> str:
    """A fix the agent announced and then made, in the past tense with its how: "Added
    `a`/`b` in `f.ex` to fix <fault>" (definitions the edit added), "Changed `g` in `f.ex`"
    (ones it changed), else "Edited `f.ex`"; a call that changed no file, by its name."""
    ops = [op for op in call_file_ops(call) if op.action not in ("deleted", "moved", "copied")]
    if not ops:
        return f"Ran {code_span(call.name)} to fix {fault}"
    where = code_span(shown(ops[0].path))
    added = added_definitions(call)
    names = added or ops[0].symbols
    if not names:
        return f"Edited {where} to fix {fault}"
    listed = "/".join(code_span(n) for n in names[:HOW_NAMES])
    more = f" (+{len(names) - HOW_NAMES})" if len(names) > HOW_NAMES else ""
    return f"{'Added' if added else 'Changed'} {listed}{more} in {where} to fix {fault}"


def announced_fix(sentence: str) -> str | None:
    """``Fix: <what>`` for a sentence of the agent announcing a fix of a named fault, else
    None; what follows "then" (the next step) is cut."""
    m = _ANNOUNCED.match(sentence.strip())
    reported = None if m is not None else _REPORTED.match(sentence.strip())
    if reported is not None:
        what = _TAIL.sub("", reported.group("what").rstrip(" .:!,")).rstrip(" .:!,")
        if all(p.search(what) for p in _NAMES_A_FAULT) or _LINTER.search(reported["tool"]):
            return f"Fix: {clip_words(what, FIX_WORDS)} ({reported['tool']})"
        return None
    if m is None:
        return None
    what = _TAIL.sub("", m.group("what").rstrip(" .:!,")).rstrip(" .:!,")
    if what.endswith("?") or not all(p.search(what) for p in _NAMES_A_FAULT):
        return None  # "fix the compile error": which one, the history has to say
    return f"Fix: {clip_words(what, FIX_WORDS)}"


__all__ = ["Fix", "FixBook", "announced_fix", "fix_statement"]
