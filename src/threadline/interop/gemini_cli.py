"""Gemini CLI saved sessions (one JSON file a session).

One JSON object: ``sessionId``, ``startTime``, ``lastUpdated`` and ``messages``. A
``user`` message is the user's; a ``gemini`` message is the model's, with ``tokens``
as usage, ``thoughts`` in ``metadata["thinking"]`` and ``toolCalls``, each holding its
own ``result``: its ``functionResponse`` output becomes a tool message right after the
call (flagged ``is_error`` unless the call's status is ``success``). Other message
types (the CLI's own notices) are skipped and counted.
"""

from __future__ import annotations

from pathlib import Path

from threadline.errors import ImportFormatError
from threadline.interop.record_fields import normalise, text_of, usage_of
from threadline.interop.records import Parsed, Where, load_json, stamp
from threadline.messages import Message, TextPart, ToolCall


def parse(text: str, path: Path) -> Parsed:
    data = load_json(text, path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ImportFormatError("a Gemini CLI session needs a 'messages' list", path=str(path))
    result = Parsed(
        [[]],
        {
            "session_id": data.get("sessionId"),
            "started": data.get("startTime"),
            "updated": data.get("lastUpdated"),
        },
    )
    out = result.runs[0]
    with Where(path):
        for msg in data["messages"]:
            kind, when = msg.get("type"), msg.get("timestamp")
            raw = msg.get("content")
            content = (
                raw
                if isinstance(raw, str)
                else normalise([TextPart(text=p["text"]) for p in raw or [] if "text" in p])
            )
            if kind == "user":
                out.append(stamp(Message.user(content), when))
                continue
            if kind != "gemini":
                result.skipped[f"message:{kind}"] += 1
                continue
            calls = msg.get("toolCalls") or []
            tool_calls = [
                ToolCall(id=c["id"], name=c["name"], arguments=c.get("args") or {}) for c in calls
            ]
            usage = usage_of(
                msg.get("tokens"),
                input_tokens="input",
                output_tokens="output",
                cached_tokens="cached",
            )
            meta = {"thinking": msg["thoughts"]} if msg.get("thoughts") else {}
            out.append(
                stamp(
                    Message.assistant(
                        content,
                        tool_calls=tool_calls,
                        model=msg.get("model"),
                        usage=usage,
                        metadata=meta,
                    ),
                    when,
                    source_id=msg.get("id"),
                )
            )
            for c in calls:
                responses = [
                    r.get("functionResponse", {}).get("response") for r in c.get("result") or []
                ]
                if not responses:
                    continue
                body = [r.get("output", r) if isinstance(r, dict) else r for r in responses]
                result_text = "\n".join(text_of(b) for b in body)
                error = {"is_error": True} if c.get("status") not in (None, "success") else {}
                out.append(
                    stamp(
                        Message.tool(
                            result_text, tool_call_id=c["id"], name=c["name"], metadata=error
                        ),
                        c.get("timestamp", when),
                    )
                )
    return result
