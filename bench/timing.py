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


def paired_median_ms(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median milliseconds of each call over ``rounds`` rounds in which the calls take
    turns, so a change in the machine's load during the run falls on all of them alike
    (a peer measured after the first would otherwise meet another machine)."""
    times: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, call in calls.items():
            start = time.perf_counter()
            call()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(t) * 1000 for key, t in times.items()}


async def apaired_median_ms(
    calls: dict[str, Callable[[], Awaitable[Any]]], rounds: int
) -> dict[str, float]:
    """``paired_median_ms`` of coroutine calls."""
    times: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, call in calls.items():
            start = time.perf_counter()
            await call()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(t) * 1000 for key, t in times.items()}
