"""Counts taken from a raw transcript file by a few lines per format, without the importer.

What each counter counts is the format's own unit (a record, a block, a part), with
the importer's documented choices spelled out where they decide a count: Claude Code's
streamed lines of one response are one message and its compaction summary a
checkpoint; a Codex call the model made right after a tool result opens an assistant
message of its own; an OpenCode step is one assistant message and its compaction
summary a checkpoint; an aider user turn is a run of ``####`` lines. Used by
tests/test_independent_counts.py and, for the table in the report, run as a script.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Counts = Counter[str]
"""Per role (``user``, ``assistant``, ``tool``, ``system``), plus ``calls``."""


def records(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON object of a JSONL file, two glued on one line included."""
    decoder = json.JSONDecoder()
    for line in path.read_text(encoding="utf-8").splitlines():
        at = 0
        line = line.strip()
        while at < len(line):
            rec, at = decoder.raw_decode(line, at)
            yield rec


def claude_code(path: Path) -> Counts:
    c: Counts = Counter()
    last_id, waiting, pending_text = None, [], False
    for rec in records(path):
        kind, msg = rec.get("type"), rec.get("message") or {}
        if kind == "queue-operation":
            if rec.get("operation") == "enqueue":
                waiting.append(rec.get("content") or "")
            elif rec.get("operation") == "remove" and waiting:
                typed = [t for t in waiting if not t.startswith("<task-notification>")]
                text = typed[0] if typed else waiting[0]
                waiting.remove(text)
                pending_text = pending_text or not re.match(r"\s*/\w", text)
            continue
        if kind == "assistant":
            blocks = msg.get("content") or []
            c["calls"] += sum(b.get("type") == "tool_use" for b in blocks)
            if msg.get("id") != last_id or msg.get("id") is None:
                c["assistant"] += 1
                c["user"] += pending_text  # a prompt taken mid-turn goes first
                pending_text = False
            last_id = msg.get("id")
        elif kind == "user":
            content = msg.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text"}]
            c["tool"] += sum(b.get("type") == "tool_result" for b in blocks)
            if any(b.get("type") != "tool_result" for b in blocks):
                last_id = None
                c["user"] += not rec.get("isCompactSummary")  # a checkpoint, not a message
    return c


def _payload(rec: dict[str, Any]) -> dict[str, Any]:
    return rec.get("payload") or {}


def codex(path: Path) -> Counts:
    c: Counts = Counter()
    previous = None  # the last item that makes a message: "assistant", "call", "other"
    compacted = False
    window_user, window_events = False, 0
    for rec in records(path):
        p, kind = _payload(rec), rec.get("type")
        item = p.get("type")
        if kind == "compacted":
            compacted = True
        if kind == "event_msg" and item == "user_message":
            window_events += 1
        if kind != "response_item":
            continue
        if item == "message":
            role = {"developer": "system"}.get(p["role"], p["role"])
            c[role] += 1
            texts = [str(b.get("text", "")) for b in p.get("content") or []]
            context = (
                "<environment_context",
                "<user_instructions",
                "# AGENTS.md",
                "<recommended_plugins",
            )
            window_user = window_user or (
                role == "user" and not all(t.startswith(context) for t in texts)
            )
            previous = "assistant" if role == "assistant" else "other"
            compacted = False
        elif item in ("function_call", "custom_tool_call"):
            c["calls"] += 1
            if previous not in ("assistant", "call") or compacted:
                c["assistant"] += 1
            previous, compacted = "call", False
        elif item in ("function_call_output", "custom_tool_call_output"):
            c["tool"] += 1
            previous, compacted = "other", False
        elif item == "web_search_call":  # a call and, at once, its result
            c["calls"] += 1
            c["tool"] += 1
            if previous not in ("assistant", "call") or compacted:
                c["assistant"] += 1
            previous, compacted = "other", False
        if item in ("function_call", "custom_tool_call", "reasoning", "web_search_call") or (
            item == "message" and p["role"] == "assistant"
        ):  # model output: a user turn carried only by events is a message too
            c["user"] += 0 if window_user else window_events
            window_user, window_events = False, 0
    return c


def openai_runs(path: Path) -> Counts:
    c: Counts = Counter()
    for run in json.loads(path.read_text(encoding="utf-8")):
        for m in run["traj"]:
            c[m["role"]] += 1
            c["calls"] += len(m.get("tool_calls") or [])
    return c


def swe_agent(path: Path) -> Counts:
    c: Counts = Counter()
    for m in json.loads(path.read_text(encoding="utf-8"))["history"]:
        c[m["role"]] += 1
        c["calls"] += len(m.get("tool_calls") or [])
    return c


