"""SWE-agent trajectories (``.traj``).

One JSON object. ``history`` is the conversation in OpenAI chat shape plus SWE-agent's
own keys (``agent``, ``message_type``, ``action``, ``is_demo``: kept in metadata); a
tool message names its call in ``tool_call_ids`` (the first is its id; all are kept
when there are several). The ``trajectory`` steps show the same turns as the agent saw
them and are read only for the repository root (a step's ``state.working_dir``);
``info`` gives ``exit_status`` and ``model_stats``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop.openai_format import message_from_openai
from threadline.interop.record_fields import Cwd
from threadline.interop.records import Parsed, Where, load_json
from threadline.interop.shapes import json_kind
from threadline.messages import Message


def parse(text: str, path: Path) -> Parsed:
    data = load_json(text, path)
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise ImportFormatError("a SWE-agent .traj needs a 'history' list", path=str(path))
    out: list[Message] = []
    with Where(path):
        for i, entry in enumerate(data["history"]):
            if not isinstance(entry, dict):
                raise InvalidMessage(f"history[{i}]: expected an object, got {json_kind(entry)}")
            d = dict(entry)
            ids = d.pop("tool_call_ids", None)
            if d.get("role") == "tool" and ids and not d.get("tool_call_id"):
                d["tool_call_id"] = ids[0]
            try:
                m = message_from_openai(d)
            except InvalidMessage as exc:
                raise InvalidMessage(f"history[{i}]: {exc}") from exc
            keep = ("agent", "message_type", "action", "is_demo")
            m.metadata.update({k: d[k] for k in keep if d.get(k) is not None})
            if ids and len(ids) > 1:
                m.metadata["tool_call_ids"] = ids
            out.append(m)
    if out:
        Cwd().stamp(out[0], _swe_agent_cwd(data.get("trajectory")))
    info = data.get("info") or {}
    return Parsed([out], {k: info.get(k) for k in ("exit_status", "model_stats") if k in info})


def _swe_agent_cwd(trajectory: Any) -> str | None:
    """The repository root: ``working_dir`` in the first step's state (a dict or JSON text)."""
    for step in trajectory if isinstance(trajectory, list) else []:
        state = step.get("state") if isinstance(step, dict) else None
        if isinstance(state, str):
            try:
                state = json.loads(state)
            except json.JSONDecodeError:
                state = None
        if isinstance(state, dict) and isinstance(state.get("working_dir"), str):
            return str(state["working_dir"])
    return None
