"""The scratchpad reads of the SQL backends as one ranged query each: which names, in
which order and how many are decided here once; each backend only runs the query."""

from __future__ import annotations

from typing import ClassVar

from threadline.store.checks import prefix_bounds
from threadline.store.core import page_range
from threadline.store.session_info import ScratchpadEntry

Args = tuple[str | int, ...]


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

    def _entries(
        self, session_id: str, prefix: str, before: str | None, limit: int | None
    ) -> list[ScratchpadEntry]:
        """Names from ``prefix`` on and below ``before``: all of them by name, or the
        last ``limit`` of them, last first (a page)."""
        mark = self.MARK
        low, high = page_range(prefix, before)
        args: Args = (low,) if high is None else (low, high)
        where = f" AND name >= {mark}" + ("" if high is None else f" AND name < {mark}")
        if limit is None:
            return self._select_entries(session_id, where + " ORDER BY name", args)
        return self._select_entries(
            session_id, f"{where} ORDER BY name DESC LIMIT {mark}", (*args, limit)
        )

    def _scratchpad_contents(
        self, session_id: str, names: list[str], prefixes: list[str]
    ) -> dict[str, str]:
        """One query: the names (lookups in the primary key) and each prefix's range of
        it, one ``SELECT`` each joined by ``UNION ALL`` (an ``OR`` of them would have
        SQLite read every entry of the session)."""
        mark = self.MARK
        terms: list[str] = []
        args: list[str | int] = []
        if names:
            terms.append(f"name IN ({', '.join([mark] * len(names))})")
            args += [session_id, *names]
        for prefix in prefixes:
            low, high = prefix_bounds(prefix)
            terms.append(f"name >= {mark}" + ("" if high is None else f" AND name < {mark}"))
            args += [session_id, low] if high is None else [session_id, low, high]
        select = f"SELECT name, content FROM scratchpad WHERE session_id = {mark} AND "
        query = " UNION ALL ".join(select + term for term in terms)
        return dict(self._select_contents(session_id, query, tuple(args)))

    def _select_entries(self, session_id: str, condition: str, args: Args) -> list[ScratchpadEntry]:
        """The session's entries ``WHERE session_id = <mark>{condition}``; the session
        must exist (``SessionNotFound``), checked only when no entry comes back."""
        raise NotImplementedError

    def _select_contents(self, session_id: str, query: str, args: Args) -> list[tuple[str, str]]:
        """The ``(name, content)`` rows ``query`` reads, as ``_select_entries`` (the
        session checked when none comes back)."""
        raise NotImplementedError
