"""The progress account (issue 31): what the run did on each work item, in order, said in
Current State from the run's own evidence.

Runs are written record by record in the shapes the shared transcripts hold (Claude
Code's Bash results with "Exit code 1", beads' "✓ Updated issue", ``mix test``'s
"14 tests, 0 failures", Elixir's compile error with its ``└─ file:line`` line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, section, store
from tests.test_ledger import filler, imported_any, imported_plain, numbered
from threadline.compaction.progress import (
    Progress,
    Segment,
    account,
    is_check,
    located_error,
    result_line,
    unresolved,
    verdict_ok,
)
from threadline.compaction.reconcile import progress_lines
from threadline.compaction.trail import Trail, build_trail
from threadline.context.builder import ORIENTATION_KEY
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

__all__ = ["store"]  # the fixture, shared with test_compaction_truth

COMPILE_ERROR = (
    "Exit code 1\nCompiling 2 files (.ex)\n"
    "error: cannot invoke remote function Access.get/2 inside a guard\n"
    "    │\n171 │       %{last: idx} = info when idx == line[:result_line_index] ->\n"
    "    │                                        ^\n    │\n"
    "    └─ lib/shop_web/components/cart.ex:171:45: ShopWeb.Cart.expand/2\n\n"
    "== Compilation error in file lib/shop_web/components/cart.ex ==\n"
    "** (CompileError) lib/shop_web/components/cart.ex: cannot compile file (errors have been "
    "logged)"
)


def state(text: str) -> list[str]:
    return section(text, "current_state")


def beads_run() -> ClaudeLog:
    log = ClaudeLog()
    log.user("Work on bead shop-7q2. Start with the first ready task.")
    log.call("Bash", {"command": "bd update shop-7q2.1 --status in_progress"}, "✓ Updated")
    log.call(
        "Write",
        {"file_path": f"{CWD}/lib/shop/coupon.ex", "content": "defmodule C do\nend"},
        f"File created successfully at: {CWD}/lib/shop/coupon.ex",
    )
    log.call(
        "Bash",
        {"command": "mix test 2>&1 | tail -5"},
        "........\nFinished in 0.3 seconds (0.1s async, 0.2s sync)\n14 tests, 0 failures",
    )
    log.call(
        "Bash",
        {"command": "git add -A && git commit -m 'feat: coupons (shop-7q2.1)'"},
        "[main 4c1d2e9] feat: coupons (shop-7q2.1)\n 1 file changed, 3 insertions(+)",
    )
    log.call(
        "Bash",
        {"command": 'bd close shop-7q2.1 --reason="Coupons apply at checkout"'},
        "✓ Closed shop-7q2.1: Coupons apply at checkout",
    )
    log.call("Bash", {"command": "bd update shop-7q2.2 --status in_progress"}, "✓ Updated")
    log.call(
        "Edit",
        {
            "file_path": f"{CWD}/lib/shop_web/components/cart.ex",
            "old_string": "a",
            "new_string": "b",
        },
    )
    log.say("The expand control is in. Still need to update the SessionLive template.")
    piped = COMPILE_ERROR.removeprefix("Exit code 1\n")  # `| head`: the pipe's status is 0
    log.call("Bash", {"command": "mix compile 2>&1 | head -30"}, piped)
    return log


def test_each_item_gets_its_account_in_order_with_the_open_error(
    store: Store, tmp_path: Path
) -> None:
    """Fails on the code before the account: Current State named only the item in
    progress, none of what was done on the closed one, and no error."""
    log = beads_run()
    filler(log)
    lines = state(compacted(imported_plain(store, log, tmp_path)))
    done = next(i for i, line in enumerate(lines) if line.startswith("Done: `shop-7q2.1`"))
    now = next(i for i, line in enumerate(lines) if line.startswith("In progress: `shop-7q2.2`"))
    assert done < now  # chronological
    assert "created `lib/shop/coupon.ex`" in lines[done]  # Write of a new file
    assert "`mix test` -> `14 tests, 0 failures`" in lines[done]
    assert "`4c1d2e9 feat: coupons (shop-7q2.1)`" in lines[done]
    assert "closed: Coupons apply at checkout" in lines[done]
    assert "`lib/shop_web/components/cart.ex`" in lines[now]
    assert "Still need to update the SessionLive template" in lines[now]
    error = next(line for line in lines if line.startswith("Unresolved error"))
    assert "cannot invoke remote function Access.get/2 inside a guard" in error
    assert "lib/shop_web/components/cart.ex:171:45" in error  # where, from the output


def test_a_later_clean_run_settles_the_error_and_the_kept_tail_is_not_contradicted() -> None:
    failed_run = beads_run()  # the same error reported by its exit status (no pipe)
    failed_run.call("Bash", {"command": "mix compile"}, COMPILE_ERROR, error=True)
    lines = progress_lines(build_trail(numbered(_messages(failed_run))))
    assert any("`mix compile` -> `error: cannot invoke" in line for line in lines)
    log_messages = numbered(_messages(beads_run()))
    trail = build_trail(log_messages)
    assert any(line.startswith("Unresolved error") for line in progress_lines(trail))
    # the same command runs clean after the cut (no result line to quote): settled
    clean = [
        Message.assistant(
            "", tool_calls=[ToolCall(id="z", name="Bash", arguments={"command": "mix compile"})]
        ),
        Message.tool("Compiling 2 files (.ex)\nGenerated shop app", tool_call_id="z"),
    ]
    for i, m in enumerate(clean, len(log_messages) + 1):
        m.seq = i
    later = trail.copy().extend(clean)
    assert not any(line.startswith("Unresolved error") for line in progress_lines(trail, later))
    # closed in the kept tail: not called "in progress", not said to be closed either
    close = [
        Message.assistant(
            "",
            tool_calls=[
                ToolCall(id="c", name="Bash", arguments={"command": "bd close shop-7q2.2"})
            ],
        ),
        Message.tool("✓ Closed shop-7q2.2", tool_call_id="c"),
    ]
    for i, m in enumerate(close, len(log_messages) + 3):
        m.seq = i
    lines = progress_lines(trail, later.copy().extend(close))
    current = next(line for line in lines if "shop-7q2.2" in line)
    assert not current.startswith("In progress") and "closed" not in current
    assert "the messages kept below go on with it" in current
    # carried in checkpoint metadata: the same account after a round trip
    again = Trail.from_metadata(trail.to_metadata())
    assert again is not None and progress_lines(again) == progress_lines(trail)


def _messages(log: ClaudeLog) -> list[Message]:
    from threadline.interop.anthropic_format import from_anthropic

    out: list[Message] = []
    for rec in log.lines:
        msg = rec.get("message")
        if isinstance(msg, dict):
            made = from_anthropic([msg])
            for m in made:
                m.metadata["cwd"] = rec["cwd"]
            for m in made:
                if m.role == "tool":  # the name the call gave, as the importer sets it
                    m.name = "Bash"
            out.extend(made)
    return out


def test_requests_make_the_segments_of_a_run_without_a_tracker(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog()
    log.user("Add a red highlight when a king is in check.")
    log.call("Edit", {"file_path": f"{CWD}/styles.css", "old_string": "a", "new_string": "b"})
    log.call("Bash", {"command": "npx vitest run"}, "Tests  12 passed (12)\n Test Files  3 passed")
    log.user("Now break app.js down into modules.")
    log.call("Write", {"file_path": f"{CWD}/ui.js", "content": "export {}"})
    filler(log)
    lines = state(compacted(imported_plain(store, log, tmp_path)))
    first = next(line for line in lines if line.startswith("Worked on request #1"))
    assert "Add a red highlight" in first and "`styles.css`" in first
    assert "`npx vitest run` -> `Test Files  3 passed`" in first
    assert "ui.js" not in first
    current = next(line for line in lines if line.startswith("In progress: request #"))
    assert "break app.js down" in current and "`ui.js`" in current


def test_a_result_line_is_the_output_s_own_verdict() -> None:
    assert result_line("....\nFinished in 5.5 seconds\n14 doctests, 397 tests, 0 failures") == (
        "14 doctests, 397 tests, 0 failures"
    )
    assert result_line("===== 1 failed, 4 passed in 0.31s =====") == (
        "===== 1 failed, 4 passed in 0.31s ====="
    )
    assert result_line("src/a.py:1:1: F401 unused\nFound 1 error.") == "Found 1 error."
    assert result_line("All checks passed!") == "All checks passed!"
    assert result_line("71 mods/funs, found no issues.\nShowing priority issues") is not None
    credo = "876 mods/funs, found 5 software design suggestions."
    assert result_line(f"Analysis took 0.4 seconds\n{credo}\nUse `mix credo explain`") == credo
    assert result_line("test result: ok. 10 passed; 0 failed; 0 ignored") is not None
    assert result_line("drwxr-xr-x  4 u  staff  755  test/\n-rw-r--r-- README.md") is None
    assert verdict_ok("59 tests, 0 failures") and verdict_ok("All checks passed!")
    assert not verdict_ok("12 tests, 12 failures") and not verdict_ok("1 failed, 4 passed")
    assert verdict_ok("Summary: 6 passed, 0 warnings, 0 failed") and not verdict_ok("Build failed")
    assert located_error(COMPILE_ERROR) == (
        "error: cannot invoke remote function Access.get/2 inside a guard "
        "(lib/shop_web/components/cart.ex:171:45)"
    )
    assert located_error("src/a.ts(3,5): error TS2322: Type 'x' is not 'y'.") is not None
    assert located_error("Exit code 1\nerror: something broke") is None  # nowhere said
    assert is_check("cd app && mix test 2>&1 | tail -5")
    assert not is_check("head -c 500 a.jsonl | python3 -c 'import json'")
    assert not is_check("pwd && ls -la && find . -name '*.ts'")


def test_a_failed_check_s_line_says_why_not_its_banner() -> None:
    from threadline.compaction.trail import error_lines

    out = (
        "Checking formatting...\n\nspecs/child-roles.md (218ms)\n\n"
        "Format issues found in above 1 files. Run without `--check` to fix.\n"
        "Finished in 240ms on 1 files using 10 threads.\n\n\nCommand exited with code 1"
    )
    assert error_lines(out) == [
        "Format issues found in above 1 files. Run without `--check` to fix."
    ]


def test_a_todo_step_does_not_take_over_the_tracked_item() -> None:
    progress = Progress()
    progress.request(1, "Work on bead shop-7q2")
    progress.claimed("shop-7q2.1", "Coupons", "beads", 2)
    progress.claimed("todo: write the test", "write the test", "todo list", 3)
    progress.touched(["/w/a.ex"], 4)
    assert [s.key for s in progress.segments] == ["shop-7q2.1"]  # the empty request went
    assert progress.segments[0].files == ["/w/a.ex"]
    progress.closed("shop-7q2.1", 5)
    progress.claimed("todo: write the docs", "write the docs", "todo list", 6)
    assert progress.current is not None and progress.current.key == "todo: write the docs"


def test_the_session_s_recorded_directory_wins_over_a_later_cd(
    store: Store, tmp_path: Path
) -> None:
    """Claude Code stamps each record with its shell's directory: after ``cd assets`` the
    records say ``.../assets``. Fails on the old code, which took the last one."""
    log = ClaudeLog()
    log.user("Build the assets.")
    log.call("Bash", {"command": "cd assets && npm run build"}, "built")
    moved = len(log.lines)
    log.user("go on")
    log.call("Bash", {"command": "npm test"}, "Tests: 3 passed, 3 total")
    filler(log)
    for rec in log.lines[moved:]:  # the shell stayed in assets/
        rec["cwd"] = f"{CWD}/assets"
    session = imported_plain(store, log, tmp_path)
    assert session.info.metadata["cwd"] == CWD
    compacted(session)
    checkpoint = session.latest_checkpoint()
    assert checkpoint is not None
    orientation = checkpoint.metadata[ORIENTATION_KEY]
    assert f"- Working directory: {CWD}" in orientation.split("\n")


def test_files_a_pi_subagent_reports_changing_are_the_run_s() -> None:
    """Pi's ``spawn_pi`` answers with a tally; each subagent's own report rides in the
    result's ``details`` (``result.results[].summary``), which the importer keeps."""
    from threadline.interop.pi_session import SUBAGENT_REPORTS_KEY, subagent_reports

    details = {
        "phase": "finished",
        "result": {
            "results": [
                {
                    "status": "succeeded",
                    "summary": "### Changes\n- Resolved lint in `src/tools.ts`.",
                },
                {"status": "succeeded", "summary": "- Updated `src/herdr/host.ts` to clear it."},
                {"status": "parent_aborted", "error": {"code": "parent_aborted"}},
            ]
        },
    }
    reports = subagent_reports(details)
    assert len(reports) == 2 and subagent_reports({"result": "x"}) == []
    call = ToolCall(id="p", name="spawn_pi", arguments={"tasks": [{"prompt": "fix lint"}]})
    messages = numbered(
        [
            Message.user("Adopt the new lint rules."),
            Message.assistant("", tool_calls=[call]),
            Message.tool(
                "spawn_pi: ✓ 2 of 2 tasks complete",
                tool_call_id="p",
                name="spawn_pi",
                metadata={SUBAGENT_REPORTS_KEY: reports},
            ),
        ]
    )
    files = build_trail(messages, cwd="/w").tracker.files(mentioned=False)
    assert {"src/tools.ts", "src/herdr/host.ts"} <= set(files)


