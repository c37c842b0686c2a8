"""Important Values that mean something (issue 31): a value is kept when the run refers to it
in prose or in a command, labelled by what it is; a failure listed is still unresolved and
shows its real error line.

Each test is built from records shaped like the shared transcripts' (Pi and Codex shell
results, Claude Code's background tasks and beads, a Codex compaction) and fails on the
code before this change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_compaction_truth import ClaudeLog, compacted, section, store
from tests.test_ledger import filler, imported_plain, numbered
from tests.test_native_checkpoints import import_into, rollout
from threadline import open_store
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.trail import Trail, error_lines
from threadline.compaction.values import Value, worth_keeping
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

__all__ = ["store"]


def values(messages: list[Message]) -> str:
    text = ExtractiveSummarizer().summarize(numbered(messages)).text
    return "\n".join(section(text, "important_values"))


def bash(command: str, call_id: str) -> Message:
    return Message.assistant(
        "", tool_calls=[ToolCall(id=call_id, name="bash", arguments={"command": command})]
    )


def result(text: str, call_id: str, *, error: bool = False) -> Message:
    return Message.tool(text, tool_call_id=call_id, metadata={"is_error": True} if error else {})


def test_a_variable_a_script_printed_is_no_setting() -> None:
    """Judge, run F: ``setting: status=2`` and ``diff_check=2`` (what ``printf`` printed from
    ``status=$?``) were listed as values."""
    script = "pnpm fix > /tmp/fix.log 2>&1; status=$?; printf 'status=%s\\n' $status"
    said = values(
        [
            Message.user("Run the fixer."),
            bash(script, "c1"),
            result("status=2\ndiff_check=2\n", "c1"),
            Message.assistant("The fixer reports problems; looking at the log."),
        ]
    )
    assert "status=2" not in said and "diff_check=2" not in said


def test_code_syntax_is_no_name() -> None:
    """Judges: ``@not_found``, ``::after``, ``name: prompt:`` meant nothing to a reader."""
    for text in ("::after", "@not_found", "prompt:", ".square.check", ":debug_payload"):
        assert not worth_keeping(Value("identifier", text), 2), text
    for text in ("renderBoard", "render/2", "newGame()", "SessionState.CondensedLines"):
        assert worth_keeping(Value("identifier", text), 2), text


def test_a_background_tasks_output_file_is_no_value() -> None:
    """Run A: ``/tmp/claude-1000/.../tasks/b7636e2.output``, where Claude Code wrote a
    background command's output, was a value; the agent never named it."""
    out = "/tmp/claude-1000/-home-dev-shop/tasks/b7636e2.output"
    call = ToolCall(
        id="b1", name="Bash", arguments={"command": "mix test", "run_in_background": True}
    )
    said = values(
        [
            Message.user("Run the suite."),
            Message.assistant("", tool_calls=[call]),
            result(
                "Command running in background with ID: b7636e2. "
                f"Output is being written to: {out}",
                "b1",
            ),
            Message.assistant(
                "", tool_calls=[ToolCall(id="r1", name="Read", arguments={"file_path": out})]
            ),
            result("410 tests, 0 failures", "r1"),
        ]
    )
    assert out not in said


def test_a_path_says_what_the_run_did_with_it() -> None:
    read = ToolCall(id="r1", name="Read", arguments={"file_path": "lib/shop/cart.ex"})
    said = values(
        [
            Message.user("Look at `config/runtime.exs` and the cart."),
            Message.assistant("", tool_calls=[read]),
            result("defmodule Shop.Cart do\nend\n", "r1"),
        ]
    )
    assert "lib/shop/cart.ex" not in said  # merely read: where the agent looked
    assert "path: `config/runtime.exs` (named by the user)" in said
    discussed = values(
        [
            Message.user("Why is the total off?"),
            Message.assistant("", tool_calls=[read]),
            result("defmodule Shop.Cart do\nend\n", "r1"),
            Message.assistant("`lib/shop/cart.ex` rounds each line before summing."),
        ]
    )
    assert "path: `lib/shop/cart.ex` (read)" in discussed  # read, and said why it matters
    grep = [ToolCall(id=f"g{i}", name="Grep", arguments={"pattern": "total"}) for i in range(2)]
    listed = values(
        [
            Message.user("Where are totals computed?"),
            *(
                m
                for g in grep
                for m in (
                    Message.assistant("", tool_calls=[g]),
                    result("lib/shop/totals.ex:3: def total", g.id),
                )
            ),
        ]
    )
    assert "lib/shop/totals.ex" not in listed  # a search hit nobody named again


