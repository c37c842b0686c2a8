"""supyagent sessions, both ways: ``.supyagent/sessions/<agent>/<id>.jsonl`` plus
``<id>_summary.json``.

The JSONL's first line is the session's meta record (``{"type": "meta",
"session_id", "agent", "model", "title", "created_at", "updated_at"}``); every
other line is one message ``{"type": "user" | "assistant" | "tool_result" |
"system", "content", "tool_calls", "tool_call_id", "name", "ts"}`` with content
and tool calls in Chat Completions shape (older files and supyagent's docs write
``timestamp`` for ``ts``, and a file may lack the meta line).

The summary file is supyagent's context summary: ``{"content", "messages_summarized",
"first_message_idx", "last_message_idx", "created_at", "token_count"}``, indexes
counting the file's message lines from 0. It becomes a checkpoint covering messages
``0..last_message_idx``; supyagent keeps only its latest summary, so an export writes
the session's latest checkpoint there. ``content`` is the summary text, or (newer
structured snapshots) an object of sections, rendered one heading per section.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop.openai_format import (
    content_from_openai,
    message_to_openai,
    tool_call_from_openai,
)
from threadline.interop.records import Parsed, Where, jsonl, stamp
from threadline.messages import Message

MESSAGE_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
SUMMARY_SUFFIX = "_summary.json"
_TYPE_OF_ROLE = {
    "user": "user",
    "assistant": "assistant",
    "tool": "tool_result",
    "system": "system",
}


def summary_path(path: Path) -> Path:
    """Where supyagent keeps the summary of the session file at ``path``."""
    return path.with_name(path.stem + SUMMARY_SUFFIX)


def looks_like(record: Mapping[str, Any]) -> bool:
    """Whether a first JSONL record is supyagent's: its meta line, or a message line
    (a Claude Code line of the same ``type`` always has ``message`` or ``uuid``)."""
    kind = record.get("type")
    if not isinstance(kind, str):
        return False
    if kind == "meta":
        return "session_id" in record and "agent" in record
    if kind not in MESSAGE_TYPES or {"message", "uuid", "sessionId"} & record.keys():
        return False
    return "content" in record or "tool_calls" in record


# -- reading -------------------------------------------------------------------------


def parse(text: str, path: Path, summary: str | None = None) -> Parsed:
    """The session in ``text`` (a supyagent JSONL), with ``summary`` (the text of its
    ``_summary.json``, if any) as a checkpoint."""
    result = Parsed([[]])
    out = result.runs[0]
    extra = result.extra(0)
    meta: dict[str, Any] = {}
    with Where(path) as where:
        for where.line, rec in jsonl(text, path):
            kind = rec.get("type")
            if kind == "meta":
                meta = rec
                continue
            if kind not in MESSAGE_TYPES:
                result.skipped[f"type:{kind}"] += 1
                continue
            out.append(
                stamp(_message(kind, rec, meta.get("model")), rec.get("ts", rec.get("timestamp")))
            )
    model = meta.get("model") if isinstance(meta.get("model"), str) else None
    agent, own = meta.get("agent"), meta.get("session_id")
    if isinstance(agent, str) and isinstance(own, str) and agent and own:
        extra["source_id"] = f"{agent}/{own}"
    elif path.name != "-" and path.suffix == ".jsonl" and path.parent.name:
        extra["source_id"] = f"{path.parent.name}/{path.stem}"  # the layout names it
    extra["started"], extra["updated"] = meta.get("created_at"), meta.get("updated_at")
    extra["model"] = model
    facts = {"supyagent_agent": agent, "source_title": meta.get("title")}
    extra["facts"] = {k: v for k, v in facts.items() if isinstance(v, str) and v}
    if summary is not None:
        _add_summary(result, summary, path, len(out))
    return result


def _message(kind: str, rec: Mapping[str, Any], model: Any) -> Message:
    content = content_from_openai(rec.get("content"))
    if kind == "tool_result":
        call_id = rec.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage("a tool_result needs 'tool_call_id'")
        name = rec.get("name")
        return Message.tool(
            content, tool_call_id=call_id, name=name if isinstance(name, str) else None
        )
    if kind == "assistant":
        raw_calls = rec.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise InvalidMessage("'tool_calls' must be a list")
        calls = [tool_call_from_openai(c) for c in raw_calls]
        return Message.assistant(
            content, tool_calls=calls, model=model if isinstance(model, str) else None
        )
    return Message(role="user" if kind == "user" else "system", content=content)


def _add_summary(result: Parsed, text: str, path: Path, count: int) -> None:
    where = str(summary_path(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"invalid JSON: {exc.msg}", line=exc.lineno, path=where) from exc
    last = data.get("last_message_idx") if isinstance(data, dict) else None
    if not isinstance(data, dict) or isinstance(last, bool) or not isinstance(last, int):
        raise ImportFormatError("a summary needs 'content' and 'last_message_idx'", path=where)
    if "content" not in data or last < -1:
        raise ImportFormatError("a summary needs 'content' and 'last_message_idx'", path=where)
    if last + 1 > count:
        result.skipped["summary_beyond_messages"] += 1  # written for lines not in the file
        return
    keys = ("messages_summarized", "first_message_idx", "last_message_idx", "token_count")
    metadata: dict[str, Any] = {"native": "supyagent", "source_created_at": data.get("created_at")}
    metadata.update({k: data[k] for k in keys if isinstance(data.get(k), int)})
    result.extra(0).setdefault("compactions", []).append(
        {"before": last + 1, "summary": summary_text(data["content"]), "metadata": metadata}
    )


def summary_text(content: Any) -> str:
    """A summary's ``content`` as text: as written, or an object of sections as one
    ``## heading`` per section (lists as bullet points)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        blocks = []
        for title, body in content.items():
            if isinstance(body, list):
                lines = "\n".join(f"- {_plain(item)}" for item in body)
            else:
                lines = _plain(body)
            blocks.append(f"## {title}\n{lines}".rstrip())
        return "\n\n".join(blocks)
    return _plain(content)


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# -- writing -------------------------------------------------------------------------


