"""What a search returns (``SearchHit``, ``SearchPage``, the ``Mark`` of a match) and
the options it takes; the syntax and the matching are ``store/search_query.py``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict

from threadline.store.records import Record


@dataclass(kw_only=True)
class Mark(Record):
    """Where a snippet's bracketed match is: ``snippet[start:end]`` is ``[word]``."""

    start: int
    end: int


@dataclass(kw_only=True)
class SearchHit(Record):
    session_id: str
    seq: int
    role: str
    snippet: str
    """Around the first match, each match in brackets (as the CLI shows it)."""
    agent: str | None = None
    marks: list[Mark] = field(default_factory=list)
    """The bracketed matches of ``snippet``, so a page highlights them (``<mark>``)
    without mistaking brackets the text itself holds for a match."""
    parent_id: str | None = None
    """The session the hit's session is listed under (a subagent's parent), if any."""


class SearchOptions(TypedDict, total=False):
    """The keyword arguments of ``Store.search``: which messages, and which page."""

    agent: str | None
    session_id: str | None
    model: str | None
    role: str | None
    since: datetime | None
    until: datetime | None
    limit: int
    offset: int


class SearchPage(list[SearchHit]):
    """One page of hits (a list, newest first) that also knows how many there are in
    all (``total``) and where the page starts (``offset``).

    ``exact`` is False when a scanning backend stopped at its time budget: ``total``
    is then the hits found so far, a lower bound ("more than N"), and the page is the
    newest of those."""

    def __init__(
        self,
        hits: Iterable[SearchHit] = (),
        *,
        total: int = 0,
        offset: int = 0,
        exact: bool = True,
    ):
        super().__init__(hits)
        self.total = total
        self.offset = offset
        self.exact = exact

    def total_text(self) -> str:
        """``"12"``, or ``"more than 12"`` when the total is a lower bound."""
        return f"{self.total}" if self.exact else f"more than {self.total}"
