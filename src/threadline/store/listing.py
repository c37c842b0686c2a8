"""Listing sessions: a checked ``list_sessions`` call (``ListRequest``), the page it
returns (``SessionPage``), and the id lists a listing asks about (children, memos)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from threadline.errors import UsageError
from threadline.store.checks import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    validate_agent,
    validate_offset,
    validate_page_size,
    validate_session_id,
)
from threadline.store.records import Record
from threadline.store.session_info import SessionInfo, refuse_unknown


@dataclass(frozen=True)
class ListRequest:
    """A checked ``list_sessions`` call: which sessions (every one, the top-level ones,
    or one session's children; of one agent or all; updated within a time range or at
    any time) and which page of them."""

    agent: str | None
    limit: int
    offset: int
    top_level: bool
    parent: str | None
    updated_since: datetime | None = None
    """Only sessions updated at or after this time (timezone-aware)."""
    updated_until: datetime | None = None
    """Only sessions updated before this time (timezone-aware)."""

    @property
    def dated(self) -> bool:
        return self.updated_since is not None or self.updated_until is not None

    def where(
        self, mark: str, stamp: Callable[[datetime], Any] = lambda t: t
    ) -> tuple[str, dict[str, Any]]:
        """For an SQL backend: the WHERE clause and its named parameters, each written
        as ``mark`` formats its name (``:{}``, ``%({})s``), times as ``stamp`` stores
        them. ``parent_id IS NULL`` is written out, so the indexes of top-level sessions
        serve it; a time range is a range of those indexes' ``updated_at``."""
        clauses: list[str] = []
        args: dict[str, Any] = {}
        if self.agent is not None:
            clauses.append(f"agent = {mark.format('agent')}")
            args["agent"] = self.agent
        if self.top_level:
            clauses.append("parent_id IS NULL")
        if self.parent is not None:
            clauses.append(f"parent_id = {mark.format('parent')}")
            args["parent"] = self.parent
        if self.updated_since is not None:
            clauses.append(f"updated_at >= {mark.format('updated_since')}")
            args["updated_since"] = stamp(self.updated_since)
        if self.updated_until is not None:
            clauses.append(f"updated_at < {mark.format('updated_until')}")
            args["updated_until"] = stamp(self.updated_until)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args

    def admits(self, info: SessionInfo) -> bool:
        """For a backend that scans: whether ``info`` is listed."""
        if self.agent is not None and info.agent != self.agent:
            return False
        if self.top_level and info.parent_id is not None:
            return False
        if self.updated_since is not None and info.updated_at < self.updated_since:
            return False
        if self.updated_until is not None and info.updated_at >= self.updated_until:
            return False
        return self.parent is None or info.parent_id == self.parent

    def page(self, infos: list[SessionInfo]) -> SessionPage:
        """The page of ``infos`` (every session admitted), newest updated first."""
        infos.sort(key=lambda i: i.id)
        infos.sort(key=lambda i: i.updated_at, reverse=True)
        return SessionPage(
            items=infos[self.offset : self.offset + self.limit],
            total=len(infos),
            offset=self.offset,
            limit=self.limit,
        )


class ListOptions(TypedDict, total=False):
    """The keyword arguments of ``Store.list_sessions`` (checked by ``list_request``)."""

    agent: str | None
    limit: int
    offset: int
    top_level: bool
    """Only the sessions listed under no other."""
    parent: str | None
    """Only the sessions listed directly under this one."""
    updated_since: datetime | None
    """Only the sessions updated at or after this time (timezone-aware)."""
    updated_until: datetime | None
    """Only the sessions updated before this time (timezone-aware)."""


def _when(options: ListOptions, key: str) -> datetime | None:
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise UsageError(f"list_sessions {key} must be a timezone-aware datetime, got {value!r}")
    return value


def list_request(options: ListOptions) -> ListRequest:
    refuse_unknown("list_sessions", options, ListOptions)
    agent, parent = options.get("agent"), options.get("parent")
    top_level = bool(options.get("top_level", False))
    limit = validate_page_size(options.get("limit", DEFAULT_PAGE_SIZE))
    offset = validate_offset(options.get("offset", 0))
    if agent is not None:
        validate_agent(agent)
    if parent is not None:
        validate_session_id(parent, what="parent session id")
        if top_level:
            raise UsageError("list the top-level sessions or one session's children, not both")
    since, until = _when(options, "updated_since"), _when(options, "updated_until")
    return ListRequest(agent, limit, offset, top_level, parent, since, until)


def children_request(session_ids: Sequence[str]) -> list[str]:
    """The ids ``count_children`` counts for: checked, each once, at most a page."""
    if isinstance(session_ids, str):
        raise UsageError("count_children takes a list of session ids, not one id")
    ids = list(dict.fromkeys(validate_session_id(s) for s in session_ids))
    if len(ids) > MAX_PAGE_SIZE:
        raise UsageError(f"count_children takes at most {MAX_PAGE_SIZE} ids at a time")
    return ids


def memo_request(session_ids: Sequence[str]) -> list[str]:
    """The ids ``get_memos`` reads: checked, each once, in order."""
    if isinstance(session_ids, str):
        raise UsageError("get_memos takes a list of session ids, not one id")
    return list(dict.fromkeys(validate_session_id(s) for s in session_ids))


def children_counts(parent_ids: list[str], infos: Iterable[SessionInfo]) -> dict[str, int]:
    """For a backend that scans: ``count_children`` counted over ``infos``."""
    counts = dict.fromkeys(parent_ids, 0)
    for info in infos:
        if info.parent_id in counts:
            counts[info.parent_id] += 1
    return counts


@dataclass(kw_only=True)
class SessionPage(Record):
    items: list[SessionInfo]
    total: int
    """How many sessions match, across all pages."""
    offset: int = 0
    limit: int = DEFAULT_PAGE_SIZE

    def __iter__(self) -> Iterator[SessionInfo]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)
