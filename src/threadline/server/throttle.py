"""Wrong tokens per client address, and when an address must wait before trying again.

A token can only be guessed as fast as the server checks guesses. After ``limit``
failed checks (a wrong bearer token, a wrong token in the login form, a used or
unknown login link) from one address within ``window`` seconds, that address's
token checks are refused with 429 until the oldest of those failures is ``window``
seconds old. A refused check is no guess, so it does not count. While an address
waits, even the right bearer token is refused from it (letting it through would
tell a guesser which guess was right); a browser already logged in keeps working,
since its cookie is checked without a token. Behind a proxy every client has the
proxy's address, and they wait together.

The addresses remembered are capped (``max_clients``, the least recently failing
forgotten first), so a flood of addresses cannot grow memory without bound.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_CLIENTS = 10_000


class Throttle:
    """See the module docstring; thread-safe, O(1) per call."""

    def __init__(
        self,
        *,
        limit: int,
        window: float,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("a throttle needs a limit of at least 1 and a positive window")
        self.limit = limit
        self.window = window
        self.max_clients = max_clients
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds before ``client`` may have a token checked again; 0 when it may now."""
        with self._lock:
            times = self._failures.get(client)
            if times is None:
                return 0.0
            now = self.clock()
            self._expire(times, now)
            if len(times) < self.limit:
                return 0.0
            return max(times[0] + self.window - now, 0.001)

    def failed(self, client: str) -> None:
        """Count a wrong token from ``client``."""
        with self._lock:
            now = self.clock()
            times = self._failures.get(client)
            if times is None:
                times = self._failures[client] = deque(maxlen=self.limit)
                while len(self._failures) > self.max_clients:
                    self._failures.popitem(last=False)
            else:
                self._failures.move_to_end(client)
            self._expire(times, now)
            times.append(now)

    @property
    def count(self) -> int:
        """How many are kept now (no ``__len__``: an empty one must not be falsy)."""
        with self._lock:
            return len(self._failures)

    def _expire(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window:
            times.popleft()
