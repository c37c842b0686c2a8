"""Does the window still know? Probes from the raw history, answered by the built window.

For each real agent transcript under a directory, this does what a new user
does: import it with threadline's importers (``threadline sessions import``,
native compactions becoming checkpoints) into a temporary SQLite store, run
``threadline compact ID`` with default settings (the offline extractive
summarizer), then build the window at 16k, 32k and 64k tokens. Each window is
asked questions whose answers are derived from the stored history by rules of
this script, which never calls the summarizer or its recogniser:

* ``files``: every file the run created, wrote, edited, moved or deleted,
  read from each format's own tool schema (Claude Code ``Edit`` / ``Write`` /
  ``MultiEdit`` / ``NotebookEdit``, Codex ``apply_patch`` and the patches and
  commands of its code-mode ``exec`` scripts, OpenCode ``edit`` /
  ``write`` / ``patch``, OpenHands and SWE-agent ``str_replace_editor``,
  Gemini CLI ``write_file`` / ``replace``, Pi ``edit`` / ``write``, Aider's
  "Applied edit to", and shell commands: redirections, ``tee``, ``sed -i``,
  ``rm``, ``mv``, ``git rm`` / ``git mv``, patches fed to ``apply_patch``),
  less the calls whose result shows they did nothing: turned down by the person,
  or an editing tool that failed (a shell command that failed may have written);
* ``requests``: the opening words of the first and of the latest user request
  (the latest may be the words the person typed when turning a tool call down);
* ``todos_open``: the items still open in the latest structured todo state
  (``TodoWrite``, ``update_plan`` also from a Codex ``exec`` script,
  ``todowrite``, ``write_todos``, ``task_tracker``) must be present;
* ``todos_stale``: items open in an earlier todo state and completed in the
  latest must not be listed as pending by the summary (a count: 0 expected);
* ``errors``: the last failing command and its error line;
* ``values``: URLs and ids (UUIDs, commit hashes, ticket-style ids) that the
  agent itself used (in its tool calls or its text) in at least two messages.

Statement checks (issue 31) judge what the summary says, not only which strings
the window holds:

* ``open_items``: every work item still open at the end of the run, by each
  tracker's own schema and results: the latest todo / plan list (a Codex
  ``exec`` script's ``tools.update_plan`` too), ``TaskCreate`` ids from their
  results less ``TaskUpdate`` completions, beads (``bd create`` ids from their
  results, ``bd update --status``, ``bd close``, ``bd reopen``), ``gh issue`` /
  ``gh pr`` create, close, merge, and a ``git commit`` that failed (a hook
  rejected it) with no later commit made: named by the snapshot (by the window
  where there is none), not only by a kept message (recall, 1.0 expected);
* ``stale``: items those trackers show closed that the summary lists as pending
  (a count: 0 expected);
* ``injected``: Key Decisions lines whose words come from text the agent was
  given, not said: user records marked meta, ``<system-reminder>`` blocks, skill
  bodies, AGENTS.md / CLAUDE.md blocks, command templates, developer and system
  messages (a count: 0 expected);
* ``orientation``: the window states the session's own working directory (where
  it started: a later ``cd`` of the agent's shell moves one command, not the
  session), git branch and the date of its latest message, where the stored
  session knows them, in the text that orients the model: the checkpoint's
  orientation block or the system prompt ``threadline context`` gives the
  session's agent (its "Working directory" section says where an imported
  session ran). A run with nothing compacted has no checkpoint; its window
  still opens with that system prompt, so it is judged the same way (1.0
  expected).

A probe is answered by string match against the window's text (the summary,
each message's text, and its tool calls' arguments), whitespace collapsed.
Recall per category and size is found probes / all probes, over all runs.

    python bench/probes.py [--root DIR] [--json] [--only NAME] [--misses]

``--json`` prints ``{"sizes": {"16000": {"files": r, ...}, ...}, "runs": [...]}``.
Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline import ContextPolicy, Message, ToolCall, build_context, open_store
from threadline.agent.prompt import build_system_prompt
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.errors import ContextOverflow
from threadline.interop.sync import Source, Syncer, SyncStatus, find_sources
from threadline.requests import request_text, user_words
from threadline.store.protocol import Session

ROOT = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
BASE_PROMPT = "You are a helpful assistant."
"""The instructions of the system prompt the window opens with (its sections say where and
when the session ran, as ``threadline context`` shows them)."""
SIZES = (16_000, 32_000, 64_000)
CATEGORIES = (
    "files",
    "requests",
    "todos_open",
    "todos_stale",
    "errors",
    "values",
    "open_items",
    "stale",
    "injected",
    "orientation",
)
COUNTS = frozenset({"todos_stale", "stale", "injected"})
"""Categories that count faults (0 expected) rather than recall."""
REQUEST_WORDS = 12
"""A request counts as known when its opening words appear verbatim."""
TODO_WORDS = 8
COMMAND_CHARS = 60
ERROR_CHARS = 80
MIN_USES = 2

# -- what each format's tools are ------------------------------------------------------

PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "filename", "target_file")
EDIT_TOOLS = frozenset(
    {
        "Edit",
        "MultiEdit",
        "Write",
        "NotebookEdit",  # Claude Code
        "edit",
        "write",
        "multiedit",  # OpenCode, Pi
        "write_file",
        "replace",  # Gemini CLI
        "edit_file",
        "create_file",
    }
)
EDITOR_TOOLS = frozenset({"str_replace_editor", "file_editor", "edit_file"})
"""OpenHands / SWE-agent editors: ``command`` says whether the call changes the file."""
EDITOR_WRITES = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "edit"})
PATCH_TOOLS = frozenset({"apply_patch", "patch"})
PATCH_KEYS = ("input", "patch", "patchText", "patch_text")
SHELL_KEYS = ("command", "cmd")
TODO_TOOLS: dict[str, tuple[str, str]] = {
    "TodoWrite": ("todos", "content"),
    "todowrite": ("todos", "content"),
    "update_plan": ("plan", "step"),
    "write_todos": ("todos", "description"),
    "task_tracker": ("task_list", "title"),
}
"""Todo tools by schema: the list argument and each item's text key."""
DONE = frozenset({"completed", "complete", "done", "cancelled", "canceled"})
APPLIED = "Applied edit to "

