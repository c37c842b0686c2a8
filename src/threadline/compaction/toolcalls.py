"""What tool calls did, read from their names, arguments and results.

Agents name their tools differently (``Edit``, ``str_replace_editor``,
``apply_patch``, ``write_file``, ``Bash``, ``exec_command``), so a tool's
effect on files is read from several signals: an editor's ``command``
argument (``{"command": "str_replace", "path": ...}``), the words in the tool
name (``write``, ``edit``, ``delete``, ``move``, ...), shell commands that
change files (``rm``, ``mv``, ``cp``, ``touch``, ``sed -i``, ``tee``,
redirections; heredoc bodies are not commands), and patch text (Codex's
``*** Update File:``, unified diffs' ``+++ b/``), also when a shell command
feeds it to ``apply_patch``. SWE-agent's ``edit`` / ``insert`` change the file
``open`` opened, and Aider logs "Applied edit to". ``FileTracker`` follows a
session through all of these and keeps one record per file, its path resolved
against the working directory the messages report (``metadata["cwd"]``) and
shown relative to it; ``edited_files`` is its one-call form. Todo-list tools
(``TodoWrite``, ``update_plan``) are recognised by their arguments: a list of
items that each carry a ``status``.

A tool result is told in brief: a test summary and the last error line win
over the first line; JSON shows its scalar fields; a file read is reported by
size; a bare "ok" / ``{"ok": true}`` / "file updated successfully" is a
confirmation and carries no data.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from threadline.compaction.applied import Undo, not_applied
from threadline.compaction.file_edit import FileEdit
from threadline.compaction.snapshot import clip_words, code_span
from threadline.compaction.values import extract_error_lines, split_words
from threadline.messages import Message, ToolCall
from threadline.rejections import rejected

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
_READ_ACTIONS = frozenset(split_words("read view cat open head tail"))
"""File reads: their results are file contents, mined only for error lines."""
_SEARCH_ACTIONS = frozenset(split_words("glob grep search find ls list"))
"""Searches and listings: their results are data (which files match), mined like any result."""
_SHELL_NAMES = frozenset(
    split_words(
        "bash shell sh zsh exec execute run terminal command cmd powershell local_shell "
        "exec_command run_command run_shell"
    )
)
_VERB_ARG_KEYS = split_words("command action operation op mode")
PATH_ARG_KEYS = split_words(
    "path file_path filepath filename file target_file target_path notebook_path paths files "
    "file_paths"
)
SOURCE_ARG_KEYS = split_words("old_path source src from from_path")
DEST_ARG_KEYS = split_words("new_path destination dest target to to_path")
SHELL_ARG_KEYS = split_words("command cmd script commands")
_HINT_ARG_KEYS = split_words(
    "command cmd pattern query q url path file_path filename target_file args"
)
CODE_ARG_KEYS = frozenset(
    split_words(
        "content contents new_string old_string new_str old_str old new old_text new_text "
        "replacement search file_text text code body data patch diff input edits patch_text"
    )
)
_TODO_TEXT_KEYS = split_words("content step task title description text name")
DONE_STATUSES = frozenset(split_words("completed complete done finished cancelled canceled"))
_CONFIRMATIONS = frozenset(
    split_words(
        "ok okay success successful succeeded done true completed complete saved updated "
        "written null none applied accepted"
    )
)
_CONFIRMATION_KEYS = frozenset(split_words("ok success status result done error errors"))


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
_CODEX_FILE = re.compile(r"^\*\*\*\s+(?P<op>Add|Update|Delete)\s+File:\s*(?P<path>\S.*?)\s*$")
_PATCH_OPS = {"Add": "created", "Update": "edited", "Delete": "deleted"}
_PATCH_KEYS = split_words("input patch diff patch_text")
_PATCH_COMMAND = re.compile(r"\b(?:apply_patch|applypatch|git\s+apply|patch)\b")
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*['\"]?(\w+)['\"]?")
_REDIRECT_OP = re.compile(r"\d*(?:>>|>\||>&|>)|&>>?|\d*(?:<<<|<<-?|<&|<>|<)")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@#?*$!-]")
_SEPARATORS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", "(", ")", "\n"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PREFIX_COMMANDS = frozenset(
    split_words("sudo command exec env time nohup nice xargs builtin then do else")
)
"""Words before the command proper (``if ...; then rm x; fi`` runs ``rm x``)."""
_GIT_VALUE_OPTIONS = frozenset({"-s", "--source"})
_SUFFIX = re.compile(r"^\.\w+$")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_PATHISH = re.compile(r"[/.]|^[A-Z][a-z]+file$")
_BUILD_OUTPUTS = frozenset(
    split_words(
        "build dist out target node_modules __pycache__ .pytest_cache .mypy_cache .ruff_cache "
        ".cache .next coverage htmlcov _build deps"
    )
)
"""Directories a clean removes: deleting them changes no source."""
_SCRATCH_PREFIXES = ("/dev/", "/proc/", "/tmp/", "/var/tmp/", "/private/tmp/")
"""Where a command's throw-away output goes; not files of the project."""
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:\\")
_EDIT_TEXT_KEYS = split_words(
    "old_string new_string old_str new_str old new old_text new_text search replace "
    "replacement text"
)
"""The parts of an editor call that hold the changed text (a whole new file is not a change)."""
_DEFINITIONS = (
    re.compile(
        r"\s*(?:(?:export|default|public|private|protected|internal|static|async|abstract|final|"
        r"override|pub(?:\([\w:]+\))?|unsafe|extern|inline)\s+)*"
        r"(?:def|defp|defmacro|defmacrop|defmodule|defimpl|defprotocol|function\*?|class|fn|func|"
        r"interface|struct|enum|trait|impl|module|type)\s+(?:\([^)]*\)\s*)?"
        r"(?P<name>[A-Za-z_$][\w$.!?]*)"
    ),
    re.compile(r"(?:export\s+)?(?:const|let|var)\s+(?P<name>[A-Za-z_$][\w$]*)\s*="),
    re.compile(r"(?P<name>[A-Z][A-Z0-9_]{2,})\s*(?::[^=]*)?=(?!=)"),
)
"""A definition's name: a function, class or module anywhere; a binding or constant at the
top level (unindented) only."""
_PROSE_FILE = re.compile(
    r"\.(?:md|markdown|txt|rst|adoc|json|jsonl|ya?ml|toml|ini|cfg|csv|lock|html?|css|scss|svg|xml)$",
    re.I,
)
"""Files whose changes name no definitions."""
_SWE_EDITS = frozenset(split_words("edit insert append edit_file"))
_SWE_VIEWS = frozenset(
    split_words("open goto scroll_up scroll_down search_file search_dir find_file submit view")
)
_SWE_OPENERS = frozenset(split_words("open create open_file"))
_OPEN_FILE = re.compile(r"\(Open file: (?P<path>[^)\n]+)\)")
_AIDER_APPLIED = re.compile(r"^Applied edit to (?P<path>\S.*?)\s*$")
_AIDER_CREATE = re.compile(r"^Create new file\?.*:\s*y(?:es)?\s*$", re.I)


