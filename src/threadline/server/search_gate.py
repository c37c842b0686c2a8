"""At most a few searches at once per server process.

A search on a scanning backend (Redis, JSONL, memory) reads messages for up to its
time budget, and ten at once took every core and gigabytes before scans were bounded;
even bounded, a flood of them would starve prompts. So each worker runs at most
``slots`` searches together: another waits up to ``wait`` seconds for a slot, then is
refused with 429 (``TOO_MANY_REQUESTS``) to retry later.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from threadline.errors import ThreadlineError

DEFAULT_SEARCH_SLOTS = 4
DEFAULT_SEARCH_WAIT = 2.0
"""Seconds a search waits for a slot before the 429."""


class TooManySearches(ThreadlineError):
    """Every search slot stayed busy for the whole wait."""


class SearchGate:
    def __init__(self, slots: int = DEFAULT_SEARCH_SLOTS, wait: float = DEFAULT_SEARCH_WAIT):
        if slots < 1 or wait < 0:
            raise ValueError("search slots must be >= 1 and the wait >= 0 seconds")
        self.slots = slots
        self.wait = wait
        self._free = threading.BoundedSemaphore(slots)

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the block; ``TooManySearches`` when none frees in time."""
        if not self._free.acquire(timeout=self.wait):
            raise TooManySearches(
                f"{self.slots} searches are already running in this server; retry in a few seconds"
            )
        try:
            yield
        finally:
            self._free.release()
