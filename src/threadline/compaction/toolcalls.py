"""What tool calls did, read from their names, arguments and results.

Agents name their tools differently (``Edit``, ``str_replace_editor``,
``apply_patch``, ``write_file``, ``Bash``, ``exec_command``), so a tool's
effect on files is read from several signals: an editor's ``command``
argument (``{"command": "str_replace", "path": ...}``), the words in the tool
name (``write``, ``edit``, ``delete``, ``move``, ...), shell commands that
change files (``rm``, ``mv``, ``cp``, ``touch``, ``sed -i``, ``tee``,
redirections; heredoc bodies are not commands), and patch text (Codex's
``*** Update File:``, unified diffs' ``+++ b/``). Todo-list tools
(``TodoWrite``, ``update_plan``) are recognised by their arguments: a list of
items that each carry a ``status``.

A tool result is told in brief: a test summary and the last error line win
over the first line; JSON shows its scalar fields; a file read is reported by
size; a bare "ok" / ``{"ok": true}`` / "file updated successfully" is a
confirmation and carries no data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from threadline.compaction.snapshot import clip_words, code_span
from threadline.compaction.values import extract_error_lines
from threadline.messages import ToolCall


def _split(text: str) -> tuple[str, ...]:
    """The words of ``text``: long word lists stay readable as one string."""
    return tuple(text.split())


BRIEF_MAX_WORDS = 30
ARG_HINT_MAX_WORDS = 12
MAX_PATH_CHARS = 300
"""A path argument longer than this (or spanning lines) is not a path."""
BRIEF_SCAN_CHARS = 8_000
"""A long result is briefed from this many characters at each end."""
CONFIRMATION_MAX_CHARS = 400

_WRITE_ACTIONS: dict[str, str] = {
    word: action
    for action, names in (
        ("written", "write save overwrite"),
        ("created", "create new touch mkdir"),
        (
            "edited",
            "edit multiedit replace str_replace undo_edit patch apply_patch update modify "
            "insert append",
        ),
        ("deleted", "delete remove rm unlink"),
        ("moved", "move mv rename"),
        ("copied", "copy cp"),
    )
    for word in names.split()
}
_READ_ACTIONS = frozenset(_split("read view cat open head tail"))
"""File reads: their results are file contents, mined only for error lines."""
_SEARCH_ACTIONS = frozenset(_split("glob grep search find ls list"))
"""Searches and listings: their results are data (which files match), mined like any result."""
_SHELL_NAMES = frozenset(
    _split(
        "bash shell sh zsh exec execute run terminal command cmd powershell local_shell "
        "exec_command run_command run_shell"
    )
)
_VERB_ARG_KEYS = _split("command action operation op mode")
PATH_ARG_KEYS = _split(
    "path file_path filepath filename file target_file target_path notebook_path paths files "
    "file_paths"
)
SOURCE_ARG_KEYS = _split("old_path source src from from_path")
DEST_ARG_KEYS = _split("new_path destination dest target to to_path")
SHELL_ARG_KEYS = _split("command cmd script commands")
_HINT_ARG_KEYS = _split("command cmd pattern query q url path file_path filename target_file args")
CODE_ARG_KEYS = frozenset(
    _split(
        "content contents new_string old_string new_str old_str old new old_text new_text "
        "replacement search file_text text code body data patch diff input edits"
    )
)
_TODO_TEXT_KEYS = _split("content step task title description text name")
DONE_STATUSES = frozenset(_split("completed complete done finished cancelled canceled"))
_CONFIRMATIONS = frozenset(
    _split(
        "ok okay success successful succeeded done true completed complete saved updated "
        "written null none applied accepted"
    )
)
_CONFIRMATION_KEYS = frozenset(_split("ok success status result done error errors"))


_NAME_TOKENS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SUMMARY_LINE = re.compile(
    r"\b\d+\s+(?:passed|failed|errors?|skipped|warnings?|tests?|files?\s+changed|"
    r"insertions?|deletions?|deselected|xfailed|rows?)\b|\bexit\s+(?:code|status)\s*:?\s*-?\d+|"
    r"\bexited\s+with\s+(?:code|status)\s+-?\d+|"
    r"\breturn(?:ed)?\s+code\s*:?\s*-?\d+",
    re.I,
)
_CONFIRMATION_LINE = re.compile(
    r"^(?:the\s+)?file\s+\S.{0,200}\s(?:has\s+been|was)\s+(?:successfully\s+)?"
    r"(?:updated|created|written|saved|edited|modified|deleted)(?:\s+successfully)?\.?$|"
    r"^(?:file\s+)?(?:created|written|updated|saved|deleted)\s+successfully\b.{0,200}$|"
    r"^successfully\s+(?:wrote|written|created|updated|saved|edited|applied|deleted)\b.{0,200}$|"
    r"^todos\s+have\s+been\s+modified\s+successfully\b.*$|^plan\s+updated\.?$|"
    r"^(?:your\s+)?command\s+ran\s+successfully\s+and\s+did\s+not\s+produce\s+any\s+output\.?$",
    re.I | re.S,
)
_RUNNER_HEADER = re.compile(
    r"\AChunk ID: \S+\nWall time: [^\n]*\n(?P<status>Process [^\n]*)\n"
    r"(?:Original token count: [^\n]*\n)?Output:\n?"
)
"""Codex wraps command output in a header; the status line is the part worth keeping."""
_PATCH_FILE = re.compile(
    r"(?m)^\*\*\*\s+(?P<op>Add|Update|Delete)\s+File:\s*(?P<path>\S.*?)\s*$|"
    r"^\*\*\*\s+Move\s+to:\s*(?P<moved>\S.*?)\s*$|^\+\+\+\s+(?:b/)?(?P<diff>\S+)"
)
_PATCH_OPS = {"Add": "created", "Update": "edited", "Delete": "deleted"}
_SHELL_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_REDIRECT = re.compile(r"(?<![<>\d&])(>>?)\s*(?!&)([^\s;&|<>()]+)")
_PATHISH = re.compile(r"[/.]|^[A-Z][a-z]+file$")
_DEVICES = frozenset({"/dev/null", "/dev/stderr", "/dev/stdout"})


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def plausible_path(text: str) -> bool:
    return 0 < len(text) <= MAX_PATH_CHARS and "\n" not in text and text.strip() == text


# -- tool calls ----------------------------------------------------------------------


def call_action(call: ToolCall) -> str | None:
    """What a call does to files: an action ("edited", ...), "read", "search", "shell" or None.

    "read" needs a path argument: ``get_user_details`` returns data, not a file.
    """
    tokens = [t.lower() for t in _NAME_TOKENS.findall(call.name)]
    joined = "_".join(tokens)
    if joined in _SHELL_NAMES or any(t in _SHELL_NAMES for t in tokens):
        return "shell"
    for key in _VERB_ARG_KEYS:  # an editor tool: {"command": "str_replace", "path": ...}
        verb = call.arguments.get(key)
        if isinstance(verb, str) and verb.strip() and " " not in verb.strip():
            word = verb.strip().lower()
            if word in _WRITE_ACTIONS:
                return _WRITE_ACTIONS[word]
            if word in _READ_ACTIONS:
                return "read"
    for combo in ("str_replace", "apply_patch", "undo_edit"):
        if combo in joined:
            return _WRITE_ACTIONS[combo]
    if "todo" in tokens or "plan" in tokens:
        return None
    for token in tokens:
        if token in _WRITE_ACTIONS:
            return _WRITE_ACTIONS[token]
    if any(t in _READ_ACTIONS for t in tokens) and path_args(call, PATH_ARG_KEYS):
        return "read"
    return "search" if any(t in _SEARCH_ACTIONS for t in tokens) else None


def path_args(call: ToolCall, keys: Sequence[str]) -> list[str]:
    return [
        s.strip()
        for key in keys
        for s in strings(call.arguments.get(key))
        if plausible_path(s.strip())
    ]


def shell_text(call: ToolCall) -> str | None:
    for key in SHELL_ARG_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            shell = value[0].endswith(("bash", "sh", "zsh")) and value[1:2] in (["-c"], ["-lc"])
            return str(value[2]) if shell and len(value) >= 3 else " ".join(value)
    return None


def split_heredocs(command: str) -> tuple[str, str]:
    """A shell script's command lines, and its heredoc bodies (code or data, not commands)."""
    commands: list[str] = []
    bodies: list[str] = []
    until: str | None = None
    for line in command.splitlines():
        if until is not None:
            if line.strip() == until:
                until = None
            else:
                bodies.append(line)
            continue
        commands.append(line)
        heredoc = _HEREDOC.search(line)
        if heredoc:
            until = heredoc.group(1)
    return "\n".join(commands), "\n".join(bodies)


