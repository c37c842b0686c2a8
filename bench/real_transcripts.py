"""Context fidelity on every real agent transcript beside the project.

For each conversation under ``../shared/transcripts`` (one row per conversation;
files holding several runs give one row per run), this does what a new user
does: import it into a fresh SQLite store, run ``threadline compact ID`` with
default settings (the extractive summarizer), and build the window at 32,000
tokens (``threadline context ID --limit 32000``). Each row reports:

* messages and user turns (requests a person made, not tool wrappers);
* whether the compaction wrote a checkpoint, and the snapshot's words;
* dropped: stored messages neither in the window nor under the checkpoint
  (the target is 0);
* edited-file recall: of the files the run wrote or edited according to its
  own tool calls (read here by rules independent of the summarizer's), the
  share named in the snapshot or present in the window;
* whether the first user request is in the window or the snapshot;
* whether the window is valid by OpenAI's and Anthropic's rules
  (``threadline.interop.provider_rules``).

    python bench/real_transcripts.py [--limit 32000] [--json] [--root DIR]

The test suite asserts the same figures (tests/test_real_transcripts.py).
Nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from threadline import ContextPolicy, Message, ToolCall, build_context, open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import one_line, words
from threadline.interop.importers import import_file, read_transcript_runs
from threadline.interop.provider_rules import anthropic_problems, openai_problems
from threadline.requests import first_request, is_request, request_text
from threadline.store.base import prepare_messages

ROOT = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
LIMIT = 32_000
REQUEST_WORDS = 12
"""The first request counts as present when its opening words appear verbatim."""


@dataclass
class Row:
    conversation: str
    messages: int
    user_turns: int
    compacted: bool
    snapshot_words: int
    dropped: int
    edited_files: int
    edited_recalled: int
    first_request: bool | None
    """None when the conversation has no request a person made."""
    valid_openai: bool
    valid_anthropic: bool
    problems: list[str]

    @property
    def recall(self) -> float | None:
        return self.edited_recalled / self.edited_files if self.edited_files else None


# -- which files a run edited, by its own tool calls ------------------------------------

_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M
)
_REDIRECT = re.compile(r"(?:^|[\s;&|(])>>?\s*(['\"]?)([\w./~][\w./~@+-]*)\1", re.M)
_HEREDOC_BODY = re.compile(r"(<<-?\s*(['\"]?)(\w+)\2[^\n]*)\n.*?^\s*\3\s*$", re.S | re.M)
_EDIT_TOOLS = {
    "edit",
    "write",
    "multiedit",
    "notebookedit",
    "write_file",
    "replace",
    "edit_file",
    "create_file",
}
_EDITOR_COMMANDS = {"create", "str_replace", "insert", "edit", "write"}
_SHELL_TOOLS = {
    "bash",
    "shell",
    "shell_command",
    "local_shell",
    "exec_command",
    "execute_bash",
    "run_shell_command",
}


def _args(raw: object) -> dict[str, object]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": raw}
    return {}


def _call_args(call: ToolCall) -> dict[str, object]:
    """The call's arguments; free-form input (Codex's ``apply_patch``) as ``input``."""
    return _args(call.raw_arguments if call.raw_arguments is not None else call.arguments)


def _patch_targets(patch: str) -> Iterator[str]:
    for m in _PATCH_FILE.finditer(patch):
        yield m.group(1) or m.group(2)


def _shell_targets(command: str) -> Iterator[str]:
    yield from _patch_targets(command)  # apply_patch through the shell, as Codex runs it
    command = _HEREDOC_BODY.sub(r"\1", command)  # a heredoc's body is data, not shell
    for m in _REDIRECT.finditer(command):
        target = m.group(2)
        if target.startswith(SCRATCH) or not ("." in target or "/" in target):
            continue  # a device, or a scratch file outside the project (a log in /tmp)
        yield target
    try:
        words_ = shlex.split(command, comments=False)
    except ValueError:
        return
    for i, w in enumerate(words_):
        if w == "tee" and i + 1 < len(words_) and not words_[i + 1].startswith("-"):
            yield words_[i + 1]


SCRATCH = ("/dev/", "/tmp/", "/var/tmp/", "/private/tmp/")
"""Where a shell redirect writes outside any project: not a file the run changed."""
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)
APPLIED = "Applied edit to "
"""Aider logs each edit it applies this way (the importer keeps the log in metadata)."""


def _swe_commands(m: Message) -> Iterator[tuple[str, str]]:
    """(command, argument) of SWE-agent's text commands (``open f``, ``create f``,
    ``edit 4:4``) in an assistant message's fenced block."""
    if m.role != "assistant" or m.tool_calls:
        return
    for block in _FENCED.findall(m.text):
        head = block.strip().split("\n", 1)[0].split()
        if head:
            yield head[0], head[1] if len(head) > 1 else ""