_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$"
    r"|^\+\+\+ b/(.+?)\s*$",
    re.M,
)
_HEREDOC_BODY = re.compile(r"(<<-?\s*(['\"]?)(\w+)\2[^\n]*)\n.*?^\s*\3\s*$", re.S | re.M)
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_SEPARATORS = frozenset({"&&", "||", ";", "|", "(", ")", "&"})

_URL = re.compile(r"https?://[^\s\"'<>`)\]|\\]+")
_UUID = re.compile(
    r"(?<![\w-])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![\w-])"
)
_HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")
_TICKET = re.compile(
    r"(?<![\w./-])(?:[A-Z][A-Z0-9]+-\d+|[A-Za-z][A-Za-z0-9]*-"
    r"(?:(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{2,}|\d+)(?:\.\d+)+|"
    r"[A-Za-z][A-Za-z0-9]*-(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{3,})(?![\w/-])"
)
"""Ticket-style ids: ``PROJ-123``, ``spotter-4te``, ``spotter-4te.3``, ``task-12.1``; not a
CSS class (``h-20``) or a version."""
_FENCED_ANY = re.compile(r"```.*?(?:```|\Z)", re.S)
_REDACTED = re.compile(r"\[REDACTED_[^\]]*\]")
_MARKUP = re.compile(r"<[^<>\n]{0,200}>")
"""Markup written in prose (JSX, HTML): code, whose class names are no values."""
EXIT_MARKERS = ("exit code", "exited with code", "exit status", '"exit_code":')
"""How a tool result reports its exit status; a non-zero number after one means failure."""
ERROR_WORDS = ("error", "fatal", "fail", "exception", "denied", "not found", "no such", "cannot")
PENDING_WORDS = ("pending", "in progress", "in_progress", "todo", "to do", "open", "not yet", "[ ]")
DONE_WORDS = ("done", "complete", "closed", "finished", "[x]")


def exit_code(text: str) -> int | None:
    """The exit status a result reports near its start or end, if any."""
    for part in (text[:400].lower(), text[-400:].lower()):
        for marker in EXIT_MARKERS:
            at = part.find(marker)
            number = re.match(r"\s*:?\s*(-?\d+)", part[at + len(marker) :]) if at >= 0 else None
            if number:
                return int(number.group(1))
    return None


def says(line: str, words: Sequence[str]) -> bool:
    low = line.lower()
    return any(w in low for w in words)


def flat(text: str) -> str:
    return " ".join(text.split())