def canonical_key(key: str) -> str:
    """An argument name without case, underscores or dashes: each format spells its schema
    its own way (``file_path`` in Claude Code, ``filePath`` in OpenCode, ``oldText`` in Pi)."""
    return key.replace("_", "").replace("-", "").lower()


_CODE_KEYS = frozenset(canonical_key(k) for k in CODE_ARG_KEYS)


def is_code_key(key: str) -> bool:
    """An argument that carries code or file content (however the schema spells it)."""
    return canonical_key(key) in _CODE_KEYS


def argument(arguments: Mapping[str, Any], key: str) -> Any:
    """``arguments[key]``, found under any spelling of ``key`` (see ``canonical_key``)."""
    if key in arguments:
        return arguments[key]
    want = canonical_key(key)
    return next((v for k, v in arguments.items() if canonical_key(k) == want), None)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def plausible_path(text: str) -> bool:
    return 0 < len(text) <= MAX_PATH_CHARS and "\n" not in text and text.strip() == text


# -- tool calls ----------------------------------------------------------------------

SUBAGENT_TOOLS = frozenset({"Task", "Agent", "task", "spawn_pi", "spawn_agent", "subagent"})
"""Tools that hand work to a subagent and answer with its report: their prompt is the
subagent's brief, not something the agent itself did."""


def call_action(call: ToolCall) -> str | None:
    """What a call does to files: an action ("edited", ...), "read", "search", "shell" or None.

    "read" needs a path argument: ``get_user_details`` returns data, not a file.
    """
    tokens = [t.lower() for t in _NAME_TOKENS.findall(call.name)]
    joined = "_".join(tokens)
    if joined in _SHELL_NAMES or any(t in _SHELL_NAMES for t in tokens):
        return "shell"
    for key in _VERB_ARG_KEYS:  # an editor tool: {"command": "str_replace", "path": ...}
        verb = argument(call.arguments, key)
        if isinstance(verb, str) and verb.strip() and " " not in verb.strip():
            word = verb.strip().lower()
            if word in _WRITE_ACTIONS:
                return _WRITE_ACTIONS[word]
            if word in _READ_ACTIONS:
                return "read"
    for combo in ("str_replace", "apply_patch", "undo_edit"):
        if combo in joined:
            return _WRITE_ACTIONS[combo]
    if any(t.startswith(("todo", "plan")) for t in tokens):
        return None  # TodoWrite, todowrite, write_todos, update_plan: a list, not a file
    for token in tokens:
        if token in _WRITE_ACTIONS:
            return _WRITE_ACTIONS[token]
    if any(t in _READ_ACTIONS for t in tokens) and path_args(call, PATH_ARG_KEYS):
        return "read"
    return "search" if any(t in _SEARCH_ACTIONS for t in tokens) else None


def path_args(call: ToolCall, keys: Sequence[str]) -> list[str]:
    """The plausible paths among ``keys``' arguments (each spelling of a key read once)."""
    canon = dict.fromkeys(canonical_key(k) for k in keys)
    found = [v for k, v in call.arguments.items() if canonical_key(k) in canon]
    return [s.strip() for value in found for s in strings(value) if plausible_path(s.strip())]


_JS_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_SCRIPT_CALL = re.compile(r"\btools\.(?P<name>\w+)\s*\(")
_SCRIPT_ARG = re.compile(r'(?P<key>\w+)\s*:\s*(?P<value>"(?:[^"\\\n]|\\.)*")')
SCRIPT_SCAN_CHARS = 20_000
"""How far into a nested call's arguments a script is read for their string values."""


def _js_string(literal: str) -> str | None:
    """A double-quoted JavaScript string literal's text (JSON's escapes, and ``\\'``)."""
    try:
        text = json.loads(literal.replace("\\'", "'"))
    except ValueError:
        return None
    return text if isinstance(text, str) else None


def script_calls(call: ToolCall) -> list[ToolCall]:
    """The tool calls a code-mode tool's script makes, as calls of their own.

    Codex's ``exec`` tool takes JavaScript that calls ``tools.exec_command({cmd: "...",
    workdir: "..."})`` and ``tools.apply_patch(patch)`` with the patch in a string
    literal; what those calls change is what the ``exec`` call changes.
    """
    script = call.raw_arguments
    if not script or "tools." not in script:
        return []
    out: list[ToolCall] = []
    for i, m in enumerate(_SCRIPT_CALL.finditer(script)):
        name = m.group("name")
        if name == "apply_patch":
            continue  # its patch is a literal anywhere in the script: read below
        end = script.find("})", m.end(), m.end() + SCRIPT_SCAN_CHARS)
        body = script[m.end() : end if end >= 0 else m.end() + SCRIPT_SCAN_CHARS]
        args = {
            a.group("key"): text
            for a in _SCRIPT_ARG.finditer(body)
            if (text := _js_string(a.group("value"))) is not None
        }
        if args:
            out.append(ToolCall(id=f"{call.id}/{i}", name=name, arguments=args))
    if "apply_patch" in script:
        for j, literal in enumerate(_JS_STRING.finditer(script)):
            text = _js_string(literal.group())
            if text and is_patch(text):
                out.append(ToolCall(id=f"{call.id}/p{j}", name="apply_patch", raw_arguments=text))
    return out


