"""What the MCP tools answer: pages of sessions, hits, messages and memories as plain data.

Each answer is a JSON-ready dict, paged (a cursor or offset for the next page, ``None``
at the end) and capped: a message's text is cut in the middle past ``MESSAGE_CHARS``
and a page stops adding items once ``PAGE_CHARS`` of text are in it, so no call can
flood the asking agent's context. Everything is read through the library calls the
CLI and the server use (``Store.list_sessions``, ``Store.search``,
``Session.read_messages``, the memory store); nothing here decides what a session
holds.
"""

from __future__ import annotations

from typing import Any

from threadline.agent.memory_link import memory_scope, search_scopes
from threadline.context.truncation import cut_middle
from threadline.errors import UsageError
from threadline.memory import MemoryStore
from threadline.memory.build import SOURCE_FORMAT_KEY
from threadline.messages import Message
from threadline.report.text import shorten
from threadline.store.checks import MAX_PAGE_SIZE
from threadline.store.listing import SessionPage
from threadline.store.protocol import Store
from threadline.store.search_query import parse_when
from threadline.store.session_info import SessionInfo

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
"""Items one call returns at most (below the store's ``MAX_PAGE_SIZE``)."""
MESSAGE_CHARS = 4_000
"""A message's text past this is cut in the middle (head and tail kept)."""
ARGUMENTS_CHARS = 200
"""A tool call's arguments, shown briefly."""
TITLE_CHARS = 200
SUMMARY_CHARS = 12_000
PAGE_CHARS = 40_000
"""Text one answer carries at most; the page ends early and says where to go on."""
SCAN_PAGE = MAX_PAGE_SIZE
SCAN_BUDGET = 20_000
"""Sessions one filtered ``list_sessions`` call reads at most before it hands back a
cursor: a filter the store cannot apply (source, dates) costs at most this much."""
SESSION_FACTS = 50


