"""The artifact trail: what the whole covered range did, computed from its stored messages.

A snapshot built from the previous summary's text plus the new messages keeps
only what that text said. A summary written by another tool (Claude Code's,
Codex's) or by a model names few of the files changed, none of the commands
that failed, and tasks that were finished later. The trail is computed, not
remembered (invariant 11): one pass over the stored messages of the covered
range, through the same recogniser the summarizers use (``toolcalls``), finds

* every file a tool call created, wrote, edited, moved or deleted, with its
  last action (a deleted file stays deleted until created again), the
  definitions the edits touched and the agent's words for the last one;
* the commands that failed, with their error lines, until the same command
  runs clean again;
* the URLs and ids (UUIDs, commit hashes, ticket ids) the agent used, with the
  number of its messages that used each;
* the latest structured todo state (any todo / plan tool the recogniser knows);
* the items closed since: ``bd close X``, ``gh issue close 12``, ``--status
  done``, or a ``git commit`` whose message names the item; a reopen undoes it;
* the skills the agent loaded (``skill`` tool results name theirs in metadata),
  so a compaction can say which skills were in use;
* the state ledger (``ledger.py``): each tracker's work items, commit and push
  outcomes, subagents' reports; and the assistant's last structured answer
  (a plan, a list) with whether the latest request refers to it.

The trail goes into each checkpoint's metadata (``TRAIL_KEY``), so the next
compaction reads only its new messages; a checkpoint without one (imported from
another tool, or older) makes the next compaction read the range it covers
once. What the trail does to a snapshot is ``reconcile``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.decisions import is_narration, turns_approach_down
from threadline.compaction.disputes import remember
from threadline.compaction.edit_defs import edit_defs
from threadline.compaction.extractive import FENCED_CODE, SHORT_RESULT_CHARS, edit_note
from threadline.compaction.fixes import FixBook, named_options
from threadline.compaction.id_label import id_label
from threadline.compaction.ledger import ACTIVE, CLOSED, STATUS, Ledger
from threadline.compaction.lookups import only_looks
from threadline.compaction.options import choice_line, offered
from threadline.compaction.progress import (
    TODO_SOURCE,
    Progress,
    close_reason,
    failed_case,
    is_check,
    is_tally,
    located_error,
    result_line,
    verdict_ok,
)
from threadline.compaction.snapshot import clip_chars, clip_words, one_line
from threadline.compaction.subagents import BY_SUBAGENT, resolved
from threadline.compaction.toolcalls import (
    DONE_STATUSES,
    FileTracker,
    canonical_key,
    describe_call,
    is_code_key,
    shell_text,
    simple_commands,
    split_heredocs,
    todo_items,
)
from threadline.compaction.untracked import git_listed_paths, untracked_paths
from threadline.compaction.values import (
    Value,
    extract_error_lines,
    extract_values,
    ids_within,
    split_words,
)
from threadline.messages import SKILL_KEY, Message, ToolCall
from threadline.rejections import rejected
from threadline.requests import user_words

TRAIL_KEY = "trail"
"""Checkpoint metadata key of the trail."""
TRAIL_VERSION = 3
"""2: the state ledger (``ledger.py``) rides along; 3: the progress account
(``progress.py``) too; an older trail is read again."""


MAX_FAILURES = 3
"""Failed commands remembered (the newest); older failures were most likely dealt with."""
MAX_ERROR_LINES = 10
"""Error lines of one failed run remembered for telling when a later clean run settled them."""
MAX_SKILLS = 20
REPLY_WORDS = 40
"""Skills remembered as in use (the most recently loaded)."""
MAX_RUNS = 20
"""Shell calls remembered while they wait for their results (parallel calls, a cut between)."""
MAX_CHOICES = 6
"""Options the person picked (``options.py``), the latest kept: the design they chose."""
OFFER_CHARS = 4_000
"""An offer of options carried to the next compaction, clipped: its list comes first."""
MAX_REMEMBERED = 300
"""URLs and ids counted, and closed items: beyond twice this many the least used (and the
oldest) are forgotten, so the trail each checkpoint carries stays small."""
CLIP_CHARS = {"command": 160, "error": 200, "request": 2_000}
"""A failed command and an error line are kept by their first line, a request by its
opening (a snapshot pins fewer words), cut at a word after this many characters."""
ERROR_SCAN_CHARS = 20_000
"""A long output is searched for its error lines this far from each end."""
USED_KINDS = frozenset({"url", "uuid", "hex", "id"})
"""What counts as a value the agent used again: URLs and ids, not paths (Files Modified)."""
HANDLE_KEYS = frozenset({"task_id", "bash_id", "shell_id", "taskId", "agentId", "agent_id"})
"""Arguments naming a background task or subagent: a handle of the moment, no value to keep
(``TaskStop {task_id: "be6a1d6"}`` is no commit hash)."""
CLOSE_WORDS = frozenset(
    {"close", "closed", "done", "complete", "completed", "finish", "finished", "resolve"}
)
"""A subcommand that closes the items it names (``bd close X``, ``gh issue close 12``)."""
REOPEN_WORDS = frozenset({"reopen", "reopened"})
CHANGE_WORDS = CLOSE_WORDS | REOPEN_WORDS
CLOSED_STATUSES = frozenset(w for w, s in STATUS.items() if s == CLOSED)
OPEN_STATUSES = frozenset(w for w, s in STATUS.items() if s != CLOSED)
STATUS_FLAGS = frozenset({"--status", "-s", "--state"})

_EXIT_CODE = re.compile(
    r"(?i)\bexit(?:ed\s+with)?\s+(?:code|status)\s*:?\s*(-?\d+)|"
    r"\"exit_code\"\s*:\s*(-?\d+)|\bProcess exited with code (-?\d+)"
)
"""How tools report a command's exit status (Claude Code, Codex, OpenHands)."""
_ERROR_WORD = re.compile(
    r"(?i)\b(?:error|errors|fatal|fail|fails|failed|failure|exception|denied|not found|"
    r"(?:issues?|problems?|violations?)\s+found|"
    r"no such|cannot|unable|undefined|panic(?:ked)?|"
    r"not formatted|would (?:be )?reformat(?:ted)?)\b"
)
"""A word that names a failure: the line holding the last one is the failure's summary
("1 failed, 3 passed", "Found 2 errors") when no line has an error's own shape."""
_EXIT_LINE = re.compile(
    r"(?i)^\W*(?:(?:command\s+)?exit(?:ed\s+with)?\s+(?:code|status)|process exited|wall time:|"
    r"chunk id:|"
    r"original token count:|output:\s*$|finished\s+in\s+\d|"
    r"(?:\[?[A-Z]+\]?\s+)?command\s+failed\s+with\s+exit\s+code\b)|^[^\n]*(?:\.{3}|\u2026)\s*$"
)
"""A line of the wrapper around a command's output (its exit status, timing, chunk id): it
says a command ran or failed, never how."""
_DIAGNOSTIC = re.compile(r"^[\w./-]+\.\w{1,8}:\d+(?::\d+)?:\s*\S")
"""A compiler's or linter's complaint: ``file.go:634:64: not enough arguments ...``."""
_ISSUE_NUMBER = re.compile(r"(?<![\w&])#(\d{1,7})\b")
"""``Closes #41`` in a commit message."""
_DIGITS = re.compile(r"^#?\d{1,7}$")
_MARKUP = re.compile(r"<[^<>\n]{0,200}>")
"""Markup in prose (JSX, HTML) is code: its class names are not values the agent used."""
_COMMIT = re.compile(r"\bgit\b[^\n;&|]*?\bcommit\b")
_RUN_HEADER = re.compile(
    r"\A\s*(?:Chunk ID: \S+\s*\n)?(?:Wall time: [^\n]*\n)?(?:Process exited with code -?\d+\s*\n)?"
    r"(?:Original token count: [^\n]*\n)?(?:Output:\s*\n?)?"
    r"|\A\s*(?:Error: )?Exit code:? -?\d+\s*\n(?:Wall time: [^\n]*\n)?(?:Output:\s*\n?)?"
)
"""The header a tool wraps a command's output in (Codex's chunk id, wall time and exit line;
Claude Code's "Exit code 1"): no error line is in it."""
_REDIRECTS = re.compile(r"\s+(?:\d?>&\d|\d?>\s*/dev/null)")
_PIPE_TAIL = re.compile(r"\s*\|\s*(?:tail|head|grep|rg|less|cat|tee|sort|uniq|wc)\b[^|]*$")
_CD_PREFIX = re.compile(r"^\s*(?:(?:cd|sleep)\s+\S+\s*(?:&&|;)\s*)+")
"""``cd dir &&`` and ``sleep 30 &&`` before a command change where and when it runs, not what."""
_NOT_RUN = re.compile(r"^\s*<tool_use_error>")
"""Claude Code's answer for a call it did not run."""
_SEARCHERS = frozenset({"rg", "grep", "egrep", "fgrep", "ag", "git-grep"})