def test_a_pi_session_s_subagent_reports_survive_import(store: Store, tmp_path: Path) -> None:
    """Through ``sessions import`` of a Pi session file: the files the subagents report
    changing are in Files Modified of the compaction."""
    cwd = "/Users/dev/app"
    stamp = "2026-08-16T13:38:24.455Z"
    records: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "01a0", "timestamp": stamp, "cwd": cwd}
    ]

    def entry(message: dict[str, Any]) -> None:
        parent = records[-1].get("id") if len(records) > 1 else None
        n = len(records)
        records.append(
            {
                "type": "message",
                "id": f"e{n}",
                "parentId": parent,
                "timestamp": stamp,
                "message": {**message, "timestamp": 1},
            }
        )

    entry({"role": "user", "content": [{"type": "text", "text": "Adopt the lint rules."}]})
    first = {"type": "toolCall", "id": "c0", "name": "spawn_pi", "arguments": {"tasks": []}}
    entry({"role": "assistant", "content": [first], "provider": "x", "model": "y"})
    entry(
        {
            "role": "toolResult",
            "toolCallId": "c0",
            "toolName": "spawn_pi",
            "content": [{"type": "text", "text": "spawn_pi: \u00d7 incomplete \u00b7 0 of 1"}],
            "isError": False,
        }
    )
    call = {
        "type": "toolCall",
        "id": "c1",
        "name": "spawn_pi",
        "arguments": {"tasks": [{"role": "worker", "prompt": "fix src/tools.ts"}]},
    }
    entry({"role": "assistant", "content": [call], "provider": "x", "model": "y"})
    report = "### Changes\n- Resolved all diagnostics in `src/tools.ts`.\n\n### Verification\n- ok"
    entry(
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "spawn_pi",
            "content": [{"type": "text", "text": "spawn_pi: \u2713 1 of 1 task complete"}],
            "details": {"result": {"results": [{"status": "succeeded", "summary": report}]}},
            "isError": False,
        }
    )
    for i in range(8):
        entry({"role": "user", "content": [{"type": "text", "text": f"and then step {i}"}]})
        entry({"role": "assistant", "content": [{"type": "text", "text": f"Done step {i}."}]})
    path = tmp_path / "pi.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    text = compacted(imported_any(store, path))
    assert "`src/tools.ts`" in "\n".join(section(text, "files_modified"))
    reports = [s for s in section(text, "current_state") if s.startswith("Subagent")]
    assert len(reports) == 2 and "incomplete" in reports[0], reports  # in the run's order