def edited_paths(messages: Iterable[Message]) -> set[str]:
    """Paths the run wrote or edited, read from its tool calls (and, for runs without
    structured calls, from SWE-agent's text commands and Aider's edit log)."""
    out: set[str] = set()
    open_file: str | None = None  # SWE-agent's editor edits the file it has open
    for m in messages:
        notes = m.metadata.get("aider_notes")
        if isinstance(notes, list):
            out.update(n[len(APPLIED) :] for n in notes if str(n).startswith(APPLIED))
        for command, arg in _swe_commands(m):
            if command in ("open", "create") and arg:
                open_file = arg.strip("\"'")
            if open_file and command in ("create", "edit", "insert"):
                out.add(open_file)
        for call in m.tool_calls:
            name = call.name.lower()
            args = _call_args(call)
            path = args.get("file_path") or args.get("path") or args.get("notebook_path")
            command = args.get("command")
            if name in ("open", "create"):
                target = path or args.get("filename")
                open_file = target if isinstance(target, str) else open_file
                if name == "create" and open_file:
                    out.add(open_file)
            elif name in ("edit", "insert") and not path and open_file:
                out.add(open_file)
            elif name in _EDIT_TOOLS and isinstance(path, str):
                out.add(path)
            elif name in ("str_replace_editor", "edit_file") and command in _EDITOR_COMMANDS:
                if isinstance(path, str):
                    out.add(path)
            elif name == "apply_patch":
                text = "\n".join(v for v in args.values() if isinstance(v, str))
                out.update(_patch_targets(text))
            elif name in _SHELL_TOOLS:
                cmd = command if isinstance(command, str) else args.get("cmd") or ""
                if isinstance(cmd, list):
                    cmd = " ".join(str(c) for c in cmd)
                out.update(_shell_targets(str(cmd)))
    return {p.strip() for p in out if p.strip() and "$" not in p and "*" not in p}


def recalled(path: str, text: str, cwds: Iterable[str] = ()) -> bool:
    """Named in ``text``: the path itself, its last two or more components, or the path
    relative to a working directory the run had; a Windows path (``Models\\Offer.cs``,
    as aider logs it there) also with forward slashes."""
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


def _visible(m: Message) -> str:
    """What the model reads of ``m``: its text (and the request it carries, as
    ``threadline.requests`` reads it) and its tool calls' arguments, decoded."""
    parts = [m.text, request_text(m) or ""]
    for call in m.tool_calls:
        parts.append(call.name)
        parts.extend(str(v) for v in _call_args(call).values())
    return "\n".join(parts)


# -- one conversation --------------------------------------------------------------------


def conversations(root: Path, *, only: str | None = None) -> Iterator[tuple[str, list[Message]]]:
    """(name, messages) per conversation under ``root`` (``only``: one file's, by its
    path relative to ``root``)."""
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md"):
        name = str(path.relative_to(root))
        if only is not None and name != only:
            continue
        runs = read_transcript_runs(path)
        if len(runs) == 1:
            yield name, import_file(path).messages
        else:
            for i, run in enumerate(runs, 1):
                yield f"{name} #{i}", run