def _clip(text: str, limit: int) -> str:
    """The first line of ``text``, clipped (a command's first line says what ran)."""
    return clip_chars(text.strip().split("\n", 1)[0], limit)


def run_target(command: str) -> str:
    """What a command runs, for telling whether a later run settled an earlier failure: its
    first line without a leading ``cd``, output plumbing (``2>&1``, ``| tail -40``) or
    extra spaces."""
    line = command.strip().split("\n", 1)[0]
    line = _CD_PREFIX.sub("", line)
    while True:
        cut = _PIPE_TAIL.sub("", _REDIRECTS.sub("", line))
        if cut == line:
            break
        line = cut
    return " ".join(line.split()).rstrip(" \u2026")


def settles(success: str, failure: str) -> bool:
    """Whether a clean run of the shell command ``success`` settles an earlier failed run of
    ``failure``, however each was written (``cd X &&``, ``2>&1 | tail -40``, ``VAR=1``,
    ``timeout 60``, its options in another order); a run of another target does not."""
    return _covers(run_target(success), run_target(failure))


def _retries(command: str, failure: Failure) -> bool:
    """``command`` runs what ``failure`` ran, perhaps split in two with an option added
    (``git add -f x && git add y`` after ``git add y x``): its words hold all the failed
    run's words but options."""
    failed = run_target(failure.command).split()
    words = set(run_target(command).split())
    return len(failed) >= 2 and all(w in words for w in failed if not w.startswith("-"))


def _covers(success: str, failure: str) -> bool:
    """A clean run of ``success`` settles ``failure``: the same run, a wider run of the
    same tool (``mix test`` passing after ``mix test test/a_test.exs`` failed), or a run
    of every command the failure ran on the same operands, options and plumbing aside
    (``pnpm fix && pnpm check`` after ``pnpm fix > log; status=$?; tail log`` failed;
    ``oxfmt x.md`` after ``oxfmt --check x.md``)."""
    if failure == success or (
        len(success.split()) >= 2 and failure.startswith(success + " ") and "&&" not in failure
    ):
        return True
    failed_work = _work(failure)
    if not failed_work:
        return False
    done = _work(success)
    return failed_work <= done or _work(failure, last=True) <= done


_PLUMBING = frozenset(
    split_words("cd tail head exit echo printf cat true false sleep set wc sort uniq tee less")
)
"""Commands that move or show another command's output: no work of their own."""