def shell_text(call: ToolCall) -> str | None:
    nested = [t for c in script_calls(call) if (t := shell_text(c))]
    if nested:
        return "\n".join(nested)
    for key in SHELL_ARG_KEYS:
        value = argument(call.arguments, key)
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


_PLAN_ITEM = re.compile(
    r'"?(?P<k1>step|content|status)"?\s*:\s*(?P<v1>"(?:[^"\\\n]|\\.)*")\s*,\s*'
    r'"?(?P<k2>step|content|status)"?\s*:\s*(?P<v2>"(?:[^"\\\n]|\\.)*")'
)
"""One plan item written as a JavaScript object literal: ``{step: "...", status: "..."}``."""


def _script_plan(script: str) -> list[tuple[str, str]] | None:
    """The plan a Codex ``exec`` script passes to ``tools.update_plan({plan: [...]})``."""
    at = script.rfind("tools.update_plan(")
    if at < 0:
        return None
    items: list[tuple[str, str]] = []
    for m in _PLAN_ITEM.finditer(script, at, at + SCRIPT_SCAN_CHARS):
        pair = {m.group("k1"): _js_string(m.group("v1")), m.group("k2"): _js_string(m.group("v2"))}
        text = pair.get("step") or pair.get("content")
        status = pair.get("status")
        if text and status:
            items.append((text, status.lower()))
    return items or None


def todo_items(call: ToolCall) -> list[tuple[str, str]] | None:
    """(text, status) of a todo-list tool's whole list, or None when the call holds none;
    a Codex ``exec`` script's ``update_plan`` call is one too."""
    if call.raw_arguments and "update_plan" in call.raw_arguments:
        return _script_plan(call.raw_arguments)
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
        value = argument(call.arguments, key)
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
            if not is_code_key(k) and str(v).strip()
        ][:3]
        if pairs:
            hint = clip_words(", ".join(pairs), ARG_HINT_MAX_WORDS)
        elif call.raw_arguments and (ops := patch_ops(call.raw_arguments)):
            # a patch is named by what it does, not by its text
            hint = ", ".join(f"{op.action} {code_span(op.path)}" for op in ops[:3])
            hint += f" (+{len(ops) - 3} more)" if len(ops) > 3 else ""
        elif call.raw_arguments:
            hint = code_span(clip_words(call.raw_arguments, ARG_HINT_MAX_WORDS))
    return f"{code_span(call.name)} {hint}".strip()


def _ends(text: str) -> str:
    if len(text) <= 2 * BRIEF_SCAN_CHARS:
        return text
    return text[:BRIEF_SCAN_CHARS] + "\n" + text[-BRIEF_SCAN_CHARS:]


# -- what calls did to files ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileOp:
    """One change a call made to one file, as the call named it."""

    action: str
    """created, written, edited, deleted, moved, copied or reverted."""
    path: str
    other: str | None = None
    """Where a move put the file, or where a copy came from."""
    base: str | None = None
    """The directory a relative ``path`` is relative to when the call said (``workdir``, ``cd``)."""
    symbols: tuple[str, ...] = ()
    """Definitions the change touched (``parse``, ``Client``): what changed, in brief."""


def definitions(lines: Iterable[str]) -> tuple[str, ...]:
    """Names defined on the changed lines of an edit (an ``@@`` header names one too)."""
    names: dict[str, None] = {}
    for line in lines:
        text = line.split("@@")[-1].strip() if line.startswith("@@") else line.lstrip("+-")
        anywhere, *top_level = _DEFINITIONS
        m = anywhere.match(text) or next((r.match(text) for r in top_level if r.match(text)), None)
        if m:
            names[m.group("name")] = None
    return tuple(names)


def edit_pairs(call: ToolCall) -> list[tuple[str, str]]:
    """An editor call's (old, new) texts: one pair, or MultiEdit's list of them."""
    sources = [call.arguments]
    sources += [e for e in argument(call.arguments, "edits") or [] if isinstance(e, dict)]
    pairs: list[tuple[str, str]] = []
    for source in sources:
        texts = [(k, s) for k in _EDIT_TEXT_KEYS for s in strings(argument(source, k))]
        olds = [s for k, s in texts if k.startswith(("old", "search"))]
        news = [s for k, s in texts if not k.startswith(("old", "search"))]
        pairs.append(("\n".join(olds), "\n".join(news)))
    return pairs


def _call_symbols(call: ToolCall) -> tuple[str, ...]:
    """What an editor call changed: names defined in its old and new text (not in whole
    files); a definition line both sides hold unchanged is only the edit's anchor when
    other definitions were added or removed beside it, or when the new text keeps the old
    whole (lines inserted next to it: a test added after ``load_fixture`` is no change of
    ``load_fixture``)."""
    pairs = edit_pairs(call)
    lines = [line.strip() for pair in pairs for text in pair for line in text.splitlines()]
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    changed = definitions(line for line in lines if counts[line] == 1)
    rewritten = [
        line.strip()
        for old, new in pairs
        if not (old.strip() and old.strip() in new)
        for text in (old, new)
        for line in text.splitlines()
    ]
    return changed or definitions(rewritten)