def opening(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def call_args(call: ToolCall) -> dict[str, Any]:
    """A call's arguments; free-form input (Codex's custom ``apply_patch``) as ``input``."""
    if call.raw_arguments is not None:
        try:
            value = json.loads(call.raw_arguments)
        except ValueError:
            return {"input": call.raw_arguments}
        return value if isinstance(value, dict) else {"input": call.raw_arguments}
    return dict(call.arguments)


def shell_command(args: dict[str, Any]) -> str | None:
    for key in SHELL_KEYS:
        value = args.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[1] in ("-c", "-lc"):
                return str(value[2])
            return " ".join(value)
        if isinstance(value, str) and value.strip():
            return value
    return None


# -- files -----------------------------------------------------------------------------


def _shell_words(command: str) -> list[str]:
    body = _HEREDOC_BODY.sub(r"\1", command)
    try:
        lexer = shlex.shlex(body, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:
        return body.split()


def _named_file(word: str) -> bool:
    return (
        bool(word)
        and not word.startswith(("-", "/dev/", "/tmp/", "$"))
        and "$" not in word
        and "*" not in word
        and ("." in word or "/" in word)
    )


def shell_targets(command: str) -> Iterator[str]:
    """Files a shell command changes: patches it applies, redirections, ``tee``,
    ``sed -i``, ``rm``, ``mv``, ``git rm`` / ``git mv``."""
    for m in _PATCH_FILE.finditer(command):
        if "apply_patch" in command or "git apply" in command or "patch" in command:
            yield next(g for g in m.groups() if g)
    words = _shell_words(command)
    segment: list[str] = []
    for i, w in enumerate([*words, ";"]):
        if w in (">", ">>") and i + 1 < len(words) and _named_file(words[i + 1]):
            yield words[i + 1]
        if w in _SEPARATORS or w in ("<", ">", ">>"):
            yield from _segment_targets(segment)
            segment = []
            continue
        segment.append(w)


def _segment_targets(argv: list[str]) -> Iterator[str]:
    while argv and ("=" in argv[0] or argv[0] in ("sudo", "command", "then", "do")):
        argv = argv[1:]
    if not argv:
        return
    prog, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    if prog == "git" and args[:1] in (["rm"], ["mv"]):
        prog, args = args[0], args[1:]
    operands = [a for a in args if not a.startswith("-")]
    if prog == "rm" or prog == "tee" or (prog == "mv" and len(operands) >= 2):
        yield from (a for a in operands if _named_file(a))
    elif prog == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
        yield from (a for a in operands[1:] if _named_file(a))


def script_targets(script: str) -> Iterator[str]:
    """Files a Codex ``exec`` script changes: patches in its string literals, and the shell
    commands it passes to ``tools.exec_command({cmd: ...})``."""
    start = script.find('"')
    while start >= 0:
        end = start + 1
        while end < len(script) and script[end] != '"':
            end += 2 if script[end] == "\\" else 1
        try:
            text = json.loads(script[start : end + 1].replace("\\'", "'"))
        except ValueError:
            text = ""
        before = script[max(0, start - 12) : start]
        if isinstance(text, str) and "*** Begin Patch" in text:
            yield from (next(g for g in m.groups() if g) for m in _PATCH_FILE.finditer(text))
        elif isinstance(text, str) and "cmd" in before:
            yield from shell_targets(text)
        start = script.find('"', end + 1)


_TURNED_DOWN = re.compile(
    r"(?i)\A\W*(?:error:\s*)?(?:the user doesn't want to (?:proceed with this tool use|"
    r"take this action)|user rejected (?:the )?tool use|the user rejected permission to use this|"
    r"(?:patch|exec command) rejected by user)"
)
"""A result that says the person turned the call down (Claude Code, OpenCode, Codex): nothing
ran."""
_EDIT_FAILED = re.compile(r"(?i)\A\s*(?:<tool_use_error>|apply_patch verification failed)")
"""An editing tool's result that says nothing was written, where the importer did not flag it."""


def undone_calls(messages: Iterable[Message]) -> tuple[set[str], set[str]]:
    """Ids of the calls turned down, and of those whose result failed (flagged ``is_error``
    or an editing tool's failure): an edit tool that failed wrote nothing, a shell command
    that failed may have written before failing, a turned-down call did nothing."""
    turned: set[str] = set()
    failed: set[str] = set()
    for m in messages:
        if m.role != "tool" or not m.tool_call_id:
            continue
        if _TURNED_DOWN.match(m.text[:600]):
            turned.add(m.tool_call_id)
        elif m.metadata.get("is_error") or _EDIT_FAILED.match(m.text[:600]):
            failed.add(m.tool_call_id)
    return turned, failed


def edited_files(messages: Sequence[Message]) -> set[str]:
    """Every file the run changed, by its tools' own schemas (see the module docstring);
    an edit whose result shows it did not happen (``undone_calls``) changed nothing."""
    out: set[str] = set()
    open_file: str | None = None  # SWE-agent's editor edits the file it has open
    turned, failed = undone_calls(messages)
    for m in messages:
        notes = m.metadata.get("aider_notes")
        if isinstance(notes, list):
            out.update(n[len(APPLIED) :].strip() for n in notes if str(n).startswith(APPLIED))
        if m.role == "assistant" and not m.tool_calls and not m.metadata.get("is_demo"):
            for block in _FENCED.findall(m.text):
                head = block.strip().split("\n", 1)[0].split()
                if head and head[0] in ("open", "create") and len(head) > 1:
                    open_file = head[1].strip("\"'")
                if head and head[0] in ("create", "edit", "insert") and open_file:
                    out.add(open_file)
        for call in m.tool_calls:
            if call.id in turned:
                continue
            args = call_args(call)
            path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), None)
            command = args.get("command")
            editor = call.name in EDIT_TOOLS | PATCH_TOOLS | {"create", "edit", "insert"} or (
                call.name in EDITOR_TOOLS and command in EDITOR_WRITES
            )
            if call.id in failed and editor:
                continue  # an editing tool that failed wrote nothing
            if call.name in ("open", "create") and path:
                open_file = path
                if call.name == "create":
                    out.add(path)
            elif call.name in ("edit", "insert") and not path and open_file:
                out.add(open_file)
            elif path and (
                (call.name in EDITOR_TOOLS and command in EDITOR_WRITES) or call.name in EDIT_TOOLS
            ):
                out.add(path)
            elif call.name == "exec" and call.raw_arguments:  # Codex code mode: JavaScript
                out.update(script_targets(call.raw_arguments))
            elif call.name in PATCH_TOOLS:
                text = "\n".join(v for k in PATCH_KEYS if isinstance(v := args.get(k), str))
                out.update(next(g for g in m.groups() if g) for m in _PATCH_FILE.finditer(text))
            elif (cmd := shell_command(args)) is not None:
                out.update(shell_targets(cmd))
    return {p.strip() for p in out if p.strip()}