def _work(command: str, *, last: bool = False) -> set[tuple[str, ...]]:
    """The commands a shell line runs, each as its program and the set of its other words,
    without options (``-x``, ``--y``) and words built at run time; plumbing left out.
    ``last``: only the final one, which is what failed when a chain (``git checkout X &&
    go build``) printed its errors."""
    out: list[tuple[str, ...]] = []
    for argv in simple_commands(command):
        argv = command_proper(argv)
        if not argv or argv[0].rsplit("/", 1)[-1] in _PLUMBING:
            continue
        words = _unwrapped([w for w in argv if not w.startswith("-") and "\0" not in w])
        out.append(words[:1] + tuple(sorted(set(words[1:]))))  # options may come anywhere
    return set(out[-1:] if last else out)


_DURATION = re.compile(r"^\d+(?:\.\d+)?[smhd]?$")
_PYTHON = re.compile(r"^python(?:\d(?:\.\d+)?)?$")


def command_proper(argv: list[str]) -> list[str]:
    """``argv`` without what only bounds or hosts the command: ``timeout [-s SIG] 60 cmd``
    runs ``cmd``, ``python -m pytest`` runs ``pytest`` (leading ``VAR=x``, ``env``, ``time``
    and ``nice`` go in ``simple_commands``)."""
    while argv:
        prog = argv[0].rsplit("/", 1)[-1]
        if prog in ("timeout", "gtimeout"):
            rest = argv[1:]
            while rest and not _DURATION.match(rest[0]):
                rest = rest[1:]  # its options and their values (-s KILL, -k 5)
            argv = rest[1:]
        elif _PYTHON.match(prog) and len(argv) > 2 and argv[1] == "-m":
            argv = argv[2:]
        else:
            return argv
    return argv


_RUNNERS = (
    ("pnpm", "exec"),
    ("pnpm", "dlx"),
    ("pnpm", "run"),
    ("npm", "exec"),
    ("npm", "run"),
    ("yarn", "dlx"),
    ("yarn", "run"),
    ("bun", "run"),
    ("uv", "run"),
    ("poetry", "run"),
    ("bundle", "exec"),
    ("pipx", "run"),
    ("npx",),
    ("bunx",),
)
"""Prefixes that only run the command after them: ``pnpm exec oxlint`` runs ``oxlint``."""


def _unwrapped(words: list[str]) -> tuple[str, ...]:
    for prefix in _RUNNERS:
        if len(words) > len(prefix) and tuple(words[: len(prefix)]) == prefix:
            return tuple(words[len(prefix) :])
    return tuple(words)


_ECHOED = re.compile(r"(?m)^[ \t]*[$>][ \t]+(?P<command>\S[^\n]{0,300})$")
"""A command a runner says it ran (``$ ultracite check``, npm's ``> eslint .``)."""


_SCRIPT_RUNNERS = frozenset(split_words("pnpm npm yarn bun make just task"))


def runs_scripts(command: str) -> bool:
    """A command that runs a project's named scripts, whose output echoes each command."""
    return any(argv and argv[0] in _SCRIPT_RUNNERS for argv in simple_commands(command))


def ran_clean(text: str) -> list[str]:
    """The commands a clean run's output says it ran (a package script's own command)."""
    return [m.group("command") for m in _ECHOED.finditer(text[: SHORT_RESULT_CHARS * 4])]


def _no_match(command: str | None, text: str) -> bool:
    """A search whose status is 1 (``grep`` / ``rg`` exit 1 when nothing matched, 2 on an
    error): an answer, not a failure, whatever a shell profile printed around it."""
    if not command or exit_status(text) != 1:
        return False
    argv = (list(simple_commands(command)) or [[]])[-1]  # the status is the last command's
    return bool(argv) and argv[0].rsplit("/", 1)[-1] in _SEARCHERS


def exit_status(text: str) -> int | None:
    """The exit status a tool reported at the head or tail of its output, if any."""
    for part in (text[:600], text[-600:]):
        m = _EXIT_CODE.search(part)
        if m:
            return int(next(g for g in m.groups() if g is not None))
    return None


def failed(m: Message) -> bool:
    """A tool result that reports failure: flagged as an error, or a non-zero exit status.
    (A call the person turned down did not fail: it did not run, ``rejections``.)"""
    if m.metadata.get("is_error") or m.metadata.get("error"):
        return True
    status = exit_status(m.text)
    return status is not None and status != 0


def error_lines(text: str) -> list[str]:
    """The lines of a failure worth keeping: the last line that looks like an error (by the
    error patterns of ``values``) and the last line that names one (a test summary, "Found 2
    errors"), when they differ; the first line when neither exists."""
    out: list[str] = []
    text = _RUN_HEADER.sub("", text, count=1)
    found = extract_error_lines(
        text[:20_000] + "\n" + text[-20_000:] if len(text) > 40_000 else text
    )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    diagnostic = next((ln for ln in lines if _DIAGNOSTIC.match(ln)), None)
    if diagnostic is not None:  # a compiler's first complaint is the one to fix first
        out.append(diagnostic)
    if found and not any(found[-1].text in o for o in out):
        out.append(found[-1].text)
    named = [  # a bare verdict ("FAIL") says nothing the exit status did not
        ln
        for ln in lines
        if _ERROR_WORD.search(ln) and not _EXIT_LINE.match(ln) and len(ln.split()) >= 2
    ]
    if named and not any(named[-1] in o or o in named[-1] for o in out):
        out.append(named[-1])
    if not out and lines:  # a banner ("Checking formatting...") says what ran, not why
        plain = [ln for ln in lines if not _EXIT_LINE.match(ln) and ln[:2] != "# "]
        first = next((ln for ln in plain if not ln.endswith(("...", "\u2026"))), "")
        first = first or (plain[0] if plain else "")
        if first:
            out.append(first)
    return [_clip(line, CLIP_CHARS["error"]) for line in out]