def is_patch(text: str) -> bool:
    """Patch text (Codex's ``*** Begin Patch`` or a unified diff): code, not values."""
    return "*** Begin Patch" in text or ("\n+++ " in text and "\n--- " in text)


def shell_file_ops(command: str) -> list[tuple[str, str]]:
    """(action, path) pairs a shell command performs on files; heredoc bodies are skipped."""
    ops: list[tuple[str, str]] = []
    for line in split_heredocs(command)[0].splitlines():
        for op, target in _REDIRECT.findall(line):
            if target not in _DEVICES and _PATHISH.search(target):
                ops.append(("edited" if op == ">>" else "written", target.strip("'\"")))
        for segment in _SHELL_SPLIT.split(line):
            ops.extend(_segment_ops(segment.split()))
    return ops


def _segment_ops(argv: list[str]) -> list[tuple[str, str]]:
    while argv and ("=" in argv[0] or argv[0] in ("sudo", "command", "exec")):
        argv = argv[1:]
    if not argv:
        return []
    prog, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    if prog == "git" and args and args[0] in ("rm", "mv"):
        prog, args = args[0], args[1:]
    operands = [a.strip("'\"") for a in args if not a.startswith("-")]
    operands = [a for a in operands if a and not a.startswith(("<", ">", "$(")) and "*" not in a]
    if prog in ("rm", "unlink", "rmdir"):
        return [("deleted", a) for a in operands]
    if prog in ("touch", "mkdir"):
        return [("created", a) for a in operands]
    if prog in ("mv", "cp") and len(operands) >= 2:
        action = "moved" if prog == "mv" else "copied"
        return [(action, f"{a} -> {operands[-1]}") for a in operands[:-1]]
    if prog == "sed" and any(a.startswith("-i") for a in args) and operands:
        return [("edited", operands[-1])]
    if prog == "tee" and operands:
        return [("edited" if "-a" in args else "written", a) for a in operands]
    return []


