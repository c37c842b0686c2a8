"""OpenHands' legacy (resolver) events, brought to the shape ``openhands_events`` reads.

Schema: the OpenHands resolver's ``output.jsonl`` (``openhands/resolver``, 2024) holds
one run a line (``issue``, ``instruction``, ``history``, ``metrics``, ``success``,
``git_patch``). Its ``history`` events are actions and observations written by
``event.to_memory()`` of that time: no ``id``, ``timestamp``, ``source``, ``cause``
or ``tool_call_metadata``, and each action's arguments (``content``, ``command``,
``code``, ``path``, ``thought``, ...) and each observation's extras (``command``,
``exit_code``, ``path``, ...) sit beside ``action`` / ``observation`` instead of in
``args`` / ``extras``.

:func:`normalise` moves them into ``args`` / ``extras`` and says who spoke: the
first ``message`` is the task (the user); a later one is the user's when it answers
an agent message that waited for a response (``wait_for_response``), else the
agent's; every other action is the agent's. Observations carry no ``cause``, so
``openhands_events`` pairs them with the actions positionally. Events already in the current
shape (``args`` present) pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ACTION_META = frozenset({"action", "source", "id", "timestamp", "message", "cause", "action_risk"})
OBSERVATION_META = frozenset(
    {"observation", "content", "source", "id", "timestamp", "message", "cause"}
)


def is_legacy(event: Any) -> bool:
    if not isinstance(event, Mapping):
        return False
    if "action" in event:
        return "args" not in event
    return "observation" in event and "extras" not in event and "cause" not in event


def normalise(events: list[Any]) -> list[Any]:
    """``events`` in the current shape (see the module docstring)."""
    if not any(is_legacy(e) for e in events):
        return events
    out: list[Any] = []
    seen_message = False
    waiting = False  # the agent's last message asked the user for a response
    for ev in events:
        if not is_legacy(ev):
            out.append(ev)
            continue
        if "action" in ev:
            args = {k: v for k, v in ev.items() if k not in ACTION_META}
            source = ev.get("source")
            if source is None:
                source = "agent"
                if ev["action"] == "message" and (not seen_message or waiting):
                    source = "user"
            if ev["action"] == "message":
                seen_message = True
                waiting = source == "agent" and bool(args.get("wait_for_response"))
            out.append(
                {**{k: ev[k] for k in ACTION_META if k in ev}, "args": args, "source": source}
            )
        else:
            extras = {k: v for k, v in ev.items() if k not in OBSERVATION_META}
            base = {k: ev[k] for k in OBSERVATION_META if k in ev}
            out.append({**base, "extras": extras, "source": ev.get("source") or "agent"})
    return out
