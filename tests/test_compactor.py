"""The compactor: where it cuts, what it writes, and how it fails and refuses."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance.backends import BACKENDS, clean_store
from tests.strategies import history
from threadline import (
    ContextPolicy,
    LockHolder,
    Message,
    Session,
    ToolCall,
    build_context,
    open_store,
)
from threadline.compaction.compactor import MARK_KEY, Compactor, current_mark
from threadline.compaction.snapshot import Snapshot, SummaryResult
from threadline.compaction.triggers import (
    TOKENS_THROUGH_KEY,
    check_triggers,
    choose_cut,
    is_user_turn,
)
from threadline.compaction.values import extract_values, retention
from threadline.context.builder import window_cost
from threadline.errors import CheckpointConflict, CompactionInProgress
from threadline.messages import utcnow
from threadline.store.encoding import prepare_messages
from threadline.store.locks import this_host
from threadline.store.protocol import Store
from threadline.tokens import counter_for


class FakeSummarizer:
    """Records its inputs; the snapshot lists each message's first words."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[list[Message], str | None, int]] = []
        self.during: Any = None

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        self.calls.append((list(messages), previous, max_words))
        if self.during is not None:
            self.during()
        snap = Snapshot.parse(previous) if previous else Snapshot()
        for m in messages:
            snap.add("current_state", f"#{m.seq} {m.role}: {m.text[:40]}", score=float(m.seq or 0))
        text = snap.render(max_words)
        source = "\n".join(m.text for m in messages)
        values = extract_values(source)
        return SummaryResult(
            text=text,
            snapshot=snap,
            values=values,
            retention=retention(values, text),
            input_tokens=len(source.split()),
            output_tokens=len(text.split()),
            summarizer=self.name,
        )


class Boom(FakeSummarizer):
    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        raise RuntimeError("the summarizer fell over")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return open_store("memory://")
    return open_store(f"sqlite://{tmp_path / 'store.db'}")