_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.sampled_from(["fix it", "add docs"])),
        st.tuples(st.just("claim"), st.sampled_from(["a-1", "a-2", "a-3"])),
        st.tuples(st.just("close"), st.sampled_from(["a-1", "a-2", "a-3"])),
        st.tuples(st.just("touch"), st.sampled_from(["/w/x.py", "/w/y.py"])),
        st.tuples(st.just("run"), st.tuples(st.sampled_from(["make", "pytest"]), st.booleans())),
        st.tuples(st.just("commit"), st.sampled_from(["abc1234 feat", "def5678 fix"])),
    ),
    max_size=40,
)


@given(_EVENTS)
@settings(max_examples=150, deadline=None)
def test_an_error_is_unresolved_only_while_its_command_s_latest_run_failed(
    events: list[tuple[str, Any]],
) -> None:
    """Whatever the order of claims, closures, edits and runs: a failure is said only while
    no later run of the same command passed, and the account survives its metadata form."""
    progress = Progress()
    latest: dict[str, bool] = {}
    for seq, (kind, arg) in enumerate(events, 1):
        if kind == "request":
            progress.request(seq, arg)
        elif kind == "claim":
            progress.claimed(arg, "", "beads", seq)
        elif kind == "close":
            progress.closed(arg, seq)
        elif kind == "touch":
            progress.touched([arg], seq)
        elif kind == "commit":
            progress.committed(arg, seq)
        else:
            command, ok = arg
            progress.checked(
                command,
                command,
                "1 failed" if not ok else "ok",
                ok,
                seq,
                settles=lambda t, c=command: t == c,
            )
            latest[command] = ok
    for seg in progress.segments:
        for target in (c.command for c in unresolved(seg)):
            assert latest[target] is False
    again = Progress.from_json(json.loads(json.dumps(progress.to_json())))
    assert again.to_json() == progress.to_json()
    assert account(again, len(events)) == account(progress, len(events))