def added_definitions(call: ToolCall) -> tuple[str, ...]:
    """Names an editor call or a patch defines that its old text did not: how a change was
    made ("added `classify_code_line`"), when it made new definitions."""
    old_lines: list[str] = []
    new_lines: list[str] = []
    for old, new in edit_pairs(call):
        old_lines += old.splitlines()
        new_lines += new.splitlines()
    for text in [call.raw_arguments or "", *strings(argument(call.arguments, "patch"))]:
        if is_patch(text):
            old_lines += [line[1:] for line in text.splitlines() if line.startswith("-")]
            new_lines += [line[1:] for line in text.splitlines() if line.startswith("+")]
    before = set(definitions(old_lines))
    return tuple(n for n in definitions(new_lines) if n not in before)


def patch_ops(text: str, *, base: str | None = None) -> list[FileOp]:
    """The files a patch changes: Codex's ``*** Update File:`` sections or a unified diff."""
    ops: list[FileOp] = []
    action, path, other = "", "", None
    changed: list[str] = []
    old: str | None = None

    def flush() -> None:
        if path:
            ops.append(FileOp(action, path, other, base, definitions(changed)))
        changed.clear()

    for line in text.splitlines():
        codex = _CODEX_FILE.match(line)
        if codex:
            flush()
            action, path, other = _PATCH_OPS[codex.group("op")], codex.group("path"), None
        elif line.startswith("*** Move to:") and path:
            action, other = "moved", line.removeprefix("*** Move to:").strip() or None
        elif line.startswith("*** End Patch"):
            flush()
            path = ""
        elif line.startswith("--- ") and not line.startswith("--- -"):
            old = _diff_path(line[4:])
        elif line.startswith("+++ ") and old is not None:
            flush()
            new = _diff_path(line[4:])
            if new == "/dev/null":
                action, path = "deleted", old
            else:
                action, path = ("created" if old == "/dev/null" else "edited"), new
            other, old = None, None
        elif path and line[:1] in ("+", "-", "@"):
            changed.append(line)
    flush()
    return [op for op in ops if op.path and op.path != "/dev/null"]


def _diff_path(text: str) -> str:
    name = text.split("\t")[0].strip()
    return name[2:] if name[:2] in ("a/", "b/") else name


def _lex(line: str) -> list[tuple[str, str]]:
    """A shell script as ("w", word) and ("op", operator) tokens, quotes removed.

    Enough of the shell's grammar to tell ``echo "a > b" > out.txt`` (one
    redirection) from ``2>&1`` (none): quotes, escapes, ``$(...)``, file
    descriptor prefixes and comments. A word holding a substitution or a
    variable is marked with ``\\0`` so it is never taken for a path.
    """
    tokens: list[tuple[str, str]] = []
    word: list[str] = []
    started = False
    i, n = 0, len(line)

    def flush() -> None:
        nonlocal started
        if started:
            tokens.append(("w", "".join(word)))
        word.clear()
        started = False

    while i < n:
        c = line[i]
        if c in " \t\r":
            flush()
            i += 1
        elif c == "\n":
            flush()
            tokens.append(("op", "\n"))
            i += 1
        elif c == "\\":
            word.append(line[i + 1 : i + 2])
            started, i = True, i + 2
        elif c == "'":
            end = line.find("'", i + 1)
            end = n if end < 0 else end
            word.append(line[i + 1 : end])
            started, i = True, end + 1
        elif c == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            body = line[i + 1 : j]
            word.append(body + ("\0" if "$" in body or "`" in body else ""))
            started, i = True, j + 1
        elif c == "`" or c == "$":
            j = _substitution_end(line, i)
            word.append("\0" + line[i:j])
            started, i = True, j
        elif c == "#" and not started:
            end = line.find("\n", i)
            i = n if end < 0 else end
        elif (c in "<>&" or (c.isdigit() and not started)) and (m := _REDIRECT_OP.match(line, i)):
            flush()
            tokens.append(("op", m.group()))
            i = m.end()
        elif c in "|&;()":
            op = line[i : i + 2] if line[i : i + 2] in ("&&", "||", ";;", "|&") else c
            flush()
            tokens.append(("op", op))
            i += len(op)
        else:
            word.append(c)
            started, i = True, i + 1
    flush()
    return tokens


def _substitution_end(line: str, i: int) -> int:
    """Where a ``$(...)``, ``${...}``, ```...``` or ``$NAME`` starting at ``i`` ends."""
    if line[i] == "`":
        end = line.find("`", i + 1)
        return len(line) if end < 0 else end + 1
    if line.startswith(("$(", "${"), i):
        opening, closing = line[i + 1], ")" if line[i + 1] == "(" else "}"
        depth, j = 0, i + 1
        while j < len(line):
            depth += (line[j] == opening) - (line[j] == closing)
            j += 1
            if depth == 0:
                break
        return j
    m = _VARIABLE.match(line, i + 1)
    return m.end() if m else i + 1


def _unnamed(path: str) -> bool:
    """Not one file's name: a glob, a name built at run time, a bare directory marker."""
    return not path or "\0" in path or "*" in path or path in ("-", ".", "..", "/")


def _scratch(path: str) -> bool:
    """Not a file of the project: unnamed, a device, a temp file, a descriptor number."""
    return _unnamed(path) or path.startswith(_SCRATCH_PREFIXES) or path.isdigit()


