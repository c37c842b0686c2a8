"""Subagent outcomes (issue 31, run F): each subagent's brief, the substance of its report,
its files and commits, never the tool's tally banner. Records are shaped like Pi's
``spawn_pi`` results (``details.result.results[]``) and Claude Code's ``Task`` calls."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from threadline.compaction.subagents import (
    BY_SUBAGENT,
    MAX_OUTCOMES,
    SUBAGENT_REPORTS_KEY,
    latest_outcomes,
    resolved,
    subagent_outcomes,
)
from threadline.compaction.trail import build_trail
from threadline.interop.pi_session import SUBAGENT_REPORTS_KEY as PI_KEY
from threadline.interop.pi_session import subagent_reports
from threadline.messages import Message, ToolCall

TALLY = "spawn_pi: \u2713 2 of 3 tasks complete\n\u2713 task-1 [worker] \u00b7 session 5ad70dff"


def spawn(prompts: list[str]) -> ToolCall:
    tasks = [{"role": "worker", "thinking": "high", "prompt": p} for p in prompts]
    return ToolCall(id="call_1|fc_1", name="spawn_pi", arguments={"tasks": tasks})


def pi_result(runs: list[dict[str, Any]]) -> Message:
    details = {"phase": "finished", "result": {"requested": len(runs), "results": runs}}
    return Message.tool(
        TALLY,
        tool_call_id="call_1|fc_1",
        name="spawn_pi",
        metadata={PI_KEY: subagent_reports(details)},
    )


def test_each_pi_subagent_says_its_task_and_report_not_the_tally() -> None:
    call = spawn(
        [
            "Adopt full lint rules in src/batch.ts and src/results.ts only. Run focused tests.",
            "Resolve diagnostics in src/tools.ts only. Do not edit other files.",
            "Review the uncommitted diff for behaviour changes. Do not edit.",
        ]
    )
    runs = [
        {
            "taskId": "task-1",
            "requestIndex": 0,
            "status": "succeeded",
            "summary": "### Changes\n- **Changed:** Updated `src/batch.ts` and `src/results.ts` "
            "to satisfy the rules.\n- Committed as `4c1d2e9`.\n\n### Verification\n- ok",
        },
        {
            "taskId": "task-2",
            "requestIndex": 1,
            "status": "parent_aborted",
            "error": {"code": "parent_aborted", "message": "Parent stopped waiting; child open"},
        },
        {
            "taskId": "task-3",
            "requestIndex": 2,
            "status": "succeeded",
            "summary": "Perfect! Now I have everything.\n\n**Verdict: clean migration.** No "
            "accidental behaviour changes found. Here is the full report.\n\n## Report",
        },
    ]
    assert PI_KEY == SUBAGENT_REPORTS_KEY
    lines = [o.line() for o in subagent_outcomes(call, pi_result(runs), 7)]
    assert len(lines) == 3
    assert all("of 3 tasks" not in ln for ln in lines)  # never the tally
    first, second, third = lines
    assert "Adopt full lint rules in src/batch.ts" in first
    assert ": Updated `src/batch.ts` and `src/results.ts` to satisfy the rules" in first
    assert "changed `src/batch.ts`, `src/results.ts`" in first and "`4c1d2e9`" in first
    assert "Resolve diagnostics in src/tools.ts" in second
    assert "not finished (parent_aborted): Parent stopped waiting" in second
    assert "changed" not in second  # an unfinished subagent changed nothing we know of
    assert "Verdict: clean migration." in third and "Perfect" not in third
    assert "full report" not in third  # a pointer to the rest is no substance


def test_a_task_run_again_replaces_its_earlier_outcome() -> None:
    call = spawn(["Fix src/a.ts only.", "Fix src/b.ts only."])
    failed = [
        {"requestIndex": i, "status": "parent_aborted", "error": {"message": "stopped"}}
        for i in range(2)
    ]
    done = [
        {"requestIndex": i, "status": "succeeded", "summary": f"Updated `src/{c}.ts` as asked."}
        for i, c in enumerate("ab")
    ]
    kept = latest_outcomes([], subagent_outcomes(call, pi_result(failed), 3))
    kept = latest_outcomes(kept, subagent_outcomes(call, pi_result(done), 9))
    assert [o.seq for o in kept] == [9, 9]
    assert all("not finished" not in o.line() for o in kept)
    many = [
        o
        for n in range(4)
        for o in subagent_outcomes(
            spawn([f"task {n}", f"job {n}"]),
            pi_result([{"requestIndex": 0, "status": "succeeded", "summary": "done it all"}]),
            n,
        )
    ]
    assert len(latest_outcomes([], many)) <= MAX_OUTCOMES


def test_a_claude_code_task_says_its_description_and_report() -> None:
    call = ToolCall(
        id="toolu_01",
        name="Task",
        arguments={
            "description": "Explore transcript rendering",
            "prompt": "Very thorough exploration of lib/web/live/session_live.ex ...",
            "subagent_type": "Explore",
        },
    )
    report = (
        "Perfect! Now I have all the information needed.\n\n"
        "## Rendering is duplicated in SessionLive and SubagentLive\n\n- details"
    )
    result = Message.tool(report, tool_call_id="toolu_01")
    (outcome,) = subagent_outcomes(call, result, 4)
    assert outcome.line() == (
        "Subagent `Explore transcript rendering`: Rendering is duplicated in SessionLive and "
        "SubagentLive"
    )


def test_a_tally_alone_is_said_as_it_is() -> None:
    """No report kept (an older import): the tally is all the evidence, said as such."""
    result = Message.tool("spawn_pi: \u00d7 incomplete \u00b7 0 of 1", tool_call_id="c")
    (outcome,) = subagent_outcomes(spawn(["fix it"]), result, 2)
    assert "incomplete" in outcome.line() and "finished" not in outcome.line()


def test_a_bare_name_a_subagent_reports_is_the_path_its_brief_named() -> None:
    call = spawn(["Resolve diagnostics in test/unit/results.test.ts and test/unit/domain.test.ts."])
    runs = [
        {
            "taskId": "task-1",
            "requestIndex": 0,
            "status": "succeeded",
            "summary": "Fixed the unsafe assertions.\n\nFiles changed:\n- `domain.test.ts`\n"
            "- `results.test.ts`\n- `other.test.ts`",
        }
    ]
    (outcome,) = subagent_outcomes(call, pi_result(runs), 3)
    # named in the brief: its path; named nowhere else: as the subagent said it
    assert outcome.files == [
        "test/unit/domain.test.ts",
        "test/unit/results.test.ts",
        "other.test.ts",
    ]


@given(st.lists(st.sampled_from(["a/x.ts", "b/x.ts", "c/y.ts", "x.ts", "z.ts"]), max_size=6))
def test_a_bare_name_resolves_only_to_the_one_known_path_with_that_name(known: list[str]) -> None:
    for name in ("x.ts", "y.ts", "z.ts"):
        out = resolved(name, known)
        same = {p for p in known if p.rsplit("/", 1)[-1] == name and p != name}
        assert out == (same.pop() if len(same) == 1 else name)
    # a path said with a directory less is the run's one longer spelling of that file;
    # one whose directories the known path does not hold is kept as written
    assert resolved("a/x.ts", ["b/a/x.ts"]) == "b/a/x.ts"
    assert resolved("a/x.ts", ["c/b/x.ts"]) == "a/x.ts"
    assert resolved("a/x.ts", ["a/x.ts", "b/a/x.ts"]) == "a/x.ts"


def test_files_a_subagent_changed_are_its_work_not_the_agent_s_edits() -> None:
    """A Pi parent edits one file; a ``spawn_pi`` child reports one by bare name, which the
    parent had read under its directory."""
    call = spawn(["Fix the diagnostics in the domain tests only."])
    runs = [
        {
            "taskId": "t1",
            "requestIndex": 0,
            "status": "succeeded",
            "summary": "Fixed the assertions.\n\nFiles changed:\n- `domain.test.ts`",
        }
    ]
    read = ToolCall(id="r1", name="read", arguments={"path": "test/unit/domain.test.ts"})
    edit = ToolCall(id="e1", name="edit", arguments={"path": "src/a.ts", "edits": []})
    messages = [
        Message.user("Tidy the lint setup."),
        Message.assistant("", tool_calls=[read]),
        Message.tool("import x", tool_call_id="r1", name="read"),
        Message.assistant("", tool_calls=[edit]),
        Message.tool("Successfully replaced 1 block(s) in src/a.ts.", tool_call_id="e1"),
        Message.assistant("", tool_calls=[call]),
        pi_result(runs),
    ]
    for n, m in enumerate(messages, 1):
        m.seq = n
    trail = build_trail(messages, "/w")
    files = trail.tracker.files()
    assert set(files["src/a.ts"].actions) == {"edited"}
    assert "domain.test.ts" not in files  # the one path of that name the run knows...
    assert set(files["test/unit/domain.test.ts"].actions) == {BY_SUBAGENT}  # ...its work
    (seg,) = trail.progress.segments
    assert seg.files == ["/w/src/a.ts"] and seg.delegated == ["/w/test/unit/domain.test.ts"]
    assert "subagents changed `/w/test/unit/domain.test.ts`" in seg.facts(str)


def test_every_worker_of_a_batch_larger_than_the_outcomes_kept_has_its_files_listed() -> None:
    """Judges (run F): a batch of eight workers changed fourteen files; the snapshot kept the
    latest six reports and said "(+2 more files)" of the rest."""
    count = MAX_OUTCOMES + 2
    call = spawn([f"Fix the diagnostics in src/m{i}.ts only." for i in range(count)])
    runs = [
        {
            "taskId": f"task-{i}",
            "requestIndex": i,
            "status": "succeeded",
            "summary": f"### Changes\n- Fixed diagnostics in `src/m{i}.ts`.",
        }
        for i in range(count)
    ]
    messages = [Message.user("Fix the lint diagnostics."), Message.assistant("", tool_calls=[call])]
    messages.append(pi_result(runs))
    for n, m in enumerate(messages, 1):
        m.seq = n
    trail = build_trail(messages, "/w")
    changed = {f"src/m{i}.ts" for i in range(count)}
    assert changed <= set(trail.tracker.files())
    (seg,) = trail.progress.segments
    assert set(seg.delegated) == {f"/w/{f}" for f in changed}
    assert f"(+{count - 5} more files)" in " ".join(seg.facts(str))
    assert len(trail.ledger.outcomes) == MAX_OUTCOMES  # what Current State quotes stays few


def test_files_a_report_says_it_left_unchanged_are_not_its_changes() -> None:
    """Run F: "Confirmed no changes were needed in `src/domain.ts` ..." under "### Changes"."""
    report = (
        "### Changes\n- Fixed async diagnostics in `src/orchestrator.ts`.\n"
        "- Confirmed no changes were needed in `src/domain.ts`, `src/parent-label.ts`, or "
        "`src/index.ts`.\n\n- **Changes:** Updated `test/integration/batch.test.ts`; "
        "`protocol.test.ts` required no changes.\n- No additional edits made to `src/host.ts`.\n"
        "- Reformatted `src/tools.ts`, behaviour unchanged.\n- `src/ui.ts` was left untouched."
    )
    result = Message.tool(report, tool_call_id="call_1|fc_1", name="spawn_pi")
    (outcome,) = subagent_outcomes(spawn(["Fix the diagnostics."]), result, 3)
    assert outcome.files == [
        "src/orchestrator.ts",
        "test/integration/batch.test.ts",
        "src/tools.ts",  # a change that kept the behaviour is a change
    ]