def test_a_turned_down_edit_is_not_a_change_of_its_stretch() -> None:
    """Judge, run C: "Worked on plan step ...; changed `claude.go`" where the only edit of
    ``claude.go`` in that stretch was turned down by the person."""
    turned = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected "
        "(eg. if it was a file edit, the new_string was NOT written to the file)."
    )

    def edit(call_id: str, path: str) -> Message:
        args = {"file_path": path, "old_string": "a", "new_string": "b"}
        return Message.assistant("", tool_calls=[ToolCall(id=call_id, name="Edit", arguments=args)])

    messages = [
        Message.user("Add the interface to both agents."),
        edit("e1", "/w/claude.go"),
        Message.tool(turned, tool_call_id="e1", metadata={"is_error": True}),
        edit("e2", "/w/gemini.go"),
        Message.tool("The file /w/gemini.go has been updated.", tool_call_id="e2"),
    ]
    progress = build_trail(numbered(messages), cwd="/w").progress
    assert [s.files for s in progress.segments] == [["/w/gemini.go"]]
    messages += [
        edit("e3", "/w/claude.go"),
        Message.tool("The file /w/claude.go has been updated.", tool_call_id="e3"),
    ]
    progress = build_trail(numbered(messages), cwd="/w").progress
    assert [s.files for s in progress.segments] == [["/w/gemini.go", "/w/claude.go"]]


