"""Compaction as properties: history unchanged, view invariants kept, cost incremental."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import history, policies
from tests.windows import checked_window
from threadline import ContextPolicy, Message, Session, open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import SummaryResult, words
from threadline.compaction.triggers import is_user_turn
from threadline.context.builder import window_cost
from threadline.store.encoding import prepare_messages
from threadline.tokens import counter_for

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class RecordingSummarizer:
    """ExtractiveSummarizer that records what each call was given."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.calls: list[dict[str, Any]] = []

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        self.calls.append(
            {
                "seqs": [m.seq for m in messages],
                "chars": sum(len(m.search_text()) for m in messages),
                "previous_chars": len(previous or ""),
            }
        )
        return self.inner.summarize(messages, previous=previous, max_words=max_words)


def _session(model: str = "gpt-4o") -> Session:
    return open_store("memory://").create_session(model=model)


def append_raw(s: Session, batch: list[Message]) -> None:
    """Store a batch as an importer would, orphan results included (crash-broken logs)."""
    s.store.append_messages(s.id, prepare_messages(s.model, batch))
    s.refresh()


def _dump(s: Session) -> list[dict[str, Any]]:
    return [m.model_dump() for m in s.messages()]


def _check_view(s: Session, policy: ContextPolicy) -> None:
    w = checked_window(s, policy)  # invariants 2 and 3
    if w is None:
        return
    body = [m for m in w.messages if not m.summary and m.role != "system"]
    summaries = [m for m in w.messages if m.summary]
    assert all(m.synthetic for m in summaries)
    assert all(m.role != "user" or "not written by the user" in m.text for m in summaries)
    seqs = [m.seq for m in body if m.seq is not None]
    assert seqs == sorted(seqs)
    shown = {c.id: c for c in s.checkpoints()}.get(w.report.checkpoint_id or -1)
    newest = s.latest_checkpoint()
    assert w.report.newest_checkpoint_id == (newest.id if newest else None)
    if shown is not None and newest is not None and shown.id != newest.id:
        # a stable window holds an older checkpoint only while it drops nothing (invariant 7)
        assert policy.trim_strategy == "stable" and w.report.dropped_messages == 0
    floor = shown.covers_up_to if shown else 0
    assert all(q > floor for q in seqs), "a message covered by the summary is shown again"
    stored = s.messages(after_seq=floor)
    need = min(policy.min_recent_messages, len(stored))
    tail = {m.seq for m in stored[len(stored) - need :] if m.role != "tool"}
    assert tail <= set(seqs) | set(w.report.orphan_results), "min_recent not honoured"


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), history(min_units=1, max_units=12, broken=True)),
        st.tuples(st.just("compact"), st.booleans()),
    ),
    min_size=1,
    max_size=8,
)
POLICIES = policies(
    2_000,
    20_000,
    preserve_user_turns=st.integers(0, 4),
    summary_placement=st.sampled_from(["system", "checkpoint_pair"]),
    summary_max_words=st.integers(80, 600),
    max_messages_before_summary=st.integers(1, 30),
    preserve_fill=st.booleans(),
)


@given(operations=ops, policy=POLICIES)
@SETTINGS
def test_any_appends_and_compactions_keep_history_and_view_invariants(
    operations: list[tuple[str, Any]], policy: ContextPolicy
) -> None:
    s = _session()
    comp = Compactor(ExtractiveSummarizer(), policy=policy)
    last_cover = 0
    for op, arg in operations:
        if op == "append":
            append_raw(s, arg)
            continue
        before = _dump(s)
        r = comp.compact(s, force=True) if arg else comp.compact_if_needed(s)
        assert _dump(s) == before, "compaction changed stored messages"  # invariant 1
        assert r.status in {"compacted", "noop", "not_needed"}, r.error
        if r.compacted:
            assert r.checkpoint is not None and r.covers_up_to is not None
            assert r.covers_up_to > last_cover
            last_cover = r.covers_up_to
            kept = s.messages(after_seq=r.covers_up_to)
            assert len(kept) >= policy.min_recent_messages
            cost = window_cost(counter_for(s.model))  # what the window pays, as the cut counts
            budget = policy.context_limit - policy.response_reserve  # type: ignore[operator]
            share = min(int(budget * policy.preserve_share), policy.preserve_max_tokens)
            if sum(is_user_turn(m) for m in kept) < policy.preserve_user_turns:
                # fewer turns only because all of them would not fit the preserved share
                whole = s.messages(after_seq=last_user_start(s, policy.preserve_user_turns))
                assert sum(cost(m) for m in whole) > share
            if policy.preserve_fill and sum(cost(m) for m in kept) > share:
                # over the share only to keep min_recent_messages
                assert r.checkpoint.metadata["cut_rule"] == "recent"
            assert not kept or kept[0].role != "tool"
            assert words(r.checkpoint.summary) <= policy.summary_max_words
        _check_view(s, policy)


def last_user_start(s: Session, turns: int) -> int:
    """The seq just before the ``turns``-th user turn from the end (0: from the start)."""
    users = [m.seq or 0 for m in s.messages() if is_user_turn(m)]
    return users[-turns] - 1 if len(users) >= turns else 0


def _turn(i: int) -> list[Message]:
    return [
        Message.user(f"step {i}: update src/module_{i}.py and set timeout_{i}=30"),
        Message.assistant(f"Done with step {i}; module_{i} now validates its input."),
    ]


def test_incremental_cost_follows_new_messages_not_history() -> None:
    s = _session()
    rec = RecordingSummarizer()
    # the reference CLI's tail, so each round's ten short turns are summarized
    policy = ContextPolicy(min_recent_messages=6, preserve_user_turns=2, preserve_fill=False)
    comp = Compactor(rec, policy=policy)
    rounds = 30
    per_round = 10  # turns appended between compactions
    for r in range(rounds):
        s.append([m for i in range(r * per_round, (r + 1) * per_round) for m in _turn(i)])
        assert comp.compact(s, force=True).compacted
    covered = [q for call in rec.calls for q in call["seqs"]]
    last = s.latest_checkpoint()
    assert last is not None
    # each message is summarized exactly once, in order: no round re-reads history
    assert covered == list(range(1, last.covers_up_to + 1))
    sizes = [len(call["seqs"]) for call in rec.calls]
    assert max(sizes[1:]) == 2 * per_round  # one round's worth, in round 30 as in round 2
    chars = [call["chars"] for call in rec.calls]
    assert max(chars[1:]) <= 1.2 * min(chars[1:])  # flat, not growing with history
    # the previous snapshot passed along is bounded by the word limit, not the history
    prev = [call["previous_chars"] for call in rec.calls[1:]]
    assert max(prev) < 600 * 40
    total_input = sum(chars)
    assert total_input <= 1.05 * sum(len(m.search_text()) for m in s.messages())


@given(batches=st.lists(st.integers(1, 25), min_size=2, max_size=10), keep=st.integers(0, 10))
@SETTINGS
def test_rounds_partition_the_history(batches: list[int], keep: int) -> None:
    s = _session()
    rec = RecordingSummarizer()
    policy = ContextPolicy(min_recent_messages=keep, preserve_user_turns=1, preserve_fill=False)
    comp = Compactor(rec, policy=policy)
    n = 0
    for size in batches:
        s.append([m for i in range(n, n + size) for m in _turn(i)])
        n += size
        comp.compact(s, force=True)
    covered = [q for call in rec.calls for q in call["seqs"]]
    assert covered == sorted(set(covered))  # no message summarized twice
    cp = s.latest_checkpoint()
    assert covered == list(range(1, (cp.covers_up_to if cp else 0) + 1))