def to_supyagent(
    info: Mapping[str, Any],
    messages: Iterable[Message],
    checkpoint: Mapping[str, Any] | None = None,
) -> tuple[str, str | None]:
    """``(session JSONL, summary JSON or None)`` for a session; ``info`` is the session's
    (id, agent, model, title, created/updated), ``checkpoint`` its latest, if any."""
    items = list(messages)
    meta = {
        "type": "meta",
        "session_id": str(info.get("id", "")),
        "agent": str(info.get("agent") or "threadline"),
        "model": str(info.get("model") or ""),
        "title": info.get("title"),
        "created_at": _iso(info.get("created_at")),
        "updated_at": _iso(info.get("updated_at")),
    }
    lines = [json.dumps(meta, ensure_ascii=False)]
    for m in items:
        lines.append(json.dumps(_record(m), ensure_ascii=False))
    summary = _summary(checkpoint, items) if checkpoint is not None else None
    return "\n".join(lines) + "\n", summary


def _record(m: Message) -> dict[str, Any]:
    openai = message_to_openai(m)
    return {
        "type": _TYPE_OF_ROLE[m.role],
        "content": openai.get("content"),
        "tool_calls": openai.get("tool_calls"),
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "ts": m.created_at.isoformat(),
    }


def _summary(checkpoint: Mapping[str, Any], items: Sequence[Message]) -> str | None:
    covers = checkpoint.get("covers_up_to")
    if not isinstance(covers, int):
        return None
    # the summary indexes the file's message lines, which are the exported messages
    last = max(
        (i for i, m in enumerate(items) if m.seq is not None and m.seq <= covers), default=-1
    )
    if last < 0:
        return None
    data = {
        "content": str(checkpoint.get("summary", "")),
        "messages_summarized": last + 1,
        "first_message_idx": 0,
        "last_message_idx": last,
        "created_at": _iso(checkpoint.get("created_at")),
    }
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.isoformat()
    return value if isinstance(value, str) else None
