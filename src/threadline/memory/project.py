"""Which project a session belongs to: the git root, else the working directory.

A coding agent's memory of one project must not be injected into another's
sessions. The project is recorded on the session (``metadata["project"]``) when
an agent creates it; imported sessions carry the transcript's ``cwd`` (on the
session or on its first messages), whose git root is found the same way when the
directory still exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadline.store.protocol import Session

PROJECT_KEY = "project"
"""The session metadata key holding the session's project directory."""
FIRST_MESSAGES = 8
"""Messages read from a session's start for an imported transcript's ``cwd``."""


def project_root(cwd: str | Path | None = None) -> str:
    """The git root above ``cwd`` (default: the process's), else ``cwd`` itself."""
    start = Path(cwd) if cwd is not None else Path.cwd()
    try:
        start = start.resolve()
    except OSError:
        return str(start)
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return str(folder)
    return str(start)


def _recorded(metadata: dict[str, Any]) -> str | None:
    for key in (PROJECT_KEY, "cwd"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value if key == PROJECT_KEY else project_root(value)
    return None


def session_project(session: Session) -> str | None:
    """The project recorded on ``session`` (or its first messages' ``cwd``); None if none."""
    found = _recorded(session.info.metadata)
    if found is not None:
        return found
    for m in session.read_messages(limit=FIRST_MESSAGES):
        found = _recorded(m.metadata)
        if found is not None:
            return found
    return None
