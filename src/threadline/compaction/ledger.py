"""The state ledger: which work items the run opened and which the evidence closed.

A snapshot that says "Pending Tasks: (none)" while a beads task is still in
progress, or lists a task the run finished long ago, sends the next agent the
wrong way. The ledger reads each tracker from its own schema and its results,
never from the agent's prose:

* Claude Code's ``TaskCreate`` (the id from its result, "Task #3 created
  successfully: ..."), ``TaskUpdate`` (``taskId``, ``status``) and
  ``TaskList`` results;
* beads: ``bd create`` (the id from "Created issue: X"), ``bd update X
  --status S``, ``bd close X``, ``bd reopen X``;
* GitHub's CLI: ``gh issue create`` / ``gh pr create`` (the number from the URL
  they print), ``gh issue close`` / ``reopen``, ``gh pr merge`` / ``close``;
* issue tools reached through MCP (``mcp__<server>__create_issue`` /
  ``update_issue`` / ``close_issue``);
* ``git commit`` and ``git push`` outcomes: a commit a hook rejected is not a
  commit, so it stays open (with the hook's error line) until a later commit
  succeeds; the last commit made is remembered by its hash.

An item is open until the evidence closes it. Todo-list tools (``TodoWrite``,
``update_plan``) are whole lists, and the trail keeps their latest state.
The ledger travels inside the trail's checkpoint metadata, so an incremental
compaction reads only its new messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threadline.compaction.carried import Carried
from threadline.compaction.snapshot import clip_words, code_span, one_line
from threadline.compaction.subagents import Outcome, latest_outcomes, subagent_outcomes
from threadline.compaction.toolcalls import SUBAGENT_TOOLS, operands, shell_text, simple_commands
from threadline.compaction.values import extract_error_lines
from threadline.messages import Message, ToolCall

MAX_ITEMS = 200
"""Items remembered: beyond this the oldest closed ones are forgotten."""
TITLE_WORDS = 16
ERROR_CHARS = 160

OPEN, ACTIVE, CLOSED = "open", "in_progress", "closed"
STATUS = {
    "open": OPEN,
    "opened": OPEN,
    "pending": OPEN,
    "todo": OPEN,
    "blocked": OPEN,
    "deferred": OPEN,
    "reopened": OPEN,
    "in_progress": ACTIVE,
    "in-progress": ACTIVE,
    "active": ACTIVE,
    "started": ACTIVE,
    "doing": ACTIVE,
    "closed": CLOSED,
    "completed": CLOSED,
    "complete": CLOSED,
    "done": CLOSED,
    "finished": CLOSED,
    "resolved": CLOSED,
    "merged": CLOSED,
    "cancelled": CLOSED,
    "canceled": CLOSED,
    "deleted": CLOSED,
    "wontfix": CLOSED,
}
"""Each tracker's status words, on one scale (the trail's ``--status`` reading uses it too)."""

_TASK_CREATED = re.compile(r"Task #(?P<id>[\w.-]+) created successfully(?::\s*(?P<title>.+))?")
"""``TaskCreate``'s result: the id the later ``TaskUpdate`` calls use."""
_TASK_LISTED = re.compile(
    r"^\s*#(?P<id>[\w.-]+)\.?\s+\[(?P<status>[\w -]+)\]\s+(?P<title>.+)$", re.M
)
"""A ``TaskList`` line: ``#2 [in_progress] Write the OGP fetcher``."""
_BD_CREATED = re.compile(r"Created issue:\s*(?P<id>[\w.-]+)")
"""``bd create``'s result: "✓ Created issue: spotter-fum.5"."""
_BD_SHOWN = re.compile(
    r"^\W{0,3}(?P<id>[\w-]+(?:\.\d+)*)(?: \[\w+\])? \u00b7 (?P<title>.+?)\s+"
    r"\[[^\]]*\u00b7\s*(?P<status>[A-Za-z_ -]+)\]\s*$",
    re.M,
)
"""``bd show X``'s head line: "○ spotter-fum.1 · Enrich the renderer   [● P2 · OPEN]"."""
_BD_CHILD = re.compile(
    r"^\s*\u21b3 (?P<mark>[\u2713\u25cb\u25d0]) (?P<id>[\w-]+(?:\.\d+)+): (?P<title>.+?)"
    r"(?:\s+\u25cf P\d)?\s*$",
    re.M,
)
"""A child under ``bd show X``'s CHILDREN: "  ↳ ○ spotter-fum.4: Add coverage ● P2"."""
_BD_MARKS = {"\u2713": CLOSED, "\u25cb": OPEN, "\u25d0": ACTIVE}
"""The child's mark: ✓ closed, ○ open, ◐ in progress."""
_GH_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?P<kind>issues|pull)/(?P<n>\d+)")
"""What ``gh issue create`` / ``gh pr create`` print."""
_MCP_ISSUE = re.compile(r"^mcp__.+__(?P<verb>create|update|close|reopen)_issue$")
"""An issue tool reached through MCP (``mcp__github__create_issue``)."""
_COMMIT_MADE = re.compile(
    r"^\[(?P<branch>[^\]\s]+)(?: \(root-commit\))? (?P<hash>[0-9a-f]{7,40})\] (?P<msg>.+)$", re.M
)
"""``git commit`` made one: ``[main 4c1d2e9] message``."""
_HOOK = re.compile(r"(?i)\b(?:pre-commit|commit-msg|pre-push|hook)\b")
"""A failed commit that names a hook: the hook rejected it."""
_HEADER = re.compile(
    r"(?i)^(?:chunk id:|wall time:|process exited with code|original token count:|output:|"
    r"exit code\b|error: exit code\b)"
)
"""A line a tool wraps its output in (Codex's header, Claude Code's exit line)."""
_BANNER = re.compile(r"\.{4,}|^\s*- (?:hook id|exit code|duration):")
"""A pre-commit hook's status banner and its detail lines: they say a hook ran, not why."""
_ERROR_LINE = re.compile(
    r"(?i)\b(?:error|errors|failed|failure|fatal|rejected|denied|cannot|not allowed|"
    r"violation|would be reformatted|aborting|refusing)\b"
)


