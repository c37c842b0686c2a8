"""agsh's session database (``~/.local/share/agsh/sessions.db``) into threadline.

The schema, as agsh documents it: ``sessions(id UUID, created_at, updated_at,
locked_by, metadata)``, ``messages(id, session_id, role, content, created_at)``
with ``role`` one of ``user``, ``assistant``, ``tool_results`` and ``content``
"plain text or JSON", and ``tool_outputs(session_id, name, content,
created_at)``, a per-session scratchpad.

Content that is JSON is read as the Messages API writes it: a list of content
blocks (``text``, ``tool_use``, ``tool_result``, images), or one message object
with ``content`` (and, Chat Completions style, ``tool_calls``; a tool-results
row may then be a list of ``{"tool_call_id", "content"}``). Anything else is the
text a person or the model wrote, kept as it is. Scratchpad entries are not
conversation: their names and sizes are kept in the session's metadata
(``agsh_scratchpad``), not their contents. Each session's UUID is its source id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop import databases
from threadline.interop.anthropic_format import from_anthropic
from threadline.interop.openai_format import content_from_openai, tool_call_from_openai
from threadline.interop.records import Parsed, stamp, utc_iso
from threadline.json_limits import TooDeep, parse_json
from threadline.messages import Message

ROLES = frozenset({"user", "assistant", "tool_results"})
MAX_SCRATCHPAD = 200
"""Scratchpad entries named in a session's metadata; more are counted."""


def matches(tables: dict[str, set[str]]) -> bool:
    return {"id", "created_at", "updated_at", "locked_by"} <= tables.get("sessions", set()) and {
        "session_id",
        "role",
        "content",
    } <= tables.get("messages", set())


def parse(conn: sqlite3.Connection, name: str, tables: dict[str, set[str]]) -> Parsed:
    """Every session in the database, oldest first."""
    result = Parsed([])
    scratch: dict[str, list[dict[str, Any]]] = {}
    if {"session_id", "name", "content"} <= tables.get("tool_outputs", set()):
        for sid, entry, content in conn.execute(
            "SELECT session_id, name, content FROM tool_outputs ORDER BY session_id, name"
        ):
            size = len(content) if isinstance(content, str | bytes) else 0
            scratch.setdefault(str(sid), []).append({"name": str(entry), "chars": size})
    databases.index_sessions(conn, "messages")
    has_meta = "metadata" in tables["sessions"]
    sessions = conn.execute(
        "SELECT id, created_at, updated_at, "
        + ("metadata" if has_meta else "NULL")
        + " FROM sessions ORDER BY created_at, id"
    ).fetchall()
    for sid, created, updated, metadata in sessions:
        rows = conn.execute(
            "SELECT id, role, content, created_at FROM messages WHERE session_id = ? ORDER BY id",
            (sid,),
        ).fetchall()
        messages: list[Message] = []
        names: dict[str, str] = {}
        for row_id, role, content, at in rows:
            try:
                made = _row(role, content, names)
            except InvalidMessage as exc:
                raise ImportFormatError(
                    f"session {sid}, message {row_id}: {exc}", path=name
                ) from exc
            messages.extend(stamp(m, at) for m in made)
        if not messages:
            result.skipped["empty_session"] += 1
            continue
        run = len(result.runs)
        result.runs.append(messages)
        facts: dict[str, Any] = {}
        entries = scratch.get(str(sid), [])
        if entries:
            facts["agsh_scratchpad"] = entries[:MAX_SCRATCHPAD]
            if len(entries) > MAX_SCRATCHPAD:
                facts["agsh_scratchpad_omitted"] = len(entries) - MAX_SCRATCHPAD
        if isinstance(metadata, str) and metadata:
            facts["agsh_metadata"] = metadata
        result.extra(run).update(
            source_id=str(sid), started=utc_iso(created), updated=utc_iso(updated), facts=facts
        )
    return result


def _row(role: Any, content: Any, names: dict[str, str]) -> list[Message]:
    if role not in ROLES:
        raise InvalidMessage(f"unknown role {role!r} (expected user, assistant or tool_results)")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise InvalidMessage("content must be text")
    data = _structured(content)
    if data is None:
        if role == "tool_results":
            raise InvalidMessage("tool results must be JSON")
        return [Message.user(content) if role == "user" else Message.assistant(content)]
    if isinstance(data, Mapping):  # one message object
        if role == "assistant" and data.get("tool_calls") is not None:
            made = Message.assistant(
                content_from_openai(data.get("content")),
                tool_calls=[tool_call_from_openai(c) for c in data["tool_calls"]],
            )
            names.update({c.id: c.name for c in made.tool_calls})
            return [made]
        data = data.get("content")
    if role == "tool_results" and _openai_results(data):
        return [_openai_result(r, names) for r in data]
    turn = {"role": "assistant" if role == "assistant" else "user", "content": data}
    made_list = from_anthropic([turn])
    for m in made_list:
        names.update({c.id: c.name for c in m.tool_calls})
        if m.role == "tool" and m.name is None and m.tool_call_id in names:
            m.name = names[m.tool_call_id]
    return made_list


def _openai_results(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(r, Mapping) and "tool_call_id" in r for r in data)
    )


def _openai_result(raw: Mapping[str, Any], names: dict[str, str]) -> Message:
    call_id = raw.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage("a tool result needs 'tool_call_id'")
    body = raw.get("content", raw.get("output"))
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return Message.tool(text, tool_call_id=call_id, name=names.get(call_id))


def _structured(content: str) -> Any:
    """Content's JSON when it is a message or content blocks, else None (plain text,
    even text that happens to parse as JSON, such as ``[1, 2]``)."""
    head = content.lstrip()[:1]
    if head not in ("[", "{"):
        return None
    try:
        data = parse_json(content)
    except TooDeep as exc:
        raise InvalidMessage(f"its JSON {exc}") from exc
    except json.JSONDecodeError:
        return None
    if (
        isinstance(data, list)
        and data
        and all(isinstance(b, Mapping) and ("type" in b or "tool_call_id" in b) for b in data)
    ):
        return data
    if isinstance(data, Mapping) and "content" in data:
        return data
    return None
