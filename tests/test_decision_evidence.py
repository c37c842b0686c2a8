"""Key Decisions that say why, from what the history shows (issue 31, items 1 and 2).

Runs are written in the shapes the shared transcripts hold: Claude Code records
(an assistant message split into a ``thinking`` record and a ``tool_use`` record
under one message id; a call the person turned down, with their words), and a
Codex-shaped ``exec`` whose output opens with "Exit code: 1".
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, section, store
from tests.test_ledger import filler, imported_plain, numbered, state
from threadline.compaction.decisions import standing_first, standing_rank
from threadline.compaction.disputes import dismissed
from threadline.compaction.fixes import FixBook, announced_fix
from threadline.compaction.snapshot import Bullet
from threadline.compaction.trail import Trail, build_trail
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

__all__ = ["store"]


def decisions(text: str) -> str:
    return "\n".join(section(text, "key_decisions"))


def values(text: str) -> str:
    return "\n".join(section(text, "important_values"))


def edit(log: ClaudeLog, name: str) -> None:
    log.call("Edit", {"file_path": f"{CWD}/{name}", "old_string": "a", "new_string": "b"})


def thought_then_call(log: ClaudeLog, thinking: str, name: str, args: dict[str, object]) -> None:
    """One assistant message as Claude Code writes it: a ``thinking`` record, then a
    ``tool_use`` record with the same message id, then the tool's result."""
    mid = f"msg_think_{log.n:04d}"
    head = {"id": mid, "role": "assistant", "model": "claude-opus-4-6"}
    block = {"type": "thinking", "thinking": thinking, "signature": "sig"}
    log._rec("assistant", message={**head, "content": [block]})
    call_id = f"toolu_{log.n:04d}"
    use = {"type": "tool_use", "id": call_id, "name": name, "input": args}
    log._rec("assistant", message={**head, "content": [use]})
    result = {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}
    log._rec("user", message={"role": "user", "content": [result]})


def acts(call_id: str, name: str, **arguments: object) -> Message:
    """An assistant message that only calls ``name``."""
    return Message.assistant("", tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)])


COMPILE_ERROR = (
    "Exit code 1\n== Compilation error in file lib/cart/step1.ex ==\n"
    "** (CompileError) lib/cart/step1.ex:4: undefined function total/1"
)


# -- fixes: a failed check, a change, the same check passing ---------------------------