def shell_file_ops(command: str, *, base: str | None = None) -> list[FileOp]:
    """The files a shell command changes: redirections, ``tee``, ``sed -i``, ``rm``, ``mv``, ...

    Heredoc bodies are data, not commands; ``/dev/null``, descriptor
    duplications (``2>&1``), temp files and comparisons inside ``[[ ]]`` are
    not files. A ``cd`` moves the base of the relative paths after it.
    """
    ops: list[FileOp] = []
    commands, _ = split_heredocs(command)
    tokens = [*_lex(commands.replace("\\\n", " ")), ("op", "\n")]
    argv: list[str] = []
    redirects: list[tuple[str, str]] = []
    in_test = False
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        i += 1
        if kind == "w":
            in_test = (in_test or text == "[[") and text != "]]"
            argv.append(text)
        elif text in _SEPARATORS:
            base = _segment(argv, redirects, base, ops)
            argv, redirects = [], []
        elif in_test and text in ("<", ">"):
            continue  # [[ a > b ]] compares strings
        else:
            target = tokens[i][1] if i < len(tokens) and tokens[i][0] == "w" else ""
            i += 1 if target else 0
            if "<" in text or (text.endswith("&") and (target.isdigit() or target == "-")):
                continue  # input, heredoc or here-string; or a descriptor duplicated
            redirects.append(("edited" if ">>" in text else "written", target))
    return ops


def simple_commands(command: str) -> list[list[str]]:
    """The argv of each simple command in a shell script (heredoc bodies, redirections and
    leading assignments or ``sudo`` left out); words built at run time carry a ``\\0``."""
    commands, _ = split_heredocs(command)
    out: list[list[str]] = []
    argv: list[str] = []
    skip_target = False
    for kind, text in [*_lex(commands.replace("\\\n", " ")), ("op", "\n")]:
        if kind == "w":
            if skip_target:
                skip_target = False
            else:
                argv.append(text)
        elif text in _SEPARATORS:
            while argv and (_ASSIGNMENT.match(argv[0]) or argv[0] in _PREFIX_COMMANDS):
                argv = argv[1:]
            if argv:
                out.append(argv)
            argv = []
        else:
            skip_target = True  # a redirection's target is no argument
    return out


def _segment(
    argv: list[str], redirects: list[tuple[str, str]], base: str | None, ops: list[FileOp]
) -> str | None:
    """Add one simple command's file changes to ``ops``; the base directory after it."""
    for action, target in redirects:
        if not _scratch(target) and _PATHISH.search(target):
            ops.append(FileOp(action, target, base=base))
    while argv and (_ASSIGNMENT.match(argv[0]) or argv[0] in _PREFIX_COMMANDS):
        argv = argv[1:]
    if not argv:
        return base
    prog, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    if prog in ("cd", "pushd"):
        target = args[0] if args else ""
        if not target or _scratch(target) or target.startswith("~") or target == "-":
            return base
        return target if target.startswith("/") or base is None else posixpath.join(base, target)
    if prog == "git" and args[:1] == ["-C"] and len(args) >= 3:
        where = (
            args[1] if args[1].startswith("/") or base is None else posixpath.join(base, args[1])
        )
        ops.extend(_command_ops("git", args[2:], where))
        return base  # git -C does not move the shell
    ops.extend(_command_ops(prog, args, base))
    return base


def operands(
    args: list[str],
    takes_value: frozenset[str] = frozenset(),
    *,
    switches: frozenset[str] | None = None,
) -> list[str]:
    """Arguments that are not options (or option values); everything after ``--`` is one.

    An option takes the next word as its value when it is in ``takes_value``; with
    ``switches`` given, every option does unless it is a switch or says ``--name=value``
    (a tracker CLI whose options we do not list: ``bd close X --reason "..."``)."""
    out: list[str] = []
    skip = False
    for k, a in enumerate(args):
        if skip:
            skip = False
        elif a == "--":
            out.extend(args[k + 1 :])
            break
        elif a.startswith("-") and len(a) > 1:
            skip = a in takes_value if switches is None else "=" not in a and a not in switches
        else:
            out.append(a)
    return out


def _command_ops(prog: str, args: list[str], base: str | None) -> list[FileOp]:
    if prog == "git" and args:
        sub, args = args[0], args[1:]
        if sub in ("rm", "mv"):
            prog = sub
        elif sub == "restore" and ("--staged" not in args or "--worktree" in args):
            return [FileOp("reverted", a, base=base) for a in operands(args, _GIT_VALUE_OPTIONS)]
        elif sub == "checkout" and "--" in args:
            return [FileOp("reverted", a, base=base) for a in args[args.index("--") + 1 :]]
        else:
            return []
    ops: list[FileOp] = []
    if prog in ("rm", "unlink", "rmdir"):
        ops = [
            FileOp("deleted", a, base=base)
            for a in operands(args)
            if posixpath.basename(a.rstrip("/")) not in _BUILD_OUTPUTS
        ]
    elif prog == "touch":
        ops = [
            FileOp("created", a, base=base) for a in operands(args, frozenset({"-d", "-r", "-t"}))
        ]
    elif prog == "tee":
        appended = any(a in ("-a", "--append") for a in args)
        ops = [FileOp("edited" if appended else "written", a, base=base) for a in operands(args)]
    elif prog in ("mv", "cp"):
        ops = _move_ops(prog, args, base)
    elif prog in ("sed", "perl") and _in_place(args):
        ops = [FileOp("edited", a, base=base) for a in _script_files(args)]
    return [op for op in ops if not _scratch(op.path)]


def _in_place(args: list[str]) -> bool:
    return any(
        a == "--in-place"
        or a.startswith("--in-place=")
        or (a.startswith("-") and not a.startswith("--") and "i" in a[1:].split(".")[0])
        for a in args
    )


def _script_files(args: list[str]) -> list[str]:
    """The files a ``sed`` / ``perl`` command works on: operands after its script."""
    operands: list[str] = []
    given = skip = False
    for k, a in enumerate(args):
        if skip:
            skip = False
        elif a in ("-e", "--expression", "-f", "--file", "-pe", "-ne", "-pie", "-lpe"):
            given = skip = True
        elif a.startswith(("--expression=", "--file=")):
            given = True
        elif a.startswith("-") and len(a) > 1:
            nxt = args[k + 1] if k + 1 < len(args) else None
            skip = a == "-i" and nxt is not None and (nxt == "" or bool(_SUFFIX.match(nxt)))
        else:
            operands.append(a)
    return operands if given else operands[1:]


