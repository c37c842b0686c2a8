"""The retry loop: bounded, exponential with jitter, Retry-After honoured or refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.llm.retry import (
    RetriesExhausted,
    Retryable,
    RetryEvent,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
)


class Flaky(Exception):
    pass


class Fatal(Exception):
    pass


def classify(exc: BaseException) -> Retryable | None:
    if isinstance(exc, Flaky):
        return Retryable("flaky", retry_after=exc.args[0] if exc.args else None)
    return None


def failing(errors: list[Exception], result: str = "ok"):  # type: ignore[no-untyped-def]
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return result

    return fn, calls


def test_succeeds_after_transient_errors() -> None:
    fn, calls = failing([Flaky(), Flaky()])
    slept: list[float] = []
    events: list[RetryEvent] = []
    policy = RetryPolicy(max_retries=3, base_delay=1.0, jitter=0.0)
    assert (
        call_with_retries(
            fn, policy=policy, classify=classify, on_retry=events.append, sleep=slept.append
        )
        == "ok"
    )
    assert calls["n"] == 3
    assert slept == [1.0, 2.0]  # exponential
    assert [(e.retry_number, e.reason) for e in events] == [(1, "flaky"), (2, "flaky")]


def test_gives_up_after_max_retries() -> None:
    fn, calls = failing([Flaky() for _ in range(10)])
    with pytest.raises(RetriesExhausted, match="gave up after 3 attempts") as info:
        call_with_retries(
            fn, policy=RetryPolicy(max_retries=2), classify=classify, sleep=lambda s: None
        )
    assert calls["n"] == 3
    assert isinstance(info.value.__cause__, Flaky)


def test_other_errors_pass_through_untouched() -> None:
    fn, calls = failing([Fatal("boom")])
    with pytest.raises(Fatal, match="boom"):
        call_with_retries(fn, policy=RetryPolicy(), classify=classify, sleep=lambda s: None)
    assert calls["n"] == 1


def test_retry_after_is_used_instead_of_backoff() -> None:
    fn, _ = failing([Flaky(7.5)])
    slept: list[float] = []
    call_with_retries(fn, policy=RetryPolicy(base_delay=100), classify=classify, sleep=slept.append)
    assert slept == [7.5]


def test_too_long_retry_after_is_not_waited_for() -> None:
    fn, calls = failing([Flaky(3600.0)])
    slept: list[float] = []
    with pytest.raises(RetriesExhausted, match="asked to wait 3600s"):
        call_with_retries(fn, policy=RetryPolicy(), classify=classify, sleep=slept.append)
    assert calls["n"] == 1 and slept == []


def test_no_retries_policy() -> None:
    fn, calls = failing([Flaky()])
    with pytest.raises(RetriesExhausted):
        call_with_retries(
            fn, policy=RetryPolicy(max_retries=0), classify=classify, sleep=lambda s: None
        )
    assert calls["n"] == 1


@given(
    retry_number=st.integers(1, 200),
    base=st.floats(0, 10),
    cap=st.floats(0, 60),
    jitter=st.floats(0, 0.99),
)
def test_backoff_stays_within_its_bounds(
    retry_number: int, base: float, cap: float, jitter: float
) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=cap, jitter=jitter)
    ceiling = min(base * 2.0 ** min(retry_number - 1, 62), cap)
    delay = policy.backoff(retry_number)
    assert ceiling * (1 - jitter) - 1e-9 <= delay <= ceiling + 1e-9


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after": "soon"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": header}, now=now.timestamp()) == 30.0


@pytest.mark.parametrize(
    "kwargs", [{"max_retries": -1}, {"base_delay": -1.0}, {"jitter": 1.0}, {"jitter": -0.1}]
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