def recalled(path: str, text: str, cwds: Iterable[str] = ()) -> bool:
    """Named in ``text``: the path, its last two or more components, or the path relative
    to a working directory of the run; a bare name as a whole word. A path written with
    backslashes is also named by its forward-slash form (one file, two spellings)."""
    if "\\" in path and "/" not in path and recalled(path.replace("\\", "/"), text, cwds):
        return True
    for cwd in cwds:
        prefix = cwd.rstrip("/") + "/"
        if path.startswith(prefix) and recalled(path[len(prefix) :], text):
            return True
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts:
        return False
    if len(parts) == 1:
        return re.search(rf"(?<![\w.-]){re.escape(parts[0])}(?![\w-])", text) is not None
    return any("/".join(parts[i:]) in text for i in range(len(parts) - 1))


# -- requests, todos, errors, values ---------------------------------------------------


def todo_states(messages: Iterable[Message]) -> list[list[tuple[str, str]]]:
    """Every todo state the run wrote, oldest first: (item text, status)."""
    states: list[list[tuple[str, str]]] = []
    for m in messages:
        for call in m.tool_calls:
            if call.name == "exec" and call.raw_arguments and "update_plan" in call.raw_arguments:
                plan = _exec_plan(call.raw_arguments)  # a whole list, like update_plan's
                if plan:
                    states.append(plan)
                continue
            schema = TODO_TOOLS.get(call.name)
            if schema is None:
                continue
            items = call_args(call).get(schema[0])
            if not isinstance(items, list):
                continue
            state = [
                (str(e[schema[1]]), str(e.get("status", "")).lower())
                for e in items
                if isinstance(e, dict) and isinstance(e.get(schema[1]), str)
            ]
            if state:
                states.append(state)
    return states


def last_failure(messages: Sequence[Message]) -> tuple[str, str | None] | None:
    """The last shell command whose result failed, and the result's last error line."""
    calls: dict[str, ToolCall] = {}
    found: tuple[str, str | None] | None = None
    for m in messages:
        for call in m.tool_calls:
            calls[call.id] = call
        if m.role != "tool" or m.tool_call_id not in calls:
            continue
        command = shell_command(call_args(calls[m.tool_call_id]))
        if command is None:
            continue
        text = m.text
        if not (m.metadata.get("is_error") or exit_code(text) not in (None, 0)):
            continue
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        errors = [  # a line naming the failure, not a bare verdict ("FAIL")
            ln
            for ln in lines
            if says(ln, ERROR_WORDS) and not says(ln[:20], EXIT_MARKERS) and len(ln.split()) > 1
        ]
        found = (command, errors[-1] if errors else None)
    return found


CODE_KEYS = frozenset(
    {
        "content",
        "contents",
        "new_string",
        "old_string",
        "newString",
        "oldString",
        "new_str",
        "old_str",
        "file_text",
        "edits",
        "input",
        "patch",
        "patchText",
        "text",
        "code",
    }
)
"""Arguments that carry code or file content: a URL in an SVG file is not one the agent used."""


def agent_values(messages: Iterable[Message]) -> list[str]:
    """URLs and ids the agent used in at least two messages: in its tool calls and its prose,
    not in code it wrote (file content, patches, fenced blocks, markup) nor in redaction
    markers."""
    uses: Counter[str] = Counter()
    for m in messages:
        if m.role != "assistant" or m.metadata.get("is_demo"):
            continue
        texts = [_MARKUP.sub(" ", _REDACTED.sub(" ", _FENCED_ANY.sub(" ", m.text)))]
        for call in m.tool_calls:
            for key, value in call_args(call).items():
                if key in CODE_KEYS:
                    continue
                text = value if isinstance(value, str) else json.dumps(value)
                texts.append(_HEREDOC_BODY.sub(r"\1", text) if key in SHELL_KEYS else text)
        text = "\n".join(texts)
        found = {u.rstrip(".,;:") for u in _URL.findall(text) if not set(u) & set("${}")}
        for rx in (_UUID, _HASH, _TICKET):
            found.update(rx.findall(text))
        uses.update(found)
    return sorted(v for v, n in uses.items() if n >= MIN_USES)