def patch_ops(text: str) -> list[tuple[str, str]]:
    ops: list[tuple[str, str]] = []
    for m in _PATCH_FILE.finditer(text):
        if m.group("op"):
            ops.append((_PATCH_OPS[m.group("op")], m.group("path")))
        elif m.group("moved"):
            ops.append(("moved", m.group("moved")))
        elif m.group("diff") and m.group("diff") != "/dev/null":
            ops.append(("edited", m.group("diff")))
    return ops


def todo_items(call: ToolCall) -> list[tuple[str, str]] | None:
    """(text, status) of a todo-list tool's whole list, or None when the call holds none."""
    for value in call.arguments.values():
        if not isinstance(value, list) or not value:
            continue
        if not all(isinstance(e, dict) and "status" in e for e in value):
            continue
        items = [
            (next(e[k] for k in _TODO_TEXT_KEYS if isinstance(e.get(k), str)), str(e["status"]))
            for e in value
            if any(isinstance(e.get(k), str) for k in _TODO_TEXT_KEYS)
        ]
        if items:
            return [(text, status.lower()) for text, status in items]
    return None


def describe_call(call: ToolCall) -> str:
    """``name`` plus its most telling argument, briefly."""
    hint = ""
    for key in _HINT_ARG_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip():
            hint = code_span(clip_words(value, ARG_HINT_MAX_WORDS))
            break
    else:
        pairs = [
            f"{k}={v}"
            for k, v in call.arguments.items()
            if isinstance(v, str | int | float) and not isinstance(v, bool)
            if k not in CODE_ARG_KEYS and str(v).strip()
        ][:3]
        if pairs:
            hint = clip_words(", ".join(pairs), ARG_HINT_MAX_WORDS)
        elif call.raw_arguments:
            hint = code_span(clip_words(call.raw_arguments, ARG_HINT_MAX_WORDS))
    return f"{code_span(call.name)} {hint}".strip()


