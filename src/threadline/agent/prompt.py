"""The system prompt, assembled from optional sections in a fixed order.

The agent server's seed lists the parts: the default agent instructions (the
agent's own prompt), skill hints (the skills the model can load with the
``skill`` tool), subagent hints (the agents it can delegate to with the
``task`` tool), the working directory, media context when inline images are in
the conversation, and runtime context (date, timezone, operating system). Each
is a ``PromptSection``; an empty one is left out; the rest are joined in that
order by blank lines, and ``threadline context`` shows them one by one.

The system prompt is the first thing in every request, so it is the start of
the prefix that providers cache (invariant 7): if it changed every turn, no
request would ever hit the cache. So hints are sorted by name, the time is
given to the *day* by default (``hour`` is available for agents that need it),
never to the second, and nothing else moves: two turns of one config in one
day get a byte-identical prompt (a property test holds it).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, Literal

from threadline.agent.config import RuntimeContextConfig, TimeResolution

RUNTIME_HEADER = "# Runtime context"
SKILLS_HEADER = "# Skills"
SKILLS_INTRO = (
    "Skills hold instructions for particular kinds of task. Before doing such a task, load "
    "its skill with the `skill` tool (by name); its instructions then stay in this context."
)
SUBAGENTS_HEADER = "# Subagents"
SUBAGENTS_INTRO = (
    "You can delegate a self-contained task to one of these agents with the `task` tool; "
    "each works in a session of its own and returns its final answer to you."
)
WORKDIR_HEADER = "# Working directory"
MEDIA_HEADER = "# Media"
MEDIA_TEXT = (
    "This conversation contains inline images, attached to the messages they belong to. "
    "Look at them when they bear on the request; an image that leaves this context is not "
    "shown again, so note what matters in it."
)
SectionName = Literal[
    "instructions", "skills", "subagents", "working_directory", "media", "runtime"
]
SECTION_ORDER: tuple[SectionName, ...] = (
    "instructions",
    "skills",
    "subagents",
    "working_directory",
    "media",
    "runtime",
)
SECTION_TITLES: dict[SectionName, str] = {
    "instructions": "Agent instructions",
    "skills": "Skill hints",
    "subagents": "Subagent hints",
    "working_directory": "Working directory",
    "media": "Media context",
    "runtime": "Runtime context",
}
HINT_MAX_CHARS = 300
"""A hint's description is one line, cut here."""


@dataclass(frozen=True, slots=True)
class PromptSection:
    """One part of the system prompt: which, and its text as sent."""

    name: SectionName
    text: str

    @property
    def title(self) -> str:
        return SECTION_TITLES[self.name]


LOCALTIME_PATH = Path("/etc/localtime")
ZONEINFO_MARKER = "zoneinfo/"
TZ_ENV = "TZ"


def timezone_name(tz: tzinfo | None = None, *, now: datetime | None = None) -> str:
    """The IANA name when it can be found (``Europe/Berlin``), else the abbreviation."""
    if tz is not None:
        key = getattr(tz, "key", None)  # zoneinfo.ZoneInfo
        if isinstance(key, str):
            return key
        return (now or datetime.now(tz)).tzname() or "UTC"
    env = os.environ.get(TZ_ENV, "").lstrip(":")
    if env and "/" in env and not env.startswith("/"):
        return env
    try:
        target = os.path.realpath(LOCALTIME_PATH)
    except OSError:
        target = ""
    if ZONEINFO_MARKER in target:
        return target.split(ZONEINFO_MARKER, 1)[1]
    local = (now or datetime.now()).astimezone()
    return local.tzname() or "UTC"


def _given_zone(now: datetime | None) -> tzinfo | None:
    """The zone of an explicit ``now`` when it names one (a ZoneInfo), else None (local)."""
    if now is not None and isinstance(getattr(now.tzinfo, "key", None), str):
        return now.tzinfo
    return None


def format_time(now: datetime, resolution: TimeResolution, zone: str) -> str | None:
    """``2025-01-15 (Wednesday), Europe/Berlin, UTC+01:00``, or with the hour ``14:00``."""
    if resolution == "none":
        return None
    offset = now.strftime("%z")
    utc = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    day = now.strftime("%Y-%m-%d (%A)")
    if resolution == "hour":
        day = now.strftime("%Y-%m-%d %H:00 (%A)")
    return f"{day}, timezone {zone} ({utc})"