_PLAN_PAIR = re.compile(
    r'"?(step|status)"?\s*:\s*("(?:[^"\\\n]|\\.)*")\s*,\s*"?(step|status)"?\s*:\s*'
    r'("(?:[^"\\\n]|\\.)*")'
)
"""A plan item in a Codex ``exec`` script, keys quoted or not."""
_TASK_MADE = re.compile(r"Task #(\w+) created successfully")
"""``TaskCreate``'s result names the new task's id."""
_BEAD_MADE = re.compile(r"Created issue:\s*([\w.-]+)")
"""So does ``bd create``'s."""
_GH_MADE = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/(\d+)")
"""``gh issue create`` / ``gh pr create`` print the new URL."""
_COMMIT_LINE = re.compile(r"^\[[^\]\s]+(?: \(root-commit\))? [0-9a-f]{7,40}\] ", re.M)
"""``git commit`` made one: ``[main 4c1d2e9] message``."""
CLOSED_WORDS = frozenset({*DONE, "closed", "resolved", "merged", "deleted"})
INSTRUCTION_MARKS = (
    "<system-reminder>",
    "Base directory for this skill",
    "# AGENTS.md",
    "AGENTS.md instructions",
    "CLAUDE.md",
    "<command-name>",
    "<command-message>",
    "<environment_context>",
    "<permissions instructions>",
    "<user_instructions>",
)
"""Marks of text an agent was given rather than said (in a user-role record)."""
DECISION_WORDS = 7


def _exec_plan(script: str) -> list[tuple[str, str]]:
    """The plan a Codex ``exec`` script hands ``tools.update_plan``: (step, status)."""
    at = script.rfind("tools.update_plan(")
    items: list[tuple[str, str]] = []
    for m in _PLAN_PAIR.finditer(script, at if at >= 0 else len(script)):
        pair = {m.group(1): m.group(2), m.group(3): m.group(4)}
        try:
            step, status = json.loads(pair["step"]), json.loads(pair["status"])
        except (KeyError, ValueError):
            continue
        items.append((str(step), str(status).lower()))
    return items


def _flag_value(argv: list[str], names: Sequence[str]) -> str | None:
    """``--status done`` or ``--status=done``."""
    for word, following in zip(argv, [*argv[1:], None], strict=True):
        name, eq, value = word.partition("=")
        if name in names:
            return value if eq else following
    return None


def _argvs(command: str) -> Iterator[list[str]]:
    argv: list[str] = []
    for w in [*_shell_words(command), ";"]:
        if w in _SEPARATORS or w == "\n":
            if argv:
                yield argv
            argv = []
        else:
            argv.append(w)


def work_items(messages: Sequence[Message]) -> tuple[list[str], list[str]]:
    """(open, closed) work items at the end of the run, each as the words a reader would
    look for: a todo item's opening words, a task's subject, a bead's or PR's id."""
    status: dict[str, str] = {}  # name -> "open" / "closed"
    calls: dict[str, ToolCall] = {}
    for m in messages:
        for call in m.tool_calls:
            calls[call.id] = call
        if m.role != "tool" or m.tool_call_id not in calls:
            continue
        call = calls[m.tool_call_id]
        args = call_args(call)
        text = m.text
        bad = bool(m.metadata.get("is_error")) or exit_code(text) not in (None, 0)
        if call.name == "TaskCreate" and (made := _TASK_MADE.search(text)):
            status[f"#{made.group(1)}"] = "open"
            status.setdefault(f"task:{made.group(1)}", str(args.get("subject", "")))
        elif call.name == "TaskUpdate" and not bad and f"#{args.get('taskId')}" in status:
            st = str(args.get("status", "")).lower()
            if st:
                status[f"#{args.get('taskId')}"] = "closed" if st in CLOSED_WORDS else "open"
        command = shell_command(args)
        for argv in _argvs(command or ""):
            if bad and argv[:2] != ["git", "commit"]:
                continue
            ids = [w for w in argv[2:] if not w.startswith("-") and re.match(r"^[\w.-]+$", w)]
            if argv[:2] == ["bd", "create"] and (made := _BEAD_MADE.search(text)):
                status[made.group(1)] = "open"
            elif argv[:2] in (["bd", "close"], ["bd", "done"]):
                status.update({i: "closed" for i in ids if i in status or "-" in i})
            elif argv[:2] == ["bd", "reopen"]:
                status.update({i: "open" for i in ids})
            elif argv[:2] == ["bd", "update"] and (st := _flag_value(argv, ("--status", "-s"))):
                first = ids[:1]
                status.update({i: "closed" if st in CLOSED_WORDS else "open" for i in first})
            elif argv[:1] == ["gh"] and len(argv) > 2 and argv[1] in ("issue", "pr"):
                if argv[2] == "create" and (made := _GH_MADE.search(text)):
                    status[f"#{made.group(2)}"] = "open"
                elif argv[2] in ("close", "merge"):
                    status.update({f"#{i.lstrip('#')}": "closed" for i in argv[3:4]})
            elif argv[:2] == ["git", "commit"]:
                if bad:
                    status["git commit"] = "open"
                elif _COMMIT_LINE.search(text):
                    status["git commit"] = "closed"
    names = {k: status.get(f"task:{k[1:]}", "") or k for k in status if not k.startswith("task:")}
    open_ = [names[k] for k, v in status.items() if v == "open" and k in names]
    closed = [names[k] for k, v in status.items() if v == "closed" and k in names]
    return [opening(t, TODO_WORDS) for t in open_], [opening(t, TODO_WORDS) for t in closed]