def _move_ops(prog: str, args: list[str], base: str | None) -> list[FileOp]:
    words = operands(args, frozenset({"-t", "--target-directory", "-S", "--suffix"}))
    target = next((args[k + 1] for k, a in enumerate(args[:-1]) if a == "-t"), None)
    sources = [a for a in words if a != target] if target else words[:-1]
    dest = target or (words[-1] if len(words) >= 2 else None)
    if dest is None or _scratch(dest):
        return []
    ops: list[FileOp] = []
    for src in sources:
        into = dest.endswith("/") or target is not None or len(sources) > 1
        into = into or (bool(_EXTENSION.search(src)) and not _EXTENSION.search(dest))
        where = posixpath.join(dest, posixpath.basename(src.rstrip("/"))) if into else dest
        if prog == "mv":
            ops.append(FileOp("moved", src, where, base))
        else:
            ops.append(FileOp("copied", where, src, base))
    return ops


def _applies_patch(command: str) -> bool:
    """A shell command that feeds patch text to ``apply_patch`` / ``git apply`` / ``patch``."""
    return is_patch(command) and bool(_PATCH_COMMAND.search(split_heredocs(command)[0]))


def _workdir(call: ToolCall) -> str | None:
    for key in ("workdir", "cwd", "working_dir", "working_directory"):
        value = argument(call.arguments, key)
        if isinstance(value, str) and value.strip() and value.strip() != ".":
            return value.strip()
    return None


def call_file_ops(call: ToolCall, *, open_file: str | None = None) -> list[FileOp]:
    """The files one tool call changes, however the agent's tools are named.

    ``open_file`` is the file an editor without a path argument works on
    (SWE-agent's ``edit`` / ``insert`` change the file ``open`` opened).
    """
    nested = script_calls(call)
    if nested:
        return [op for c in nested for op in call_file_ops(c, open_file=open_file)]
    action = call_action(call)
    base = _workdir(call)
    if action == "shell":
        text = shell_text(call) or ""
        ops = shell_file_ops(text, base=base)
        return ops + patch_ops(text, base=base) if _applies_patch(text) else ops
    if action in ("read", "search"):
        return []
    texts = [
        call.raw_arguments or "",
        *(s for k in _PATCH_KEYS for s in strings(argument(call.arguments, k))),
    ]
    for text in texts:
        if is_patch(text):
            return patch_ops(text, base=base)
    if action is None:
        return []
    symbols = () if action in ("written", "created") else _call_symbols(call)
    sources, dests = path_args(call, SOURCE_ARG_KEYS), path_args(call, DEST_ARG_KEYS)
    paths = path_args(call, PATH_ARG_KEYS)
    if action in ("moved", "copied") and (sources or paths) and dests:
        if action == "moved":
            return [FileOp("moved", s, dests[0], base) for s in sources or paths]
        return [FileOp("copied", dests[0], s, base) for s in sources or paths]
    if not paths and not dests and open_file and action in ("edited", "written"):
        paths = [open_file]
    return [FileOp(action, p, base=base, symbols=symbols) for p in paths]


def swe_agent_ops(action_text: str, *, open_file: str | None = None) -> list[FileOp]:
    """The files a SWE-agent text command changes: ``create x.py``, ``edit 4:4``, a shell line."""
    first = action_text.strip().split("\n", 1)[0]
    word, _, rest = first.partition(" ")
    if word in ("create", "touch") and rest.strip():
        return [FileOp("created", rest.strip().strip("'\""))]
    if word in _SWE_EDITS:
        return [FileOp("edited", open_file)] if open_file else []
    if word in _SWE_VIEWS:
        return []
    return shell_file_ops(action_text)


def _as_created(rec: FileEdit) -> None:
    """One whole-file write of ``rec`` was its creation."""
    if rec.actions.get("written"):
        rec.actions["written"] -= 1
        rec.actions = {k: v for k, v in rec.actions.items() if v}
        rec.actions["created"] = rec.actions.get("created", 0) + 1
        if rec.last_action == "written":
            rec.last_action = "created"