def test_a_file_the_stretch_removed_is_said_deleted_not_changed() -> None:
    """Judge, run D: "#33 ... changed `UNIFIED-TRACKING-DESIGN.md`" for a file ``rm`` removed."""
    rm = ToolCall(id="r1", name="Bash", arguments={"command": "rm /w/DESIGN.md"})
    write = ToolCall(id="w1", name="Write", arguments={"file_path": "/w/plan.md", "content": "x"})
    messages = [
        Message.user("Don't create separate documents."),
        Message.assistant("", tool_calls=[rm]),
        Message.tool("", tool_call_id="r1"),
        Message.assistant("", tool_calls=[write]),
        Message.tool("File created successfully at: /w/plan.md", tool_call_id="w1"),
    ]
    trail = build_trail(numbered(messages), cwd="/w")
    (seg,) = trail.progress.segments
    assert seg.deleted == ["/w/DESIGN.md"]
    lines = progress_lines(trail)
    assert any("deleted `DESIGN.md`" in line for line in lines), lines
    assert not any("changed `DESIGN.md`" in line for line in lines), lines
    assert Segment.from_json(seg.to_json()).deleted == ["/w/DESIGN.md"]


def test_a_stretch_keeps_the_assistant_s_report_of_what_it_did() -> None:
    """Judges, run D: the account named the files of each request but not what was done;
    the assistant's own report says it. Narration and findings are no report."""
    write = ToolCall(id="w1", name="Write", arguments={"file_path": "/w/PLAN.md", "content": "x"})
    messages = [
        Message.user("Track the sync state in the same file as the metrics."),
        Message.assistant("", tool_calls=[write]),
        Message.tool("File created successfully at: /w/PLAN.md", tool_call_id="w1"),
        Message.assistant(
            "Perfect! I've written the unified tracking design into `PLAN.md`, keeping one "
            "syncState object per session.\n\n## Key Benefits\n1. One file"
        ),
        Message.user("Now rename it."),
        Message.assistant("I see the pattern here, there are separate paths for each agent."),
        Message.assistant("Let me check the SessionState to see what we have available now."),
    ]
    progress = build_trail(numbered(messages), cwd="/w").progress
    first, second = progress.segments
    assert first.report == (
        "I've written the unified tracking design into `PLAN.md`, keeping one syncState "
        "object per session."
    )
    assert second.report == ""
    assert Segment.from_json(first.to_json()).report == first.report


