"""The scratchpad listings of the SQL backends as one ranged query: which names, in which
order and how many are decided here once; each backend only runs the query."""

from __future__ import annotations

from typing import ClassVar

from threadline.store.core import page_range
from threadline.store.session_info import ScratchpadEntry


class SQLEntries:
    """Mixed in before ``StoreCore``: its ``_scratchpad_list`` and ``_scratchpad_page``."""

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
        args: tuple[str | int, ...] = (low,) if high is None else (low, high)
        where = f" AND name >= {mark}" + ("" if high is None else f" AND name < {mark}")
        if limit is None:
            return self._select_entries(session_id, where + " ORDER BY name", args)
        return self._select_entries(
            session_id, f"{where} ORDER BY name DESC LIMIT {mark}", (*args, limit)
        )

    def _select_entries(
        self, session_id: str, condition: str, args: tuple[str | int, ...]
    ) -> list[ScratchpadEntry]:
        """The session's entries ``WHERE session_id = <mark>{condition}``; the session
        must exist (``SessionNotFound``)."""
        raise NotImplementedError
