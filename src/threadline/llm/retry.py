"""Retrying a provider call: bounded, exponential, jittered, observable.

The official SDKs retry on their own, but their delays are module constants
(half a second and up), invisible to the caller, and not adjustable per
client. threadline turns SDK retries off (``max_retries=0``) and retries here
instead, so that one ``RetryPolicy`` governs every provider, tests can make
the delays tiny, and a CLI can say "rate limited, retrying in 4 s" through
``on_retry`` instead of freezing silently.

What is retried is decided by the provider (a ``classify`` callback that
knows its SDK's exception types): rate limits (429), server errors (5xx,
Anthropic's 529 "overloaded"), timeouts and connection errors. A
``Retry-After`` the server sends is honoured exactly; one longer than
``max_retry_after`` is not waited for at all: the error is raised at once,
because a silent ten-minute stall is worse than a clear failure.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from threadline.llm.cancel import CallCancelled

log = logging.getLogger("threadline.llm")

T = TypeVar("T")

DEFAULT_MAX_RETRIES = 3
"""Retries after the first attempt (so at most four requests per call)."""
DEFAULT_BASE_DELAY = 1.0
"""Seconds before the first retry; doubled for each further retry."""
DEFAULT_MAX_DELAY = 30.0
"""Cap on one computed backoff delay, in seconds."""
DEFAULT_MAX_RETRY_AFTER = 60.0
"""The longest ``Retry-After`` (seconds) we wait for; a longer one fails at once."""
DEFAULT_JITTER = 0.25
"""Backoff delays are reduced by a random fraction in ``[0, jitter)``."""
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses worth another try: timeouts, conflicts, rate limits, server trouble."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry a failed provider call."""

    max_retries: int = DEFAULT_MAX_RETRIES
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER
    jitter: float = DEFAULT_JITTER

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("retry delays must be >= 0")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")

    def backoff(self, retry_number: int) -> float:
        """Delay before retry ``retry_number`` (1-based) when the server gave no hint."""
        exponent = min(retry_number - 1, 62)  # keep 2**n finite
        delay = min(self.base_delay * (2.0**exponent), self.max_delay)
        return delay * (1.0 - self.jitter * random.random())


NO_RETRIES = RetryPolicy(max_retries=0)


@dataclass(frozen=True, slots=True)
class Retryable:
    """A provider's verdict that a failure may pass: why, and what the server asked for."""

    reason: str
    """Short and human: ``"HTTP 429 rate limited"``, ``"connection error"``."""
    retry_after: float | None = None
    """Seconds the server asked us to wait, when it said."""


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """Passed to ``on_retry`` just before sleeping."""

    retry_number: int
    """1 for the first retry."""
    max_retries: int
    delay: float
    """Seconds we are about to wait."""
    reason: str
    error: BaseException


class RetriesExhausted(Exception):
    """Raised by ``call_with_retries`` when it gives up; ``__cause__`` is the last error."""

    def __init__(self, verdict: Retryable, attempts: int, *, waited_too_long: bool) -> None:
        if waited_too_long:
            text = (
                f"{verdict.reason}; the server asked to wait {verdict.retry_after:.0f}s, "
                "longer than threadline waits"
            )
        else:
            text = f"{verdict.reason} (gave up after {attempts} attempts)"
        super().__init__(text)
        self.verdict = verdict
        self.attempts = attempts


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(when.timestamp() - current, 0.0)


def call_with_retries(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Retryable | None],
    on_retry: Callable[[RetryEvent], None] | None = None,
    sleep: Callable[[float], None] | None = None,
    cancel: threading.Event | None = None,
) -> T:
    """Call ``fn`` until it succeeds, fails for good, or the retries run out.

    An error ``classify`` returns None for is re-raised untouched. When the
    policy is spent (or the server asks for too long a wait) ``RetriesExhausted``
    is raised from the last error, for the provider to translate. Once ``cancel``
    is set nothing is retried or waited for: ``CallCancelled`` is raised (from the
    error the aborted attempt ended with, if any).
    """
    retry_number = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise CallCancelled("the model call was cancelled")
        try:
            return fn()
        except Exception as exc:
            if cancel is not None and cancel.is_set():
                raise CallCancelled("the model call was cancelled") from exc
            verdict = classify(exc)
            if verdict is None:
                raise
            too_long = (
                verdict.retry_after is not None and verdict.retry_after > policy.max_retry_after
            )
            if too_long or retry_number >= policy.max_retries:
                raise RetriesExhausted(verdict, retry_number + 1, waited_too_long=too_long) from exc
            retry_number += 1
            delay = (
                verdict.retry_after
                if verdict.retry_after is not None
                else policy.backoff(retry_number)
            )
            event = RetryEvent(
                retry_number=retry_number,
                max_retries=policy.max_retries,
                delay=delay,
                reason=verdict.reason,
                error=exc,
            )
            log.info(
                "%s; retry %d of %d in %.2fs",
                verdict.reason,
                retry_number,
                policy.max_retries,
                delay,
            )
            if on_retry is not None:
                on_retry(event)
            if sleep is not None:
                sleep(delay)
            elif cancel is not None:
                cancel.wait(delay)  # a cancel ends the wait; the loop's check raises
            else:
                time.sleep(delay)


def retryable_status(
    status: int, message: str, headers: Mapping[str, str] | None, *, kind: str = ""
) -> Retryable | None:
    """A retry for a rate limit or server error status, honouring ``Retry-After``."""
    if status not in RETRYABLE_STATUS:
        return None
    label = kind or ("rate limited" if status == 429 else "server error")
    return Retryable(f"HTTP {status} {label}: {message}", retry_after=parse_retry_after(headers))