@dataclass(slots=True)
class WorkItem:
    """One tracked item: ``key`` is how the run names it (``spotter-fum.3``, ``task #2``,
    ``PR #104``), ``status`` one of open / in_progress / closed."""

    key: str
    title: str
    status: str
    source: str
    seq: int

    def to_json(self) -> list[Any]:
        return [self.key, self.title, self.status, self.source, self.seq]

    @property
    def open(self) -> bool:
        return self.status != CLOSED

    def line(self) -> str:
        """The item as a Pending Tasks bullet: what it is, then where it is tracked."""
        if self.source == "git":
            return self.title
        mark = "[in progress] " if self.status == ACTIVE else ""
        title = f": {self.title}" if self.title and self.title != self.key else ""
        return f"{mark}{code_span(self.key)}{title} ({self.source})"


def _status(word: str | None) -> str | None:
    return STATUS.get(word.strip().lower().replace(" ", "_")) if word else None


def _flag(argv: list[str], *names: str) -> str | None:
    """The value of ``--name value`` or ``--name=value`` in ``argv``."""
    for i, w in enumerate(argv):
        for name in names:
            if w == name and i + 1 < len(argv):
                return argv[i + 1]
            if w.startswith(name + "="):
                return w.split("=", 1)[1]
    return None


_SWITCHES = frozenset({"--json", "-f", "--force"})
"""A tracker CLI's options that take no value."""


def _operands(argv: list[str]) -> list[str]:
    """Words that are not flags nor a flag's value (``--reason "..."``), nor a substitution."""
    return [w for w in operands(argv, switches=_SWITCHES) if "\0" not in w]


def _first_error(text: str) -> str:
    """The line of a failed result that says why: an error-shaped line (``values``), else a
    line naming a failure; never a wrapper header nor a hook's banner (``mix format....Failed``)."""
    shaped = extract_error_lines(text)
    if shaped:
        return one_line(shaped[0].text)[:ERROR_CHARS]
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not _HEADER.match(ln.strip()) and not _BANNER.search(ln)
    ]
    chosen = next((ln for ln in lines if _ERROR_LINE.search(ln)), lines[0] if lines else "")
    return one_line(chosen)[:ERROR_CHARS]


