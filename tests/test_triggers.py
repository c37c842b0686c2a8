"""Compaction triggers: each fires at its threshold, not before, and reports progress."""

from __future__ import annotations

from typing import Any

import pytest

from threadline import ContextPolicy, Message, Session, open_store
from threadline.compaction.triggers import (
    MIN_MESSAGES_MARGIN,
    TOKENS_THROUGH_KEY,
    check_triggers,
    tokens_since_checkpoint,
)
from threadline.store.protocol import Store


@pytest.fixture
def store() -> Store:
    return open_store("memory://")


def _session(store: Store, n: int, *, words: int = 3) -> Session:
    s = store.create_session(model="gpt-4o")
    body = " ".join(["word"] * words)
    msgs = [
        Message.user(f"q{i} {body}") if i % 2 == 0 else Message.assistant(f"a{i} {body}")
        for i in range(n)
    ]
    if msgs:
        s.append(msgs)
    return s


def _policy(**kw: Any) -> ContextPolicy:
    base: dict[str, Any] = {
        "max_messages_before_summary": 30,
        "max_tokens_before_summary": 128_000,
        "min_recent_messages": 6,
        # the reference CLI's tail, so these short sessions have something to summarize
        "preserve_fill": False,
    }
    base.update(kw)
    return ContextPolicy(**base)


def test_message_trigger_fires_exactly_at_threshold(store: Store) -> None:
    s = _session(store, 29)
    d = check_triggers(s, _policy())
    assert not d.fire
    assert d.get("messages") is not None
    s.append(Message.user("one more"))
    d = check_triggers(s, _policy())
    assert d.fire and d.reason == "messages"
    p = d.get("messages")
    assert p is not None and (p.value, p.threshold, p.percent) == (30, 30, 100.0)


def test_message_trigger_counts_only_since_the_checkpoint(store: Store) -> None:
    s = _session(store, 40)
    s.add_checkpoint(covers_up_to=35, summary="## Current State\n- x")
    d = check_triggers(s, _policy())
    assert d.messages_since_checkpoint == 5
    assert not d.fire
    p = d.get("messages")
    assert p is not None and p.value == 5 and round(p.percent, 2) == round(5 / 30 * 100, 2)


def test_token_trigger_fires_at_threshold(store: Store) -> None:
    s = _session(store, 12, words=50)
    total = s.total_tokens
    assert not check_triggers(s, _policy(max_tokens_before_summary=total + 1)).fire
    d = check_triggers(s, _policy(max_tokens_before_summary=total))
    assert d.fire and d.reason == "tokens"
    p = d.get("tokens")
    assert p is not None and p.value == total and p.percent == 100.0


def test_token_trigger_counts_tokens_after_the_checkpoint(store: Store) -> None:
    """Total tokens never fall; counting them would fire on every turn after one compaction."""
    s = _session(store, 20, words=50)
    total = s.total_tokens
    s.add_checkpoint(
        covers_up_to=20, summary="## Current State\n- x", metadata={TOKENS_THROUGH_KEY: total}
    )
    assert tokens_since_checkpoint(s, s.latest_checkpoint()) == 0
    s.append([Message.user("new " * 30), Message.assistant("reply " * 30)])
    since = tokens_since_checkpoint(s, s.latest_checkpoint())
    assert 0 < since == s.total_tokens - total
    policy = _policy(max_tokens_before_summary=total, min_recent_messages=0)
    assert not check_triggers(s, policy).fire  # total is over the threshold, "since" is not


def test_checkpoint_without_token_record_counts_the_total(store: Store) -> None:
    s = _session(store, 10)
    s.add_checkpoint(covers_up_to=4, summary="x")
    assert tokens_since_checkpoint(s, s.latest_checkpoint()) == s.total_tokens


def test_context_trigger_fires_at_fraction_of_window(store: Store) -> None:
    s = _session(store, 12)
    policy = _policy(context_limit=10_000, compact_at_fraction=0.8)
    assert not check_triggers(s, policy, context_tokens=7_999).fire
    d = check_triggers(s, policy, context_tokens=8_000)
    assert d.fire and d.reason == "context"
    p = d.get("context")
    assert p is not None and (p.value, p.threshold) == (8_000, 8_000)


def test_context_trigger_uses_the_model_window_from_the_catalog(store: Store) -> None:
    s = _session(store, 12)
    d = check_triggers(s, _policy(), model="gpt-4o", context_tokens=110_000)
    p = d.get("context")
    assert p is not None and p.threshold == int(128_000 * 0.8)
    assert d.fire and d.reason == "context"