def test_a_change_that_made_the_failing_check_pass_is_a_decision_with_its_error(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Work on the cart totals.")
    log.call("Bash", {"command": "mix test"}, COMPILE_ERROR, error=True)
    edit(log, "lib/cart/step1.ex")
    log.call("Bash", {"command": "mix test"}, "Finished in 0.4 seconds\n31 tests, 0 failures")
    filler(log)
    said = decisions(compacted(imported_plain(store, log, tmp_path)))
    (fix,) = [d for d in said.splitlines() if d.startswith("Changed")]
    assert "`lib/cart/step1.ex`" in fix
    assert "undefined function total/1" in fix
    assert fix.endswith("(then `mix test` passed)")


def test_no_fix_is_claimed_without_a_clean_run_or_for_a_file_the_error_does_not_name(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Work on the cart totals.")
    log.call("Bash", {"command": "mix test"}, COMPILE_ERROR, error=True)
    edit(log, "lib/cart/step2.ex")  # not the file the error names
    log.call("Bash", {"command": "mix test"}, "Finished in 0.4 seconds\n31 tests, 0 failures")
    log.call("Bash", {"command": "mix credo"}, "Exit code 1\nlib/a.ex:3:5 error: too deep", True)
    edit(log, "lib/a.ex")  # and no later run of `mix credo`
    filler(log)
    said = decisions(compacted(imported_plain(store, log, tmp_path)))
    assert "Changed" not in said and "to fix" not in said


def test_a_codex_exec_failure_fixed_by_a_patch_is_a_fix() -> None:
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    messages = numbered(
        [
            Message.user("Make the tests pass."),
            acts("c1", "exec_command", cmd="pytest -q"),
            Message.tool(
                "Exit code: 1\nWall time: 1.2 seconds\nOutput:\n"
                "FAILED tests/test_app.py::test_x - AssertionError: assert 1 == 2\n"
                "1 failed, 3 passed in 0.2s",
                tool_call_id="c1",
            ),
            acts("c2", "apply_patch", input=patch),
            Message.tool("Success. Updated the following files:\nM src/app.py", tool_call_id="c2"),
            acts("c3", "exec_command", cmd="pytest -q"),
            Message.tool(
                "Exit code: 0\nWall time: 1.1 seconds\nOutput:\n4 passed in 0.2s", tool_call_id="c3"
            ),
        ]
    )
    trail = build_trail(messages, cwd="/repo")
    (fix,) = trail.fixes.fixes
    assert fix.files == ["/repo/src/app.py"] and fix.target == "pytest -q"
    assert "1 failed" in fix.error or "AssertionError" in fix.error
    again = Trail.from_metadata(trail.to_metadata())
    assert again is not None and [f.to_json() for f in again.fixes.fixes] == [fix.to_json()]


@given(
    st.lists(
        st.tuples(st.sampled_from(["fail", "change", "pass"]), st.sampled_from(["a", "b"])),
        max_size=30,
    )
)
def test_a_fix_always_follows_a_failure_and_a_change_of_the_same_check(
    steps: list[tuple[str, str]],
) -> None:
    book = FixBook()
    failed: set[str] = set()
    changed_since: dict[str, bool] = {}
    for seq, (what, target) in enumerate(steps):
        before = len(book.fixes)
        if what == "fail":
            book.failed(target, f"error in {target}", seq)
            failed.add(target)
            changed_since[target] = False
        elif what == "change":
            book.changed([f"{target}.py"])
            changed_since = dict.fromkeys(changed_since, True)
        else:
            book.passed(lambda t, target=target: t == target, seq)
            made = len(book.fixes) - before
            assert made == (1 if target in failed and changed_since.get(target) else 0)
            failed.discard(target)
            changed_since.pop(target, None)
    assert FixBook.from_json(book.to_json()).to_json() == book.to_json()


# -- fixes and approaches the agent states ---------------------------------------------


def test_a_fix_announced_in_thinking_is_a_decision_tied_to_the_edit(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Work on the renderer.")
    thought_then_call(
        log,
        "Let me fix the credo nesting issue in `build_tool_use_index` and then compile.",
        "Edit",
        {"file_path": f"{CWD}/lib/renderer.ex", "old_string": "a", "new_string": "b"},
    )
    thought_then_call(
        log,
        "Let me fix the failing test in `cart_test.exs` next.",
        "Read",
        {"file_path": f"{CWD}/test/cart_test.exs"},
    )
    log.user("Now look at the docs.")
    filler(log)
    said = decisions(compacted(imported_plain(store, log, tmp_path)))
    (fix,) = [d for d in said.splitlines() if "to fix" in d]
    assert (
        fix == "Edited `lib/renderer.ex` to fix the credo nesting issue in `build_tool_use_index`"
    )
    assert "cart_test" not in said  # only read, then the person asked for something else


NESTED = """  defp classify(lines) do
    Enum.map(lines, fn line ->
      case state(line) do
        :normal -> if code?(line), do: :code, else: :text
      end
    end)
  end"""
FLAT = """  defp classify(lines) do
    Enum.map(lines, &classify_line/1)
  end

  defp classify_line(line), do: classify_state(state(line), line)

  defp classify_state(:normal, line), do: if(code?(line), do: :code, else: :text)"""


def test_a_check_the_agent_relays_then_fixes_is_worded_with_what_the_edit_added(
    store: Store, tmp_path: Path
) -> None:
    """Judge 1, run B: a hook's credo output never reaches the history; the agent's words
    ("Credo reports nesting too deep in `classify`") and the edit's added definitions do."""
    log = ClaudeLog.asking("Work on the renderer.")
    thought_then_call(
        log,
        "Credo reports nesting too deep in `classify/1`. I will flatten it.",
        "Edit",
        {"file_path": f"{CWD}/lib/renderer.ex", "old_string": NESTED, "new_string": FLAT},
    )
    log.user("Now look at the docs.")
    filler(log)
    said = decisions(compacted(imported_plain(store, log, tmp_path)))
    (fix,) = [d for d in said.splitlines() if "to fix" in d]
    assert fix.startswith("Added `classify_line`/`classify_state` in `lib/renderer.ex` to fix")
    assert "nesting too deep in `classify/1` (Credo)" in fix
    assert len(fix.split()) <= 25


def test_a_relayed_report_names_a_fault_or_is_none() -> None:
    assert announced_fix("Credo reports nesting too deep in `classify/1`.") == (
        "Fix: nesting too deep in `classify/1` (Credo)"
    )
    assert announced_fix("The compiler is complaining about an unused alias.") == (
        "Fix: an unused alias (compiler)"
    )
    assert announced_fix("The page reports three sessions.") is None


def test_an_edit_anchored_on_a_helper_does_not_name_the_helper_as_changed() -> None:
    """Judge 1, run A: tests added before `load_fixture` (the edit's anchor) were listed as
    a change of `load_fixture`; a body changed under the same head still names it."""
    from threadline.compaction.toolcalls import call_file_ops

    helper = "  defp load_fixture(name) do\n    File.read!(name)\n  end"
    added = 'describe "render/2" do\n  test "kinds" do\n    assert true\n  end\nend\n\n' + helper
    anchored = ToolCall(
        id="e1",
        name="Edit",
        arguments={"file_path": "/r/t_test.exs", "old_string": helper, "new_string": added},
    )
    (op,) = call_file_ops(anchored)
    assert op.symbols == ()
    body = helper.replace("File.read!(name)", "File.read!(Path.join(@dir, name))")
    changed = ToolCall(
        id="e2",
        name="Edit",
        arguments={"file_path": "/r/t_test.exs", "old_string": helper, "new_string": body},
    )
    (op,) = call_file_ops(changed)
    assert op.symbols == ("load_fixture",)


def test_a_rerun_with_the_option_the_error_advised_is_a_fix() -> None:
    """Judge 1, run B: `git add` refused an ignored path ("hint: Use -f ..."); the same add
    with `-f` went through. An option nobody advised is no fix."""
    ignored = (
        "Exit code 1\nThe following paths are ignored by one of your .gitignore files:\n"
        "priv/static/assets\nhint: Use -f if you really want to add them.\n"
        'hint: Turn this message off by running\nhint: "git config advice.addIgnoredFile false"'
    )
    messages = numbered(
        [
            Message.user("Commit it."),
            acts("c1", "Bash", command="git add lib/a.ex priv/static/assets/app.css"),
            Message.tool(ignored, tool_call_id="c1", metadata={"is_error": True}),
            acts("c2", "Bash", command="git add -f priv/static/assets/app.css && git add lib/a.ex"),
            Message.tool("", tool_call_id="c2"),
            acts("c3", "Bash", command="find . -name '*.css'"),
            Message.tool(
                "Exit code 1\nfind: bad path", tool_call_id="c3", metadata={"is_error": True}
            ),
            acts("c4", "Bash", command="find . -maxdepth 2 -name '*.css'"),
            Message.tool("./a.css", tool_call_id="c4"),
        ]
    )
    trail = build_trail(messages, cwd="/repo")
    (fix,) = trail.fixes.fixes
    assert fix.line().startswith("Added `-f` to `git add` to get past `The following paths")
    again = Trail.from_metadata(trail.to_metadata())
    assert again is not None and [f.to_json() for f in again.fixes.fixes] == [fix.to_json()]


def test_an_announced_fix_names_its_fault_or_is_not_stated() -> None:
    assert announced_fix("Let me fix the compile error first, then update mount.") is None
    assert announced_fix("I'll fix up the docs.") is None
    assert announced_fix("Let me fix the TypeError in `renderChart`.") == (
        "Fix: the TypeError in `renderChart`"
    )
    assert announced_fix("Should I fix `a.py`?") is None


def test_an_approach_the_agent_states_is_a_decision_once_it_acts_on_it(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Upgrade the renderer.")
    log.say(
        "Now I have a clear picture. The changes needed in the renderer:\n\n"
        "1. Remove the 5-line truncation, keep all lines\n2. Add `:debug_payload` per row\n"
    )
    log.call("Write", {"file_path": f"{CWD}/lib/renderer.ex", "content": "defmodule R do end"})
    log.say("My plan:\n1. Rewrite the docs\n2. Drop the old guide")
    log.call("Read", {"file_path": f"{CWD}/docs/guide.md"}, "# guide")
    log.user("Leave the docs alone.")
    filler(log)
    said = decisions(compacted(imported_plain(store, log, tmp_path)))
    (approach,) = [d for d in said.splitlines() if d.startswith("Approach:")]
    assert "1. Remove the 5-line truncation, keep all lines; 2. Add `:debug_payload`" in approach
    assert "(then `Write`" in approach
    assert "Rewrite the docs" not in said  # never acted on: the person turned it away


# -- order, rejected plan steps, names set aside ---------------------------------------


def test_the_persons_standing_rules_come_first() -> None:
    bullets = [
        Bullet(text="I'll use X because Y (then `Edit` `a.py`)"),
        Bullet(text="User: Let's break app.js into modules"),
        Bullet(text="User: never push to main"),
        Bullet(text="User (turning down `Edit` `a.go`): we don't want if-else dispatch"),
    ]
    ranked = [b.text for b in standing_first(bullets)]
    assert ranked[:2] == [bullets[2].text, bullets[3].text]
    assert ranked[-1] == bullets[0].text


PERSON_SAID = ("never push", "add a button", "don't fake it (corrected later: no)")
RANK_SAMPLES = [f"User: {t}" for t in PERSON_SAID] + ["Approved plan: keep it", "I used X since Y"]


@given(st.lists(st.sampled_from(RANK_SAMPLES), max_size=12))
def test_standing_first_reorders_without_losing_and_ranks_never_fall(texts: list[str]) -> None:
    out = [b.text for b in standing_first([Bullet(text=t) for t in texts])]
    assert sorted(out) == sorted(texts)
    ranks = [standing_rank(t) for t in out]
    assert ranks == sorted(ranks)


def test_a_plan_step_whose_call_the_person_turned_down_says_so(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Wire transcript analysis into both agents.")
    todos = [
        {
            "content": "Add a dispatch helper by agent type",
            "status": "in_progress",
            "activeForm": "Adding",
        },
        {"content": "Write the tests", "status": "pending", "activeForm": "Writing"},
    ]
    log.call("TodoWrite", {"todos": todos})
    edit(log, "cmd/cli/agent/helper.go")
    log.call(
        "Edit",
        {"file_path": f"{CWD}/cmd/cli/hooks.go", "old_string": "a", "new_string": "b"},
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. "
        "if it was a file edit, the new_string was NOT written to the file). To tell you how "
        "to proceed, the user said:\nthe interface is better no? We don't want if-else call "
        "site agent selection logic",
        error=True,
    )
    edit(log, "cmd/cli/agent/agent.go")  # the interface the person asked for instead
    log.call("TodoWrite", {"todos": [{**todos[0], "status": "completed"}, todos[1]]})
    filler(log)
    current = state(compacted(imported_plain(store, log, tmp_path)))
    step = next(ln for ln in current.splitlines() if "Add a dispatch helper" in ln)
    assert 'plan step "Add a dispatch helper by agent type": approach turned down' in step
    assert "We don't want if-else call site agent selection logic" in step
    assert not step.startswith("Done")  # not implemented as planned
    planned, _, ours = step.partition("then, the user's way: ")
    assert "helper.go" in planned and "agent.go" not in planned
    assert "agent.go" in ours and "helper.go" not in ours


def test_a_question_while_turning_a_call_down_leaves_the_plan_step_as_it_was() -> None:
    messages = numbered(
        [
            Message.user("Wire it in."),
            acts("t1", "TodoWrite", todos=[{"content": "Add the helper", "status": "in_progress"}]),
            Message.tool("Todos have been modified successfully.", tool_call_id="t1"),
            acts("e1", "Edit", file_path="/repo/a.go", old_string="a", new_string="b"),
            Message.tool(
                "The user doesn't want to proceed with this tool use. The tool use was rejected."
                " To tell you how to proceed, the user said:\nis the count the same for gemini?",
                tool_call_id="e1",
            ),
        ]
    )
    trail = build_trail(messages, cwd="/repo")
    assert all(not s.turned for s in trail.progress.segments)


def test_a_name_the_person_calls_redundant_carries_their_words(
    store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Design incremental conversation sync.")
    log.say("I'll track `lastSyncedMessageUuid` in `SyncState` so the next sync finds the delta.")
    edit(log, "docs/design.md")
    log.user(
        "I think that processedRecordIds is exactly the same as lastSyncedMessageUuid and it "
        "might be redundant."
    )
    edit(log, "docs/design.md")
    filler(log)
    shown = values(compacted(imported_plain(store, log, tmp_path)))
    (line,) = [v for v in shown.splitlines() if "`lastSyncedMessageUuid`" in v]
    assert '(the user later: "I think that processedRecordIds is exactly the same' in line


def test_only_a_statement_that_sets_a_name_aside_disputes_it() -> None:
    assert dismissed("is `legacy_sync` redundant?") == {}
    assert dismissed("Track `sync_state` in the same file.") == {}
    assert set(dismissed("We don't need `legacy_sync` any more.")) == {"legacy_sync"}


def test_an_approach_or_fix_the_window_ends_on_is_not_yet_a_decision() -> None:
    messages = numbered(
        [
            Message.user("Upgrade the renderer."),
            Message.assistant(
                "The changes needed in the renderer:\n1. Drop the truncation\n2. Add a payload\n"
                "Let me fix the nesting issue in `build_index` first."
            ),
        ]
    )
    from threadline.compaction.extractive import ExtractiveSummarizer

    said = decisions(ExtractiveSummarizer().summarize(messages).text)
    assert "Approach:" not in said and "Fix:" not in said


EPIC = """○ shop-9 [EPIC] · Checkout rework   [● P1 · OPEN]

DESCRIPTION
## Problem
The cart and the checkout compute totals twice and drift.

## No-gos
- Do not add a second pricing library; continue with `money.ex`.
- Do not keep separate total code paths for cart and checkout.
- Do not touch the payment provider.

## Acceptance Tests
- GIVEN a cart WHEN checking out THEN the totals match.
"""


def test_a_task_s_no_gos_are_rules_the_work_keeps(store: Store, tmp_path: Path) -> None:
    """Judges (run A): the epic's "No-gos" bind the work as the person's words do; the
    snapshot kept only its "Why"."""
    log = ClaudeLog.asking("Work on bead shop-9.")
    log.bd("show shop-9", EPIC)
    edit(log, "lib/cart.ex")
    log.user("Now look at the docs.")
    filler(log)
    said = decisions(compacted(imported_plain(store, log, tmp_path)))
    assert "Task rule (from `Bash` `bd show shop-9`): Do not add a second pricing library" in said
    # the first description's reason is the reason for the whole work
    why = "Why the work (from `Bash` `bd show shop-9`): The cart and the checkout compute totals"
    assert why in said
    assert "payment provider" not in said  # two rules of one description at most
    assert "GIVEN a cart" not in said  # an acceptance test is no rule


def test_rules_are_read_only_under_their_heading() -> None:
    from threadline.compaction.task_why import stated_rules

    assert stated_rules(EPIC) == [
        "Do not add a second pricing library; continue with `money.ex`.",
        "Do not keep separate total code paths for cart and checkout.",
    ]
    assert stated_rules("## Why\n- Do not add X.\n") == []
    assert stated_rules("Constraints:\n- must stay under 1 MB\n\nDone.") == ["must stay under 1 MB"]
    # a heading that says what kind of constraints (a task template's "Architecture Constraints")
    task = "## Edge Cases\n- Empty state.\n\n## Architecture Constraints\n- Keep one renderer.\n"
    assert stated_rules(task) == ["Keep one renderer."]
    assert stated_rules("## Rabbit Holes\n- Syncing templates by hand.\n") == []
    assert stated_rules("## The constraints of the old design were\n- x\n") == []
