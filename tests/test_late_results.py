"""Late tool results are repaired in the view, never dropped.

Claude Code logs one content block a line, so parallel calls can be stored as
``A(c1,c2) T(c1) A(c3) T(c2) T(c3)``: ``T(c2)`` arrives after a later assistant
message. The view places it right after its call (both providers' rules hold),
reports it under ``repaired``, and storage keeps the logged order (invariant 1).
The properties run over random interleavings of parallel calls and results,
including duplicates, orphans and results that never arrive.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import interleaved
from tests.windows import checked_window, raw_session
from threadline import ContextOverflow, ContextPolicy, Message, ToolCall, open_store
from threadline.compaction.compactor import Compactor, prepare_context
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.triggers import choose_cut
from threadline.interop.provider_rules import anthropic_problems, openai_problems
from threadline.messages import group_units
from threadline.store.encoding import prepare_messages
from threadline.store.protocol import Session

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _session(msgs: list[Message]) -> Session:
    """Stored in the order logged, as an import stores them."""
    return raw_session(msgs, batch=5)


def answers(stored: list[Message]) -> dict[str, int]:
    """Call id -> seq of the result that answers it: the first one stored after the call
    (ids are unique in these histories, so pairing is unambiguous)."""
    called: set[str] = set()
    out: dict[str, int] = {}
    for m in stored:
        called.update(c.id for c in m.tool_calls)
        if m.role == "tool" and m.tool_call_id in called and m.tool_call_id not in out:
            assert m.seq is not None
            out[m.tool_call_id] = m.seq
    return out


def late_seqs(stored: list[Message]) -> set[int]:
    """Results stored after a later message than their call."""
    call_at: dict[str, int] = {}
    answer = answers(stored)
    heads = [m.seq for m in stored if m.role != "tool" and m.seq is not None]
    out: set[int] = set()
    for m in stored:
        for c in m.tool_calls:
            assert m.seq is not None
            call_at[c.id] = m.seq
    for call_id, seq in answer.items():
        if any(call_at[call_id] < h < seq for h in heads):
            out.add(seq)
    return out


def check_view(stored: list[Message], history: list[Message]) -> set[int]:
    """The view's history against the store: each call in view is followed by exactly its
    answer (or a synthetic one when none was stored), no other result is shown, and the
    order is the stored order but for results moved up to their call. Returns the seqs
    of stored messages the view leaves out that it could have shown."""
    answer = answers(stored)
    shown = {m.seq for m in history if m.seq is not None}
    for i, m in enumerate(history):
        results = history[i + 1 : i + 1 + len(m.tool_calls)]
        for call, result in zip(m.tool_calls, results, strict=True):
            if call.id in answer:
                assert result.seq == answer[call.id], f"{call.id} is not answered by its result"
            else:
                assert result.synthetic and result.seq is None
        if m.role == "tool" and not m.synthetic:
            assert answer.get(m.tool_call_id or "") == m.seq, "a duplicate or orphan is shown"
    heads = [m.seq for m in history if m.role != "tool"]
    assert all(q is not None for q in heads)
    assert heads == sorted(q for q in heads if q is not None)
    placeable = {m.seq for m in stored if m.role != "tool"} | set(answer.values())
    return {q for q in placeable if q not in shown and q is not None}


def test_the_issue_shape_is_repaired_and_nothing_is_dropped() -> None:
    c1, c2, c3 = (ToolCall(id=f"c{i}", name="Read", arguments={"path": f"f{i}"}) for i in (1, 2, 3))
    s = _session(
        [
            Message.user("read the three files"),
            Message.assistant("", tool_calls=[c1, c2]),
            Message.tool("one", tool_call_id="c1", name="Read"),
            Message.assistant("", tool_calls=[c3]),
            Message.tool("two", tool_call_id="c2", name="Read"),
            Message.tool("three", tool_call_id="c3", name="Read"),
            Message.assistant("all three read"),
        ]
    )
    w = checked_window(s, ContextPolicy(context_limit=8_000, response_reserve=500))
    assert w is not None
    history = [m for m in w.messages if m.role != "system"]
    assert [m.seq for m in history] == [1, 2, 3, 5, 4, 6, 7]
    assert w.report.repaired == [5] and w.report.dropped_messages == 0
    assert w.report.orphan_results == [] and w.report.synthesized_results == []
    assert openai_problems(w.to_openai()) == []
    assert anthropic_problems(w.to_anthropic()) == []
    assert [m.seq for m in s.messages()] == [1, 2, 3, 4, 5, 6, 7]  # storage keeps the log order
    assert s.messages()[4].tool_call_id == "c2"


@given(
    msgs=interleaved(),
    limit=st.integers(1_500, 30_000),
    min_recent=st.integers(0, 6),
    strategy=st.sampled_from(["stable", "greedy"]),
    placement=st.sampled_from(["system", "checkpoint_pair"]),
)
@SETTINGS
def test_any_interleaving_gives_a_valid_view_that_drops_nothing_with_its_call(
    msgs: list[Message], limit: int, min_recent: int, strategy: str, placement: str
) -> None:
    s = _session(msgs)
    policy = ContextPolicy(
        context_limit=limit,
        response_reserve=200,
        min_recent_messages=min_recent,
        trim_strategy=strategy,  # type: ignore[arg-type]
        summary_placement=placement,  # type: ignore[arg-type]
        pruning=False,
    )
    w = checked_window(s, policy)  # the budget holds, units are whole
    if w is None:
        return
    stored = s.messages()
    history = [m for m in w.messages if not m.summary and m.role != "system"]
    left_out = check_view(stored, history)
    if history:
        assert openai_problems(w.to_openai()) == []
        assert anthropic_problems(w.to_anthropic()) == []
    shown = {m.seq for m in history if m.seq is not None}
    assert set(w.report.repaired) == late_seqs(stored) & shown
    if w.report.dropped_messages == 0:
        assert not left_out, f"stored messages {sorted(left_out)} left out but not reported"
    if not left_out:
        assert w.report.dropped_messages == 0
    assert [m.model_dump() for m in s.messages()] == [m.model_dump() for m in stored]


@given(msgs=interleaved())
@SETTINGS
def test_a_window_that_holds_everything_shows_every_result_with_its_call(
    msgs: list[Message],
) -> None:
    s = _session(msgs)
    w = checked_window(s, ContextPolicy(context_limit=200_000, pruning=False))
    assert w is not None
    stored = s.messages()
    history = [m for m in w.messages if m.role != "system"]
    assert check_view(stored, history) == set()
    assert w.report.dropped_messages == 0
    assert set(w.report.repaired) == late_seqs(stored)


@given(msgs=interleaved(max_steps=60), keep=st.integers(0, 8), share=st.integers(200, 6_000))
@SETTINGS
def test_a_cut_never_summarizes_a_call_whose_result_it_keeps(
    msgs: list[Message], keep: int, share: int
) -> None:
    s = _session(msgs)
    stored = s.messages()
    answer = answers(stored)
    call_at = {c.id: m.seq for m in stored for c in m.tool_calls}
    for fill in (True, False):
        cut = choose_cut(
            iter(reversed(stored)),
            min_recent=keep,
            user_turns=2,
            max_kept_tokens=share,
            fill=fill,
        )
        if cut.seq is None:
            continue
        kept = [m for m in stored if (m.seq or 0) > cut.seq]
        assert not kept or kept[0].role != "tool"
        for m in kept:
            if m.role == "tool" and answer.get(m.tool_call_id or "") == m.seq:
                assert (call_at[m.tool_call_id or ""] or 0) > cut.seq, (
                    "call summarized, result kept"
                )


@given(
    msgs=interleaved(max_steps=60),
    limit=st.integers(3_000, 8_000),
    strategy=st.sampled_from(["stable", "greedy"]),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_agent_loop_replaying_any_interleaving_never_drops_a_message(
    msgs: list[Message], limit: int, strategy: str
) -> None:
    """As an agent loop calls ``prepare_context`` before each model call: no window ever
    leaves a stored message out that neither it shows nor a checkpoint covers."""
    store = open_store("memory://")
    s = store.create_session(agent="replay", model="gpt-4o")
    policy = ContextPolicy(
        context_limit=limit,
        response_reserve=200,
        min_recent_messages=2,
        trim_strategy=strategy,  # type: ignore[arg-type]
    )
    compactor = Compactor(ExtractiveSummarizer(), policy=policy)
    for m in msgs:
        if m.role == "assistant" and s.last_seq:
            try:
                w = prepare_context(s, compactor, policy=policy)
            except ContextOverflow:
                continue
            assert w.report.dropped_messages == 0, w.report.notes
            floor = w.report.covered_by_summary
            stored = [q for q in s.messages() if (q.seq or 0) > floor]
            history = [q for q in w.messages if not q.summary and q.role != "system"]
            # results whose call lies under the checkpoint cannot be shown: not dropped
            assert {q for q in check_view(stored, history) if q > floor} == set()
        store.append_messages(s.id, prepare_messages(s.model, [m]))
        s.refresh()


def test_group_units_places_a_late_result_and_reports_it() -> None:
    a = ToolCall(id="a", name="t", arguments={})
    b = ToolCall(id="b", name="t", arguments={})
    msgs = [
        Message.assistant("", tool_calls=[a, b], seq=1),
        Message.tool("ra", tool_call_id="a", seq=2),
        Message.user("meanwhile", seq=3),
        Message.tool("rb", tool_call_id="b", seq=4),
        Message.tool("rb again", tool_call_id="b", seq=5),
    ]
    units, report = group_units(msgs)
    assert [[m.seq for m in u.messages] for u in units] == [[1, 2, 4], [3]]
    assert report.late == [4] and report.orphans == [5] and report.duplicates == [5]
    assert report.synthesized == []


def test_late_and_duplicate_results_do_not_make_the_cut_read_the_whole_history() -> None:
    calls = [ToolCall(id=f"k{i}", name="Read", arguments={"path": f"f{i}"}) for i in range(3)]
    msgs: list[Message] = []
    for i in range(300):
        msgs += [Message.user(f"question {i} " + "word " * 40), Message.assistant(f"answer {i}")]
    msgs += [
        Message.assistant("", tool_calls=calls[:2]),
        Message.tool("one", tool_call_id="k0", name="Read"),
        Message.assistant("", tool_calls=calls[2:]),
        Message.tool("two", tool_call_id="k1", name="Read"),  # late
        Message.tool("three", tool_call_id="k2", name="Read"),
        Message.tool("two again", tool_call_id="k1", name="Read"),  # a duplicate
        Message.assistant("done"),
    ]
    s = raw_session(msgs)
    seen: list[int] = []
    real_tail = s.store.tail

    def counting_tail(session_id: str, limit: int, *, before_seq: int | None = None) -> list[Any]:
        page = real_tail(session_id, limit, before_seq=before_seq)
        seen.extend(m.seq or 0 for m in page)
        return page

    s.store.tail = counting_tail  # type: ignore[method-assign]
    cut = Compactor(ExtractiveSummarizer()).plan(s, budget=4_000).cut
    assert cut is not None and cut.seq is not None
    assert cut.seq < 601  # the chains (seq 601-607) are kept whole
    assert len(seen) < 200  # a few pages, not the 607-message history