def test_context_trigger_unavailable_without_a_built_context(store: Store) -> None:
    s = _session(store, 12)
    d = check_triggers(s, _policy(context_limit=100, response_reserve=0))
    p = d.get("context")
    assert p is not None and not p.available and not p.fired and p.percent == 0.0


def test_nothing_fires_before_min_recent_plus_four(store: Store) -> None:
    policy = _policy(max_messages_before_summary=1, min_recent_messages=6)
    minimum = 6 + MIN_MESSAGES_MARGIN
    s = _session(store, minimum - 1)
    d = check_triggers(s, policy, context_tokens=10**9)
    assert not d.fire
    assert d.minimum_messages == minimum
    assert "waits for" in d.note
    s.append(Message.user("the tenth"))
    assert check_triggers(s, policy).fire


def test_auto_summarize_off_switches_every_trigger_off(store: Store) -> None:
    s = _session(store, 100, words=100)
    policy = _policy(
        auto_summarize=False, max_tokens_before_summary=1, context_limit=1000, response_reserve=0
    )
    d = check_triggers(s, policy, context_tokens=10**6)
    assert not d.fire and d.reason is None
    assert all(p.reached and not p.fired for p in d.progress)
    assert "auto_summarize is off" in d.note


def test_the_trigger_furthest_past_its_threshold_wins(store: Store) -> None:
    s = _session(store, 60, words=5)
    policy = _policy(max_messages_before_summary=30, context_limit=1000, response_reserve=0)
    d = check_triggers(s, policy, context_tokens=900)  # messages 200%, context 112%
    assert d.fire and d.reason == "messages"
    assert {p.name for p in d.progress if p.fired} == {"messages", "context"}
    d = check_triggers(s, policy, context_tokens=5000)  # context 625%
    assert d.reason == "context"


def test_progress_percentages(store: Store) -> None:
    s = _session(store, 15)
    d = check_triggers(s, _policy(context_limit=1000, response_reserve=0), context_tokens=200)
    by_name = {p.name: p for p in d.progress}
    assert by_name["messages"].percent == pytest.approx(50.0)
    assert by_name["context"].percent == pytest.approx(25.0)
    assert by_name["tokens"].percent == pytest.approx(s.total_tokens / 128_000 * 100)
    assert [p.name for p in d.progress] == ["messages", "tokens", "context"]


def test_check_reads_no_history_below_the_thresholds(store: Store) -> None:
    """O(1) until a threshold is reached: the session info and the latest checkpoint."""
    s = _session(store, 20)

    class Guard:
        def __getattr__(self, name: str) -> Any:
            if name in {"tail", "read_messages", "count_messages", "search"}:
                raise AssertionError(f"check_triggers read history via {name}")
            return getattr(store, name)

    guarded = Session(Guard(), s.info)  # type: ignore[arg-type]
    assert not check_triggers(guarded, _policy(), context_tokens=10).fire


def test_a_reached_threshold_reads_only_the_tail_to_the_cut(store: Store) -> None:
    """The one decision: a reached threshold fires only with a cut, found in the tail."""
    s = _session(store, 2_000)
    read: list[int] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            if name in {"read_messages", "count_messages", "search"}:
                raise AssertionError(f"check_triggers read history via {name}")
            attr = getattr(store, name)
            if name != "tail":
                return attr

            def tail(*args: Any, **kw: Any) -> Any:
                page = attr(*args, **kw)
                read.extend(m.seq for m in page)
                return page

            return tail

    guarded = Session(Counting(), s.info)  # type: ignore[arg-type]
    d = check_triggers(guarded, _policy(), context_tokens=10)
    assert d.fire and d.covers_up_to == 2_000 - 8 and d.covers_from == 1
    assert len(read) <= 64


def test_progress_renders_as_the_reference_bars(store: Store) -> None:
    from rich.console import Console

    from threadline.report.context import render_trigger_progress

    s = _session(store, 18)
    d = check_triggers(s, _policy())
    console = Console(width=100, record=True, color_system=None)
    console.print(render_trigger_progress(d))
    out = console.export_text()
    assert "Messages: 18 / 30 (60%)" in out
    assert "[████████████░░░░░░░░]" in out
    assert "Tokens:" in out and "/ 128,000" in out
    assert "Context:  - (no context built yet)" in out