@pytest.fixture(params=BACKENDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every backend: the mark and the checkpoint record live in each one's memo and tables."""
    yield from clean_store(request.param, tmp_path)


def chain(i: int, n: int = 2) -> list[Message]:
    calls = [
        ToolCall(id=f"c{i}_{k}", name="read_file", arguments={"path": f"src/m{i}.py"})
        for k in range(n)
    ]
    out = [Message.assistant(f"reading {i}", tool_calls=calls)]
    out += [
        Message.tool(f"contents {i}.{k}", tool_call_id=c.id, name=c.name)
        for k, c in enumerate(calls)
    ]
    return out


def turns(count: int, *, start: int = 0) -> list[Message]:
    """``count`` user turns: question, a tool chain, an answer (5 messages each)."""
    out: list[Message] = []
    for i in range(start, start + count):
        out.append(Message.user(f"question {i}: fix src/app{i}.py"))
        out += chain(i)
        out.append(Message.assistant(f"answer {i}: fixed src/app{i}.py"))
    return out


def make_session(store: Store, msgs: list[Message]) -> Session:
    s = store.create_session(model="gpt-4o")
    s.append(msgs)
    return s


def policy(**kw: Any) -> ContextPolicy:
    """The reference CLI's smaller tail (the last turns, else ``min_recent_messages``), so
    these short sessions have something to compact; the filled tail is tested below."""
    return ContextPolicy(**{"preserve_fill": False, **kw})


# -- the cut -----------------------------------------------------------------------


def test_cut_keeps_the_last_four_user_turns(store: Store) -> None:
    s = make_session(store, turns(10))  # 50 messages, a user message every 5
    fake = FakeSummarizer()
    r = Compactor(fake, policy=policy(min_recent_messages=6)).compact(s, force=True)
    assert r.status == "compacted"
    # the 4th user message from the end is question 6 at seq 31: the cut is just before it
    assert r.covers_up_to == 30
    assert r.messages_kept == 20
    kept = s.messages(after_seq=30)
    assert sum(is_user_turn(m) for m in kept) == 4
    assert kept[0].role == "user"


def test_cut_keeps_min_recent_when_that_is_more(store: Store) -> None:
    s = make_session(store, turns(10))
    r = Compactor(FakeSummarizer(), policy=policy(min_recent_messages=23)).compact(s, force=True)
    # 23 messages reach into turn 5's tool chain; the cut moves back to that chain's call
    assert r.messages_kept >= 23
    first_kept = s.messages(after_seq=r.covers_up_to or 0)[0]
    assert first_kept.role != "tool"
    assert r.covers_up_to == 50 - 24  # the assistant call at seq 27 opens the kept part


def test_cut_never_splits_a_tool_chain(store: Store) -> None:
    msgs = [Message.user("go"), *chain(0, 3), Message.user("again"), *chain(1, 3)]
    s = make_session(store, msgs)
    for keep in range(0, len(msgs)):
        p = policy(min_recent_messages=keep, preserve_user_turns=0)
        cut = Compactor(FakeSummarizer(), policy=p).plan(s).cut
        assert cut is not None
        if cut.seq is None:
            continue
        after = s.messages(after_seq=cut.seq)
        assert not after or after[0].role != "tool", f"keep={keep} cut inside a chain"
        assert len(after) >= keep


@given(
    msgs=history(min_units=1, max_units=25, broken=True),
    keep=st.integers(0, 12),
    users=st.integers(0, 5),
    share=st.one_of(st.none(), st.integers(1, 4_000)),
)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_cut_rules_hold_for_any_history(
    msgs: list[Message], keep: int, users: int, share: int | None
) -> None:
    """Min recent always kept, whole units, turns kept only while they fit, and a cut always
    exists when the history since the floor does not fit the share."""
    s = open_store("memory://").create_session(model="gpt-4o")
    s.store.append_messages(s.id, prepare_messages(s.model, msgs))  # as an import would
    stored = s.messages()
    cut = choose_cut(
        iter(reversed(stored)), min_recent=keep, user_turns=users, max_kept_tokens=share
    )
    tokens = sum(next(iter(m.token_counts.values())) for m in stored)
    if cut.seq is None:
        # everything is kept: it fits, or nothing older than the kept minimum exists
        assert share is None or tokens <= share or len(stored) <= keep or cut.rule == "none"
        after = stored
        assert (
            len(after) < keep + 1 or share is None or tokens <= share or not _boundary(stored, keep)
        )
        return
    after = [m for m in stored if (m.seq or 0) > cut.seq]
    assert [m.seq for m in reversed(cut.kept)] == [m.seq for m in after]
    assert cut.kept_tokens == sum(next(iter(m.token_counts.values())) for m in after)
    assert len(after) >= keep
    assert not after or after[0].role != "tool"
    if cut.rule == "turns" and share is not None:
        assert cut.kept_tokens <= share
    if sum(is_user_turn(m) for m in after) < users:
        assert share is not None  # fewer turns only because they did not fit


def _boundary(stored: list[Message], keep: int) -> bool:
    """Whether a legal cut keeping at least ``keep`` messages exists at all."""
    for i in range(len(stored) - 1, 0, -1):
        kept = stored[i:]
        if len(kept) >= keep and kept[0].role != "tool":
            return True
    return False


def _one_request_run(steps: int, size: int = 400) -> list[Message]:
    """One user request followed by ``steps`` tool steps: the commonest real shape."""
    out: list[Message] = [Message.user("Work on bead spotter-dov: fix the transcript renderer")]
    for i in range(steps):
        call = ToolCall(id=f"t{i}", name="Bash", arguments={"command": f"mix test --seed {i}"})
        out.append(Message.assistant(f"step {i}", tool_calls=[call]))
        out.append(Message.tool("x " * size + f"result {i}", tool_call_id=call.id, name="Bash"))
    return out


def test_a_single_request_run_can_always_be_compacted(store: Store) -> None:
    """The issue's case: one request, hundreds of steps, fewer than 4 user turns."""
    s = make_session(store, _one_request_run(150))
    budget = 20_000
    comp = Compactor(FakeSummarizer(), policy=policy())
    plan = comp.plan(s, budget=budget)
    assert plan.has_work and plan.cut is not None and plan.cut.rule == "recent"
    r = comp.compact(s, force=True, budget=budget)
    assert r.status == "compacted"
    kept = s.messages(after_seq=r.covers_up_to or 0)
    assert len(kept) >= 6 and kept[0].role != "tool"
    assert sum(next(iter(m.token_counts.values())) for m in kept) <= budget // 2


def test_whole_turns_are_kept_while_they_fit(store: Store) -> None:
    s = make_session(store, turns(10))
    cost = window_cost(counter_for(s.model))  # the share is measured as a window counts
    tail4 = sum(cost(m) for m in s.messages(after_seq=30))
    tail2 = sum(cost(m) for m in s.messages(after_seq=40))
    # the last 4 turns fit half the budget: kept
    cut = Compactor(FakeSummarizer(), policy=policy()).plan(s, budget=tail4 * 2).cut
    assert cut is not None and cut.seq == 30 and cut.rule == "turns"
    # only the last 2 fit: the cut keeps those whole
    cut = Compactor(FakeSummarizer(), policy=policy()).plan(s, budget=(tail2 + 1) * 2).cut
    assert cut is not None and cut.seq == 40 and cut.rule == "turns"


def test_keep_overrides_and_focus_reach_the_summarizer(store: Store) -> None:
    class Focused(FakeSummarizer):
        focus: str | None = None

        def summarize(  # type: ignore[override]
            self,
            messages: Sequence[Message],
            *,
            previous: str | None = None,
            max_words: int = 600,
            focus: str | None = None,
        ) -> SummaryResult:
            self.focus = focus
            return super().summarize(messages, previous=previous, max_words=max_words)

    s = make_session(store, turns(10))
    fake = Focused()
    r = Compactor(fake, policy=policy()).compact(
        s, force=True, keep_recent=2, keep_turns=1, focus="the migration"
    )
    assert r.covers_up_to == 45 and fake.focus == "the migration"
    assert r.checkpoint is not None and r.checkpoint.metadata["focus"] == "the migration"


def test_every_snapshot_pins_the_first_and_latest_request(store: Store) -> None:
    msgs = [Message.user("Caveat: The messages below were generated by the user")]
    msgs += turns(10)
    s = make_session(store, msgs)
    comp = Compactor(FakeSummarizer(), policy=policy(summary_max_words=120))
    first = comp.compact(s, force=True)
    assert first.checkpoint is not None
    assert "Primary request (user, #2): question 0: fix src/app0.py" in first.checkpoint.summary
    for round_ in range(3):
        s.append(turns(6, start=10 + 6 * round_))
        r = comp.compact(s, force=True)
        assert r.checkpoint is not None
        summary = r.checkpoint.summary
        assert "Primary request (user, #2): question 0: fix src/app0.py" in summary
        assert f"Latest request (user, #{s.last_seq - 4}): question {15 + 6 * round_}" in summary
        assert len([w for w in summary.split() if any(c.isalnum() for c in w)]) <= 120


def test_plan_reads_only_the_tail_it_needs(store: Store) -> None:
    s = make_session(store, turns(200))  # 1,000 messages
    seen: list[int] = []
    real_tail = s.store.tail

    def counting_tail(
        session_id: str, limit: int, *, before_seq: int | None = None
    ) -> list[Message]:
        page = real_tail(session_id, limit, before_seq=before_seq)
        seen.extend(m.seq or 0 for m in page)
        return page

    s.store.tail = counting_tail  # type: ignore[method-assign]
    cut = Compactor(FakeSummarizer(), policy=policy()).plan(s).cut
    assert cut is not None and cut.seq == 980
    assert len(seen) <= 64  # one or two pages, not the history


# -- what it writes ------------------------------------------------------------------


def test_checkpoint_metadata_and_history_unchanged(any_store: Store) -> None:
    s = make_session(any_store, turns(10))
    before = [m.model_dump() for m in s.messages()]
    r = Compactor(FakeSummarizer(), policy=policy()).compact(s, force=True)
    cp = r.checkpoint
    assert cp is not None and cp == s.latest_checkpoint()
    assert cp.covers_up_to == 30
    md = cp.metadata
    assert md["summarizer"] == "fake"
    assert md["messages_summarized"] == 30 == r.messages_summarized
    assert md["covers_from"] == 1
    assert md["words"] == len([w for w in cp.summary.split() if any(c.isalnum() for c in w)])
    assert md["input_tokens"] > 0 and md["output_tokens"] > 0
    assert set(md["retention"]) >= {"total", "kept", "missing", "ratio"}
    assert md["duration_ms"] >= 0
    assert md["trigger"] == "forced"
    kept_tokens = sum(next(iter(m.token_counts.values())) for m in s.messages(after_seq=30))
    assert md[TOKENS_THROUGH_KEY] == s.total_tokens - kept_tokens
    assert [m.model_dump() for m in s.messages()] == before
    assert current_mark(s) is None


def test_incremental_second_round_summarizes_only_new_messages(any_store: Store) -> None:
    s = make_session(any_store, turns(10))
    fake = FakeSummarizer()
    comp = Compactor(fake, policy=policy())
    first = comp.compact(s, force=True)
    s.append(turns(6, start=10))
    second = comp.compact(s, force=True)
    assert second.status == "compacted"
    assert second.covers_from == 31 and second.covers_up_to == 60
    msgs, previous, _ = fake.calls[1]
    assert previous == first.checkpoint.summary  # type: ignore[union-attr]
    assert [m.seq for m in msgs] == list(range(31, 61))
    assert second.checkpoint is not None
    assert second.checkpoint.metadata["previous_checkpoint"] == first.checkpoint.id  # type: ignore[union-attr]


def test_nothing_to_summarize_is_a_noop_that_says_so(store: Store) -> None:
    s = make_session(store, turns(3))
    r = Compactor(FakeSummarizer(), policy=policy()).compact(s, force=True)
    assert r.status == "noop" and not r.compacted
    assert "nothing to summarize" in r.reason
    assert s.latest_checkpoint() is None
    assert current_mark(s) is None


def test_dry_run_writes_nothing_and_fires_nothing(store: Store) -> None:
    s = make_session(store, turns(10))
    fired: list[str] = []
    comp = Compactor(
        FakeSummarizer(),
        policy=policy(),
        hooks={
            "before_compaction": lambda *a: fired.append("before"),
            "context_compacted": lambda *a: fired.append("after"),
        },
    )
    memo_before = s.get_memo()
    r = comp.compact(s, force=True, dry_run=True)
    assert r.status == "dry_run" and r.summary is not None and r.covers_up_to == 30
    assert s.latest_checkpoint() is None and fired == [] and s.get_memo() == memo_before


def test_view_after_compaction_uses_the_checkpoint(store: Store) -> None:
    s = make_session(store, turns(10))
    r = Compactor(FakeSummarizer(), policy=policy()).compact(s, force=True)
    w = build_context(s, system_prompt="sys")
    assert w.report.checkpoint_id == r.checkpoint.id  # type: ignore[union-attr]
    assert w.report.covered_by_summary == 30
    history_seqs = [m.seq for m in w.messages if m.seq is not None]
    assert history_seqs == list(range(31, 51))
    assert any(m.summary for m in w.messages)


# -- triggers and hooks ----------------------------------------------------------------


def test_compact_if_needed_follows_the_triggers(store: Store) -> None:
    p = policy(max_messages_before_summary=30)
    s = make_session(store, turns(5))  # 25 messages
    comp = Compactor(FakeSummarizer(), policy=p)
    r = comp.compact_if_needed(s)
    assert r.status == "not_needed" and r.trigger is not None and not r.trigger.fire
    s.append(turns(1, start=5))  # 30
    r = comp.compact_if_needed(s)
    assert r.status == "compacted" and r.checkpoint is not None
    assert r.checkpoint.metadata["trigger"] == "messages"
    # the next turn does not fire again: counts restart when the checkpoint was written
    s.append(turns(1, start=6))
    d = check_triggers(s.refresh(), p)
    assert not d.fire and d.messages_since_checkpoint == 5


def test_compaction_inside_a_tool_loop_keeps_the_open_chain(store: Store) -> None:
    s = make_session(store, [*turns(7), Message.user("one more"), *chain(99)])
    comp = Compactor(FakeSummarizer(), policy=policy(max_messages_before_summary=30))
    r = comp.compact_if_needed(s)
    assert r.status == "compacted" and r.covers_up_to is not None
    kept = s.messages(after_seq=r.covers_up_to)
    assert kept[-3].tool_calls and [m.role for m in kept[-2:]] == ["tool", "tool"]
    assert kept[0].role != "tool"


def test_a_trigger_never_fires_when_there_is_nothing_to_summarize(store: Store) -> None:
    s = make_session(store, turns(7))  # 35 messages, all within the last 4 turns + ...
    p = policy(max_messages_before_summary=5, preserve_user_turns=10)
    d = check_triggers(s, p)
    assert d.get("messages") is not None and d.get("messages").reached  # type: ignore[union-attr]
    assert not d.fire and "nothing to summarize" in d.note
    r = Compactor(FakeSummarizer(), policy=p).compact_if_needed(s)
    assert r.status == "not_needed" and s.latest_checkpoint() is None


def test_token_trigger_does_not_refire_after_compaction(store: Store) -> None:
    s = make_session(store, turns(12))
    p = policy(
        max_tokens_before_summary=max(1, s.total_tokens - 10), max_messages_before_summary=1000
    )
    comp = Compactor(FakeSummarizer(), policy=p)
    assert comp.compact_if_needed(s).status == "compacted"
    s.append(turns(1, start=12))
    assert comp.compact_if_needed(s).status == "not_needed"


def test_hooks_receive_what_they_should(store: Store) -> None:
    s = make_session(store, turns(10))
    seen: dict[str, Any] = {}

    def before(session: Session, messages: list[Message]) -> None:
        seen["before"] = (session.id, [m.seq for m in messages])

    def after(session: Session, checkpoint: Any, result: Any) -> None:
        seen["after"] = (checkpoint.id, result.status)

    def broken(*args: Any) -> None:
        raise ValueError("listener bug")

    comp = Compactor(
        FakeSummarizer(), policy=policy(), hooks={"before_compaction": [before, broken]}
    )
    comp.on("context_compacted", after)
    r = comp.compact(s, force=True)
    assert seen["before"] == (s.id, list(range(1, 31)))
    assert seen["after"] == (r.checkpoint.id, "compacted")  # type: ignore[union-attr]
    assert [e.event for e in r.hook_errors] == ["before_compaction"]
    assert "listener bug" in r.hook_errors[0].error


# -- failure and concurrency -------------------------------------------------------------


def test_failure_clears_the_mark_fires_the_event_and_never_breaks_the_turn(
    any_store: Store,
) -> None:
    s = make_session(any_store, turns(10))
    failed: list[Any] = []
    comp = Compactor(
        Boom(),
        policy=policy(max_messages_before_summary=10),
        hooks={"compaction_failed": lambda *a: failed.append(a)},
    )
    r = comp.compact_if_needed(s)
    assert r.status == "failed" and r.error is not None and "fell over" in r.error
    assert len(failed) == 1 and isinstance(failed[0][1], RuntimeError)
    assert current_mark(s) is None
    assert s.latest_checkpoint() is None
    with pytest.raises(RuntimeError, match="fell over"):
        comp.compact(s, force=True)
    assert current_mark(s) is None and len(failed) == 2


def _plant_mark(s: Session, holder: LockHolder) -> None:
    memo = s.get_memo()
    memo[MARK_KEY] = {"holder": holder.to_dict(), "token": "someone-else"}
    s.set_memo(memo)


def test_a_live_holders_mark_refuses_compaction(any_store: Store) -> None:
    s = make_session(any_store, turns(10))
    s.set_memo({"strategy": {"kept": 3}})
    _plant_mark(s, LockHolder(pid=1, host="another-host"))  # fresh lease, other host: live
    comp = Compactor(FakeSummarizer(), policy=policy())
    with pytest.raises(CompactionInProgress, match="another-host"):
        comp.compact(s, force=True)
    r = comp.compact_if_needed(s)
    assert r.status == "in_progress" and r.error
    assert s.latest_checkpoint() is None
    mark = current_mark(s)
    assert mark is not None and mark["token"] == "someone-else"  # untouched
    assert s.get_memo()["strategy"] == {"kept": 3}


def test_a_dead_holders_mark_is_taken_over(any_store: Store) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    s = make_session(any_store, turns(10))
    _plant_mark(s, LockHolder(pid=proc.pid, host=this_host()))
    r = Compactor(FakeSummarizer(), policy=policy()).compact(s, force=True)
    assert r.status == "compacted"
    assert current_mark(s) is None


def test_an_expired_lease_is_taken_over(store: Store) -> None:
    s = make_session(store, turns(10))
    old = utcnow() - timedelta(hours=2)
    _plant_mark(
        s, LockHolder(pid=1, host="another-host", started_at=old, renewed_at=old, lease_seconds=60)
    )
    assert Compactor(FakeSummarizer(), policy=policy()).compact(s, force=True).status == "compacted"


def test_same_process_concurrent_compaction_is_refused(store: Store) -> None:
    s = make_session(store, turns(10))
    fake = FakeSummarizer()
    comp = Compactor(fake, policy=policy())
    inner: list[Any] = []

    def reenter() -> None:
        other = store.get_session(s.id)
        inner.append(comp.compact_if_needed(other))
        t_result: list[Any] = []
        t = threading.Thread(target=lambda: t_result.append(comp.compact_if_needed(other)))
        t.start()
        t.join()
        inner.extend(t_result)

    fake.during = reenter
    r = comp.compact(s, force=True)
    assert r.status == "compacted"
    assert [x.status for x in inner] == ["in_progress", "in_progress"]
    assert len(s.checkpoints()) == 1


def test_a_mark_taken_over_mid_run_still_writes_on_an_unchanged_base(any_store: Store) -> None:
    """The mark only saves work; the checkpoint's compare-and-set guards the chain. A
    compaction whose mark was taken over still writes while its base is the latest, and
    the taker's write on that same base is then refused."""
    s = make_session(any_store, turns(10))
    fake = FakeSummarizer()
    fake.during = lambda: _plant_mark(s, LockHolder(pid=1, host="another-host"))
    r = Compactor(fake, policy=policy()).compact(s, force=True)
    assert r.status == "compacted" and r.checkpoint is not None
    mark = current_mark(s)
    assert mark is not None and mark["token"] == "someone-else"  # not cleared: not ours
    with pytest.raises(CheckpointConflict, match="appeared after checkpoint None"):
        s.add_checkpoint(covers_up_to=40, summary="the taker's", expect_previous=None)
    assert [c.id for c in s.checkpoints()] == [r.checkpoint.id]


def test_a_checkpoint_written_meanwhile_discards_the_summary(store: Store) -> None:
    s = make_session(store, turns(10))
    fake = FakeSummarizer()
    fake.during = lambda: s.add_checkpoint(covers_up_to=5, summary="from elsewhere")
    r = Compactor(fake, policy=policy()).compact_if_needed(s)
    assert r.status == "in_progress" and "appeared" in (r.error or "")
    assert [c.summary for c in s.checkpoints()] == ["from elsewhere"]
    assert current_mark(s) is None


# -- the command -------------------------------------------------------------------------


def _cli() -> Any:
    import typer

    from threadline.cli import compact_cmd
    from threadline.cli.errors import ErrorMappingGroup

    app = typer.Typer(cls=ErrorMappingGroup, pretty_exceptions_enable=False)

    @app.callback()
    def root() -> None:
        """Test root: the store comes from $THREADLINE_STORE."""

    compact_cmd.register(app)
    return app


def test_compact_command_prints_snapshot_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    url = f"sqlite://{tmp_path / 'cli.db'}"
    monkeypatch.setenv("THREADLINE_STORE", url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # never reach a real provider
    store = open_store(url)
    s = make_session(store, turns(10))
    sid = s.id
    store.close()
    runner = CliRunner()
    # the session fits the share a compaction keeps: --keep-turns asks for the smaller tail
    dry = runner.invoke(_cli(), ["compact", sid[:8], "--dry-run", "--keep-turns", "4"])
    assert dry.exit_code == 0, dry.output
    assert "## Files Modified" in dry.output and "Dry run" in dry.output
    assert "Exact values:" in dry.output
    out = runner.invoke(_cli(), ["compact", sid, "--json", "--keep-turns", "4"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["status"] == "compacted" and doc["covers_up_to"] == 30
    assert doc["summarizer"] == "extractive" and doc["checkpoint"]["id"] >= 1
    assert set(doc["retention"]) == {"total", "kept", "missing", "ratio"}
    again = runner.invoke(_cli(), ["compact", sid])
    assert again.exit_code == 0 and "Nothing compacted" in again.output
    need_model = runner.invoke(_cli(), ["compact", sid, "--summarizer", "llm"])
    assert need_model.exit_code == 7 and "OPENAI_API_KEY" in need_model.output
