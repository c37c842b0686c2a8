"""The view invariants of DESIGN.md, as properties of build_context()."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import history, policies
from tests.windows import checked_window, raw_session
from threadline import ContextOverflow, ContextPolicy, Message, build_context, open_store
from threadline.messages import INTERRUPTED_RESULT
from threadline.store.encoding import primary_tokens
from threadline.store.protocol import Session

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

POLICIES = policies(600, 20_000, max_messages=st.one_of(st.none(), st.integers(1, 60)))


def _session(msgs: list[Message]) -> Session:
    return raw_session(msgs)


@given(msgs=history(broken=True), policy=POLICIES)
@SETTINGS
def test_budget_units_order_and_min_recent(msgs: list[Message], policy: ContextPolicy) -> None:
    s = _session(msgs)
    w = checked_window(s, policy)  # invariants 2 and 3: units whole, the budget holds
    if w is None:
        return
    history_msgs = [m for m in w.messages if m.role != "system"]
    # order preserved, and the window is a suffix of the stored history
    seqs = [m.seq for m in history_msgs if m.seq is not None]
    assert seqs == sorted(seqs)
    stored = s.messages()
    if seqs:
        assert seqs[-1] == stored[-1].seq or stored[-1].role == "tool"
        kept = {m.seq for m in stored if m.seq is not None and m.seq >= seqs[0]}
        orphans = set(w.report.orphan_results)
        assert kept - orphans - set(seqs) == set()
    # min_recent honoured in whole units
    need = min(policy.min_recent_messages, len(stored))
    tail_seqs = {m.seq for m in stored[len(stored) - need :] if m.role != "tool"}
    assert tail_seqs <= set(seqs) | set(w.report.orphan_results)


@given(msgs=history(broken=True), policy=POLICIES)
@SETTINGS
def test_views_never_change_history(msgs: list[Message], policy: ContextPolicy) -> None:
    s = _session(msgs)
    before = [m.model_dump() for m in s.messages()]
    for _ in range(2):
        with contextlib.suppress(ContextOverflow):
            build_context(s, policy=policy.model_copy(update={"context_limit": 700}))
    assert [m.model_dump() for m in s.messages()] == before
    assert all(INTERRUPTED_RESULT not in m.text for m in s.messages())


@given(
    first=history(min_units=5, max_units=30),
    turns=st.lists(history(min_units=1, max_units=3), min_size=2, max_size=12),
    limit=st.integers(3_000, 12_000),
)
@SETTINGS
def test_stable_prefix_holds_while_new_messages_fit(
    first: list[Message], turns: list[list[Message]], limit: int
) -> None:
    policy = ContextPolicy(context_limit=limit, response_reserve=200, min_recent_messages=2)
    s = _session(first)
    try:
        prev = build_context(s, system_prompt="sys", policy=policy)
    except ContextOverflow:
        return
    for turn in turns:
        added = s.append(turn)
        grown = prev.report.sections[3].tokens + sum(primary_tokens(m) for m in added)
        try:
            w = build_context(s, system_prompt="sys", policy=policy)
        except ContextOverflow:
            return
        if grown <= w.budget - w.report.sections[4].tokens and w.report.truncations == []:
            assert w.report.prefix_changed is False, "prefix moved although everything still fit"
            assert w.report.first_seq == prev.report.first_seq
        if w.report.prefix_changed:
            assert w.report.retrimmed
        prev = w


def test_stable_retrims_to_low_water_then_holds() -> None:
    policy = ContextPolicy(context_limit=4000, response_reserve=0, min_recent_messages=2)
    store = open_store("memory://")
    s = store.create_session(model="gpt-4o")
    changes = 0
    builds = 0
    for i in range(200):
        s.append([Message.user(f"question {i} " + "word " * 40), Message.assistant("answer " * 40)])
        w = build_context(s, policy=policy)
        builds += 1
        changes += bool(w.report.prefix_changed)
        assert w.tokens <= 4000
    # each re-trim frees a quarter of the budget: far fewer prefix changes than turns
    assert 0 < changes < builds / 4
