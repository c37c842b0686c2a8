"""Wrong tokens per client, and when a wrong guess must wait before it is answered 401 again.

The right token is never throttled: ``Guard`` compares it first (in constant time) and
lets it through whatever has failed before, from any address. Only a *wrong* token
meets the throttle. After ``limit`` wrong tokens (a bearer header, the login form, a
used or unknown login link) from one client within ``window`` seconds, its wrong
tokens get 429 until the oldest of those failures is ``window`` seconds old; and once
``global_limit`` wrong tokens from anyone arrive within a second, every wrong token
gets 429 for the rest of that second, so guessing from many addresses stays slow. A
refused guess does not count again, so a flood cannot push the wait further out.

What keeps a guesser out is the token's size (16 printable ASCII characters at least,
256 random bits when generated): since the right token always passes, a throttled
address still learns which guess is right. The throttle keeps floods cheap and visible
(429, ``Retry-After``) without ever refusing the token's holder, as locking an address
did (issue 33: a wrong-token flood from a shared address locked every client out).

A client is its address as the connection gives it: ``serve`` trusts forwarded headers
only from the proxies ``--forwarded-allow-ips`` names. An IPv6 client is its /64, the
block one host is usually given, so walking the addresses of one's own block gains
nothing. The clients remembered are capped (``max_clients``, the least recently failing
forgotten first), so a flood of addresses cannot grow memory without bound.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_CLIENTS = 10_000
GLOBAL_LIMIT = 20
"""Wrong tokens a second, from all clients together, before every wrong one waits."""
GLOBAL_WINDOW = 1.0
IPV6_BLOCK = 64


def client_key(address: str | None) -> str:
    """Who a throttle counts ``address`` as: an IPv6 address by its /64 (an IPv4 one
    mapped into IPv6 as itself), anything else (an IPv4 address, a socket path, a test
    client's name) as it is."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])  # without an IPv6 zone
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_BLOCK), strict=False))
    return str(ip)


class Throttle:
    """See the module docstring; thread-safe, O(1) per call."""

    def __init__(
        self,
        *,
        limit: int,
        window: float,
        global_limit: int = GLOBAL_LIMIT,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or window <= 0 or global_limit < 1:
            raise ValueError("a throttle needs limits of at least 1 and a positive window")
        self.limit = limit
        self.window = window
        self.global_limit = global_limit
        self.max_clients = max_clients
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._recent: deque[float] = deque(maxlen=global_limit)
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds before a wrong token from ``client`` is answered 401 again (0: now)."""
        with self._lock:
            now = self.clock()
            waits = [0.0]
            if len(self._recent) == self.global_limit:
                waits.append(self._recent[0] + GLOBAL_WINDOW - now)
            times = self._failures.get(client)
            if times is not None:
                _expire(times, now - self.window)
                if len(times) == self.limit:
                    waits.append(times[0] + self.window - now)
            wait = max(waits)
            return max(wait, 0.001) if wait > 0 else 0.0

    def failed(self, client: str) -> None:
        """Count a wrong token from ``client``."""
        with self._lock:
            now = self.clock()
            self._recent.append(now)
            times = self._failures.get(client)
            if times is None:
                times = self._failures[client] = deque(maxlen=self.limit)
                while len(self._failures) > self.max_clients:
                    self._failures.popitem(last=False)
            else:
                self._failures.move_to_end(client)
            _expire(times, now - self.window)
            times.append(now)

    @property
    def count(self) -> int:
        """How many are kept now (no ``__len__``: an empty one must not be falsy)."""
        with self._lock:
            return len(self._failures)


def _expire(times: deque[float], before: float) -> None:
    while times and times[0] <= before:
        times.popleft()