class FileTracker:
    """Follows a session's messages and records what its tool calls did to files.

    Paths are resolved against the working directory the messages report
    (``metadata["cwd"]``) so ``/home/u/proj/lib/a.ex`` and ``lib/a.ex`` are one
    file, shown relative to the project root: the first working directory
    reported, until the session moves to an unrelated one. Without one, an
    absolute path and a relative path it ends with are taken to be one file.
    """

    def __init__(self, cwd: str | None = None) -> None:
        self.root: str | None = None
        self.cwd: str | None = None
        self.open_file: str | None = None
        self.records: dict[str, FileEdit] = {}
        self._open: list[tuple[ToolCall, list[FileEdit]]] = []
        self._undo: dict[int, list[Undo]] = {}
        """The changes each open call recorded (by ``id`` of the call), for taking back the
        ones its result shows did not happen (``applied``)."""
        self.taken_back: list[tuple[str, int]] = []
        """(path shown, index of the call) of the changes the last result took back."""
        self.after_action = False
        """The last assistant message gave a SWE-agent text command: the next user message is
        its output, not the user speaking."""
        self.read: set[str] = set()
        self.git_listed: set[str] = set()
        """Keys of the files read calls opened, for naming a file someone calls by its bare
        name (not kept in ``state``)."""
        self.set_cwd(cwd)

    def state(self) -> dict[str, Any]:
        """What the tracker knows, as JSON data: its directories, the open file and every
        file a call changed (files only the assistant mentioned are left out)."""
        records = {k: r.to_json() for k, r in self.records.items() if not r.mentioned_only}
        return {
            "root": self.root,
            "cwd": self.cwd,
            "open_file": self.open_file,
            "files": records,
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> FileTracker:
        """The tracker ``state`` described; malformed data raises ``ValueError``."""
        tracker = cls()
        for name in ("root", "cwd", "open_file"):
            value = data.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"bad {name}")
            setattr(tracker, name, value)
        files = data.get("files") or {}
        if not isinstance(files, dict):
            raise ValueError("bad files")
        for key, rec in files.items():
            if not isinstance(rec, dict):
                raise ValueError(f"bad record for {key!r}")
            tracker.records[str(key)] = FileEdit.from_json(str(key), rec)
        return tracker

    def set_cwd(self, cwd: str | None) -> None:
        """A new working directory; the root moves only to one unrelated to it.

        A shell that steps into ``assets/`` or up to ``/workspace`` is still
        working on the same project, so its paths keep one form.
        """
        if not cwd or not cwd.startswith("/"):
            return
        cwd = posixpath.normpath(cwd)
        self.cwd = cwd
        root = self.root
        if root is None or not (_inside(cwd, root) or _inside(root, cwd)):
            self.root = cwd

    def key(self, path: str, base: str | None = None) -> str | None:
        """The absolute (or, with no working directory known, normalised) form of ``path``."""
        p = path.strip().strip("'\"`").removeprefix("file://")
        if not plausible_path(p) or _unnamed(p) or p.startswith(("/dev/", "/proc/")):
            return None
        if _WINDOWS_DRIVE.match(p):
            return p
        p = p.replace("\\", "/")
        if p.startswith("~"):
            return posixpath.normpath(p)
        if not p.startswith("/"):
            where = base if base and base.startswith("/") else None
            if where is None and self.cwd:
                where = posixpath.join(self.cwd, base) if base else self.cwd
            elif where is None and base:
                where = base
            p = posixpath.join(where, p) if where else p
        p = posixpath.normpath(p)
        return None if p in (".", "..", "/") else p

    def shown(self, key: str) -> str:
        """``key`` as a reader sees it: relative to the root when inside it."""
        if self.root and self.root != "/" and _inside(key, self.root) and key != self.root:
            return key[len(self.root.rstrip("/")) + 1 :]
        return key

    def touch(
        self,
        path: str,
        action: str,
        index: int,
        *,
        base: str | None = None,
        mentioned: bool = False,
    ) -> FileEdit | None:
        key = self.key(path, base)
        if key is None:
            return None
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = FileEdit(key, first=index, last=index, mentioned_only=True)
        rec.actions[action] = rec.actions.get(action, 0) + 1
        if index >= rec.last or not rec.last_action:
            rec.last_action = action
        rec.last = max(rec.last, index)
        if not mentioned:
            rec.mentioned_only = False
            rec.failed = None
        return rec

    def mention(self, path: str, index: int) -> FileEdit | None:
        """A file the assistant says it changed; None when a call already showed it.

        A mentioned path is relative to the project root, not to wherever the
        shell last went, and a bare ``parser.c`` is the ``src/parser.c`` already
        recorded.
        """
        key = self.key(path, self.root)
        if key is None or key in self.records:
            return None
        tail = "/" + path.strip().strip("'\"`").removeprefix("./")
        if any(k.endswith(tail) for k in self.records):
            return None
        return self.touch(path, "changed", index, base=self.root, mentioned=True)

    def apply(self, op: FileOp, index: int, undo: list[Undo] | None = None) -> FileEdit | None:
        """Record ``op``; with ``undo``, how to take it back goes there."""
        key = self.key(op.path, op.base)
        if undo is not None and key is not None:
            undo.append(Undo.before(key, self.records.get(key), op.action, index))
        rec = self.touch(op.path, op.action, index, base=op.base)
        if rec is not None:
            if op.other:
                other = self.key(op.other, op.base)
                rec.other = self.shown(other) if other else op.other
            if not _PROSE_FILE.search(op.path):
                rec.symbols = list(dict.fromkeys([*rec.symbols, *op.symbols]))
        return rec

    def observe(self, m: Message, index: int) -> tuple[ToolCall | None, list[FileEdit]]:
        """Take in one message: the call a tool result answers, and the files touched.

        A demonstration (SWE-agent's ``is_demo``) shows another run: nothing in
        it happened in this one.
        """
        self.taken_back = []
        if m.metadata.get("is_demo"):
            return None, []
        cwd = m.metadata.get("cwd")
        if isinstance(cwd, str):
            self.set_cwd(cwd)
        touched: list[FileEdit] = []
        notes = m.metadata.get("aider_notes")
        if isinstance(notes, list):
            touched += self._aider(notes, index)
        if m.role == "assistant":
            ops: list[tuple[ToolCall | None, FileOp]] = []
            for call in m.tool_calls:
                self._opened(call)
                ops += [(call, op) for op in call_file_ops(call, open_file=self.open_file)]
            action = m.metadata.get("action")
            self.after_action = bool(isinstance(action, str) and action and not m.tool_calls)
            if self.after_action:
                ops += [(None, op) for op in swe_agent_ops(str(action), open_file=self.open_file)]
                self._opened_by_text(str(action))
            for call in m.tool_calls:
                undo = self._undo.setdefault(id(call), [])
                recs = [r for c, op in ops if c is call if (r := self.apply(op, index, undo))]
                self._open.append((call, recs))
                touched += recs
            touched += [r for c, op in ops if c is None if (r := self.apply(op, index))]
            return None, touched
        if m.role in ("tool", "user"):
            self.after_action = False
            self._observed_open_file(m.text)
        if m.role != "tool":
            return None, touched
        answered, recs = self._pair(m)
        undo = self._undo.pop(id(answered), []) if answered is not None else []
        if answered is not None and undo and not_applied(m, shell=call_action(answered) == "shell"):
            self._take_back(undo, m)
            return answered, touched
        error = m.metadata.get("is_error") or m.metadata.get("error")
        if error and recs:
            brief = brief_result(m.text) or "error"
            for rec in recs:
                rec.failed = brief
        elif recs and m.text.lstrip().startswith("File created successfully"):
            for rec in recs:
                _as_created(rec)
        return answered, touched

    def untracked(self, path: str) -> None:
        """Git lists ``path`` as untracked: a file the run wrote whole is one it created."""
        key = self.key(path)
        rec = self.records.get(key) if key is not None else None
        if rec is not None and not rec.actions.get("created"):
            _as_created(rec)

    def _take_back(self, undo: Sequence[Undo], m: Message) -> list[FileEdit]:
        """Changes the result ``m`` shows did not happen, taken back (newest first); a failed
        edit of a file changed before says so on it (a turned-down one changed nothing)."""
        self.taken_back = [
            (rec.path, u.index) for u in undo if (rec := self.records.get(u.key)) is not None
        ]
        left = [rec for u in reversed(undo) if (rec := u.revert(self.records)) is not None]
        if not rejected(m.text):
            brief = brief_result(m.text) or "error"
            for rec in left:
                rec.failed = brief
        return left

    def last_change(self, path: str) -> int | None:
        """The index of the last change a call made to the file shown as ``path``, or None
        when no call changed it."""
        return next((rec.last for rec in self.records.values() if rec.path == path), None)

    def _pair(self, m: Message) -> tuple[ToolCall | None, list[FileEdit]]:
        """The call a result answers: the first open call with its id, else the oldest open."""
        for i, (call, recs) in enumerate(self._open):
            if call.id == m.tool_call_id:
                del self._open[i]
                return call, recs
        return self._open.pop(0) if self._open else (None, [])

    def known(self) -> list[str]:
        """Every file the run read, changed or saw git list, as shown."""
        seen = sorted(self.read | self.git_listed)
        return list(dict.fromkeys([*self.files(), *(self.shown(k) for k in seen)]))

    def listed(self, paths: Iterable[str]) -> None:
        """Paths git's output listed (``untracked.git_listed_paths``): the project's own
        spelling of them. Like ``read``, not kept in the checkpoint's state."""
        self.git_listed.update(k for p in paths if (k := self.key(p)))

    def _opened(self, call: ToolCall) -> None:
        if call_action(call) == "read":
            self.read.update(k for p in path_args(call, PATH_ARG_KEYS) if (k := self.key(p)))
        if call.name in _SWE_OPENERS:
            paths = path_args(call, PATH_ARG_KEYS)
            if paths:
                self.open_file = self.key(paths[0])

    def _opened_by_text(self, action: str) -> None:
        word, _, rest = action.strip().split("\n", 1)[0].partition(" ")
        tokens = [text for kind, text in _lex(rest) if kind == "w"]
        if word in _SWE_OPENERS and tokens:
            self.open_file = self.key(tokens[0])

    def _observed_open_file(self, text: str) -> None:
        """SWE-agent observations end with ``(Open file: /repo/x.py)``."""
        tail = text[-2_000:]
        for match in list(_OPEN_FILE.finditer(tail))[-1:]:
            path = match.group("path").strip()
            self.open_file = None if path in ("n/a", "<path>") else self.key(path)

    def _aider(self, notes: list[Any], index: int) -> list[FileEdit]:
        """Aider logs ``Applied edit to x.py`` and ``Create new file? ... y`` after the path."""
        touched: list[FileEdit] = []
        previous = ""
        for note in notes:
            line = str(note).strip()
            applied = _AIDER_APPLIED.match(line)
            if applied:
                rec = self.touch(applied.group("path"), "edited", index)
            elif _AIDER_CREATE.match(line) and previous and not re.search(r"[\s`]", previous):
                rec = self.touch(previous, "created", index)  # the line before names the file
            else:
                rec = None
            if rec is not None:
                touched.append(rec)
            previous = line
        return touched

    def files(self, *, mentioned: bool = True) -> dict[str, FileEdit]:
        """Every file touched, by its shown path, in order of first change."""
        out: dict[str, FileEdit] = {}
        for key, rec in sorted(self.records.items(), key=lambda kv: kv[1].first):
            if rec.mentioned_only and not mentioned:
                continue
            shown = self.shown(key)
            merged = replace(rec, path=shown, actions=dict(rec.actions), symbols=list(rec.symbols))
            if shown in out:
                out[shown].absorb(merged)
            else:
                out[shown] = merged
        if self.root is None:
            _merge_suffixes(out)
        return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _merge_suffixes(files: dict[str, FileEdit]) -> None:
    """With no working directory known, ``/x/proj/a.py`` and ``a.py`` are one file."""
    relative = [p for p in files if not p.startswith(("/", "~"))]
    for path in [p for p in files if p.startswith("/")]:
        matches = [r for r in relative if path.endswith("/" + r)]
        if len(matches) == 1:
            files[matches[0]].absorb(files.pop(path))


def edited_files(messages: Sequence[Message], *, cwd: str | None = None) -> dict[str, FileEdit]:
    """The files ``messages`` created, wrote, edited, moved or deleted, by shown path.

    Paths are relative to the session's working directory (``cwd``, else what
    the messages report in ``metadata["cwd"]``) when the file is inside it.
    """
    tracker = FileTracker(cwd)
    for index, m in enumerate(messages):
        tracker.observe(m, index)
    return tracker.files()


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
    "SUBAGENT_TOOLS",
    "FileEdit",
    "FileOp",
    "FileTracker",
    "added_definitions",
    "brief_result",
    "call_action",
    "call_file_ops",
    "describe_call",
    "edited_files",
    "is_confirmation",
    "is_patch",
    "operands",
    "patch_ops",
    "path_args",
    "plausible_path",
    "script_calls",
    "shell_file_ops",
    "shell_text",
    "simple_commands",
    "split_heredocs",
    "strings",
    "swe_agent_ops",
    "todo_items",
]
