"""Whether a model's snapshot can be used at all: only an unusable one gives way.

A model's prose holds what the offline snapshot cannot (why things were done, what
the work is now, the values it judged important), while the sections a resumed agent
must be able to trust (files changed, open items, unresolved failures) come from the
stored history either way: ``overlay`` lays them over the model's snapshot. Judging a
model's snapshot by how many of the offline snapshot's values it repeats verbatim
threw good summaries away, since many of those values are noise a good summary omits.

So a model's snapshot is kept unless the reply is unusable: it was empty, it had none
of the five sections, or it names as modified files that nothing in the history shows
(it describes another run). Only then does the compaction store the offline snapshot,
saying why in the checkpoint's metadata (``FALLBACK_KEY``) and in ``threadline
compact``'s report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.reconcile import paths_of, same_file
from threadline.compaction.snapshot import MODEL_SUMMARIZERS, SummaryResult
from threadline.compaction.trail import Trail

FALLBACK_KEY = "fallback"
"""Checkpoint metadata key of the note a fallback leaves."""
GATED = MODEL_SUMMARIZERS
"""The summarizers whose snapshots the gate checks (what a model wrote)."""
SHOWN_FILES = 5
"""Unknown files named in a fallback's reason."""


@dataclass(slots=True)
class Verdict:
    """What the gate found: why the model's snapshot cannot be used, if it cannot."""

    reply: str | None = None
    """The reply's own defect (empty, no section), from the summarizer."""
    unknown_files: list[str] = field(default_factory=list)
    """Files the model lists as modified that the history never shows."""

    @property
    def passed(self) -> bool:
        return self.reply is None and not self.unknown_files

    def reasons(self) -> list[str]:
        out = [self.reply] if self.reply else []
        if self.unknown_files:
            shown = ", ".join(self.unknown_files[:SHOWN_FILES])
            more = len(self.unknown_files) - SHOWN_FILES
            out.append(
                "it names modified files no message shows: "
                + shown
                + (f" and {more} more" if more > 0 else "")
            )
        return out


_FILE_NAME = re.compile(r"^[^\s/\\]*[A-Za-z_-][^\s/\\]*\.[A-Za-z]\w{0,9}$")
"""A file's name: a stem and an extension (``a.ex``), unlike a function's arity
(``render/2``), a directory or a version number."""
_LINE_SUFFIX = re.compile(r"(?::\d+)+$")


def _file_name(path: str) -> str | None:
    """The file name ``path`` ends in, or None when it names no file."""
    bare = _LINE_SUFFIX.sub("", path.strip().strip("`*\"'"))
    name = re.split(r"[/\\]", bare)[-1]
    return name if _FILE_NAME.match(name) else None


def _shown(path: str, trail: Trail, evidence: str) -> bool:
    """Whether the history shows the file ``path`` names: a file the trail saw, or one
    whose name the messages hold (a model may misplace a file's directory, a slip, not
    another run's file)."""
    name = _file_name(path)
    if name is None or name in evidence:
        return True
    return any(same_file(path, known) for known in trail.tracker.files(mentioned=True))


def check(model: SummaryResult, trail: Trail, evidence: str) -> Verdict:
    """The model's snapshot against the history it summarizes: ``trail`` of the covered
    range and ``evidence``, the covered messages' text (and the previous snapshot)."""
    unknown: list[str] = []
    for bullet in model.snapshot.files_modified:
        for path in paths_of(bullet.text):
            if path not in unknown and not _shown(path, trail, evidence):
                unknown.append(path)
    return Verdict(model.unusable, unknown)


def fallback_note(model: SummaryResult, verdict: Verdict) -> dict[str, Any]:
    """What a checkpoint's metadata says when the offline snapshot replaced the model's."""
    return {
        "from": model.summarizer,
        "reasons": verdict.reasons(),
        "input_tokens": model.input_tokens,
        "output_tokens": model.output_tokens,
    }


__all__ = ["FALLBACK_KEY", "GATED", "Verdict", "check", "fallback_note"]
