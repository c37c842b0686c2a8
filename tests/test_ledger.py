"""The state ledger (issue 31): each tracker read from its own records, through import and
compaction, so Pending Tasks and Current State say what is open and what is done.

The runs are written record by record in the shapes the shared transcripts hold
(Claude Code's ``TaskCreate`` results "Task #1 created successfully: ...", beads'
"✓ Created issue: X", Codex ``exec`` scripts calling ``tools.update_plan``, a
``git commit`` a pre-commit hook rejected with "Exit code 1").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_compaction_truth import ClaudeLog, compacted, section, store
from threadline import open_store
from threadline.compaction.ledger import Ledger
from threadline.compaction.trail import TRAIL_KEY, Trail, build_trail, error_lines
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

__all__ = ["store"]  # the fixture, shared with test_compaction_truth


def filler(log: ClaudeLog, n: int = 8) -> None:
    """Later reads, so the compaction's kept tail holds none of the tracker calls."""
    for i in range(n):
        log.call("Read", {"file_path": f"/home/dev/shop/docs/page{i}.md"}, "# page\n" * 40)


def pending(text: str) -> str:
    return "\n".join(section(text, "pending_tasks"))


def state(text: str) -> str:
    return "\n".join(section(text, "current_state"))


def test_todowrite_lists_open_items_not_completed_ones(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Add the coupon field and the checkout docs.")
    todos = [
        {"content": "Add the coupon field", "status": "completed", "activeForm": "Adding"},
        {"content": "Write the checkout docs", "status": "in_progress", "activeForm": "Writing"},
        {"content": "Run the whole suite", "status": "pending", "activeForm": "Running"},
    ]
    log.call("TodoWrite", {"todos": todos}, "Todos have been modified successfully.")
    filler(log)
    text = compacted(imported_plain(store, log, tmp_path))
    tasks = pending(text)
    assert "Write the checkout docs" in tasks and "Run the whole suite" in tasks
    assert "Add the coupon field" not in tasks
    assert tasks.index("Write the checkout docs") < tasks.index("Run the whole suite")


def test_task_create_and_update_ids_from_their_results(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Make the works collection MDX-ready and add the OGP card.")
    subjects = ["Make works accept MDX", "Write the OGP fetcher", "Build the OgpCard component"]
    for i, subject in enumerate(subjects, 1):
        log.call(
            "TaskCreate",
            {"subject": subject, "description": "...", "activeForm": "Working"},
            f"Task #{i} created successfully: {subject}",
        )
    log.call("TaskUpdate", {"taskId": "1", "status": "in_progress"}, "Updated task #1 status")
    log.call("TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1 status")
    log.call("TaskUpdate", {"taskId": "2", "status": "in_progress"}, "Updated task #2 status")
    filler(log)
    text = compacted(imported_plain(store, log, tmp_path))
    tasks = pending(text)
    assert "Make works accept MDX" not in tasks  # task #1 was completed
    assert "`task #2`" in tasks and "Write the OGP fetcher" in tasks
    assert "`task #3`" in tasks and "Build the OgpCard component" in tasks
    assert tasks.index("task #2") < tasks.index("task #3")  # the one in progress first
    assert "In progress: `task #2`: Write the OGP fetcher" in state(text)


def test_beads_create_update_close_and_reopen(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Work on bead shop-7q2.")
    bash = "Bash"
    log.call(
        bash,
        {"command": "bd update shop-7q2.1 --status in_progress"},
        "✓ Updated issue: shop-7q2.1",
    )
    log.call(bash, {"command": 'bd close shop-7q2.1 --reason="done"'}, "✓ Closed shop-7q2.1: done")
    log.call(
        bash,
        {"command": "bd update shop-7q2.2 --status in_progress 2>&1"},
        "✓ Updated issue: shop-7q2.2",
    )
    log.call(
        bash,
        {"command": 'bd create --title="Totals drop the coupon" --type=bug --parent=shop-7q2'},
        "✓ Created issue: shop-7q2.5\n  Title: Totals drop the coupon\n"
        "  Priority: P3\n  Status: open",
    )
    log.call(bash, {"command": "bd close shop-7q2.3"}, "✓ Closed shop-7q2.3")
    log.call(bash, {"command": "bd reopen shop-7q2.3"}, "✓ Reopened shop-7q2.3")
    filler(log)
    text = compacted(imported_plain(store, log, tmp_path))
    tasks = pending(text)
    assert "(none)" not in tasks
    assert "`shop-7q2.2`" in tasks and "[in progress]" in tasks.split("\n")[0]
    assert "`shop-7q2.5`: Totals drop the coupon" in tasks
    assert "`shop-7q2.3`" in tasks  # reopened
    assert "shop-7q2.1" not in tasks  # closed
    assert "In progress: `shop-7q2.2`" in state(text)


def test_a_commit_a_hook_rejected_is_not_a_commit(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Close the bead and commit.")
    log.call("Bash", {"command": "bd close shop-7q2.4"}, "✓ Closed shop-7q2.4")
    rejected = (
        "Exit code 1\n[INFO] Initializing environment for credo.\n"
        "mix format.............................................Failed\n"
        "- hook id: mix-format\n- exit code: 1\n"
        "** (Mix) mix format failed due to --check-formatted.\n"
        "The following files are not formatted:\n  * lib/cart/coupon.ex"
    )
    log.call(
        "Bash",
        {"command": "git add -A && git commit -m 'feat: coupons (shop-7q2.4)'"},
        rejected,
        error=True,
    )
    filler(log)
    session = imported_plain(store, log, tmp_path)
    text = compacted(session)
    tasks = pending(text)
    assert "`git commit` rejected by a hook: nothing was committed yet" in tasks
    assert "mix format failed due to --check-formatted" in tasks  # the hook's own error line
    assert "Exit code 1" not in tasks and "Last commit" not in state(text)
    # a later commit that went through settles it, and Current State names it
    log.call(
        "Bash",
        {"command": "mix format && git commit -am 'feat: coupons (shop-7q2.4)'"},
        "[main 4c1d2e9] feat: coupons (shop-7q2.4)\n 1 file changed, 3 insertions(+)",
    )
    filler(log)
    text = compacted_afresh(log, tmp_path / "again")
    assert "nothing was committed" not in pending(text)
    assert "Last commit: `4c1d2e9 feat: coupons (shop-7q2.4)`" in state(text)


# -- Codex: update_plan called from inside an exec script ---------------------------------


def codex_run(path: Path, plans: list[list[tuple[str, str]]]) -> Path:
    lines: list[dict[str, Any]] = []
    t = iter(range(10_000))

    def rec(kind: str, payload: dict[str, Any]) -> None:
        n = next(t)
        stamp = f"2026-08-03T19:{n // 60:02d}:{n % 60:02d}.000Z"
        lines.append({"timestamp": stamp, "type": kind, "payload": payload})

    rec(
        "session_meta",
        {
            "id": "019fc928-0000-7000-8000-000000000001",
            "cwd": "/home/dev/basic",
            "originator": "codex-tui",
            "cli_version": "0.146.0",
        },
    )
    rec(
        "response_item",
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Ship the five layers."}],
        },
    )
    for i, plan in enumerate(plans):
        items = ",".join(f"{{step:{json.dumps(s)},status:{json.dumps(st)}}}" for s, st in plan)
        script = f"const p = await tools.update_plan({{plan:[\n {items}]}});\ntext(p);"
        call_id = f"call_plan{i}"
        rec(
            "response_item",
            {
                "type": "custom_tool_call",
                "call_id": call_id,
                "name": "exec",
                "input": script,
                "status": "completed",
            },
        )
        rec(
            "response_item",
            {
                "type": "custom_tool_call_output",
                "call_id": call_id,
                "output": "Script completed\nWall time 0.1 seconds\nOutput:\nPlan updated",
            },
        )
    for i in range(8):
        call_id = f"call_read{i}"
        cmd = json.dumps({"cmd": f"sed -n '1,80p' docs/layer{i}.md"})
        rec(
            "response_item",
            {"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": cmd},
        )
        rec(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": "Chunk ID: 4c2cbb\nWall time: 0.0 seconds\n"
                "Process exited with code 0\nOutput:\n" + "# layer\n" * 40,
            },
        )
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n", encoding="utf-8")
    return path


def test_update_plan_inside_a_codex_exec_script(store: Store, tmp_path: Path) -> None:
    steps = ["Map the layers to the code", "Implement the console entrypoint", "Publish the stack"]
    plans = [
        [(steps[0], "in_progress"), (steps[1], "pending"), (steps[2], "pending")],
        [(steps[0], "completed"), (steps[1], "in_progress"), (steps[2], "pending")],
    ]
    session = imported_any(store, codex_run(tmp_path / "rollout.jsonl", plans))
    text = compacted(session)
    tasks = pending(text)
    assert steps[1] in tasks and steps[2] in tasks
    assert steps[0] not in tasks
    assert tasks.index(steps[1]) < tasks.index(steps[2])


# -- instructions are not decisions ----------------------------------------------------


def test_instructions_the_agent_was_given_are_not_decisions(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Write the checkout docs. Use British spelling because the docs are British.")
    log.call("Skill", {"skill": "brainstorming"}, "Launching skill: brainstorming")
    log.user(
        "Base directory for this skill: /home/dev/.claude/skills/brainstorming\n\n"
        "# Brainstorming\n\nPrefer multiple choice questions when possible.\n"
        "Always use setting shape=diamond for diagrams.",
        isMeta=True,
    )
    log.user(
        "<system-reminder>Never commit without asking, because the user reviews.</system-reminder>"
        "Don't fake the OAuth flow, use the real provider."
    )
    log.say(
        "I'll use the generated migration instead of the hand-written one, because it "
        "matches the schema."
    )
    log.call(
        "Bash", {"command": "mix ecto.gen.migration add_coupons"}, "* creating priv/repo/x.exs"
    )
    filler(log)
    text = compacted(imported_plain(store, log, tmp_path))
    decisions = "\n".join(section(text, "key_decisions"))
    assert "Prefer multiple choice" not in decisions
    assert "shape=diamond" not in text
    assert "Never commit without asking" not in decisions
    assert "British spelling" in decisions
    assert "fake the OAuth flow" in decisions
    assert "generated migration instead of the hand-written one" in decisions


# -- failures --------------------------------------------------------------------------


def test_a_failure_says_its_error_line_and_goes_when_a_wider_run_passes() -> None:
    codex = (
        "Chunk ID: 4c2cbb\nWall time: 1.2 seconds\nProcess exited with code 1\n"
        "Original token count: 80\nOutput:\n"
        "src/cart.ts(3,1): error TS2304: Cannot find name 'total'.\n"
    )
    messages = [
        Message.user("fix the cart"),
        Message.assistant(
            "",
            tool_calls=[
                ToolCall(
                    id="a", name="exec_command", arguments={"cmd": "npx tsc -p . 2>&1 | tail -20"}
                )
            ],
        ),
        Message.tool(codex, tool_call_id="a"),
        Message.assistant(
            "",
            tool_calls=[
                ToolCall(id="b", name="exec_command", arguments={"cmd": "rg -n nothing_here src"})
            ],
        ),
        Message.tool(
            "Chunk ID: 9a1b2c\nWall time: 0.0 seconds\nProcess exited with code 1\nOutput:\n",
            tool_call_id="b",
        ),
    ]
    trail = build_trail(numbered(messages))
    assert [f.errors for f in trail.failures] == [
        ["src/cart.ts(3,1): error TS2304: Cannot find name 'total'."]
    ]
    assert error_lines(codex) == ["src/cart.ts(3,1): error TS2304: Cannot find name 'total'."]
    messages = [
        Message.assistant(
            "",
            tool_calls=[
                ToolCall(
                    id="c", name="Bash", arguments={"command": "mix test test/cart_test.exs 2>&1"}
                )
            ],
        ),
        Message.tool(
            "Exit code 2\n1) test totals (CartTest)\n** (MatchError) no match",
            tool_call_id="c",
            metadata={"is_error": True},
        ),
        Message.assistant(
            "",
            tool_calls=[
                ToolCall(
                    id="d", name="Bash", arguments={"command": "cd /home/dev/shop && mix test"}
                )
            ],
        ),
        Message.tool("Finished in 0.4 seconds\n31 tests, 0 failures", tool_call_id="d"),
    ]
    assert build_trail(numbered(messages)).failures == []


# -- carried in checkpoint metadata -----------------------------------------------------


def test_the_ledger_rides_in_the_trail_of_each_checkpoint(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Work on bead shop-7q2.")
    log.call(
        "Bash",
        {"command": "bd update shop-7q2.2 --status in_progress"},
        "✓ Updated issue: shop-7q2.2",
    )
    filler(log)
    session = imported_plain(store, log, tmp_path)
    compacted(session)
    checkpoint = session.latest_checkpoint()
    assert checkpoint is not None
    trail = Trail.from_metadata(checkpoint.metadata[TRAIL_KEY])
    assert trail is not None
    assert [(i.key, i.status) for i in trail.ledger.open_items()] == [("shop-7q2.2", "in_progress")]
    old = dict(checkpoint.metadata[TRAIL_KEY], version=1)  # a trail without a ledger is read again
    assert Trail.from_metadata(old) is None


ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["a-1", "a-2", "a-3"]),
        st.sampled_from(["create", "start", "close", "reopen"]),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ACTIONS)
def test_an_item_is_open_until_its_last_event_closes_it(actions: list[tuple[str, str]]) -> None:
    """Whatever order beads' commands come in, the ledger's open items are those whose last
    event did not close them, and it reads back from its metadata unchanged."""
    ledger = Ledger()
    expected: dict[str, str] = {}
    for seq, (item, action) in enumerate(actions, 1):
        command, result = {
            "create": (f"bd create --title='{item} work'", f"✓ Created issue: {item}"),
            "start": (f"bd update {item} --status in_progress", f"✓ Updated issue: {item}"),
            "close": (f"bd close {item}", f"✓ Closed {item}"),
            "reopen": (f"bd reopen {item}", f"✓ Reopened {item}"),
        }[action]
        call = ToolCall(id=str(seq), name="Bash", arguments={"command": command})
        ledger.observe(call, Message.tool(result, tool_call_id=str(seq)), seq, failed=False)
        expected[item] = {
            "create": "open",
            "start": "in_progress",
            "close": "closed",
            "reopen": "open",
        }[action]
    assert {i.key for i in ledger.open_items()} == {k for k, v in expected.items() if v != "closed"}
    assert Ledger.from_json(json.loads(json.dumps(ledger.to_json()))).to_json() == ledger.to_json()


# -- helpers ---------------------------------------------------------------------------


def numbered(messages: list[Message]) -> list[Message]:
    for i, m in enumerate(messages, 1):
        m.seq = i
    return messages


def compacted_afresh(log: ClaudeLog, where: Path) -> str:
    """The run imported into a store of its own (the log grew since) and compacted."""
    where.mkdir(parents=True, exist_ok=True)
    fresh = open_store(f"sqlite://{where / 'store.db'}")
    try:
        return compacted(imported_plain(fresh, log, where))
    finally:
        fresh.close()


def imported_plain(store: Store, log: ClaudeLog, where: Path) -> Any:
    """A run without a native compaction, imported."""
    where.mkdir(parents=True, exist_ok=True)
    return imported_any(store, log.write(where / "run.jsonl"))


def imported_any(store: Store, path: Path) -> Any:
    from threadline.interop.sync import Source, Syncer

    (result,) = Syncer(store).sync_source(Source(path))
    assert result.session_id is not None, result
    return store.get_session(result.session_id)


# -- what the assistant produced --------------------------------------------------------


def test_a_list_the_latest_request_refers_to_is_quoted(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Review the compaction module and suggest improvements.")
    log.call("Read", {"file_path": "/home/dev/shop/lib/compact.ex"}, "defmodule Compact do end")
    items = "\n".join(
        f"{n}. Improvement number {n}: keep item {n} in the snapshot" for n in range(1, 13)
    )
    log.say(f"Here are 12 improvements for the compaction module:\n\n{items}")
    log.user("Write these into docs/improvements.md, all of them.")
    log.call(
        "Write",
        {"file_path": "/home/dev/shop/docs/improvements.md", "content": "# Improvements"},
        "File created successfully",
    )
    filler(log)
    text = compacted(imported_plain(store, log, tmp_path))
    quoted = state(text)
    assert "Assistant's answer the latest request refers to" in quoted
    assert "Here are 12 improvements for the compaction module" in quoted
    assert "1. Improvement number 1" in quoted and "5. Improvement number 5" in quoted
    # a later request about something else lets it go
    log.user("Now bump the version in mix.exs.")
    filler(log)
    text = compacted_afresh(log, tmp_path / "again")
    assert "Assistant's answer the latest request refers to" not in state(text)


def test_a_subagent_s_files_and_commits_are_the_run_s(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Add regression tests for the cart, in a subagent.")
    report = (
        "All done. The cart regression tests pass (31 tests, 0 failures).\n\n"
        "## Files changed\n"
        "- `test/cart/totals_test.exs` (new)\n"
        "- `test/support/cart_case.ex`\n\n"
        "Committed as 9f3e2a1 on branch cart-tests."
    )
    log.call(
        "Task",
        {
            "description": "Write cart regression tests",
            "subagent_type": "general-purpose",
            "prompt": "Write the tests.",
        },
        report,
    )
    filler(log)
    text = compacted(imported_plain(store, log, tmp_path))
    files = "\n".join(section(text, "files_modified"))
    assert "test/cart/totals_test.exs" in files and "test/support/cart_case.ex" in files
    line = state(text)
    assert "Subagent `Write cart regression tests`: All done." in line
    assert "committed `9f3e2a1`" in line


def test_a_pending_line_worded_otherwise_goes_when_its_todo_is_completed() -> None:
    """Claude's summary says "Debug why TranscriptPath is not being stored ..."; the todo list
    later completes "Debug TranscriptPath not being stored ...": one item, done."""
    from threadline.compaction.reconcile import reconcile
    from threadline.compaction.snapshot import SummaryResult

    summary = (
        "## Files Modified\n- (none)\n\n## Key Decisions\n- (none)\n\n## Important Values\n"
        "- (none)\n\n## Current State\n- (none)\n\n## Pending Tasks\n"
        "- Debug why TranscriptPath is not being stored in session state during the test\n"
        "- Write the release notes for the hooks\n"
    )
    todos = [
        {
            "content": "Debug TranscriptPath not being stored in session state",
            "status": "completed",
        },
        {"content": "Add TranscriptPath field to session.State struct", "status": "completed"},
    ]
    call = ToolCall(id="t", name="TodoWrite", arguments={"todos": todos})
    messages = [Message.assistant("", tool_calls=[call]), Message.tool("ok", tool_call_id="t")]
    trail = build_trail(numbered(messages))
    result = SummaryResult.counted(summary, None, [], summarizer="extractive")
    tasks = pending(reconcile(result, trail, max_words=600).text)
    assert "TranscriptPath" not in tasks
    assert "Write the release notes for the hooks" in tasks


def test_code_shaped_error_lines_are_no_values() -> None:
    """``error: {`` and ``error: vi.fn(),`` are TypeScript in a file dump (issue 31)."""
    from threadline.compaction.values import extract_error_lines

    dump = (
        "const hooks = {\n  error: {\n    log: vi.fn(),\n  },\n  error: vi.fn(),\n"
        "  error: null,\n};"
    )
    assert extract_error_lines(dump) == []
    real = "Error: connect ECONNREFUSED 127.0.0.1:3000\nerror: Cannot find module 'x'"
    assert [v.text for v in extract_error_lines(real)] == [
        "Error: connect ECONNREFUSED 127.0.0.1:3000",
        "error: Cannot find module 'x'",
    ]


def test_the_words_go_to_state_before_earlier_results() -> None:
    """Under a tight limit, open items and decisions stay; "Earlier result" lines go first."""
    from threadline.compaction.reconcile import reconcile
    from threadline.compaction.snapshot import SummaryResult

    earlier = "".join(
        f"- Earlier result: `Read` `lib/cart/step{i}.ex` -> defmodule Cart.Step{i} do (40 lines)\n"
        for i in range(10)
    )
    decisions = "".join(
        f"- Use the generated migration {i} instead of a hand-written one, because it matches\n"
        for i in range(3)
    )
    summary = (
        f"## Files Modified\n- (none)\n\n## Key Decisions\n{decisions}\n## Important Values\n"
        f"- (none)\n\n## Current State\n- Latest request (user, #9): finish the cart\n{earlier}\n"
        "## Pending Tasks\n- (none)\n"
    )
    call = ToolCall(
        id="b", name="Bash", arguments={"command": "bd update shop-7q2.2 --status in_progress"}
    )
    messages = [
        Message.assistant("", tool_calls=[call]),
        Message.tool("✓ Updated", tool_call_id="b"),
    ]
    trail = build_trail(numbered(messages))
    result = SummaryResult.counted(summary, None, [], summarizer="extractive")
    text = reconcile(result, trail, max_words=110).text
    assert "`shop-7q2.2`" in pending(text)
    assert text.count("instead of a hand-written one") == 3
    assert "Latest request (user, #9): finish the cart" in state(text)
    assert text.count("Earlier result:") < 10


def test_a_failure_the_kept_tail_settles_is_not_listed() -> None:
    """``mix test`` failed before the cut and passed after it: the snapshot neither lists the
    failure nor asks to make it succeed."""
    from threadline.compaction.reconcile import reconcile
    from threadline.compaction.snapshot import SummaryResult

    cmd = "mix test test/cart_test.exs 2>&1"
    error = "** (RuntimeError) Phoenix LiveView requires lazy_html as a test dependency."
    before = numbered(
        [
            Message.assistant(
                "", tool_calls=[ToolCall(id="a", name="Bash", arguments={"command": cmd})]
            ),
            Message.tool(f"Exit code 1\n{error}", tool_call_id="a", metadata={"is_error": True}),
        ]
    )
    after = [
        Message.assistant(
            "", tool_calls=[ToolCall(id="b", name="Bash", arguments={"command": cmd})]
        ),
        Message.tool("12 tests, 0 failures", tool_call_id="b"),
    ]
    for i, m in enumerate(after, 3):
        m.seq = i
    summary = (
        "## Files Modified\n- (none)\n\n## Key Decisions\n- (none)\n\n## Important Values\n"
        f"- error: `{error}`\n\n## Current State\n"
        f"- Next step: make `Bash` `{cmd}` succeed: {error}\n\n## Pending Tasks\n- (none)\n"
    )
    trail = build_trail(before)
    assert [f.command for f in trail.failures] == [cmd]
    later = trail.copy().extend(after)
    result = SummaryResult.counted(summary, None, [], summarizer="extractive")
    text = reconcile(result, trail, later=later, max_words=600).text
    assert "lazy_html" not in text and "failed command" not in text
    # without the later run it is still open
    text = reconcile(result, trail, max_words=600).text
    assert f"failed command: `{cmd}`" in text


def test_a_hash_only_a_tool_printed_and_a_banner_are_no_values() -> None:
    """``Command running in background with ID: be6a1d6`` gives a handle, not a commit hash;
    the agent's own ``git show 4c1d2e9`` makes one a value."""
    from threadline.compaction.reconcile import reconcile
    from threadline.compaction.snapshot import SummaryResult

    messages = numbered(
        [
            Message.assistant(
                "",
                tool_calls=[ToolCall(id="a", name="Bash", arguments={"command": "pnpm dev"})],
            ),
            Message.tool("Command running in background with ID: be6a1d6.", tool_call_id="a"),
            Message.assistant(
                "",
                tool_calls=[ToolCall(id="s", name="TaskStop", arguments={"task_id": "be6a1d6"})],
            ),
            Message.tool("Stopped", tool_call_id="s"),
            Message.assistant(
                "Checking 4c1d2e9.",
                tool_calls=[
                    ToolCall(id="g", name="Bash", arguments={"command": "git show 4c1d2e9"})
                ],
            ),
            Message.tool("commit 4c1d2e9", tool_call_id="g"),
        ]
    )
    summary = (
        "## Files Modified\n- (none)\n\n## Key Decisions\n- (none)\n\n## Important Values\n"
        "- hash: `be6a1d6`\n- hash: `4c1d2e9`\n- name: `★ Insight ─────────`\n\n"
        "## Current State\n- (none)\n\n## Pending Tasks\n- (none)\n"
    )
    result = SummaryResult.counted(summary, None, [], summarizer="extractive")
    values = "\n".join(
        section(reconcile(result, build_trail(messages), max_words=600).text, "important_values")
    )
    assert "4c1d2e9" in values
    assert "be6a1d6" not in values and "Insight" not in values


def test_a_commit_that_went_through_settles_the_rejected_ones() -> None:
    """Three commits a pre-commit hook rejected, then one made with other arguments: no
    failed commit is left, and the last commit is named."""
    rejected = "Pre-commit validation failed:\n\n[FORMAT] Code is not formatted.\nRun 'mix format'"
    steps = [
        (
            "git add .beads/issues.jsonl && git commit -m 'feat: parity (spotter-dov)'",
            rejected,
            True,
        ),
        ("git commit -m 'feat: parity (spotter-dov)'", rejected, True),
        (
            "git add lib/a.ex && git commit -m 'feat: parity (spotter-dov)'",
            "[spotter-dov 64f1b9a] feat: parity (spotter-dov)\n 12 files changed",
            False,
        ),
    ]
    messages: list[Message] = []
    for i, (cmd, out, bad) in enumerate(steps):
        call = ToolCall(id=f"c{i}", name="Bash", arguments={"command": cmd})
        messages += [
            Message.assistant("", tool_calls=[call]),
            Message.tool(out, tool_call_id=f"c{i}", metadata={"is_error": True} if bad else {}),
        ]
    trail = build_trail(numbered(messages[:4]))
    assert trail.failures and trail.ledger.items["commit"].open
    trail = build_trail(numbered(messages))
    assert trail.failures == []
    assert not trail.ledger.items["commit"].open
    assert trail.ledger.commit_line() == "Last commit: `64f1b9a feat: parity (spotter-dov)`"


def test_a_request_not_yet_answered_is_pending(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    log.user("Rename the cart module.")
    log.say("Renamed it.")
    filler(log)
    log.user("Now write the checkout docs in docs/checkout.md.")
    log.call("Read", {"file_path": "/home/dev/shop/docs/index.md"}, "# docs\n" * 40)
    filler(log)  # still working on it when the run stops: no reply in prose yet
    text = compacted(imported_plain(store, log, tmp_path))
    assert "Answer the latest request (user, #" in pending(text)
    assert "Now write the checkout docs" in pending(text)
    trail = Trail()
    trail.extend(
        numbered([Message.user("Rename the cart module."), Message.assistant("Renamed it.")])
    )
    assert trail.unanswered() is None


def test_an_agent_s_decision_names_the_call_it_led_to() -> None:
    from threadline.compaction.extractive import ExtractiveSummarizer

    call = ToolCall(
        id="g", name="Bash", arguments={"command": "mix ecto.gen.migration add_coupons"}
    )
    messages = [
        Message.user("Add coupons to the cart."),
        Message.assistant(
            "I'll use the generated migration instead of the hand-written one, because it "
            "matches the schema.",
            tool_calls=[call],
        ),
        Message.tool("* creating priv/repo/migrations/x_add_coupons.exs", tool_call_id="g"),
    ]
    text = ExtractiveSummarizer().summarize(numbered(messages)).text
    (line,) = [d for d in section(text, "key_decisions") if "generated migration" in d]
    assert "because it matches the schema" in line
    assert line.endswith("(then `Bash` `mix ecto.gen.migration add_coupons`)")


def test_pending_reads_the_latest_todo_list_the_kept_tail_wrote() -> None:
    """The plan moved on after the cut: Pending Tasks is the latest list's open items."""
    from threadline.compaction.reconcile import reconcile
    from threadline.compaction.snapshot import SummaryResult

    def plan(n: int, *items: tuple[str, str]) -> list[Message]:
        steps = [{"step": s, "status": st} for s, st in items]
        call = ToolCall(id=f"p{n}", name="update_plan", arguments={"plan": steps})
        return [
            Message.assistant("", tool_calls=[call]),
            Message.tool("Plan updated", tool_call_id=f"p{n}"),
        ]

    first = plan(1, ("Add failing tests", "in_progress"), ("Run focused verification", "pending"))
    trail = build_trail(numbered(first))
    later_messages = plan(
        2, ("Add failing tests", "completed"), ("Run focused verification", "in_progress")
    )
    for i, m in enumerate(later_messages, 3):
        m.seq = i
    later = trail.copy().extend(later_messages)
    empty = "".join(
        f"## {t}\n- (none)\n\n"
        for t in (
            "Files Modified",
            "Key Decisions",
            "Important Values",
            "Current State",
            "Pending Tasks",
        )
    )
    result = SummaryResult.counted(empty, None, [], summarizer="extractive")
    text = reconcile(result, trail, later=later, max_words=600).text
    assert pending(text) == "[in progress] Run focused verification"
    assert "Next step: Run focused verification (in progress in the todo list)" in state(text)


def test_tracker_options_take_a_value_unless_they_are_switches() -> None:
    """``--reason "..."`` swallows its value, ``--json`` does not, ``--`` ends the options."""
    ledger = Ledger()
    commands = [
        'bd close shop-1 --reason "fixed it" --json shop-2',
        "bd close -- shop-3",
        'gh issue close --comment "done" 12',
    ]
    for seq, command in enumerate(commands, 1):
        call = ToolCall(id=f"c{seq}", name="Bash", arguments={"command": command})
        ledger.observe(call, Message.tool("ok", tool_call_id=f"c{seq}"), seq, failed=False)
    assert ledger.closed_keys() == ["shop-1", "shop-2", "shop-3", "issue #12"]


def test_bd_show_s_children_give_each_sub_task_s_status() -> None:
    """Judges, run B: the epic's next sub-task (``bd show``'s CHILDREN, ○ open) was missing
    from Pending Tasks; ✓ children are closed and an unknown closed one is not added."""
    shown = (
        "○ shop-7q2 [EPIC] · Coupons at checkout   [● P2 · OPEN]\n"
        "Owner: Dev · Type: epic\n\nDESCRIPTION\nCoupons.\n\nCHILDREN\n"
        "  ↳ ✓ shop-7q2.1: Parse coupon codes ● P2\n"
        "  ↳ ◐ shop-7q2.2: Apply coupons to totals ● P2\n"
        "  ↳ ○ shop-7q2.3: Add regression coverage for coupons ● P1\n"
    )
    ledger = Ledger()
    start = ToolCall(id="1", name="Bash", arguments={"command": "bd update shop-7q2.1 -s open"})
    ledger.observe(
        start, Message.tool("✓ Updated issue: shop-7q2.1", tool_call_id="1"), 1, failed=False
    )
    call = ToolCall(id="2", name="Bash", arguments={"command": "bd show shop-7q2"})
    ledger.observe(call, Message.tool(shown, tool_call_id="2"), 2, failed=False)
    items = {i.key: i for i in ledger.open_items()}
    assert set(items) == {"shop-7q2", "shop-7q2.2", "shop-7q2.3"}
    assert items["shop-7q2.2"].status == "in_progress"
    assert items["shop-7q2.3"].title == "Add regression coverage for coupons"
    assert ledger.items["shop-7q2.1"].status == "closed"


def test_an_item_open_at_the_cut_that_the_kept_tail_takes_up_is_said_so(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog()
    log.user("Work on bead shop-7q2. Start with the first ready task.")
    shown = (
        "○ shop-7q2 [EPIC] · Coupons at checkout   [● P2 · OPEN]\n\nCHILDREN\n"
        "  ↳ ○ shop-7q2.1: Parse coupon codes ● P2\n"
        "  ↳ ○ shop-7q2.2: Apply coupons to totals ● P2\n"
    )
    log.call("Bash", {"command": "bd show shop-7q2"}, shown)
    filler(log, 12)
    log.call("Bash", {"command": "bd update shop-7q2.1 --status in_progress"}, "✓ Updated")
    filler(log, 1)
    tasks = pending(compacted(imported_plain(store, log, tmp_path))).split("\n")
    first = next(line for line in tasks if "`shop-7q2.1`" in line)
    assert "set in progress after #" in first and "in the messages kept below" in first
    second = next(line for line in tasks if "`shop-7q2.2`" in line)
    assert "set in progress" not in second  # still open: the next ready sub-task