@dataclass(slots=True)
class Failure:
    """A command that failed, and what it said."""

    seq: int
    command: str
    errors: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    """Command-line options its output named ("hint: Use -f if you really want to add
    them"): a rerun adding one of them is the fix."""

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "command": self.command,
            "errors": list(self.errors),
            "options": list(self.options),
        }


@dataclass(slots=True)
class Used:
    """A URL or id: in how many of the agent's messages it was used (``count``), in how many
    messages the run refers to it at all (``refs``: the user's, short tool results), and the
    last message that did."""

    kind: str
    count: int
    last: int
    refs: int
    said: int = 0
    """In how many messages a participant's prose or a command that changed something names
    it: none, and the agent only passed it to tools (fetched it) or read it in a path."""
    label: str = ""
    """What it is, as the words around it where it was first said say (``id_label``)."""


@dataclass(slots=True)
class Closure:
    """An item closed: when, and by what (the command, clipped)."""

    seq: int
    how: str


@dataclass(slots=True)
class TodoState:
    """A todo / plan tool's whole list as last written."""

    seq: int
    items: list[tuple[str, str]]
    """(text, status), status lower-cased."""


def _prose(text: str) -> str:
    return _MARKUP.sub(" ", FENCED_CODE.sub(" ", text))


def _agent_texts(m: Message) -> list[str]:
    """What the agent itself wrote in ``m``: its prose and its tool arguments, without code
    (file content, patches, heredoc bodies) that only passes values along."""
    texts = [_prose(m.text)] if m.text else []
    for call in m.tool_calls:
        for key, value in call.arguments.items():
            if is_code_key(key) or key in HANDLE_KEYS:
                continue
            for text in value if isinstance(value, list) else [value]:
                if not isinstance(text, str):
                    continue
                if canonical_key(key) in ("command", "cmd", "script") and "<<" in text:
                    text = split_heredocs(text)[0]
                texts.append(text)
    return texts


def _ids_in(words: Iterable[str]) -> list[str]:
    """Ids among command operands: ticket ids, UUIDs, hashes, issue numbers."""
    out: list[str] = []
    for w in words:
        if "\0" in w or w.startswith("-"):
            continue
        if _DIGITS.match(w):
            out.append(w.lstrip("#"))
            continue
        found = [v for v in extract_values(w) if v.kind in ("id", "uuid", "hex") and v.text == w]
        out.extend(v.text for v in found)
    return out


def item_changes(command: str) -> list[tuple[str, bool]]:
    """Items a shell command closes (True) or reopens (False): ``bd close X Y``, ``gh issue
    close 12``, ``tracker update X --status done``, ``git commit -m "... X"``."""
    out: list[tuple[str, bool]] = []
    for argv in simple_commands(command):
        words = [w.lower() for w in argv]
        status = next(
            (
                argv[i + 1].lower()
                for i, w in enumerate(words[:-1])
                if w in STATUS_FLAGS and "\0" not in argv[i + 1]
            ),
            None,
        )
        status = status or next(
            (w.split("=", 1)[1] for w in words if w.startswith(("--status=", "--state="))), None
        )
        verb = next((i for i, w in enumerate(words[1:4], 1) if w in CHANGE_WORDS), None)
        if words[:2] == ["git", "commit"] or (words[:1] == ["git"] and "commit" in words[1:3]):
            continue  # the message may sit in a heredoc: read from the whole command below
        if verb is not None:
            closes = words[verb] in CLOSE_WORDS
            out += [(i, closes) for i in _ids_in(argv[verb + 1 :])]
        elif status in CLOSED_STATUSES or status in OPEN_STATUSES:
            out += [(i, status in CLOSED_STATUSES) for i in _ids_in(argv[1:])]
    commit = _COMMIT.search(command)
    if commit:
        message = command[commit.end() :]
        ids = [v.text for v in extract_values(message) if v.kind == "id"]
        ids += _ISSUE_NUMBER.findall(message)
        out += [(i, True) for i in dict.fromkeys(ids)]
    return out


PRODUCED_MIN_ITEMS = 5
"""An answer with this many list items is a structured one (a plan, a list, a report)..."""
PRODUCED_WORDS = 90
"""...kept as a quote of about this many words while the latest request refers to it."""
ITEM_WORDS = 12
"""Each item of the quote keeps its opening words."""
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*\u2022])\s+(?P<text>\S.*)$", re.M)
"""A numbered or bulleted line of an answer."""
_REFERS = re.compile(
    r"(?i)\b(?:these|those|them|this list|that list|the (?:list|plan|report|items?|points?|"
    r"suggestions?|improvements?|options?|steps?|findings?|proposals?)|above|all of|each of|"
    r"(?:items?|points?|steps?|options?) \d+|#\d+|the (?:first|second|third|last) one)\b"
)
"""Words of a request that point back at what the assistant just produced."""


def produced_quote(text: str) -> str | None:
    """A structured answer clipped to a quote: its lead line and each item's opening words;
    None when ``text`` is no structured answer."""
    prose = FENCED_CODE.sub("\n", text)
    items = [m.group("text") for m in _LIST_ITEM.finditer(prose)]
    if len(items) < PRODUCED_MIN_ITEMS:
        return None
    lead = next((ln.strip(" #*") for ln in prose.splitlines() if ln.strip()), "")
    parts = [] if _LIST_ITEM.match(lead) else [clip_words(one_line(lead), ITEM_WORDS)]
    parts += [
        f"{n}. {clip_words(one_line(t.replace('**', '')), ITEM_WORDS)}"
        for n, t in enumerate(items, 1)
    ]
    return clip_words(" ".join(parts), PRODUCED_WORDS)