def instruction_texts(messages: Sequence[Message]) -> list[str]:
    """Text the agent was given rather than said: meta records, developer and system
    messages, skill bodies, reminders, AGENTS.md blocks, command templates (flattened)."""
    out: list[str] = []
    calls: dict[str, str] = {}
    for m in messages:
        for call in m.tool_calls:
            calls[call.id] = call.name
        given = m.role == "system" or m.metadata.get("is_meta")
        given = given or (m.role == "user" and any(k in m.text for k in INSTRUCTION_MARKS))
        given = given or (
            m.role == "tool" and calls.get(m.tool_call_id or "") in ("Skill", "skill")
        )
        if given and m.text.strip():
            text = m.text
            if m.role == "user" and not m.metadata.get("is_meta"):  # only the wrapped parts
                text = "\n".join(re.findall(r"<system-reminder>.*?</system-reminder>", text, re.S))
                text = text or m.text
            out.append(flat(text))
    return out


def injected_decisions(given: Sequence[str], said: str, summary: str) -> list[str]:
    """Key Decisions lines whose opening words appear in text the agent was given and not
    in anything the person or the agent said."""
    found: list[str] = []
    for section, line in section_lines(summary):
        if section != "key decisions" or not line.startswith("- "):
            continue
        body = re.sub(r"^(?:User|Assistant):\s*", "", line[2:].strip())
        body = flat(re.sub(r"[*`_]", "", body))
        probe = opening(body, DECISION_WORDS)
        if len(probe.split()) < 4:
            continue
        if any(probe in g for g in given) and probe not in said:
            found.append(probe)
    return found


def said_text(messages: Sequence[Message]) -> str:
    """What the person asked and the assistant wrote, flattened, markup removed."""
    parts = [t for m in messages if (t := request_text(m))]
    parts += [m.text for m in messages if m.role == "assistant"]
    return flat(re.sub(r"[*`_]", "", "\n".join(parts)))


@dataclass
class Probes:
    files: set[str] = field(default_factory=set)
    cwds: set[str] = field(default_factory=set)
    requests: list[str] = field(default_factory=list)
    todos_open: list[str] = field(default_factory=list)
    todos_done: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    items_open: list[str] = field(default_factory=list)
    items_closed: list[str] = field(default_factory=list)
    given: list[str] = field(default_factory=list)
    said: str = ""
    facts: dict[str, str] = field(default_factory=dict)
    """What the stored session knows of where it ran: cwd, git branch, latest date."""


def session_facts(session: Session, messages: Sequence[Message]) -> dict[str, str]:
    """Where and when the session ran: the first working directory its messages report
    (else the one stored with it), the latest git branch, the day of its latest message."""
    facts: dict[str, str] = {}
    for key, name in (("cwd", "cwd"), ("git_branch", "branch")):
        value = session.info.metadata.get(key)
        seen = [c for m in messages if isinstance(c := m.metadata.get(key), str) and c]
        value = (seen[0] if key == "cwd" else seen[-1]) if seen else value
        if isinstance(value, str) and value.strip():
            facts[name] = value.strip()
    dates = [m.created_at for m in messages if m.created_at is not None]
    meta = session.info.metadata
    if "format" in meta and not meta.get("source_updated_at"):
        dates = []  # an import whose records hold no times: its messages bear the import's
    if dates:
        facts["date"] = max(dates).date().isoformat()
    return facts


def oriented(facts: dict[str, str], block: str) -> bool:
    """The orienting text (the system prompt, the checkpoint's orientation block) states
    every fact the session knows (a date also as "February 23, 2026")."""
    for name, value in facts.items():
        if name == "date":
            from datetime import date

            day = date.fromisoformat(value)
            spelled = f"{day.strftime('%B')} {day.day}, {day.year}"
            if value not in block and spelled not in block:
                return False
        elif value not in block:
            return False
    return True


