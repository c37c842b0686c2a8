"""A compaction over another tool's summary keeps what that summary knew and still holds.

A Claude Code run continued from an earlier day arrives with Claude's own compaction
summary: it states the task ("Primary Request and Intent") and the files changed before
(its "Files and Code Sections"), which the stored messages may never show. The new
snapshot names those files, marked as the summary's word, and the task as it put it; a
question the agent answered reads as answered; a test failing at the end is pending.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, imported, section
from threadline.compaction.history import earlier_files, earlier_intent
from threadline.compaction.trail import Trail, build_trail
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

EARLIER = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
    "Analysis:\nLet me go through it.\n\nSummary:\n"
    "1. Primary Request and Intent:\n"
    "   - Continue debugging the duplicate invoice bug (BILL-42)\n"
    "   - Problem 2 (in progress): invoices re-sent when the queue retries\n\n"
    "2. Key Technical Concepts:\n   - Idempotency keys\n\n"
    "3. Files and Code Sections:\n"
    "   - **`billing/queue/worker.go`**\n"
    "     - Added an idempotency check before sending\n"
    "     ```go\n     func (w *Worker) send(inv Invoice) error {\n     ```\n"
    "   - **`billing/queue/retry.go`**\n"
    "     - Read to understand the retry policy\n"
    "   - **`billing/store/keys.go`**\n"
    "     - Created the key store\n"
    "   - **`billing/api/handler.go`**\n"
    "     - Pass the invoice key to the worker\n\n"
    "7. Pending Tasks:\n   - Write the retry test\n\n"
    "8. Current Work:\n   Getting the worker to compile.\n"
)


def test_the_summary_s_task_and_changed_files_are_read() -> None:
    assert earlier_intent(EARLIER) == [
        "Continue debugging the duplicate invoice bug (BILL-42)",
        "Problem 2 (in progress): invoices re-sent when the queue retries",
    ]
    assert earlier_files(EARLIER) == [
        "billing/queue/worker.go",
        "billing/store/keys.go",
        "billing/api/handler.go",
    ]
    own = "## Files Modified\n- `a.py`: edited\n\n## Current State\n- Primary request: x\n"
    assert earlier_intent(own) == [] and earlier_files(own) == []


GO_FAIL = (
    "=== RUN   TestRetrySendsOnce\n"
    "    worker_test.go:31: invoice sent 2 times, want 1\n"
    "--- FAIL: TestRetrySendsOnce (0.01s)\nFAIL\n"
    "FAIL\texample.com/billing/queue\t0.214s"
)


def continued_run() -> ClaudeLog:
    log = ClaudeLog.asking("let's pick up the invoice bug")
    log.call("Read", {"file_path": f"{CWD}/billing/queue/worker.go"}, "package queue\n" * 20)
    log.compact(EARLIER)
    log.user("does the retry reuse the same key?")
    log.say("Yes - the key is derived from the invoice id, so a retry reuses it. Checking.")
    log.call(
        "Edit",
        {"file_path": f"{CWD}/billing/queue/worker_test.go", "old_string": "a", "new_string": "b"},
    )
    log.call("Bash", {"command": "go test ./billing/queue/... 2>&1 | tail -30"}, GO_FAIL)
    for i in range(6):  # work after the failure, for a kept tail
        log.call("Read", {"file_path": f"{CWD}/billing/queue/more{i}.go"}, "package queue\n" * 30)
    return log


def test_a_compaction_over_a_claude_summary_carries_its_state(
    sqlite_store: Store, tmp_path: Path
) -> None:
    session = imported(sqlite_store, continued_run().write(tmp_path / "run.jsonl"))
    text = compacted(session, preserve_max_tokens=300)
    files = "\n".join(section(text, "files_modified"))
    earlier = [f for f in section(text, "files_modified") if "earlier summary" in f]
    assert earlier and "`billing/store/keys.go`" in earlier[0]
    assert "retry.go" not in files  # the summary says it was only read
    assert files.count("billing/queue/worker.go") <= 1
    state = section(text, "current_state")
    assert any("BILL-42" in s and "earlier summary" in s for s in state)
    assert any(s.startswith("Reply to the latest request") and "reuses it" in s for s in state)
    pending = section(text, "pending_tasks")
    assert any("TestRetrySendsOnce" in p and "go test ./billing/queue/..." in p for p in pending)


def test_the_reply_to_a_question_is_the_first_prose_that_answers_it() -> None:
    call = ToolCall(id="toolu_07", name="Read", arguments={"file_path": f"{CWD}/worker.go"})
    messages = [
        Message.user("does the retry reuse the same key?"),
        Message.assistant("Let me check the worker first.", tool_calls=[call]),
        Message.tool("package queue", tool_call_id="toolu_07", name="Read"),
        Message.assistant("Yes: the key is derived from the invoice id, so a retry reuses it."),
    ]
    for i, m in enumerate(messages, 1):
        m.seq = i
    trail = build_trail(messages)
    assert trail.reply is not None and trail.reply[0] == 4 and "reuses it" in trail.reply[1]
    assert Trail.from_metadata(trail.to_metadata()).reply == trail.reply  # carried