def runtime_context(
    settings: RuntimeContextConfig | None = None,
    *,
    now: datetime | None = None,
    tz: tzinfo | None = None,
    process: bool = False,
) -> str:
    """The runtime section (date, timezone, operating system); empty when turned off.
    ``process``: the session ran elsewhere and earlier, so each line says it is this
    process's."""
    settings = settings or RuntimeContextConfig()
    current = now or datetime.now(tz).astimezone(tz)
    if current.tzinfo is None:
        current = current.astimezone()
    lines: list[str] = []
    when = format_time(current, settings.time, timezone_name(tz or _given_zone(now), now=current))
    if when is not None:
        label = "Current date" if settings.time == "date" else "Current date and hour"
        lines.append(f"- {label}{PROCESS_NOTE if process else ''}: {when}")
    if settings.os:
        system = f"{platform.system() or 'unknown'} {platform.release()}"
        lines.append(f"- Operating system{PROCESS_NOTE if process else ''}: {system}")
    if not lines:
        return ""
    return RUNTIME_HEADER + "\n" + "\n".join(lines)


PROCESS_NOTE = " (of this process, not of the session)"


def session_place(facts: Mapping[str, Any] | None) -> str:
    """Where and when the session ran, as its own records say (an imported session's
    ``cwd``, ``git_branch``, ``source_updated_at``); empty when they say neither where
    nor when."""
    facts = facts or {}
    cwd = facts.get("cwd")
    updated = facts.get("source_updated_at")
    dated = isinstance(updated, str) and len(updated) >= 10
    if isinstance(cwd, str) and cwd.strip():
        text = f"The session ran in {cwd.strip()}"
    elif dated:
        text = "The session's directory is not recorded"
    else:
        return ""
    branch = facts.get("git_branch")
    if isinstance(branch, str) and branch.strip():
        text += f" on git branch {branch.strip()}"
    if isinstance(updated, str) and dated:
        text += f"; its latest record is from {updated[:10]}"
    return text + " (as its own records say)."


def working_directory(
    settings: RuntimeContextConfig | None = None,
    cwd: Path | str | None = None,
    *,
    session: Mapping[str, Any] | None = None,
) -> str:
    """The working-directory section; empty when the agent turns it off. When the session
    records where it ran, that comes first and this process's directory is labelled so
    (DESIGN invariant 11: the context describes the session, not the process)."""
    settings = settings or RuntimeContextConfig()
    if not settings.working_directory:
        return ""
    here = cwd if cwd is not None else os.getcwd()
    place = session_place(session)
    if place:
        return f"{WORKDIR_HEADER}\n{place}\nThis process runs in {here}."
    return f"{WORKDIR_HEADER}\n{here}"


def one_line_hint(description: str) -> str:
    """A description on one line, cut at ``HINT_MAX_CHARS``."""
    flat = " ".join(description.split())
    return flat if len(flat) <= HINT_MAX_CHARS else flat[: HINT_MAX_CHARS - 3].rstrip() + "..."


def hint_list(header: str, intro: str, hints: Iterable[tuple[str, str]]) -> str:
    """``header``, ``intro`` and one ``- name: description`` line per hint, sorted by name
    (a set's order, a directory listing's order must not reach the cached prefix)."""
    lines = [f"- {name}: {one_line_hint(text)}" for name, text in sorted(set(hints))]
    if not lines:
        return ""
    return "\n".join([header, intro, *lines])


def prompt_sections(
    base: str,
    settings: RuntimeContextConfig | None = None,
    *,
    skills: Sequence[tuple[str, str]] = (),
    subagents: Sequence[tuple[str, str]] = (),
    media: bool = False,
    now: datetime | None = None,
    cwd: Path | str | None = None,
    tz: tzinfo | None = None,
    session: Mapping[str, Any] | None = None,
) -> list[PromptSection]:
    """The system prompt's non-empty sections, in ``SECTION_ORDER``; ``session`` is the
    session's metadata (where an imported one ran)."""
    texts: dict[SectionName, str] = {
        "instructions": base.strip(),
        "skills": hint_list(SKILLS_HEADER, SKILLS_INTRO, skills),
        "subagents": hint_list(SUBAGENTS_HEADER, SUBAGENTS_INTRO, subagents),
        "working_directory": working_directory(settings, cwd, session=session),
        "media": f"{MEDIA_HEADER}\n{MEDIA_TEXT}" if media else "",
        "runtime": runtime_context(settings, now=now, tz=tz, process=bool(session_place(session))),
    }
    return [PromptSection(name, texts[name]) for name in SECTION_ORDER if texts[name]]


def join_sections(sections: Iterable[PromptSection]) -> str:
    return "\n\n".join(s.text for s in sections)


def build_system_prompt(
    base: str, settings: RuntimeContextConfig | None = None, **parts: Any
) -> str:
    """The assembled prompt: ``prompt_sections`` (same keywords) joined; stable within a
    day."""
    return join_sections(prompt_sections(base, settings, **parts))
