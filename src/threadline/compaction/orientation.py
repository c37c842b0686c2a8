"""Orientation after a compaction: where the session is, what it was doing, what it noted.

agsh "re-injects environment context so the agent isn't disoriented after
compaction", and its todo list and scratchpad survive it. A compaction
replaces the messages that showed the agent its surroundings with a summary,
so each checkpoint carries an orientation block, written when the checkpoint
is (``ORIENTATION_KEY`` in its metadata) and shown by the context builder right
after the summary, in the same message: the session's own facts (its working
directory, git branch and the date of its latest message, as the messages and the
importer recorded them), the current todo list, the scratchpad's index (each
note's name and size; the notes themselves are a ``scratchpad_read`` away) and the
skills loaded.

The facts are the session's, never the process's: a run imported from February
and compacted in December by a CLI started in ``/tmp`` still says the directory,
branch and day it worked in. The process now running describes itself in its
own system prompt only.

It is written once per checkpoint, not rebuilt per turn, so the window's prefix
stays byte-identical until the next compaction (invariant 7); later changes to
the todo list or the scratchpad are in the verbatim messages after the cut.
"""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.compaction.progress import failing_checks
from threadline.compaction.snapshot import clip_words
from threadline.compaction.trail import Trail
from threadline.context.builder import ORIENTATION_KEY
from threadline.messages import Message
from threadline.store.protocol import Session

ORIENTATION_HEADER = (
    "## Orientation\n"
    "[written by threadline at this compaction, so the work can go on where it stopped]"
)
TODO_HEADER = "Todo list (as last written, at #{seq}):"
SCRATCHPAD_HEADER = "Scratchpad notes (read one with scratchpad_read):"
SKILLS_HEADER = "Skills loaded (load one again with the skill tool to read it):"
MAX_NOTES = 50
"""Scratchpad notes listed by name; beyond this many the rest are counted."""
MAX_TODO_CHARS = 300
FAILED_WORDS = 12
"""Words of a failed command named beside the todo list."""

SESSION_HEADER = "Session (as its own messages record it):"


def _todo_lines(trail: Trail) -> list[str]:
    """The list as the agent last wrote it, dated, and a word when a check failed after it
    and still fails: a list marked all done is then no account of the run's state."""
    if trail.todos is None or not trail.todos.items:
        return []
    lines = [TODO_HEADER.format(seq=trail.todos.seq)]
    after = [c for c in failing_checks(trail.progress) if c.seq > trail.todos.seq]
    if after:
        failed = ", ".join(
            f"`{clip_words(c.command, FAILED_WORDS)}` failed at #{c.seq}" for c in after
        )
        lines.append(f"[since it was written: {failed}, and has not passed since]")
    for text, status in trail.todos.items:
        flat = " ".join(text.split())
        if len(flat) > MAX_TODO_CHARS:
            flat = flat[: MAX_TODO_CHARS - 3] + "..."
        lines.append(f"- [{status.replace('_', ' ')}] {flat}")
    return lines


def _scratchpad_lines(session: Session) -> list[str]:
    entries = session.scratchpad_list()
    if not entries:
        return []
    lines = [SCRATCHPAD_HEADER]
    for e in entries[:MAX_NOTES]:
        lines.append(f"- {e.name} ({len(e.content):,} characters)")
    if len(entries) > MAX_NOTES:
        lines.append(f"- ... and {len(entries) - MAX_NOTES:,} more (scratchpad_list)")
    return lines


def _session_lines(session: Session, trail: Trail, latest: Message | None) -> list[str]:
    """The session's working directory (the one its source recorded, else the first its
    messages report: a later ``cd`` of the agent's shell moves where one command ran, not
    the session), git branch and the date of its latest message (none for an imported
    transcript that records no times: its messages bear the import's)."""
    facts = session.info.metadata
    lines: list[str] = []
    recorded = facts.get("cwd")
    cwd = recorded if isinstance(recorded, str) and recorded.strip() else None
    cwd = cwd or trail.tracker.root or trail.tracker.cwd
    if isinstance(cwd, str) and cwd.strip():
        lines.append(f"- Working directory: {cwd.strip()}")
    branch = facts.get("git_branch")
    if isinstance(branch, str) and branch.strip():
        lines.append(f"- Git branch: {branch.strip()}")
    undated = "format" in facts and not facts.get("source_updated_at")
    if latest is not None and not undated:  # an import without times is dated by the import
        when = latest.created_at
        when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
        lines.append(f"- Latest message: {_day(when)}")
    return [SESSION_HEADER, *lines] if lines else []


def _day(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC (%A)")


def build_orientation(session: Session, trail: Trail, latest: Message | None = None) -> str:
    """The orientation block for a checkpoint of ``session``; ``trail`` runs to the newest
    message (the kept tail included), ``latest`` is that message. Empty when there is
    nothing to say."""
    blocks: list[list[str]] = []
    for lines in (
        _session_lines(session, trail, latest),
        _todo_lines(trail),
        _scratchpad_lines(session),
    ):
        if lines:
            blocks.append(lines)
    skills = trail.skills_in_use()
    if skills:
        blocks.append([SKILLS_HEADER, *(f"- {name}" for name in skills)])
    if not blocks:
        return ""
    return ORIENTATION_HEADER + "\n\n" + "\n\n".join("\n".join(b) for b in blocks)


def orientation_metadata(session: Session, trail: Trail, latest: Message | None) -> dict[str, str]:
    """``{ORIENTATION_KEY: text}`` for a checkpoint's metadata, or nothing."""
    text = build_orientation(session, trail, latest)
    return {ORIENTATION_KEY: text} if text else {}


__all__ = ["ORIENTATION_HEADER", "SESSION_HEADER", "build_orientation", "orientation_metadata"]