def test_words_before_a_todo_write_report_on_the_stretch_they_end_not_the_next_step() -> None:
    """Claude Code writes "Code compiles. Let me update the todo list" and the ``TodoWrite``
    that starts the next step in one message: the report is of the work before the step."""
    todo = [{"content": "Add the interface methods", "status": "in_progress"}]
    messages = numbered(
        [
            Message.user("Fix the stale base commit."),
            Message.assistant(
                "",
                tool_calls=[
                    ToolCall(
                        id="e1", name="Edit", arguments={"file_path": "/r/a.go", "old_string": "x"}
                    )
                ],
            ),
            Message.tool("The file /r/a.go has been updated successfully.", tool_call_id="e1"),
            Message.assistant(
                "The code compiles now with the base refreshed. Let me update the todo list.",
                tool_calls=[ToolCall(id="t1", name="TodoWrite", arguments={"todos": todo})],
            ),
            Message.tool("Todos have been modified successfully.", tool_call_id="t1"),
        ]
    )
    segments = build_trail(messages, "/r").progress.segments
    step = next(s for s in segments if s.title == "Add the interface methods")
    before = next(s for s in segments if s.start == 1)
    assert step.report == ""
    assert "compiles" in before.report


def test_a_fold_of_one_request_names_it_rather_than_counting_it() -> None:
    """Judge, run D: "Earlier work (#16-#20): 1 requests (#16-#16)" said nothing."""
    progress = Progress()
    progress.request(1, "Make the sync track every conversation incrementally.")
    progress.touched(["/w/design.md"], 2)
    progress.request(3, "Put it into the existing document as its own phase.")
    progress.touched(["/w/design.md"], 4, "merge the phase into the design")
    progress.request(5, "Now check the metrics error handling.")
    progress.touched(["/w/metrics.md"], 6)
    lines, _ = account(progress, 6, budget=30)
    assert lines[0].startswith('Earlier work (#1-#2): request #1 ("Make the sync track')
    assert "1 requests" not in " ".join(lines)


def test_an_output_read_again_is_not_scanned_again() -> None:
    """Each compaction reads its kept tail again (the trail's ``later``): an output's
    result line and located error are found by one scan of its lines, not one a read."""
    text = "".join(f"mix test line {i}: ok\n" for i in range(2_000))
    text += "** (CompileError) lib/a.ex:12: undefined function x/0\n3 tests, 1 failure\n"
    result_line.cache_clear()
    located_error.cache_clear()
    for _ in range(3):
        assert result_line(str(text)) == "3 tests, 1 failure"
        assert located_error(str(text)) == "** (CompileError) lib/a.ex:12: undefined function x/0"
    assert result_line.cache_info().misses == located_error.cache_info().misses == 1
