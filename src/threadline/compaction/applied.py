"""Whether a call's file changes happened, and how to take back the ones that did not.

The file tracker (``toolcalls.FileTracker``) records what a call changes when
the call is made; the result says whether it happened. A call the person turned
down (``rejections``) changed nothing, whatever it was. An edit tool that
failed (flagged ``is_error`` by its importer: Claude Code's "String to replace
not found", Pi's "Each oldText must be unique"; Codex's unflagged "apply_patch
verification failed") changed nothing either: such tools apply all or nothing.
A shell command that failed may have changed files before it failed (``cp a b
&& make``), so only a rejection, or a patch that did not apply, takes its
changes back. A change taken back is not counted, does not describe the file,
and a file no call changed is not listed as modified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from threadline.rejections import rejected

if TYPE_CHECKING:
    from threadline.compaction.file_edit import FileEdit
    from threadline.messages import Message

_EDIT_FAILED = re.compile(
    r"(?i)\A\s*(?:<tool_use_error>|apply_patch verification failed|error\b|failed\b)"
)
"""The opening of an editing tool's result that says nothing was written, where the
importer did not flag it (Codex's ``apply_patch`` outputs are plain text)."""
_PATCH_FAILED = re.compile(
    r"(?im)^\s*(?:apply_patch verification failed|error: patch failed|"
    r"failed to find (?:expected lines|context)\b|invalid (?:patch|hunk)\b)"
)
"""A line of a shell command's output saying a patch fed to it did not apply: git's, or
Codex's ``apply_patch`` ("Failed to find expected lines in index.js:"), which may follow
the shell's own noise (a profile's warning) and a harness's "Exit code: 1" header."""
_EXIT_OK = re.compile(r"\A\s*Exit code: 0\b")
"""Codex's header of a shell call that succeeded: its patch applied, whatever it printed."""


def not_applied(m: Message, *, shell: bool) -> bool:
    """Whether the result ``m`` shows that its call changed no file: turned down, or an edit
    that failed (see the module docstring; ``shell``: the call was a shell command)."""
    if rejected(m.text):
        return True
    if shell:
        return not _EXIT_OK.match(m.text) and _PATCH_FAILED.search(m.text) is not None
    flagged = m.metadata.get("is_error") or m.metadata.get("error")
    return bool(flagged) or _EDIT_FAILED.match(m.text) is not None


@dataclass(slots=True)
class Undo:
    """What one change did to a file's record, so a change that did not happen is taken back."""

    key: str
    action: str
    index: int
    created: bool
    """The change made the record (no call had changed the file before)."""
    last: int = 0
    last_action: str = ""
    mentioned_only: bool = False
    note: str | None = None
    other: str | None = None
    symbols: list[str] = field(default_factory=list)

    @classmethod
    def before(cls, key: str, rec: FileEdit | None, action: str, index: int) -> Undo:
        """The undo of a change about to be recorded on ``rec`` (None: no record yet)."""
        if rec is None:
            return cls(key, action, index, created=True)
        return cls(
            key,
            action,
            index,
            created=False,
            last=rec.last,
            last_action=rec.last_action,
            mentioned_only=rec.mentioned_only,
            note=rec.note,
            other=rec.other,
            symbols=list(rec.symbols),
        )

    def revert(self, records: dict[str, FileEdit]) -> FileEdit | None:
        """Take the change back; the record left, or None when the file is no longer one a
        call changed."""
        rec = records.get(self.key)
        if rec is None:
            return None
        left = rec.actions.get(self.action, 0) - 1
        if left > 0:
            rec.actions[self.action] = left
        else:
            rec.actions.pop(self.action, None)
        if not rec.actions and self.created:
            del records[self.key]
            return None
        if rec.last == self.index:  # nothing later touched it: it is as it was before
            rec.last, rec.last_action = self.last, self.last_action
            rec.mentioned_only, rec.note, rec.other = self.mentioned_only, self.note, self.other
            rec.symbols = list(self.symbols)
        return rec


__all__ = ["Undo", "not_applied"]