def derive(messages: Sequence[Message]) -> Probes:
    """The probes of one run, from its stored history alone."""
    p = Probes(files=edited_files(messages))
    p.cwds = {c for m in messages if isinstance(c := m.metadata.get("cwd"), str) and c}
    asked = [t for m in messages if (t := request_text(m))]
    said = [t for m in messages if (t := user_words(m))]  # words typed turning a call down too
    if asked:
        p.requests = list(dict.fromkeys([opening(asked[0], REQUEST_WORDS)]))
        p.requests += [o for o in [opening(said[-1], REQUEST_WORDS)] if o not in p.requests]
    states = todo_states(messages)
    if states:
        latest = states[-1]
        p.todos_open = [opening(t, TODO_WORDS) for t, s in latest if s not in DONE]
        was_open = {
            opening(t, TODO_WORDS) for state in states[:-1] for t, s in state if s not in DONE
        }
        p.todos_done = [opening(t, TODO_WORDS) for t, s in latest if s in DONE]
        p.todos_done = [t for t in p.todos_done if t in was_open]
    failure = last_failure(messages)
    if failure is not None:
        command, error = failure
        p.errors = [flat(command.strip().splitlines()[0])[:COMMAND_CHARS]]
        if error:
            p.errors.append(flat(error)[:ERROR_CHARS])
    p.values = agent_values(messages)
    opened, closed = work_items(messages)
    p.items_open = list(dict.fromkeys([*p.todos_open, *opened]))
    p.items_closed = [t for t in dict.fromkeys([*p.todos_done, *closed]) if t not in p.items_open]
    p.given = instruction_texts(messages)
    p.said = said_text(messages)
    return p


# -- the window ------------------------------------------------------------------------


def visible(m: Message) -> str:
    """What the model reads of ``m``: its text and its tool calls' arguments, decoded."""
    parts = [m.text, request_text(m) or ""]
    for call in m.tool_calls:
        parts.append(call.name)
        parts.extend(v if isinstance(v, str) else json.dumps(v) for v in call_args(call).values())
    return "\n".join(parts)


def section_lines(summary: str) -> Iterator[tuple[str, str]]:
    """Each line of a snapshot under its section's title (lower-cased)."""
    section = ""
    for line in summary.splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower()
        else:
            yield section, line


def stale_items(done: Sequence[str], summary: str) -> list[str]:
    """Completed items the summary still lists as pending: under Pending Tasks, or on a
    line that says pending / in progress / open without saying done."""
    pending_lines: list[str] = []
    for section, line in section_lines(summary):
        in_pending = section.startswith("pending")
        if (in_pending or says(line, PENDING_WORDS)) and not says(line, DONE_WORDS):
            pending_lines.append(flat(line))
    return [t for t in done if any(_names(t, line) for line in pending_lines)]


def _names(item: str, line: str) -> bool:
    """``line`` names ``item`` as a whole: ``spotter-fum`` is not ``spotter-fum.5``."""
    return re.search(rf"(?<![\w.-]){re.escape(item)}(?![\w-]|\.\w)", line) is not None


@dataclass
class RunResult:
    name: str
    messages: int
    checkpoints: int
    compacted: bool
    totals: dict[str, int]
    found: dict[int, dict[str, int]]
    misses: dict[int, dict[str, list[str]]]


def answer(p: Probes, session: Session, size: int) -> tuple[dict[str, int], dict[str, list[str]]]:
    """How many probes of each category the window at ``size`` answers, and which not (a
    window that cannot be built answers none)."""
    fresh = session.store.get_session(session.id)  # as a new `threadline context` call: no
    prompt = build_system_prompt(BASE_PROMPT, session=fresh.info.metadata)  # as it gives one
    try:  # view state (a stable trim point) carried over from the build at another size
        window = build_context(
            fresh, policy=ContextPolicy(context_limit=size), system_prompt=prompt
        )
    except ContextOverflow as exc:
        print(f"{session.id} @{size}: {exc}", file=sys.stderr)
        messages: list[Message] = []
    else:
        messages = window.messages
    text = "\n".join(visible(m) for m in messages)
    flat_text = flat(text)
    summary = "\n".join(m.text for m in messages if m.summary)
    orienting = "\n".join(  # what the process says of itself (its date, its directory) is no
        line  # statement about the session
        for m in messages
        if m.summary or m.role == "system"
        for line in m.text.splitlines()
        if "of this process" not in line and not line.startswith("This process runs in")
    )
    said = flat(summary) if summary else flat_text  # the snapshot must say what is open
    misses: dict[str, list[str]] = {
        "open_items": [
            t
            for t in p.items_open
            if (t not in said if t != "git commit" else not _says_uncommitted(summary))
        ],
        "stale": stale_items(p.items_closed, summary),
        "injected": injected_decisions(p.given, p.said, summary),
        "orientation": [] if not p.facts or oriented(p.facts, orienting) else [str(p.facts)],
        "files": sorted(f for f in p.files if not recalled(f, text, p.cwds)),
        "requests": [r for r in p.requests if r not in flat_text],
        "todos_open": [t for t in p.todos_open if t not in flat_text],
        "todos_stale": stale_items(p.todos_done, summary),
        "errors": [e for e in p.errors if e not in flat_text],
        "values": [v for v in p.values if v not in text],
    }
    found = {
        "files": len(p.files) - len(misses["files"]),
        "requests": len(p.requests) - len(misses["requests"]),
        "todos_open": len(p.todos_open) - len(misses["todos_open"]),
        "todos_stale": len(misses["todos_stale"]),
        "errors": len(p.errors) - len(misses["errors"]),
        "values": len(p.values) - len(misses["values"]),
        "open_items": len(p.items_open) - len(misses["open_items"]),
        "stale": len(misses["stale"]),
        "injected": len(misses["injected"]),
        "orientation": int(bool(p.facts)) - len(misses["orientation"]),
    }
    return found, misses