def openhands(path: Path) -> Counts:
    if path.is_dir():
        return openhands_v1(
            [json.loads(p.read_text(encoding="utf-8")) for p in sorted(path.iterdir())]
        )
    c: Counts = Counter()
    for run in records(path):
        responses = set()
        for ev in run["history"]:
            meta = ev.get("tool_call_metadata") or {}
            if ev.get("action") == "system":
                c["system"] += 1
            elif ev.get("action") == "message" and not meta:
                c["user" if ev.get("source") == "user" else "assistant"] += 1
            elif "action" in ev and meta:
                c["calls"] += 1
                rid = meta["model_response"]["id"]
                c["assistant"] += rid not in responses
                responses.add(rid)
            elif "observation" in ev and meta:
                c["tool"] += 1
            elif ev.get("observation") == "error":
                c["user"] += 1  # the runtime's error, as the model is shown it
    return c


def openhands_v1(events: list[dict[str, Any]]) -> Counts:
    c: Counts = Counter()
    responses = set()
    for ev in events:
        kind = ev["kind"]
        if kind == "SystemPromptEvent":
            c["system"] += 1
        elif kind == "MessageEvent":
            c[ev["llm_message"]["role"]] += 1
        elif kind == "ActionEvent":
            c["calls"] += 1
            c["assistant"] += ev.get("llm_response_id") not in responses
            responses.add(ev.get("llm_response_id"))
        elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            c["tool"] += 1
    return c


def gemini(path: Path) -> Counts:
    c: Counts = Counter()
    for m in json.loads(path.read_text(encoding="utf-8"))["messages"]:
        c[{"gemini": "assistant"}.get(m["type"], m["type"])] += 1
        calls = m.get("toolCalls") or []
        c["calls"] += len(calls)
        c["tool"] += sum(bool(call.get("result")) for call in calls)
    return c


def opencode(path: Path) -> Counts:
    c: Counts = Counter()
    for m in json.loads(path.read_text(encoding="utf-8"))["messages"]:
        parts, info = m["parts"], m["info"]
        tools = [p for p in parts if p["type"] == "tool"]
        c["calls"] += len(tools)
        c["tool"] += sum(p["state"]["status"] in ("completed", "error") for p in tools)
        if info["role"] == "user":
            c["user"] += any(p["type"] in ("text", "file", "subtask") for p in parts)
        elif not info.get("summary"):  # a compaction's summary is a checkpoint
            c["assistant"] += max(1, sum(p["type"] == "step-start" for p in parts))
    return c


def pi(path: Path) -> Counts:
    c: Counts = Counter()
    for rec in records(path):
        if rec["type"] in ("custom_message", "branch_summary"):
            c["user"] += 1
        if rec["type"] != "message":
            continue
        m = rec["message"]
        c[{"toolResult": "tool"}.get(m["role"], m["role"])] += 1
        c["calls"] += sum(
            b.get("type") == "toolCall" for b in m.get("content") or [] if isinstance(b, dict)
        )
    return c


def aider(path: Path) -> Counts:
    """User turns: runs of ``####`` lines (ending in two spaces where aider's session keeps
    them); aider writes no record boundary for replies, so those are not counted here."""
    c: Counts = Counter()
    for session in re.split(
        r"^# aider chat started at.*$", path.read_text(encoding="utf-8"), flags=re.M
    ):
        lines = session.splitlines()
        users = [x for x in lines if x.startswith("####")]
        keeps = bool(users) and sum(x.endswith("  ") for x in users) * 2 > len(users)
        inside = False
        for x in lines:
            mine = x.startswith("####") and (not keeps or x.endswith("  ") or x.strip() == "####")
            c["user"] += mine and not inside
            inside = mine
    return c


COUNTERS: dict[str, Callable[[Path], Counts]] = {
    "claude-code": claude_code,
    "codex": codex,
    "openai-chat": openai_runs,
    "swe-agent": swe_agent,
    "openhands": openhands,
    "aider": aider,
}


def counter_for(relative: str) -> Callable[[Path], Counts]:
    """By where the shared README files it, never by what the importer detects."""
    top, name = relative.split("/", 1)[0], relative.rsplit("/", 1)[-1]
    if top == "other":
        return gemini if name.startswith("gemini") else opencode if "opencode" in name else pi
    return COUNTERS[top]


def sources(root: Path) -> list[str]:
    """Every transcript under ``root``: a file, or a directory of one file per event."""
    found = set()
    for p in root.rglob("*"):
        if p.is_file() and p.name != "README.md":
            rel = str(p.relative_to(root))
            found.add(str(Path(rel).parent) if p.name.startswith("event-") else rel)
    return sorted(found)


if __name__ == "__main__":  # the table of the report: python tests/independent_counts.py DIR
    from threadline.interop.importers import import_sessions

    root = Path(sys.argv[1])
    for rel in sources(root):
        raw = counter_for(rel)(root / rel)
        got: Counts = Counter()
        for session in import_sessions(root / rel):
            for m in session.messages:
                got[m.role] += 1
                got["calls"] += len(m.tool_calls)
        keys = ("user", "assistant", "tool", "system", "calls")
        cells = " | ".join(f"{got[k]}/{raw[k]}" if raw[k] or got[k] else "-" for k in keys)
        print(f"| {rel} | {cells} |")
