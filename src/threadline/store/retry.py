"""Resending after a dropped connection: the one policy of the server backends
(``CONNECTION_RETRY``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How a server backend resends an idempotent call after its connection dropped.

    One policy for every backend that talks to a server: Redis hands it to redis-py
    (``RedisStore``), PostgreSQL runs ``call`` around its idempotent operations.
    """

    retries: int = 4
    """Resends after the first attempt."""
    base: float = 0.05
    cap: float = 0.5

    def delay(self, failures: int) -> float:
        """Seconds before resend number ``failures`` (from 1). The first goes at once: a
        dropped connection is simply replaced, and waiting there halved the throughput
        of a loop whose connections were being terminated. Later ones wait ``base``,
        doubling up to ``cap`` (0, 0.05, 0.1, 0.2 s by default)."""
        if failures <= 1:
            return 0.0
        return float(min(self.cap, self.base * 2 ** (failures - 2)))

    def call(self, fn: Callable[[], T], *, retry_on: type[BaseException]) -> T:
        """``fn()``, resent after ``retry_on`` up to ``retries`` times; the last one raises."""
        failures = 0
        while True:
            try:
                return fn()
            except retry_on:
                failures += 1
                if failures > self.retries:
                    raise
                time.sleep(self.delay(failures))


CONNECTION_RETRY = RetryPolicy()
"""The policy both server backends use."""