def _says_uncommitted(summary: str) -> bool:
    """A line saying the last commit was not made (a hook rejected it, it failed)."""
    return any(
        "commit" in line.lower()
        and says(line, ("not committed", "nothing was committed", "rejected", "failed"))
        for line in summary.splitlines()
    )


def run_source(source: Source, store_url: str, sizes: Sequence[int]) -> Iterator[RunResult]:
    store = open_store(store_url)
    try:
        for result in Syncer(store).sync_source(source):
            if result.status is SyncStatus.FAILED:
                print(f"not imported: {result.source}: {result.error}", file=sys.stderr)
                continue
            if result.session_id is None:
                continue
            session = store.get_session(result.session_id)
            messages = list(session.iter_messages())
            probes = derive(messages)
            probes.facts = session_facts(session, messages)
            compaction = Compactor(ExtractiveSummarizer(), policy=ContextPolicy()).compact(
                session, force=True
            )
            session.refresh()
            totals = {
                "files": len(probes.files),
                "requests": len(probes.requests),
                "todos_open": len(probes.todos_open),
                "todos_stale": len(probes.todos_done),
                "errors": len(probes.errors),
                "values": len(probes.values),
                "open_items": len(probes.items_open),
                "stale": len(probes.items_closed),
                "injected": 0,
                "orientation": int(bool(probes.facts)),
            }
            found: dict[int, dict[str, int]] = {}
            misses: dict[int, dict[str, list[str]]] = {}
            for size in sizes:
                found[size], misses[size] = answer(probes, session, size)
            name = result.source + (f" #{result.run}" if result.run else "")
            yield RunResult(
                name,
                len(messages),
                result.checkpoints_added,
                compaction.compacted,
                totals,
                found,
                misses,
            )
    finally:
        store.close()


def recall_table(runs: Sequence[RunResult], sizes: Sequence[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for size in sizes:
        row: dict[str, Any] = {}
        for cat in CATEGORIES:
            total = sum(r.totals[cat] for r in runs)
            got = sum(r.found[size][cat] for r in runs)
            if cat in COUNTS:
                row[cat] = got  # a count of faults: 0 expected
            else:
                row[cat] = round(got / total, 4) if total else None
        out[size] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="transcripts directory")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--only", help="only sources whose path contains this")
    ap.add_argument("--misses", action="store_true", help="list each run's missed probes")
    ap.add_argument(
        "--sizes", default=",".join(str(s) for s in SIZES), help="window sizes, comma-separated"
    )
    args = ap.parse_args()
    if not args.root.is_dir():
        sys.exit(f"no transcripts at {args.root}")
    sizes = [int(s) for s in args.sizes.split(",")]
    runs: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="threadline-probes-") as tmp:
        for n, source in enumerate(find_sources([str(args.root)])):
            if args.only and args.only not in source.name:
                continue
            runs.extend(run_source(source, f"sqlite://{tmp}/{n}.db", sizes))
    table = recall_table(runs, sizes)
    if args.json:
        doc = {
            "sizes": {str(size): table[size] for size in sizes},
            "totals": {c: sum(r.totals[c] for r in runs) for c in CATEGORIES},
            "runs": [
                {
                    "run": r.name,
                    "messages": r.messages,
                    "imported_checkpoints": r.checkpoints,
                    "compacted": r.compacted,
                    "totals": r.totals,
                    "found": {str(s): r.found[s] for s in sizes},
                    **({"misses": {str(s): r.misses[s] for s in sizes}} if args.misses else {}),
                }
                for r in runs
            ],
        }
        print(json.dumps(doc, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    totals = {c: sum(r.totals[c] for r in runs) for c in CATEGORIES}
    t = Table(title=f"probes over {len(runs)} runs: recall per category (todos_stale: a count)")
    t.add_column("window")
    for cat in CATEGORIES:
        t.add_column(f"{cat} ({totals[cat]})", justify="right")
    for size in sizes:
        cells = []
        for cat in CATEGORIES:
            v = table[size][cat]
            cells.append("-" if v is None else (str(v) if cat in COUNTS else f"{v:.1%}"))
        t.add_row(f"{size:,}", *cells)
    Console(width=200).print(t)
    if args.misses:
        for r in runs:
            for size in sizes:
                for cat, missed in r.misses[size].items():
                    if missed:
                        print(f"{r.name} @{size}: {cat}: {missed[:8]}")


if __name__ == "__main__":
    main()