def _keep_order(u: Used) -> tuple[int, int, int]:
    return (-u.count, -u.refs, -u.last)


class Trail:
    """The artifact trail of a session up to ``through``; ``observe`` extends it."""

    def __init__(self, cwd: str | None = None) -> None:
        self.through = 0
        """The last seq taken in."""
        self.tracker = FileTracker(cwd)
        self.failures: list[Failure] = []
        self.erring: dict[str, str] = {}
        """Each error line a failed run printed -> what ran (``run_target``), until a later
        clean run of it settles the line."""
        self.resolved: dict[str, int] = {}
        """Error lines a later clean run of the same command settled -> when."""
        self.used: dict[str, Used] = {}
        self.todos: TodoState | None = None
        self.closed: dict[str, Closure] = {}
        self.skills: dict[str, int] = {}
        """Skills loaded, by name, with the seq of the latest load."""
        self.last_result = 0
        """The seq of the last tool result (a failure there is the one to fix next)."""
        self.last_clean = 0
        """The seq of the last shell command that ran clean: state a summary reported before
        it (a build broken, a step to take) may have moved on (``history``)."""
        self.runs: list[str] = []
        """Ids of the shell calls still waiting for their results (``last_clean``), kept by
        id so a result read by a later compaction still finds its call."""
        self.ledger = Ledger()
        """Work items and commit outcomes (``ledger.py``)."""
        self.progress = Progress()
        """What the run did on each work item, in order (``progress.py``)."""
        self.disputed: dict[str, str] = {}
        """Names the person later called redundant, wrong or unwanted -> their words
        (``disputes.py``)."""
        self.fixes = FixBook()
        """Failed checks, the files changed after them, and the clean runs that settled them
        (``fixes.py``): the fixes, with their error lines as the why."""
        self.produced: tuple[int, str] | None = None
        """(seq, quote) of the assistant's last structured answer (``produced_quote``)."""
        self.produced_wanted = False
        """Whether the latest request refers to it."""
        self.answered = True
        """Whether the agent replied in prose (no call pending) since the latest request."""
        self.turn_end = 0
        """The seq of the agent's latest prose with no call: where it handed the turn back."""
        self.reply: tuple[int, str] | None = None
        """(seq, opening words) of the agent's first prose after the latest request: how it
        answered a question, even when it went on to act in the same message."""
        self.first_request: tuple[int, str] | None = None
        self.latest_request: tuple[int, str] | None = None
        """(seq, text clipped) of the first and the latest request a person made."""
        self.offer: str | None = None
        """The agent's last message that offered options, until the person answers it."""
        self.choices: list[tuple[int, str]] = []
        """(seq, line) of each option the person picked, resolved to its words."""
        self._note: str | None = None

    # -- reading messages

    def extend(self, messages: Iterable[Message]) -> Trail:
        for m in messages:
            self.observe(m)
        return self

    def observe(self, m: Message) -> None:
        seq = m.seq if m.seq is not None else self.through + 1
        if seq <= self.through and m.seq is not None:
            return  # already taken in
        self.through = seq
        answered, touched = self.tracker.observe(m, seq)
        for path, at in self.tracker.taken_back:  # a turned-down or failed edit changed nothing
            self.progress.untouch(path, at, self.tracker.last_change(path))
        if m.metadata.get("is_demo") or m.role == "system":
            return
        if m.role == "user" and not m.summary:
            self._note = None
        if (m.role == "user" and not m.summary) or m.role == "tool":
            asked = user_words(m)  # a tool result: the words typed when turning a call down
            if asked is not None and m.role == "tool" and turns_approach_down(asked):
                self.progress.turned_down(asked)
            if asked is not None:
                remember(self.disputed, asked)
                self.latest_request = (seq, asked[: CLIP_CHARS["request"]])
                self.answered = False
                self.reply = None
                self.produced_wanted = self.produced is not None and bool(_REFERS.search(asked))
                self.first_request = self.first_request or self.latest_request
                self.progress.request(seq, asked)
                self._chose(asked, seq)
        if touched and m.role != "user":
            self.answered = True  # it acted on the request: changed files for it
        if m.role == "assistant":
            self._assistant(m, seq)
        elif m.role == "user" or (m.role == "tool" and len(m.text) <= SHORT_RESULT_CHARS):
            said = [(m.text, False)] if m.role == "user" and not m.summary else []
            self._count(extract_values(m.text), seq, agent=False, said=said)
        for rec in touched:
            rec.note = self._note or rec.note
        if touched:
            gone = [rec.path for rec in touched if rec.last_action == "deleted"]
            self.progress.touched([rec.path for rec in touched], seq, self._note, deleted=gone)
            self.fixes.changed([rec.path for rec in touched])
        if m.role == "tool":
            self.last_result = seq
            self._ran(m, seq)
            skill = m.metadata.get(SKILL_KEY)
            if isinstance(skill, str) and skill and not m.metadata.get("is_error"):
                self.skills.pop(skill, None)
                self.skills[skill] = seq
                if len(self.skills) > MAX_SKILLS:
                    self.skills.pop(next(iter(self.skills)))
            if answered is not None:
                self._result(m, answered, seq)

    def _assistant(self, m: Message, seq: int) -> None:
        if m.text.strip() and not m.tool_calls:
            self.answered = True
            self.turn_end = seq
        said = one_line(_prose(m.text)).strip()
        if self.reply is None and self.latest_request is not None and said:
            answer = not is_narration(said)  # "Let me check ..." is no answer yet
            self.reply = (seq, clip_words(said, REPLY_WORDS)) if answer else None
        if m.text.strip() and offered(m.text):
            self.offer = m.text[:OFFER_CHARS]  # until the person's next request answers it
        if m.text.strip():
            self._note = edit_note(m.text)  # the words of this step, not of an earlier one
            quote = produced_quote(m.text)
            if quote is not None:
                self.produced, self.produced_wanted = (seq, quote), False
        named = [(_prose(m.text), False)] if m.text.strip() else []
        named += [(c, True) for c in map(shell_text, m.tool_calls) if c and not only_looks(c)]
        values = [v for t in _agent_texts(m) for v in extract_values(t)]
        self._count(values, seq, agent=True, said=named)
        if m.text.strip():  # its words come before its calls: of the stretch they end, if any
            self.progress.said(m.text, seq)
        for call in m.tool_calls:
            made = edit_defs(call)
            if made.added or made.removed or made.tests:
                self.progress.defined(seq, made.added, made.removed, made.tests)
            if call.id and shell_text(call) is not None:
                self.runs = [*self.runs, call.id][-MAX_RUNS:]
            items = todo_items(call)
            if items is not None:
                self._todo_progress(items, seq)
                self.todos = TodoState(seq, items)

    def _chose(self, asked: str, seq: int) -> None:
        """A request picking one of the options the agent offered: the option's words."""
        line, self.offer = choice_line(asked, self.offer), None
        if line is not None:
            self.choices = [*self.choices, (seq, line)][-MAX_CHOICES:]

    def _todo_progress(self, items: list[tuple[str, str]], seq: int) -> None:
        """A todo list written: its completed items end their segments, its item in
        progress becomes the current one."""
        for text, status in items:
            if status in DONE_STATUSES:
                self.progress.closed(f"todo: {text}", seq)
        for text, status in items:
            if status.replace("-", "_") == "in_progress":
                self.progress.claimed(f"todo: {text}", text, TODO_SOURCE, seq)
                break

    def _ran(self, m: Message, seq: int) -> None:
        """A shell call's result: a clean one moves ``last_clean`` (a turned-down call did
        not run)."""
        if m.tool_call_id not in self.runs:
            return
        self.runs.remove(m.tool_call_id)
        if not failed(m) and not rejected(m.text):
            self.last_clean = seq

    def _count(
        self,
        values: Iterable[Value],
        seq: int,
        *,
        agent: bool,
        said: Sequence[tuple[str, bool]] = (),
    ) -> None:
        """Count each URL or id once for this message (an id inside a path or URL too);
        ``said``: the message's prose and the commands that changed something, each with
        whether it is a command (what names a value there, ``Used.said``)."""
        found: dict[str, str] = {}
        for v in values:
            if v.kind in USED_KINDS:
                found.setdefault(v.text, v.kind)
            if v.kind in ("path", "url"):  # a hex name in a path is a file (tasks/be6a1d6.output)
                ids = [i for i in ids_within(v.text) if v.kind == "url" or i.kind != "hex"]
                found.update((i.text, i.kind) for i in ids if i.text not in found)
            elif v.kind == "setting":  # url = "https://...": the URL is used, not only the line
                inner = re.split(r"[=:]", v.text, maxsplit=1)[-1].strip(" \"'")
                for i in extract_values(inner):
                    if i.kind in USED_KINDS and i.text != v.text:
                        found.setdefault(i.text, i.kind)
        for text, kind in found.items():
            used = self.used.get(text)
            if used is None:
                used = self.used[text] = Used(kind, 0, seq, 0)
            used.refs += 1
            used.last = seq
            used.count += agent
            where = next(((t, c) for t, c in said if text in t), None)
            if where is not None:
                used.said += 1
                used.label = used.label or id_label(where[0], text, command=where[1])
        if len(self.used) > 2 * MAX_REMEMBERED:
            keep = sorted(self.used.items(), key=lambda kv: _keep_order(kv[1]))
            self.used = dict(keep[:MAX_REMEMBERED])

    def _result(self, m: Message, call: ToolCall, seq: int) -> None:
        command = shell_text(call)
        shown = _clip(command, CLIP_CHARS["command"]) if command else describe_call(call)
        if rejected(m.text):
            return  # turned down: it did not run, so it neither failed nor settled anything
        broke = failed(m) and not _no_match(command, m.text)
        before = {k: i.status for k, i in self.ledger.items.items()}
        commit = self.ledger.last_commit
        self.ledger.observe(call, m, seq, failed=broke)
        self._item_progress(before, command, seq)
        if self.ledger.last_commit is not None and self.ledger.last_commit != commit:
            self.progress.committed(self.ledger.last_commit[1], seq)
        outcomes = self.ledger.reported
        known = self.tracker.known()
        for o in outcomes:  # a bare name is the one file of that name the run knows
            o.files = list(dict.fromkeys(resolved(f, known) for f in o.files))
        reported = [f for o in outcomes for f in o.files]
        if reported:
            changed = []
            for path in dict.fromkeys(reported):  # the run's changes, made by its subagents
                rec = self.tracker.touch(path, BY_SUBAGENT, seq, base=self.tracker.root)
                changed += [rec.path] if rec is not None else []
            if changed:
                self.progress.touched(changed, seq, delegated=True)
        for path in untracked_paths(command, m.text) if command else []:
            self.tracker.untracked(path)  # git says new: a file written whole was created
        self.tracker.listed(git_listed_paths(command, m.text) if command else [])
        target = run_target(shown) if command else shown
        if command is not None and is_check(command) and not _no_match(command, m.text):
            self._check(target, m.text, broke, seq)
        if broke:
            self.failures = [f for f in self.failures if run_target(f.command) != target]
            self.failures.append(Failure(seq, shown, error_lines(m.text), named_options(m.text)))
            self.failures = self.failures[-MAX_FAILURES:]
            self._erring(m.text, target)
            return
        echoed = ran_clean(m.text) if command and runs_scripts(command) else []
        ran = [target, *(run_target(c) for c in echoed)]
        for f in self.failures:  # the same run failed before: an option it added is a fix
            if (
                command is not None
                and f.errors
                and (any(_covers(r, run_target(f.command)) for r in ran) or _retries(command, f))
            ):
                self.fixes.rerun(f.command, f.errors[0], command, f.options, seq)
        self.failures = [  # it runs clean now, or a wider run of the same tool did
            f for f in self.failures if not any(_covers(r, run_target(f.command)) for r in ran)
        ]
        self._settle(ran, seq)
        for done in ("commit", "push"):  # a commit went through: the rejected ones are moot
            outcome = self.ledger.items.get(done)
            if outcome is not None and outcome.seq == seq and not outcome.open:
                self.failures = [f for f in self.failures if f"git {done}" not in f.command]
        if command is None:
            return
        for item, closes in item_changes(command):
            if closes:
                self.closed[item] = Closure(seq, _clip(command, CLIP_CHARS["command"]))
            else:
                self.closed.pop(item, None)
        if len(self.closed) > MAX_REMEMBERED:
            newest = sorted(self.closed.items(), key=lambda kv: -kv[1].seq)[:MAX_REMEMBERED]
            self.closed = dict(newest)

    def _item_progress(self, before: Mapping[str, str], command: str | None, seq: int) -> None:
        """Items the ledger saw claimed or closed at ``seq``: segments of the account."""
        for key, item in self.ledger.items.items():
            if item.source == "git" or before.get(key) == item.status:
                continue
            if item.status == ACTIVE:
                self.progress.claimed(key, item.title, item.source, seq)
            elif item.status == CLOSED:
                self.progress.closed(key, seq, close_reason(command) if command else "")

    def _check(self, target: str, text: str, broke: bool, seq: int) -> None:
        """A check's result line (a test summary, a verdict, a located compiler error) for
        the current segment; an output with none of them is no check's."""
        if _NOT_RUN.search(text[:300]):
            return  # the harness did not run it (a sibling call failed, no permission)
        line = result_line(text)
        broke = broke or (line is not None and not verdict_ok(line))  # `| tail` hid the status
        if broke:
            if line is not None and verdict_ok(line):
                line = None  # "0 failed" from a run that failed: its error says why
            case = failed_case(text)
            if case is not None and (line is None or not is_tally(line)):
                line = case  # which test failed says more than the package's FAIL line
            located = located_error(text)
            if located and line and located not in line:
                line = f"{line}; {located}"
            shaped = extract_error_lines(_RUN_HEADER.sub("", text, count=1)[-ERROR_SCAN_CHARS:])
            line = (
                line or located or (_clip(shaped[-1].text, CLIP_CHARS["error"]) if shaped else None)
            )
            if line is None:
                return
            self.progress.checked(target, target, line, False, seq)
            self.fixes.failed(target, line, seq)
        elif line is not None:
            ok = verdict_ok(line)
            self.progress.checked(
                target, target, line, ok, seq, settles=lambda t: _covers(target, t)
            )
            if ok:
                self.fixes.passed(lambda t: _covers(target, t), seq)
            else:
                self.fixes.failed(target, line, seq)
        elif (located := located_error(text)) is not None:  # `mix compile | head`: the pipe's
            self.progress.checked(target, target, located, False, seq)  # status hides it
            self.fixes.failed(target, located, seq)
        else:  # ran clean with nothing to quote: its earlier failures are settled all the same
            self.progress.settle(lambda t: _covers(target, t))
            self.fixes.passed(lambda t: _covers(target, t), seq)

    def _erring(self, text: str, target: str) -> None:
        lines = [v.text for v in extract_error_lines(text)[:MAX_ERROR_LINES]]
        for line in [*lines, *error_lines(text)]:
            self.resolved.pop(line, None)
            self.erring.pop(line, None)
            self.erring[line] = target
        while len(self.erring) > MAX_REMEMBERED:
            del self.erring[next(iter(self.erring))]

    def _settle(self, ran: Sequence[str], seq: int) -> None:
        for line, target in list(self.erring.items()):
            if any(_covers(r, target) for r in ran):
                del self.erring[line]
                self.resolved[line] = seq
        while len(self.resolved) > MAX_REMEMBERED:
            del self.resolved[next(iter(self.resolved))]

    def settled_error(self, line: str) -> bool:
        """An error line a later clean run of the command that printed it settled."""
        return line in self.resolved

    # -- what it found

    def copy(self) -> Trail:
        """An independent copy (through its metadata form)."""
        return Trail._read(self.to_metadata())

    def unsettled(self, later: Trail) -> list[Failure]:
        """This trail's failures that ``later`` (this trail extended) still has: no later run
        of the same command or a wider one succeeded."""
        still = {(f.seq, f.command) for f in later.failures}
        return [f for f in self.failures if (f.seq, f.command) in still]

    def unanswered(self) -> tuple[int, str] | None:
        """The latest request, while the agent has neither replied to it in prose nor acted on
        it (changed a file since)."""
        return None if self.answered else self.latest_request

    def wanted_answer(self) -> tuple[int, str] | None:
        """The structured answer the latest request refers to, if it does."""
        return self.produced if self.produced_wanted else None

    def skills_in_use(self) -> list[str]:
        """The skills loaded, oldest load first."""
        return list(self.skills)

    def reused(self, minimum: int = 2) -> list[tuple[str, Used]]:
        """URLs and ids the agent used in at least ``minimum`` messages, most used first
        (the more recent first among equals)."""
        found = [(text, u) for text, u in self.used.items() if u.count >= minimum]
        return sorted(found, key=lambda kv: (-kv[1].count, -kv[1].last))

    def refs(self, text: str) -> int:
        """In how many messages the run refers to ``text`` (0 when it was not counted)."""
        used = self.used.get(text)
        return used.refs if used is not None else 0

    def closed_item(self, text: str) -> Closure | None:
        """The closure of an item ``text`` names, if one is recorded (see ``mentions``)."""
        for item in mentions(text, self.closed):
            return self.closed[item]
        return None

    # -- carried in checkpoint metadata

    def to_metadata(self) -> dict[str, Any]:
        return {
            "version": TRAIL_VERSION,
            "through": self.through,
            "files": self.tracker.state(),
            "failures": [f.to_json() for f in self.failures],
            "erring": dict(self.erring),
            "resolved": dict(self.resolved),
            "used": {
                t: [u.kind, u.count, u.last, u.refs, u.said, u.label] for t, u in self.used.items()
            },
            "todos": None
            if self.todos is None
            else {"seq": self.todos.seq, "items": [list(i) for i in self.todos.items]},
            "closed": {k: [c.seq, c.how] for k, c in self.closed.items()},
            "skills": dict(self.skills),
            "ledger": self.ledger.to_json(),
            "progress": self.progress.to_json(),
            "fixes": self.fixes.to_json(),
            "disputed": dict(self.disputed),
            "produced": [*self.produced, self.produced_wanted] if self.produced else None,
            "answered": self.answered,
            "turn_end": self.turn_end,
            "reply": list(self.reply) if self.reply else None,
            "note": self._note,
            "last_result": self.last_result,
            "last_clean": self.last_clean,
            "runs": list(self.runs),
            "first_request": list(self.first_request) if self.first_request else None,
            "latest_request": list(self.latest_request) if self.latest_request else None,
            "offer": self.offer,
            "choices": [list(c) for c in self.choices],
        }

    @classmethod
    def from_metadata(cls, data: Any) -> Trail | None:
        """The trail a checkpoint carried; None when it has none, or one this version cannot
        read (the next compaction then reads the covered range again)."""
        if not isinstance(data, Mapping) or data.get("version") != TRAIL_VERSION:
            return None
        try:
            return cls._read(data)
        except (ValueError, TypeError, KeyError, IndexError):
            return None

    @classmethod
    def _read(cls, data: Mapping[str, Any]) -> Trail:
        trail = cls()
        through = data["through"]
        if not isinstance(through, int):
            raise ValueError("bad through")
        trail.through = through
        trail.tracker = FileTracker.from_state(data["files"])
        trail.erring = {str(k): str(v) for k, v in (data.get("erring") or {}).items()}
        trail.resolved = {str(k): int(v) for k, v in (data.get("resolved") or {}).items()}
        for f in data.get("failures") or []:
            errors = [str(e) for e in f.get("errors") or []]
            options = [str(o) for o in f.get("options") or []]
            trail.failures.append(Failure(int(f["seq"]), str(f["command"]), errors, options))
        for text, (kind, count, last, refs, *more) in (data.get("used") or {}).items():
            said, label = (int(more[0]), str(more[1])) if len(more) >= 2 else (refs, "")
            trail.used[str(text)] = Used(str(kind), int(count), int(last), int(refs), said, label)
        todos = data.get("todos")
        if isinstance(todos, Mapping):
            items = [(str(t), str(s)) for t, s in todos["items"]]
            trail.todos = TodoState(int(todos["seq"]), items)
        for item, (seq, how) in (data.get("closed") or {}).items():
            trail.closed[str(item)] = Closure(int(seq), str(how))
        for name, seq in (data.get("skills") or {}).items():
            trail.skills[str(name)] = int(seq)
        trail.ledger = Ledger.from_json(data.get("ledger"))
        trail.progress = Progress.from_json(data.get("progress"))
        trail.fixes = FixBook.from_json(data.get("fixes"))
        trail.disputed = {str(k): str(v) for k, v in (data.get("disputed") or {}).items()}
        trail.answered = bool(data.get("answered", True))
        produced = data.get("produced")
        if produced:
            trail.produced = (int(produced[0]), str(produced[1]))
            trail.produced_wanted = bool(produced[2])
        note = data.get("note")
        trail._note = note if isinstance(note, str) else None
        trail.last_result = int(data.get("last_result") or 0)
        trail.turn_end = int(data.get("turn_end") or 0)
        trail.last_clean = int(data.get("last_clean") or 0)
        trail.runs = [str(r) for r in data.get("runs") or []]
        offer = data.get("offer")
        trail.offer = offer if isinstance(offer, str) else None
        trail.choices = [(int(seq), str(line)) for seq, line in data.get("choices") or []]
        for name in ("first_request", "latest_request", "reply"):
            found = data.get(name)
            if found is not None:
                setattr(trail, name, (int(found[0]), str(found[1])))
        return trail


def mentions(text: str, items: Iterable[str]) -> list[str]:
    """The ``items`` ``text`` names as whole ids: ``spotter-4te.3`` is not ``spotter-4te``,
    and an issue number is named as ``#12``."""
    out = []
    for item in items:
        if item.isdigit():
            pattern = rf"#{item}\b"
        else:
            pattern = rf"(?<![\w.-]){re.escape(item)}(?![\w-]|\.\d)"
        if re.search(pattern, text):
            out.append(item)
    return out


def build_trail(messages: Sequence[Message], cwd: str | None = None) -> Trail:
    """The trail of ``messages`` (oldest first), from nothing."""
    return Trail(cwd).extend(messages)


__all__ = [
    "MAX_FAILURES",
    "TRAIL_KEY",
    "Closure",
    "Failure",
    "TodoState",
    "Trail",
    "Used",
    "build_trail",
    "command_proper",
    "error_lines",
    "exit_status",
    "failed",
    "item_changes",
    "mentions",
    "settles",
]
