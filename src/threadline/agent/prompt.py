"""The system prompt: the agent's own prompt plus a little runtime context.

The model is told the current date, the timezone, the working directory and
the operating system (the agent server's "runtime context"). The system
prompt is the first thing in every request, so it is the start of the prefix
that providers cache (invariant 7): if it changed every turn, no request would
ever hit the cache. So the time is given to the *day* by default (``hour`` is
available for agents that need it), never to the second; within a day the
prompt is byte-identical from turn to turn, and nothing else in it moves
unless the process changes directory.
"""

from __future__ import annotations

import os
import platform
from datetime import datetime, tzinfo
from pathlib import Path

from threadline.agent.config import RuntimeContextConfig, TimeResolution

RUNTIME_HEADER = "# Runtime context"
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
    cwd: Path | str | None = None,
    tz: tzinfo | None = None,
) -> str:
    """The runtime lines of the system prompt; empty when everything is turned off."""
    settings = settings or RuntimeContextConfig()
    current = now or datetime.now(tz).astimezone(tz)
    if current.tzinfo is None:
        current = current.astimezone()
    lines: list[str] = []
    when = format_time(current, settings.time, timezone_name(tz or _given_zone(now), now=current))
    if when is not None:
        label = "Current date" if settings.time == "date" else "Current date and hour"
        lines.append(f"- {label}: {when}")
    if settings.working_directory:
        lines.append(f"- Working directory: {cwd if cwd is not None else os.getcwd()}")
    if settings.os:
        lines.append(f"- Operating system: {platform.system() or 'unknown'} {platform.release()}")
    if not lines:
        return ""
    return RUNTIME_HEADER + "\n" + "\n".join(lines)


def build_system_prompt(
    base: str,
    settings: RuntimeContextConfig | None = None,
    *,
    now: datetime | None = None,
    cwd: Path | str | None = None,
    tz: tzinfo | None = None,
) -> str:
    """The agent's prompt followed by the runtime context; stable within a day."""
    extra = runtime_context(settings, now=now, cwd=cwd, tz=tz)
    base = base.strip()
    if not extra:
        return base
    return f"{base}\n\n{extra}" if base else extra