def test_a_subagent_brief_and_code_symbols_are_not_values() -> None:
    """Run A: paths named only inside a ``Task`` prompt were listed "(passed to a tool)", and
    code symbols the agent's prose named in passing (``toggle_debug``) as bare names; a name
    the person gave stays."""
    task = ToolCall(
        id="t1",
        name="Task",
        arguments={
            "description": "Explore the transcript views",
            "prompt": "Read lib/web/live/session_live.html.heex and assets/js/app.js.",
            "subagent_type": "Explore",
        },
    )
    said = values(
        [
            Message.user("Keep `SessionLive.mount/3` as it is."),
            Message.assistant("", tool_calls=[task]),
            result("Both templates render lines the same way.", "t1"),
            Message.assistant("I'll add a `toggle_debug` event next to `rendered_lines`."),
            Message.assistant("The `toggle_debug` handler now flips the sidecar."),
        ]
    )
    assert "session_live.html.heex" not in said and "assets/js/app.js" not in said
    assert "toggle_debug" not in said and "rendered_lines" not in said
    assert "`SessionLive.mount/3`" in said
    typed = values(  # run D: the person typed the name unquoted, the agent quoted it
        [
            Message.user("I think processedRecordIds is exactly the same as lastSyncedMessageUuid"),
            Message.assistant(
                "Right: `lastSyncedMessageUuid` alone marks the delta; see `SyncState`."
            ),
        ]
    )
    assert "name: `lastSyncedMessageUuid`" in typed and "SyncState" not in typed


def test_a_link_every_linter_run_prints_is_not_a_value() -> None:
    """Run A: credo's "report issues at" link, printed by every ``mix credo`` run, was a URL
    value; a URL one deploy answered with stays (the API gave it)."""
    banner = "Please report incorrect results: https://github.com/rrrene/credo/issues"
    msgs: list[Message] = [Message.user("Lint it.")]
    for i in range(3):
        msgs += [bash("mix credo --strict", f"c{i}"), result(f"{banner}\n{i} issues", f"c{i}")]
    deploy = ToolCall(id="d1", name="deploy", arguments={"env": "staging"})
    msgs += [
        Message.assistant("", tool_calls=[deploy]),
        result('{"url": "https://preview.example.dev/r/42", "status": "live"}', "d1"),
    ]
    said = values(msgs)
    assert "rrrene/credo" not in said
    assert "https://preview.example.dev/r/42" in said


def test_a_tracker_id_says_which_item_it_is(store: Store, tmp_path: Path) -> None:
    """Run A: ``id: spotter-dov.1`` said nothing; the beads item's title and state do."""
    log = ClaudeLog()
    log.user("Work on bead shop-7q2.")
    created = "✓ Created issue: shop-7q2.5\n  Title: Totals drop the coupon\n  Status: open"
    log.bd('create --title="Totals drop the coupon" --type=bug', created)
    log.bd("update shop-7q2.5 --status in_progress", "✓ Updated")
    log.say("Fixed the totals for `shop-7q2.5`.")
    log.bd("close shop-7q2.5", "✓ Closed shop-7q2.5")
    filler(log)
    text = "\n".join(section(compacted(imported_plain(store, log, tmp_path)), "important_values"))
    assert "id: `shop-7q2.5` (beads item: Totals drop the coupon, closed)" in text


def trail_of(*messages: Message) -> Trail:
    return Trail().extend(numbered(list(messages)))


def test_a_formatters_banner_is_no_error_and_a_fix_run_settles_the_check() -> None:
    """Judge, run F: ``failed command: oxfmt --check ... -> Checking formatting...`` (a banner)
    stood after ``oxfmt`` had formatted the file and ``git diff --check`` ran clean."""
    output = (
        "Checking formatting...\n\nspecs/roles.md (218ms)\n\n"
        "Format issues found in above 1 files. Run without `--check` to fix.\n"
        "Finished in 240ms on 1 files using 10 threads.\n\n\nCommand exited with code 1"
    )
    assert error_lines(output) == [
        "Format issues found in above 1 files. Run without `--check` to fix."
    ]
    assert error_lines("Checking formatting...\n\nCommand exited with code 1") == []
    run = numbered(
        [
            Message.user("Format the spec."),
            bash("pnpm exec oxfmt --check specs/roles.md && git diff --check", "c1"),
            result(output, "c1", error=True),
            bash("pnpm exec oxfmt specs/roles.md && git diff --check", "c2"),
            result("Finished in 254ms on 1 files using 10 threads.", "c2"),
        ]
    )
    failing = Trail().extend(run[:3])
    assert [f.errors for f in failing.failures] == [
        ["Format issues found in above 1 files. Run without `--check` to fix."]
    ]
    assert failing.copy().extend(run[3:]).failures == []


def test_a_script_run_settles_the_same_commands_run_with_plumbing() -> None:
    """Run F: ``pnpm fix > log; status=$?; tail log; exit $status`` failed, then ``pnpm fix &&
    pnpm check`` ran clean, and the package manager's exit line was shown as the error."""
    output = (
        "src/index.ts:30:12: error typescript(strict-boolean-expressions): Unexpected value.\n"
        "Found 1 error.\n ELIFECYCLE  Command failed with exit code 1."
    )
    run = numbered(
        [
            Message.user("Fix the lint."),
            bash(
                "pnpm fix > /tmp/fix.log 2>&1; status=$?; tail -100 /tmp/fix.log; exit $status",
                "c1",
            ),
            result(output, "c1", error=True),
            bash("pnpm fix && pnpm check", "c2"),
            result("$ ultracite fix\nFinished.\n$ ultracite check\nAll good.\n", "c2"),
        ]
    )
    trail = Trail().extend(run[:3])
    (failure,) = trail.failures
    assert failure.errors[0].startswith("src/index.ts:30:12: error typescript")
    assert not any("ELIFECYCLE" in e for e in failure.errors)
    assert trail.extend(run[3:]).failures == []