def _ends(text: str) -> str:
    if len(text) <= 2 * BRIEF_SCAN_CHARS:
        return text
    return text[:BRIEF_SCAN_CHARS] + "\n" + text[-BRIEF_SCAN_CHARS:]


# -- tool results --------------------------------------------------------------------


def is_confirmation(text: str) -> bool:
    """A bare "it worked": nothing an agent needs to know later."""
    stripped = text.strip()
    if not stripped:
        return True
    if len(stripped) > CONFIRMATION_MAX_CHARS:
        return False
    if stripped.strip(" .!\"'()[]").lower() in _CONFIRMATIONS:
        return True
    if stripped[0] in "{[":
        try:
            data = json.loads(stripped)
        except ValueError:
            return False
        if isinstance(data, dict):
            flags = (True, False, None, "ok", "OK", "success", "done")
            return set(data) <= _CONFIRMATION_KEYS and all(
                v in flags or v == {} for v in data.values()
            )
        return data in ([], True, None)
    return bool(_CONFIRMATION_LINE.match(stripped))


def _json_brief(data: Any) -> str | None:
    if isinstance(data, dict):
        pairs = []
        for key, value in data.items():
            if isinstance(value, str | int | float | bool) or value is None:
                pairs.append(f"{key}: {value if isinstance(value, str) else json.dumps(value)}")
            elif isinstance(value, list | dict):
                pairs.append(
                    f"{key}: {len(value)} {'items' if isinstance(value, list) else 'keys'}"
                )
        return ", ".join(pairs) or None
    if isinstance(data, list):
        first = _json_brief(data[0]) if data else None
        return f"{len(data)} items" + (f"; first: {first}" if first else "")
    return None


def brief_result(text: str, *, read: bool = False, limit: int = BRIEF_MAX_WORDS) -> str | None:
    """A one-line account of a tool result, or None for a bare confirmation.

    A test summary and the last error line win over the first line, because
    they are what an agent resuming the work needs; a file read is reported by
    its size (its content is in the file); JSON shows its scalar fields.
    """
    header = _RUNNER_HEADER.match(text)
    if header:
        status = header.group("status").removeprefix("Process ").strip()
        rest = brief_result(text[header.end() :], read=read, limit=limit)
        return f"{status}; {rest}" if rest else status
    if is_confirmation(text):
        return None
    stripped = text.strip()
    lines = stripped.count("\n") + 1
    if read:
        return f"{lines} lines"
    if stripped[0] in "{[":
        try:
            brief = _json_brief(json.loads(stripped))
        except ValueError:
            brief = None
        if brief:
            return clip_words(brief, limit)
    scan = _ends(stripped)
    summaries = [ln.strip(" =-") for ln in scan.splitlines() if _SUMMARY_LINE.search(ln)]
    errors = [v.text for v in extract_error_lines(scan)]
    parts = summaries[-1:]
    if errors and not any(errors[-1] in p for p in parts):
        parts.append(errors[-1])
    if not parts:
        parts = [next((ln.strip() for ln in scan.splitlines() if any(c.isalnum() for c in ln)), "")]
    brief = clip_words("; ".join(p for p in parts if p), limit)
    return f"{brief} ({lines} lines)" if lines > 1 else brief


__all__ = [
    "CODE_ARG_KEYS",
    "DEST_ARG_KEYS",
    "DONE_STATUSES",
    "PATH_ARG_KEYS",
    "SHELL_ARG_KEYS",
    "SOURCE_ARG_KEYS",
    "brief_result",
    "call_action",
    "describe_call",
    "is_confirmation",
    "is_patch",
    "patch_ops",
    "path_args",
    "plausible_path",
    "shell_file_ops",
    "shell_text",
    "split_heredocs",
    "strings",
    "todo_items",
]
