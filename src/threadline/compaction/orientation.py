"""Orientation after a compaction: where the agent is, what it was doing, what it noted.

agsh "re-injects environment context so the agent isn't disoriented after
compaction", and its todo list and scratchpad survive it. A compaction
replaces the messages that showed the agent its surroundings with a summary,
so each checkpoint carries an orientation block, written when the checkpoint
is (``ORIENTATION_KEY`` in its metadata) and shown by the context builder right
after the summary, in the same message: the environment lines of the agent's
system prompt (working directory, date, timezone, operating system), the
current todo list, the scratchpad's index (each note's name and size; the
notes themselves are a ``scratchpad_read`` away) and the skills loaded.

It is written once per checkpoint, not rebuilt per turn, so the window's prefix
stays byte-identical until the next compaction (invariant 7); later changes to
the todo list or the scratchpad are in the verbatim messages after the cut.
"""

from __future__ import annotations

from collections.abc import Callable

from threadline.compaction.trail import Trail
from threadline.context.builder import ORIENTATION_KEY
from threadline.store.protocol import Session

ORIENTATION_HEADER = (
    "## Orientation\n"
    "[written by threadline at this compaction, so the work can go on where it stopped]"
)
TODO_HEADER = "Todo list (as last written):"
SCRATCHPAD_HEADER = "Scratchpad notes (read one with scratchpad_read):"
SKILLS_HEADER = "Skills loaded (load one again with the skill tool to read it):"
MAX_NOTES = 50
"""Scratchpad notes listed by name; beyond this many the rest are counted."""
MAX_TODO_CHARS = 300

Environment = Callable[[Session], str | None]
"""Gives the environment lines of the agent's system prompt for a session (the agent
supplies it: ``Agent`` sets ``Compactor.environment``)."""


def _todo_lines(trail: Trail) -> list[str]:
    if trail.todos is None or not trail.todos.items:
        return []
    lines = [TODO_HEADER]
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


def build_orientation(session: Session, trail: Trail, environment: str | None = None) -> str:
    """The orientation block for a checkpoint of ``session``; ``trail`` runs to the newest
    message (the kept tail included), ``environment`` is the agent's environment lines.
    Empty when there is nothing to say."""
    blocks: list[list[str]] = []
    if environment and environment.strip():
        blocks.append([environment.strip()])
    for lines in (_todo_lines(trail), _scratchpad_lines(session)):
        if lines:
            blocks.append(lines)
    skills = trail.skills_in_use()
    if skills:
        blocks.append([SKILLS_HEADER, *(f"- {name}" for name in skills)])
    if not blocks:
        return ""
    return ORIENTATION_HEADER + "\n\n" + "\n\n".join("\n".join(b) for b in blocks)


def orientation_metadata(
    session: Session, trail: Trail, environment: Environment | None
) -> dict[str, str]:
    """``{ORIENTATION_KEY: text}`` for a checkpoint's metadata, or nothing; a failing
    environment callback costs its lines, never the compaction."""
    env: str | None = None
    if environment is not None:
        try:
            env = environment(session)
        except Exception:  # the agent's callback: orientation is a courtesy, not a need
            env = None
    text = build_orientation(session, trail, env)
    return {ORIENTATION_KEY: text} if text else {}


__all__ = ["ORIENTATION_HEADER", "Environment", "build_orientation", "orientation_metadata"]
