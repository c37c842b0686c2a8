"""The median of repeated calls, the one timing the benchmark scripts share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any


def median_ms(call: Callable[[], Any], rounds: int) -> float:
    """Median milliseconds of ``rounds`` calls (warm up first where it matters)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def amedian_ms(call: Callable[[], Awaitable[Any]], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000
