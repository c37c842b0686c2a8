"""Signatures the run added: the functions and interface methods its edits introduced.

A continuing engineer calls what the run defined; "edited `agent.go`" does not say that it
now declares ``GetTranscriptPosition(path string) (int, error)``. Read from the text an edit
wrote (new text not in the text it replaced, a patch's added lines, a new file's content),
only for edits that took effect.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.compaction.applied import not_applied
from threadline.compaction.findings import Line
from threadline.compaction.toolcalls import PATH_ARG_KEYS, call_action, path_args
from threadline.compaction.values import SIGNATURE_LABEL
from threadline.messages import Message, ToolCall

SIGNATURE_LEAD = f"{SIGNATURE_LABEL}: "
"""How a signature's Important Values bullet begins (a model snapshot's reconciliation keeps it)."""
MAX_SIGNATURES = 4
"""Signatures kept, the latest first."""
MAX_PER_FILE = 2
"""Signatures kept from one file: the run's interfaces over one script's helpers."""
SIGNATURE_CHARS = 140

_SIGNATURE = re.compile(
    r"^(?:"
    r"func\s+(?:\([^)]*\)\s*)?[A-Za-z_]\w*\s*\(.*|"  # Go function or method
    # a Go interface method, with its results
    r"[A-Z]\w*\((?:[^()]|\([^()]*\))*\)\s*(?:\((?:[^()]|\([^()]*\))*\)|[\w.*\[\]]+)\s*$|"
    r"(?:async\s+)?def\s+\w+\s*\(.*\)\s*(?:->\s*[^:]+)?:\s*$|"  # Python
    r"(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*\w+\s*(?:<[^>]*>)?\(.*|"  # JS/TS
    r"(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+\w+\s*(?:<[^>]*>)?\(.*|"  # Rust
    r"defp?\s+\w+[?!]?\(.*\)\s*(?:do|,\s*do:.*)?\s*$"  # Elixir
    r")"
)
"""A line that declares a callable, in the languages runs most often edit."""
_NAME = re.compile(r"(\w+[?!]?)\s*(?:<[^>]*>)?\(")
_OLD_KEY = re.compile(r"(?i)^old(?:_?str(?:ing)?|_?text)?$")
_PATH_KEY = re.compile(r"(?i)^(?:file_?path|path|filename|file)$")
_NOT_CODE = (".md", ".markdown", ".txt", ".rst", ".adoc")
"""A callable written into a document is a sketch in prose, not one the code now has."""
_TEST_NAME = re.compile(r"^(?:Test|test_|test[A-Z])")
_TEST_FILE = re.compile(r"(?:^test_|_test\.|\.test\.|\.spec\.|_spec\.)")
"""A test, or a test file's helper: nothing a continuing engineer calls."""
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update) File:\s*(\S.*)$")


_PRIVATE = re.compile(
    r"^(?:defp\s|fn\s|async\s+fn\s)"  # Elixir's private function; Rust's without ``pub``
    r"|^func\s+(?:\([^)]*\)\s*)?[a-z_]"  # Go: a lower-case name is not exported
    r"|^def\s+\w+[?!]?\((?:\s*_\w*\s*,?)+\)"  # Elixir: a fallback clause (``def f(_)``)
)


def private(text: str, name: str) -> bool:
    """A helper the file keeps to itself, or a fallback clause: no one else calls it, so it
    is no value for the engineer who continues (the judges read them as noise)."""
    return name.startswith("_") or bool(_PRIVATE.match(text))


@dataclass(frozen=True)
class Signature(Line):
    """A callable's declaration line (``text``), the seq of the edit, and the file it wrote."""

    path: str = ""

    @property
    def name(self) -> str:
        m = _NAME.search(self.text.removeprefix("func "))
        return m.group(1) if m else self.text

    def bullet(self) -> str:
        where = "/".join(self.path.split("/")[-2:]) if self.path else "an edit"
        return f"{SIGNATURE_LEAD}`{self.text}` (written in {where})"


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a call's arguments with the key it sits under."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)


def _written(call: ToolCall) -> Iterator[tuple[str, list[str]]]:
    """(path, lines the call wrote that the text it replaced did not hold)."""
    path = ""
    old: set[str] = set()
    new: list[str] = []
    raw = [("", call.raw_arguments)] if call.raw_arguments else []  # a free-form patch
    for key, text in [*_strings(call.arguments), *raw]:
        if _PATH_KEY.match(key):
            path = text
        elif _OLD_KEY.match(key):
            old.update(line.strip() for line in text.splitlines())
        elif "*** Begin Patch" in text:
            yield from _patch(text)
        elif "\n" in text:
            new.extend(text.splitlines())
    if new:
        yield path, [line for line in new if line.strip() not in old]


def _patch(text: str) -> Iterator[tuple[str, list[str]]]:
    """A Codex patch's added lines, per file."""
    path = ""
    added: list[str] = []
    removed: set[str] = set()
    for line in text.splitlines():
        if m := _PATCH_FILE.match(line):
            if added:
                yield path, [a for a in added if a.strip() not in removed]
            path, added, removed = m.group(1).strip(), [], set[str]()
        elif line.startswith("+"):
            added.append(line[1:])
        elif line.startswith("-"):
            removed.add(line[1:].strip())
    if added:
        yield path, [a for a in added if a.strip() not in removed]


_NUMBERED = re.compile(r"^\s*\d+(?:\u2192|\t|:\s|\|)")
"""A read tool's line-number prefix (Claude Code's ``12→``, ``cat -n``'s tab, ``12: ``)."""


def _read_lines(call: ToolCall, result: Message) -> tuple[str, set[str]] | None:
    """(path, the stripped lines a read of it showed), for a call that read one file."""
    if call_action(call) != "read":
        return None
    paths = path_args(call, PATH_ARG_KEYS)
    if len(paths) != 1:
        return None
    return paths[0], {_NUMBERED.sub("", line).strip() for line in result.text.splitlines()}


def signatures(messages: Sequence[Message]) -> list[Signature]:
    """Callables the run's applied edits declared, the latest form of each, latest first; a
    file written whole declares only what a read of it had not shown already."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    latest: dict[str, Signature] = {}  # by name: an interface and its implementation
    shown: dict[str, set[str]] = {}  # path -> lines a read showed
    for index, m in enumerate(messages):
        seq = m.seq if m.seq is not None else index + 1
        for call in m.tool_calls or []:
            result = results.get(call.id)
            if result is None or not_applied(result, shell=False):
                continue
            if (read := _read_lines(call, result)) is not None:
                shown.setdefault(read[0], set()).update(read[1])
                continue
            for path, lines in _written(call):
                had = shown.get(path, set())
                lines = [line for line in lines if line.strip() not in had]
                if path.lower().endswith(_NOT_CODE) or _TEST_FILE.search(path.rsplit("/", 1)[-1]):
                    continue
                for line in lines:
                    text = line.strip().rstrip("{").strip()
                    if _SIGNATURE.match(text) and len(text) <= SIGNATURE_CHARS and "`" not in text:
                        sig = Signature(seq, text, path)
                        if _TEST_NAME.match(sig.name) or private(text, sig.name):
                            continue
                        key = sig.name
                        latest.pop(key, None)
                        latest[key] = sig
    kept: list[Signature] = []
    per_file: dict[str, int] = {}
    for sig in reversed(latest.values()):
        per_file[sig.path] = per_file.get(sig.path, 0) + 1
        if per_file[sig.path] <= MAX_PER_FILE:
            kept.append(sig)
    return kept[:MAX_SIGNATURES]
