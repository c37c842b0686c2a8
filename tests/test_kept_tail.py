"""The kept tail fills its share: after ``threadline compact`` a 32k window is mostly the
run's recent work, verbatim, not an empty budget beside a summary.

On real runs that hold a compaction imported from their own tool (Claude Code's
``compact_boundary``, Codex's ``compacted``), compacted again with the CLI's
defaults and built at 32,000 tokens (``threadline context ID --limit 32000``), the
history section holds at least 40% of the window, and no stored message falls out
unsummarized. Before, the cut inside a long single-request turn kept only
``min_recent_messages``: 3-13% of the window.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from tests.real_runs import import_into, transcript_files
from threadline import ContextPolicy, Message, ToolCall, build_context, open_store
from threadline.cli.compact_cmd import make_compaction_policy
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.triggers import plan_compaction
from threadline.context.builder import window_cost
from threadline.interop.provider_rules import anthropic_problems, openai_problems
from threadline.tokens import counter_for

LIMIT = 32_000
MIN_RECENT_SHARE = 0.40


def history_tokens(window_report: object) -> int:
    sections = window_report.sections  # type: ignore[attr-defined]
    return next(s.tokens for s in sections if s.name == "history")


@pytest.mark.parametrize("name", transcript_files() or ["(none)"])
def test_after_compact_a_32k_window_is_mostly_recent_work(name: str, tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    store = open_store(f"sqlite://{tmp_path / 'store.db'}")
    sessions = import_into(store, TRANSCRIPTS / name)
    if not sessions:
        pytest.skip(f"{name} does not import in this build")
    for imported in sessions:
        had_compaction = imported.latest_checkpoint() is not None
        policy = make_compaction_policy(max_words=None)  # `threadline compact ID`
        Compactor(ExtractiveSummarizer(), policy=policy).compact(imported, force=True)
        session = store.get_session(imported.id)  # a fresh handle, as `threadline context`
        window = build_context(session, policy=ContextPolicy(context_limit=LIMIT))
        where = f"{name} ({session.id[:8]}): "
        assert window.report.dropped_messages == 0, where + "history fell out unsummarized"
        assert openai_problems(window.to_openai()) == [], where
        assert anthropic_problems(window.to_anthropic()) == [], where
        if had_compaction:
            share = history_tokens(window.report) / LIMIT
            assert share >= MIN_RECENT_SHARE, where + f"recent verbatim work is {share:.0%}"


def _one_request_run(steps: int, size: int) -> list[Message]:
    out = [Message.user("Work on bead spotter-dov: fix the transcript renderer")]
    for i in range(steps):
        call = ToolCall(id=f"t{i}", name="Bash", arguments={"command": f"mix test --seed {i}"})
        out.append(Message.assistant(f"step {i}", tool_calls=[call]))
        out.append(Message.tool(f"result {i}: " + "ok " * size, tool_call_id=call.id, name="Bash"))
    return out


@pytest.mark.parametrize("size", [50, 400, 3_000])
def test_the_cut_keeps_the_newest_units_that_fill_the_share(size: int) -> None:
    """One request, hundreds of steps: the tail is the newest whole units up to the share,
    and the unit before it would not have fitted."""
    s = open_store("memory://").create_session(model="gpt-4o")
    s.append(_one_request_run(300, size))
    budget = 27_904  # a 32k window less the reply reserve
    policy = ContextPolicy()
    plan = plan_compaction(s, policy, budget=budget, force=True)
    cut = plan.cut
    assert cut is not None and cut.seq is not None and cut.rule == "units"
    cost = window_cost(counter_for("gpt-4o"))
    kept = s.messages(after_seq=cut.seq)
    assert kept[0].role == "assistant" and kept[0].tool_calls  # a whole unit opens the tail
    size_kept = sum(cost(m) for m in kept)
    share = min(int(budget * policy.preserve_share), policy.preserve_max_tokens)
    before = s.messages(after_seq=cut.seq - 2)[:2]  # the unit the cut summarized last
    assert size_kept <= share < size_kept + sum(cost(m) for m in before)
    r = Compactor(ExtractiveSummarizer(), policy=policy).compact(s, force=True, budget=budget)
    assert r.compacted and r.covers_up_to == cut.seq
    window = build_context(s, policy=ContextPolicy(context_limit=32_000))
    assert window.report.dropped_messages == 0
    assert history_tokens(window.report) >= MIN_RECENT_SHARE * 32_000 - max(cost(m) for m in before)


def test_a_history_that_fits_the_share_is_kept_whole_and_keep_options_still_cut() -> None:
    s = open_store("memory://").create_session(model="gpt-4o")
    s.append(_one_request_run(20, 50))
    compactor = Compactor(ExtractiveSummarizer())
    r = compactor.compact(s, force=True)
    assert r.status == "noop" and "fit the" in r.reason and s.latest_checkpoint() is None
    r = compactor.compact(s, force=True, keep_recent=4, keep_turns=0)
    assert r.compacted and r.messages_kept == 4


def test_a_threshold_reached_does_not_fire_while_the_history_fits_the_kept_share() -> None:
    s = open_store("memory://").create_session(model="gpt-4o")
    s.append(_one_request_run(20, 50))  # 41 messages: over the 30-message trigger
    decision = plan_compaction(s, ContextPolicy()).decision
    messages = decision.get("messages")
    assert messages is not None and messages.fired
    assert not decision.fire and "fit the" in decision.note
    assert decision.kept_messages == 41