def measure(name: str, messages: list[Message], store_dir: str, limit: int = LIMIT) -> Row:
    store = open_store(f"sqlite://{store_dir}/{abs(hash(name))}.db")
    session = store.create_session(agent="bench")
    store.append_messages(session.id, prepare_messages(None, messages))
    session = store.get_session(session.id)
    result = Compactor(ExtractiveSummarizer(), policy=ContextPolicy()).compact(session, force=True)
    session.refresh()
    window = build_context(session, policy=ContextPolicy(context_limit=limit))
    checkpoint = session.latest_checkpoint()
    snapshot = checkpoint.summary if checkpoint else ""
    seen = "\n".join(_visible(m) for m in window.messages)
    edited = edited_paths(messages)
    cwds = {c for m in messages if isinstance(c := m.metadata.get("cwd"), str) and c}
    first = first_request(messages)
    first_present: bool | None = None
    if first is not None:
        opening = " ".join(one_line(request_text(first) or "").split()[:REQUEST_WORDS])
        flat = " ".join(one_line(seen).split())
        first_present = opening in flat
    oa = openai_problems(window.to_openai())
    an = anthropic_problems(window.to_anthropic())
    return Row(
        conversation=name,
        messages=len(messages),
        user_turns=sum(1 for m in messages if is_request(m)),
        compacted=result.compacted,
        snapshot_words=words(snapshot),
        dropped=window.report.dropped_messages,
        edited_files=len(edited),
        edited_recalled=sum(1 for p in edited if recalled(p, seen, cwds)),
        first_request=first_present,
        valid_openai=not oa,
        valid_anthropic=not an,
        problems=[f"openai: {p}" for p in oa[:3]] + [f"anthropic: {p}" for p in an[:3]],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="transcripts directory")
    ap.add_argument("--limit", type=int, default=LIMIT, help="context limit to build at")
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    args = ap.parse_args()
    if not args.root.is_dir():
        sys.exit(f"no transcripts at {args.root}")
    from rich.console import Console
    from rich.table import Table

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="threadline-real-") as tmp:
        for name, messages in conversations(args.root):
            rows.append(measure(name, messages, tmp, args.limit))
    if args.json:
        for row in rows:
            print(json.dumps({**asdict(row), "recall": row.recall}))
        return
    table = Table(title=f"real transcripts: compact with defaults, build at {args.limit:,} tokens")
    for col in (
        "conversation",
        "msgs",
        "user turns",
        "compacted",
        "words",
        "dropped",
        "edited-file recall",
        "first request",
        "OpenAI",
        "Anthropic",
    ):
        table.add_column(col, justify="left" if col == "conversation" else "right")
    for r in rows:
        table.add_row(
            r.conversation,
            f"{r.messages:,}",
            f"{r.user_turns}",
            "yes" if r.compacted else "no",
            f"{r.snapshot_words}",
            f"{r.dropped}",
            "-" if r.recall is None else f"{r.edited_recalled}/{r.edited_files} ({r.recall:.0%})",
            "-" if r.first_request is None else ("yes" if r.first_request else "NO"),
            "valid" if r.valid_openai else "INVALID",
            "valid" if r.valid_anthropic else "INVALID",
        )
    Console(width=200).print(table)
    with_edits = [r for r in rows if r.recall is not None]
    print(
        f"{len(rows)} conversations; dropped total {sum(r.dropped for r in rows)}; "
        f"edited-file recall min {min((r.recall or 0) for r in with_edits):.0%} over "
        f"{len(with_edits)} that edit files; first request missing in "
        f"{sum(1 for r in rows if r.first_request is False)}; invalid windows: OpenAI "
        f"{sum(1 for r in rows if not r.valid_openai)}, Anthropic "
        f"{sum(1 for r in rows if not r.valid_anthropic)}"
    )
    for r in rows:
        for p in r.problems:
            print(f"  {r.conversation}: {p}")


if __name__ == "__main__":
    main()
