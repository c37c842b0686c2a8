"""OpenAI Agents SDK ``SQLiteSession`` databases into threadline.

``SQLiteSession(session_id, db_path)`` keeps ``agent_sessions(session_id,
created_at, updated_at)`` and ``agent_messages(id, session_id, message_data,
created_at)``, one Responses-API item per row as JSON, in order of ``id``. Each
session id becomes one conversation; its items map to messages exactly as
``responses_format`` says (so exporting them back as items gives the same
items). A row whose JSON does not parse is skipped, as the SDK itself skips it,
and counted.

Session ids are the application's own (``"user_123"``), unique only within one
database, so the source id is the database's absolute path and the session id:
``/path/conversations.db#user_123``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop import databases
from threadline.interop.records import Parsed, stamp, utc_iso
from threadline.interop.responses_format import items_to_messages, messages_to_items
from threadline.json_limits import MAX_JSON_DEPTH, nesting_too_deep

SESSIONS_TABLE = "agent_sessions"
MESSAGES_TABLE = "agent_messages"


def matches(tables: dict[str, set[str]]) -> bool:
    return {"session_id", "message_data", "id"} <= tables.get(MESSAGES_TABLE, set())


def parse(conn: sqlite3.Connection, name: str, tables: dict[str, set[str]]) -> Parsed:
    """Every session in the database, oldest first."""
    where = "stdin" if name == "-" else str(Path(name).resolve())
    result = Parsed([])
    times: dict[str, tuple[Any, Any]] = {}
    if {"session_id", "created_at", "updated_at"} <= tables.get(SESSIONS_TABLE, set()):
        for sid, created, updated in conn.execute(
            f"SELECT session_id, created_at, updated_at FROM {SESSIONS_TABLE}"
        ):
            times[str(sid)] = (created, updated)
    databases.index_sessions(conn, MESSAGES_TABLE)
    order = conn.execute(
        f"SELECT session_id FROM {MESSAGES_TABLE} GROUP BY session_id ORDER BY MIN(id)"
    ).fetchall()
    has_time = "created_at" in tables[MESSAGES_TABLE]
    for (sid,) in order:
        rows = conn.execute(
            f"SELECT id, message_data, {'created_at' if has_time else 'NULL'} "
            f"FROM {MESSAGES_TABLE} WHERE session_id = ? ORDER BY id",
            (sid,),
        ).fetchall()
        items: list[dict[str, Any]] = []
        stamps: list[Any] = []
        for row_id, data, created in rows:
            if isinstance(data, str | bytes) and nesting_too_deep(data) is not None:
                raise ImportFormatError(  # the parser would end in RecursionError
                    f"session {sid!r}, row {row_id}: JSON nests more than {MAX_JSON_DEPTH} "
                    "levels deep",
                    path=name,
                )
            try:
                item = json.loads(data)
            except (json.JSONDecodeError, TypeError):
                result.skipped["invalid_item_json"] += 1
                continue
            if not isinstance(item, dict):
                raise ImportFormatError(
                    f"session {sid!r}, row {row_id}: an item must be a JSON object", path=name
                )
            items.append(item)
            stamps.append(created)
        try:
            messages = items_to_messages(items)
        except InvalidMessage as exc:
            raise ImportFormatError(f"session {sid!r}: {exc}", path=name) from exc
        if not messages:
            result.skipped["empty_session"] += 1
            continue
        first = 0
        for m in messages:  # each message stamped with the time of its first item
            stamp(m, stamps[first])
            first += len(messages_to_items([m]))
        created, updated = times.get(str(sid), (None, None))
        run = len(result.runs)
        result.runs.append(messages)
        extra = result.extra(run)
        extra.update(
            source_id=f"{where}#{sid}",
            started=utc_iso(created or stamps[0]),
            updated=utc_iso(updated or stamps[-1]),
            facts={"agents_sdk_session_id": str(sid)},
        )
    return result
