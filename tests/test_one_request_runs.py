"""The commonest real shape, one request followed by hundreds of tool steps, from the faces
a user touches: ``threadline context`` and ``threadline compact``, the summary's shrink to
its share, and the cap on the tail a compaction keeps."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from threadline import ContextPolicy, Message, ToolCall, build_context, open_store
from threadline.cli.app import app
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.triggers import plan_compaction
from threadline.store.protocol import Session

REQUEST = "Port the invoice exporter to streaming writes and keep the CSV header stable"
runner = CliRunner()


def one_request_run(session: Session, steps: int, size: int = 2_000) -> None:
    batch: list[Message] = [Message.user(REQUEST)]
    for i in range(steps):
        call = ToolCall(id=f"c{i}", name="bash", arguments={"command": f"pytest -k case_{i}"})
        batch.append(Message.assistant(f"Step {i}: running case {i}.", tool_calls=[call]))
        batch.append(Message.tool(f"case {i}: " + "ok line\n" * (size // 8), tool_call_id=f"c{i}"))
    session.append(batch)


def cli(url: str, *args: str) -> Any:
    result = runner.invoke(app, ["--store", url, *args])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def test_context_names_the_range_and_compact_leaves_nothing_out(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    s = store.create_session(agent="coder", model="gpt-4o")
    one_request_run(s, 150)
    before = cli(sqlite_url, "context", s.id, "--limit", "16000").stdout
    assert "fires now: window" in before
    assert "a compaction now would summarize seq 1-" in before
    report = json.loads(cli(sqlite_url, "context", s.id, "--limit", "16000", "--json").stdout)
    assert report["report"]["dropped_messages"] > 200

    # the tail a compaction keeps is sized for the window it will be shown in
    out = cli(sqlite_url, "compact", s.id, "--focus", "the CSV header", "--limit", "16000").stdout
    assert "Compacted" in out
    after = json.loads(cli(sqlite_url, "context", s.id, "--limit", "16000", "--json").stdout)
    assert after["report"]["dropped_messages"] == 0
    summary = next(m for m in after["messages"] if "Summary of the earlier" in str(m["content"]))
    assert REQUEST in summary["content"]  # the task survives, pinned in Current State
    cp = store.get_session(s.id).latest_checkpoint()
    assert cp is not None and cp.metadata["focus"] == "the CSV header"
    text = cli(sqlite_url, "context", s.id, "--limit", "16000").stdout
    assert "(the newest)" in text
    assert "would summarize nothing" in text


def test_compact_keep_options_move_the_cut(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    s = store.create_session(agent="coder", model="gpt-4o")
    one_request_run(s, 20, size=200)
    js = json.loads(
        cli(sqlite_url, "compact", s.id, "--keep-recent", "4", "--keep-turns", "0", "--json").stdout
    )
    checkpoint = js["checkpoint"]
    assert checkpoint["covers_up_to"] == s.refresh().last_seq - 4
    assert checkpoint["metadata"]["kept_messages"] == 4


def test_a_trigger_never_fires_when_a_compaction_would_summarize_nothing() -> None:
    s = open_store("memory://").create_session(agent="a", model="gpt-4o")
    s.append([m for _ in range(20) for m in (Message.user("hi"), Message.assistant("hello"))])
    policy = ContextPolicy(max_messages_before_summary=5, preserve_user_turns=30)
    plan = plan_compaction(s, policy)
    assert plan.decision.get("messages") is not None
    assert not plan.decision.fire and not plan.has_work
    assert "nothing to summarize" in plan.decision.note


def test_kept_tail_is_capped_so_a_smaller_window_still_shows_it_whole() -> None:
    s = open_store("memory://").create_session(agent="a", model="gpt-4o")
    one_request_run(s, 200, size=4_000)
    policy = ContextPolicy()  # gpt-4o: 128k window, half of it would be 62k tokens
    result = Compactor(ExtractiveSummarizer(), policy=policy).compact(s, force=True)
    assert result.compacted and result.checkpoint is not None
    assert result.checkpoint.metadata["kept_tokens"] <= policy.preserve_max_tokens
    window = build_context(s, policy=ContextPolicy(context_limit=32_000))
    assert window.report.dropped_messages == 0


def test_a_summary_too_big_for_its_share_loses_values_before_the_request() -> None:
    s = open_store("memory://").create_session(agent="a", model="gpt-4o")
    one_request_run(s, 10, size=100)
    values = "\n".join(f"- `/srv/app/module_{i}/handler_{i}.py`" for i in range(400))
    summary = (
        "## Files Modified\n- (none)\n\n## Key Decisions\n- keep the header\n\n"
        f"## Important Values\n{values}\n\n## Current State\n"
        f"- Primary request (user, #1): {REQUEST}\n\n## Pending Tasks\n- finish"
    )
    s.add_checkpoint(covers_up_to=s.last_seq - 2, summary=summary)
    window = build_context(s, policy=ContextPolicy(context_limit=6_000))
    shown = next(m.text for m in window.messages if m.summary)
    assert window.report.summary_cut and not window.report.summary_omitted
    assert REQUEST in shown and "keep the header" in shown
    assert "module_0/" in shown  # the highest-ranked (first) values stay longest
    assert "module_399/" not in shown
    assert window.tokens <= window.limit - ContextPolicy().response_reserve


def test_history_about_to_fall_out_is_the_reason_even_when_another_trigger_is_further() -> None:
    s = open_store("memory://").create_session(agent="a", model="gpt-4o")
    one_request_run(s, 150, size=100)  # 301 messages: the message trigger is at 1000%
    window = build_context(s, policy=ContextPolicy(context_limit=16_000))
    report = window.report.model_copy(update={"dropped_messages": 1})
    plan = plan_compaction(s, ContextPolicy(), budget=window.budget, window=report)
    assert plan.decision.fire and plan.decision.reason == "window"
    compactor = Compactor(ExtractiveSummarizer())
    rebuilt, result = compactor.compact_to_fit(
        s, lambda: build_context(s, policy=ContextPolicy(context_limit=8_000))
    )
    assert result is not None and result.compacted
    assert rebuilt.report.dropped_messages == 0