CHAIN_OUTPUT = (
    "Exit code 1\n# entire.io/cli/cmd/entire/cli\n"
    "cmd/entire/cli/hooks.go:634:64: not enough arguments in call to InitializeSession\n"
    "\thave (string, string)\n\twant (string, string, string)"
)
"""Run C: ``git checkout X && go build ./...`` failed on a compile error; the error shown was
the package header ``# entire.io/cli``."""

SETTLING = [
    pytest.param(
        ("pnpm exec ultracite check --type-aware", "pnpm check"),
        "Failed to find tsgolint executable.\nCommand exited with code 1",
        "$ ultracite check --type-aware\nChecking formatting...\nAll good.\n",
        0,
        id="a package script echoing the command settles it",
    ),
    pytest.param(
        ("npm test", "cat README.md"),
        "1 failing\nCommand exited with code 1",
        "## Testing\n\n$ npm test\n",
        1,
        id="quoted commands in a file dump settle nothing",
    ),
    pytest.param(
        ("git checkout HEAD -- cmd/entire/cli/hooks.go && go build ./... 2>&1", "go build ./..."),
        CHAIN_OUTPUT,
        "",
        0,
        id="a chain's last command run clean settles the chain",
    ),
    pytest.param(
        ("mix test test/a_test.exs", "mix test test/b_test.exs"),
        "1 test, 1 failure\nExit code 1",
        "3 tests, 0 failures",
        1,
        id="another target does not settle a failure",
    ),
]


@pytest.mark.parametrize(("commands", "failed", "then", "left"), SETTLING)
def test_which_later_run_settles_a_failure(
    commands: tuple[str, str], failed: str, then: str, left: int
) -> None:
    first, second = commands
    trail = trail_of(
        Message.user("Do it."),
        bash(first, "c1"),
        result(failed, "c1", error=True),
        bash(second, "c2"),
        result(then, "c2"),
    )
    assert len(trail.failures) == left


def test_a_compile_error_is_shown_not_its_package_header() -> None:
    assert error_lines(CHAIN_OUTPUT)[0].startswith("cmd/entire/cli/hooks.go:634:64: not enough")


def test_an_error_a_later_clean_run_settled_is_no_value(store: Store, tmp_path: Path) -> None:
    """Run E: ``FileNotFoundError: ... 'exported-session.jsonl'`` stood as a value after the
    same command had run clean."""
    log = ClaudeLog()
    log.user("Export the session.")
    missing = "FileNotFoundError: [Errno 2] No such file or directory: 'exported-session.jsonl'"
    log.call(
        "Bash",
        {"command": "python3 export.py 019aad50"},
        f'Exit code 1\nTraceback (most recent call last):\n  File "export.py", line 5\n{missing}',
        error=True,
    )
    log.call(
        "Edit", {"file_path": "/home/dev/shop/export.py", "old_string": "a", "new_string": "b"}
    )
    log.call("Bash", {"command": "python3 export.py 019aad50"}, "wrote prompt_history.md")
    filler(log)
    text = "\n".join(section(compacted(imported_plain(store, log, tmp_path)), "important_values"))
    assert "FileNotFoundError" not in text


def test_an_encrypted_codex_item_states_the_records_size(tmp_path: Path) -> None:
    """Judge, run G: "encrypted by the provider, 51 characters" was the length of the
    sanitiser's placeholder, not of the 13,412 characters the record held."""
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "compaction",
            "encrypted_content": "[REDACTED_ENCRYPTED_CONTENT len=13412 sha=de3d60a6]",
        },
    ]
    (session,) = import_into(open_store("memory://"), rollout(tmp_path, history))
    (checkpoint,) = session.checkpoints()
    assert "13,412 characters" in checkpoint.summary
    assert "51 characters" not in checkpoint.summary
    (tmp_path / "plain").mkdir()
    (plain,) = import_into(
        open_store("memory://"),
        rollout(tmp_path / "plain", [{"type": "compaction", "encrypted_content": "x" * 2048}]),
    )
    assert "2,048 characters" in plain.checkpoints()[0].summary


@settings(max_examples=40, deadline=None)
@given(
    name=st.from_regex(r"[a-z]{2,8}(?:_[a-z]{2,6})?", fullmatch=True),
    sigil=st.sampled_from(["::", "@", ":", ".", "#", "--"]),
)
def test_a_name_behind_a_code_sigil_is_no_value(name: str, sigil: str) -> None:
    assert not worth_keeping(Value("identifier", sigil + name), 2)
    assert not worth_keeping(Value("identifier", name + ":"), 2)