class Ledger(Carried):
    """Work items and commit outcomes of a session; ``observe`` takes in one tool result."""

    def __init__(self) -> None:
        self.items: dict[str, WorkItem] = {}
        self.last_commit: tuple[int, str] | None = None
        """(seq, "hash message") of the last commit a result shows was made."""
        self.outcomes: list[Outcome] = []
        """The latest subagents' reports."""
        self.reported: list[Outcome] = []
        """Every report of the result ``observe`` took in last (``outcomes`` keeps the
        latest few: a batch of eight workers changed the files of all eight)."""

    # -- reading results

    def observe(self, call: ToolCall, result: Message, seq: int, *, failed: bool) -> None:
        """Take in ``result``, the answer to ``call`` (``failed`` as the tool reported it)."""
        name = call.name
        self.reported = []
        if name in SUBAGENT_TOOLS and not failed and result.text.strip():
            self.reported = subagent_outcomes(call, result, seq)
            self.outcomes = latest_outcomes(self.outcomes, self.reported)
            return
        if name in ("TaskCreate", "TaskUpdate", "TaskList"):
            if not failed:
                self._task(call, result.text, seq)
            return
        mcp = _MCP_ISSUE.match(name)
        if mcp:
            if not failed:
                self._mcp(mcp.group("verb"), call, result.text, seq)
            return
        command = shell_text(call)
        if command is None:
            return
        for argv in simple_commands(command):
            prog = argv[0].rsplit("/", 1)[-1]
            if prog == "bd" and not failed:
                self._beads(argv[1:], result.text, seq)
            elif prog == "gh" and not failed:
                self._gh(argv[1:], result.text, seq)
            elif prog == "git" and "commit" in argv[1:3]:
                self._commit(result.text, seq, failed=failed)
            elif prog == "git" and "push" in argv[1:3]:
                self._push(result.text, seq, failed=failed)

    def _set(self, key: str, status: str | None, seq: int, *, title: str = "", source: str) -> None:
        item = self.items.get(key)
        if item is None:
            if status is None:
                return
            item = self.items[key] = WorkItem(key, "", status, source, seq)
        if title:
            limit = TITLE_WORDS if source != "git" else 2 * TITLE_WORDS  # git's says why
            item.title = clip_words(one_line(title), limit)
        if status is not None:
            item.status = status
        item.seq = seq
        if len(self.items) > MAX_ITEMS:
            closed = sorted((i for i in self.items.values() if not i.open), key=lambda i: i.seq)
            for old in closed[: len(self.items) - MAX_ITEMS]:
                del self.items[old.key]

    def _task(self, call: ToolCall, text: str, seq: int) -> None:
        args = call.arguments
        if call.name == "TaskCreate":
            m = _TASK_CREATED.search(text)
            if m:
                title = str(args.get("subject") or m.group("title") or "")
                self._set(f"task #{m.group('id')}", OPEN, seq, title=title, source="task list")
        elif call.name == "TaskUpdate":
            key = f"task #{args.get('taskId') or args.get('id')}"
            status = _status(str(args.get("status") or "")) if args.get("status") else None
            title = str(args.get("subject") or "")
            if key in self.items or status is not None:
                self._set(
                    key, status or self.items[key].status, seq, title=title, source="task list"
                )
        else:
            for m in _TASK_LISTED.finditer(text):
                status = _status(m.group("status"))
                self._set(
                    f"task #{m.group('id')}",
                    status,
                    seq,
                    title=m.group("title"),
                    source="task list",
                )

    def _beads(self, args: list[str], text: str, seq: int) -> None:
        if not args:
            return
        verb, rest = args[0], args[1:]
        ids = _operands(rest)
        if verb in ("create", "new", "q"):
            m = _BD_CREATED.search(text)
            if m:
                title = _flag(rest, "--title", "-t") or (ids[0] if ids else "")
                self._set(m.group("id"), OPEN, seq, title=title, source="beads")
        elif verb in ("close", "done"):
            for i in ids:
                self._set(i, CLOSED, seq, source="beads")
        elif verb == "reopen":
            for i in ids:
                self._set(i, OPEN, seq, source="beads")
        elif verb == "update":
            status = _status(_flag(rest, "--status", "-s"))
            if "--claim" in rest:
                status = ACTIVE
            title = _flag(rest, "--title") or ""
            for i in ids:
                self._set(i, status, seq, title=title, source="beads")
        elif verb == "show":
            shown = [(m, _status(m.group("status"))) for m in _BD_SHOWN.finditer(text)]
            shown += [(m, _BD_MARKS[m.group("mark")]) for m in _BD_CHILD.finditer(text)]
            for m, status in shown:
                if m.group("id") in self.items or status != CLOSED:
                    self._set(m.group("id"), status, seq, title=m.group("title"), source="beads")

    def _gh(self, args: list[str], text: str, seq: int) -> None:
        if len(args) < 2 or args[0] not in ("issue", "pr"):
            return
        kind, verb, rest = args[0], args[1], args[2:]
        label = "issue #" if kind == "issue" else "PR #"
        source = "GitHub issue" if kind == "issue" else "GitHub pull request"
        if verb == "create":
            m = _GH_URL.search(text)
            if m:
                title = _flag(rest, "--title", "-t") or ""
                self._set(label + m.group("n"), OPEN, seq, title=title, source=source)
            return
        status = {"close": CLOSED, "merge": CLOSED, "reopen": OPEN}.get(verb)
        if status is None:
            return
        for w in _operands(rest):
            n = _GH_URL.search(w)
            number = n.group("n") if n else w.lstrip("#")
            if number.isdigit():
                self._set(label + number, status, seq, source=source)

    def _mcp(self, verb: str, call: ToolCall, text: str, seq: int) -> None:
        args = call.arguments
        number = args.get("issue_number") or args.get("number") or args.get("issueId")
        number = number or args.get("id") or args.get("identifier")
        if verb == "create":
            try:
                data = json.loads(text)
            except ValueError:
                data = None
            if isinstance(data, Mapping):
                number = data.get("number") or data.get("identifier") or data.get("id")
            if number is None:
                m = _GH_URL.search(text) or re.search(r"#(?P<n>\d+)", text)
                number = m.group("n") if m else None
        if number is None:
            return
        state = args.get("state") or args.get("status")
        status = {"create": OPEN, "close": CLOSED, "reopen": OPEN}.get(verb) or _status(
            str(state) if state else None
        )
        title = str(args.get("title") or "")
        self._set(f"issue {number}", status, seq, title=title, source="issue tracker")

    def _commit(self, text: str, seq: int, *, failed: bool) -> None:
        made = None if failed else _COMMIT_MADE.search(text)
        if made:
            self.last_commit = (seq, f"{made.group('hash')} {one_line(made.group('msg'))}")
            self._set("commit", CLOSED, seq, source="git")
        elif failed:
            why = "rejected by a hook" if _HOOK.search(text) else "failed"
            title = f"`git commit` {why}: nothing was committed yet ({_first_error(text)})"
            self._set("commit", OPEN, seq, title=title, source="git")

    def _push(self, text: str, seq: int, *, failed: bool) -> None:
        if failed:
            title = f"`git push` failed: nothing was pushed yet ({_first_error(text)})"
            self._set("push", OPEN, seq, title=title, source="git")
        else:
            self._set("push", CLOSED, seq, source="git")

    # -- what it found

    def open_items(self) -> list[WorkItem]:
        """Open items, the one in progress first, then the most recently touched."""
        found = [i for i in self.items.values() if i.open]
        return sorted(found, key=lambda i: (i.status != ACTIVE, -i.seq))

    def in_progress(self) -> WorkItem | None:
        return next((i for i in self.open_items() if i.status == ACTIVE), None)

    def closed_keys(self) -> list[str]:
        return [i.key for i in self.items.values() if not i.open]

    def commit_line(self) -> str | None:
        """Current State's word on commits: the last one made, or that the last attempt
        made none."""
        pending = self.items.get("commit")
        if pending is not None and pending.open:
            return None  # Pending Tasks says so
        if self.last_commit is None:
            return None
        return f"Last commit: {code_span(clip_words(self.last_commit[1], TITLE_WORDS))}"

    # -- carried in checkpoint metadata

    def to_json(self) -> dict[str, Any]:
        return {
            "items": [i.to_json() for i in self.items.values()],
            "last_commit": list(self.last_commit) if self.last_commit else None,
            "outcomes": [o.to_json() for o in self.outcomes],
        }

    def load(self, data: Mapping[str, Any]) -> None:
        for key, title, status, source, seq in data.get("items") or []:
            self.items[str(key)] = WorkItem(
                str(key), str(title), str(status), str(source), int(seq)
            )
        for seq, task, said, files, commits in data.get("outcomes") or []:
            outcome = Outcome(
                int(seq), str(task), str(said), [str(f) for f in files], [str(c) for c in commits]
            )
            self.outcomes.append(outcome)
        commit = data.get("last_commit")
        if commit:
            self.last_commit = (int(commit[0]), str(commit[1]))


__all__ = ["ACTIVE", "CLOSED", "OPEN", "SUBAGENT_TOOLS", "Ledger", "Outcome", "WorkItem"]
