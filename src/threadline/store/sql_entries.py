"""The scratchpad reads of the SQL backends as one ranged query each: which names, in
which order and how many are decided here once; each backend only runs the query."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from threadline.store.checks import MAX_SCRATCHPAD_NAME, prefix_bounds
from threadline.store.core import PageAndBeside, PageBeside, page_range
from threadline.store.session_info import ScratchpadEntry

Args = tuple[str | int, ...]
Row = tuple[str, str]
NAME_CEILING = "\U0010ffff" * (MAX_SCRATCHPAD_NAME + 1)
"""Above every name: what a prefix of nothing but the last code point reads up to."""


RANGES_PER_QUERY = 400
"""Ranges one query reads at most: SQLite allows 500 terms in a compound SELECT (each
range is one, and the missing-session check another)."""


class SQLEntries:
    """Mixed in before ``StoreCore``: its ``_scratchpad_list``, ``_scratchpad_page`` and
    ``_scratchpad_contents``."""

    MARK: ClassVar[str]
    """The driver's placeholder: ``?`` or ``%s``."""

    def _scratchpad_list(self, session_id: str, prefix: str) -> list[ScratchpadEntry]:
        return self._entries(session_id, prefix, None, None)

    def _scratchpad_page(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> list[ScratchpadEntry]:
        return self._entries(session_id, prefix, before, limit)

    def _scratchpad_page_contents(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> list[Row]:
        condition, args = self._condition(prefix, before, limit)
        query = f"SELECT name, content FROM scratchpad WHERE session_id = {self.MARK}{condition}"
        return self._select_rows(session_id, query, (session_id, *args))

    def _scratchpad_page_beside(self, session_id: str, ask: PageBeside) -> PageAndBeside:
        """The page and, joined to it, the ranges of its entries' names under ``beside``
        (``rest + "/"`` up to ``rest + "0"``, the next character), each an index range;
        then each name's range of itself, as ``_scratchpad_contents`` reads them."""
        names = ask.names
        if len(names) > RANGES_PER_QUERY - 2:  # the page and its join are two terms
            first, beside = self._scratchpad_page_beside(session_id, ask._replace(names=[]))
            return first, beside | self._scratchpad_contents(session_id, names, [])
        low, high = page_range(ask.prefix, ask.before)
        bounds: Args = (low,) if high is None else (low, high)
        query = _beside_query(self.MARK, len(ask.prefix), high is not None, len(names))
        ranges = [a for name in names for a in (session_id, name, name + "\x01")]
        rows = self._select_rows(
            session_id,
            query,
            (session_id, *bounds, ask.limit, session_id, ask.beside, ask.beside, *ranges),
        )
        page: list[Row] = []
        found: dict[str, str] = {}
        for kind, name, content in rows:
            if kind:
                found[name] = content
            else:
                page.append((name, content))
        page.sort(reverse=True)
        return page, found

    def _entries(
        self, session_id: str, prefix: str, before: str | None, limit: int | None
    ) -> list[ScratchpadEntry]:
        return self._select_entries(session_id, *self._condition(prefix, before, limit))

    def _condition(self, prefix: str, before: str | None, limit: int | None) -> tuple[str, Args]:
        """The condition (and its arguments) of names from ``prefix`` on and below
        ``before``: all of them by name, or the last ``limit`` of them, last first (a page)."""
        mark = self.MARK
        low, high = page_range(prefix, before)
        args: Args = (low,) if high is None else (low, high)
        where = f" AND name >= {mark}" + ("" if high is None else f" AND name < {mark}")
        if limit is None:
            return where + " ORDER BY name", args
        return f"{where} ORDER BY name DESC LIMIT {mark}", (*args, limit)

    def _scratchpad_contents(
        self, session_id: str, names: list[str], prefixes: list[str]
    ) -> dict[str, str]:
        """One query over ranges of the primary key: a name is the range of itself
        alone (no name holds NUL, so none lies between ``name`` and ``name + "\\x01"``
        but ``name + "\\x00..."``), a prefix the range of the names it starts."""
        ranges = [(n, n + "\x01") for n in names]
        for prefix in prefixes:
            low, high = prefix_bounds(prefix)
            ranges.append((low, NAME_CEILING if high is None else high))
        found: dict[str, str] = {}
        for start in range(0, max(1, len(ranges)), RANGES_PER_QUERY):
            found.update(self._select_ranges(session_id, ranges[start : start + RANGES_PER_QUERY]))
        return found

    def _select_ranges(self, session_id: str, ranges: list[tuple[str, str]]) -> list[Row]:
        """Primitive: ``(name, content)`` of the session's entries with ``low <= name <
        high`` for some of ``ranges``, each range read from the primary key; the
        session checked when none comes back (``SessionNotFound``)."""
        raise NotImplementedError

    def _select_rows(self, session_id: str, query: str, args: Args) -> list[Any]:
        """Primitive: the rows of ``query``; the session must exist (``SessionNotFound``),
        checked only when no row comes back."""
        raise NotImplementedError

    def _select_entries(self, session_id: str, condition: str, args: Args) -> list[ScratchpadEntry]:
        """The session's entries ``WHERE session_id = <mark>{condition}``; the session
        must exist (``SessionNotFound``), checked only when no entry comes back."""
        raise NotImplementedError


@functools.lru_cache(maxsize=256)
def _beside_query(mark: str, prefix_length: int, below: bool, named: int) -> str:
    """The query of ``_scratchpad_page_beside`` for its shape (made once: building it
    took a read of one checkpoint a tenth of its time): a page of names from a lower
    bound (and below an upper one), last first, the ranges of its entries' names
    under ``beside`` joined to it, then ``named`` names' ranges."""
    where = f" AND name >= {mark}" + (f" AND name < {mark}" if below else "")
    rest = f"substr(page.name, {prefix_length + 1:d})"
    query = (
        f"WITH page AS (SELECT name, content FROM scratchpad WHERE session_id = {mark}"
        f"{where} ORDER BY name DESC LIMIT {mark}) SELECT 0, name, content FROM page UNION ALL "
        f"SELECT 1, s.name, s.content FROM page JOIN scratchpad s ON s.session_id = {mark}"
        f" AND s.name >= {mark} || {rest} || '/' AND s.name < {mark} || {rest} || '0'"
    )
    one = (
        " UNION ALL SELECT 1, name, content FROM scratchpad WHERE session_id = "
        f"{mark} AND name >= {mark} AND name < {mark}"
    )
    return query + one * named