def page_size(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def non_negative(value: int, what: str) -> int:
    if value < 0:
        raise UsageError(f"{what} must be 0 or more, got {value}")
    return value


def session_item(info: SessionInfo) -> dict[str, Any]:
    source = info.metadata.get(SOURCE_FORMAT_KEY)
    return {
        "id": info.id,
        "title": shorten(info.title, TITLE_CHARS) if info.title else None,
        "agent": info.agent,
        "model": info.model,
        "source": source if isinstance(source, str) else None,
        "created_at": info.created_at.isoformat(),
        "updated_at": info.updated_at.isoformat(),
        "message_count": info.message_count,
        "parent_id": info.parent_id,
    }


def list_sessions(
    store: Store,
    *,
    agent: str | None = None,
    source: str | None = None,
    since: str | None = None,
    until: str | None = None,
    include_children: bool = False,
    limit: int = DEFAULT_LIMIT,
    cursor: int = 0,
) -> dict[str, Any]:
    """Sessions newest updated first. The agent and the dates are the store's own
    listing filters (``updated_since`` / ``updated_until``: a range of its index, so a
    range deep in 100,000 sessions costs one page); ``cursor`` is a position in that
    listing. The source, which the store cannot select, is applied to the pages read
    from there, and the answer's ``next_cursor`` says where the next call goes on
    (``None``: no more)."""
    limit, cursor = page_size(limit), non_negative(cursor, "cursor")
    start, end = parse_when(since, "since"), parse_when(until, "until")
    if start and end and start >= end:
        raise UsageError("since must be before until")

    def listing(limit: int, offset: int) -> SessionPage:
        return store.list_sessions(
            agent=agent,
            top_level=not include_children,
            updated_since=start,
            updated_until=end,
            limit=limit,
            offset=offset,
        )

    if source is None:
        page = listing(limit, cursor)
        after = cursor + len(page.items)
        return {
            "total": page.total,
            "sessions": [session_item(i) for i in page.items],
            "next_cursor": after if after < page.total else None,
        }
    found: list[SessionInfo] = []
    position, read, total = cursor, 0, None
    while len(found) < limit and read < SCAN_BUDGET:
        page = listing(SCAN_PAGE, position)
        total = page.total
        for info in page.items:
            position += 1
            if info.metadata.get(SOURCE_FORMAT_KEY) == source:
                found.append(info)
                if len(found) == limit:
                    break
        read += len(page.items)
        if len(page.items) < SCAN_PAGE:
            break
    more = total is not None and position < total
    return {"sessions": [session_item(i) for i in found], "next_cursor": position if more else None}


def search_sessions(
    store: Store,
    query: str,
    *,
    agent: str | None = None,
    session_id: str | None = None,
    role: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
) -> dict[str, Any]:
    """The store's full-text search (``Store.search``: its syntax, order and filters)."""
    if not query.strip():
        raise UsageError("the search query is empty")
    page = store.search(
        query,
        agent=agent,
        session_id=store.resolve_id(session_id) if session_id else None,
        role=role,
        since=parse_when(since, "since"),
        until=parse_when(until, "until"),
        limit=page_size(limit),
        offset=non_negative(offset, "offset"),
    )
    end = page.offset + len(page)
    return {
        "total": page.total,
        "total_exact": page.exact,
        "hits": [
            {
                "session_id": h.session_id,
                "seq": h.seq,
                "role": h.role,
                "agent": h.agent,
                "snippet": h.snippet,
            }
            for h in page
        ],
        "next_offset": end if end < page.total or (not page.exact and len(page)) else None,
    }


def message_item(m: Message) -> dict[str, Any]:
    """A message with its text capped and each tool call as its name, id and the start
    of its arguments."""
    text = cut_middle(m.text, MESSAGE_CHARS // 2, MESSAGE_CHARS // 2)
    item: dict[str, Any] = {
        "seq": m.seq,
        "role": m.role,
        "created_at": m.created_at.isoformat() if m.created_at else None,
        "text": text,
    }
    if m.tool_calls:
        item["tool_calls"] = [
            {"name": c.name, "id": c.id, "arguments": shorten(c.arguments_json(), ARGUMENTS_CHARS)}
            for c in m.tool_calls
        ]
    if m.tool_call_id:
        item["tool_call_id"] = m.tool_call_id
    return item


def read_session(
    store: Store, session_id: str, *, from_seq: int = 1, limit: int = DEFAULT_LIMIT
) -> dict[str, Any]:
    """Messages in view (as history and exports show them) from ``from_seq`` on."""
    if from_seq < 1:
        raise UsageError(f"from_seq must be 1 or more, got {from_seq}")
    session = store.get_session(session_id)
    messages = session.read_messages(after_seq=from_seq - 1, limit=page_size(limit) + 1)
    more = len(messages) > limit
    items: list[dict[str, Any]] = []
    size = 0
    for m in messages[:limit]:
        item = message_item(m)
        size += len(item["text"])
        if items and size > PAGE_CHARS:
            more = True
            break
        items.append(item)
    next_seq = (items[-1]["seq"] + 1) if more and items else None
    return {
        "session": session_item(session.info),
        "messages": items,
        "next_seq": next_seq,
    }


def session_summary(store: Store, memory: MemoryStore | None, session_id: str) -> dict[str, Any]:
    """The session, its latest checkpoint (the snapshot a compaction wrote) and the
    memory facts learned from it (in its agent's scope)."""
    session = store.get_session(session_id)
    checkpoint = session.latest_checkpoint()
    facts: list[dict[str, Any]] = []
    if memory is not None:
        scope = memory_scope(None, session.info.agent)
        for f in memory.list_facts(scope):
            if f.session_id == session.id:
                facts.append({"id": f.id, "statement": f.statement, "seq": f.seq})
                if len(facts) == SESSION_FACTS:
                    break
    return {
        "session": session_item(session.info),
        "checkpoint": (
            {
                "covers_up_to": checkpoint.covers_up_to,
                "created_at": checkpoint.created_at.isoformat(),
                "summary": cut_middle(checkpoint.summary, SUMMARY_CHARS // 2, SUMMARY_CHARS // 2),
            }
            if checkpoint is not None
            else None
        ),
        "facts": facts,
    }


def memory_search(
    memory: MemoryStore,
    query: str,
    *,
    scope: str | None = None,
    agent: str | None = None,
    limit: int = 10,
) -> dict[str, Any]:
    """Memories best first, of ``scope`` or ``agent``'s scope, else of every scope (as
    ``threadline memory search``)."""
    if not query.strip():
        raise UsageError("the memory query is empty")
    scopes = search_scopes(memory, scope, agent)
    hits = memory.search(query, scopes=scopes, k=page_size(limit))
    return {
        "scopes": scopes,
        "hits": [
            {
                "kind": h.kind,
                "id": h.id,
                "text": cut_middle(h.text, MESSAGE_CHARS // 2, MESSAGE_CHARS // 2),
                "score": round(h.score, 4),
                "scope": h.scope,
                "session_id": h.session_id,
                "seq": h.seq,
            }
            for h in hits
        ],
    }


def remember(
    memory: MemoryStore,
    statement: str,
    *,
    scope: str | None = None,
    agent: str | None = None,
    subject: str | None = None,
) -> dict[str, Any]:
    """Store one fact (``memory add``): it supersedes an older one on the same slot."""
    if not statement.strip():
        raise UsageError("the statement is empty")
    where = memory_scope(scope, agent)
    fact = memory.write_fact(where, statement.strip(), subject=subject)
    return {"id": fact.id, "scope": where, "statement": fact.statement}
