"""What a run found and settled reaches the snapshot, and only what the messages say.

Records are shaped like Claude Code, Codex and Pi sessions (a cause the agent diagnosed,
a question answered after a look, a terse follow-up, a design restated on the person's
correction and then written, interface methods an edit added) and imported as a user would.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, imported, section
from threadline.compaction.findings import answers, findings, settled
from threadline.compaction.signatures import signatures
from threadline.interop.importers import import_file
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). To tell you how to proceed, "
    "the user said:\nno"
)
INTERFACE_OLD = "type Analyzer interface {\n\tAgent\n}"
INTERFACE_NEW = (
    "type Analyzer interface {\n\tAgent\n\n\t// Position returns the line count.\n"
    "\tPosition(path string) (int, error)\n}"
)


def messages(log: ClaudeLog, tmp_path: Path) -> list[Message]:
    return list(import_file(log.write(tmp_path / "run.jsonl")).messages)


def sync_run() -> ClaudeLog:
    log = ClaudeLog.asking("Review the sync code: will new messages in a session be synced?")
    log.call("Read", {"file_path": f"{CWD}/src/sync.ts"}, "export function sync() {}\n" * 5)
    log.say(
        "I found the root cause: the sync marks the whole session as processed, so messages "
        "added later are skipped on every cycle. If the problem is elsewhere we will see it."
    )
    log.user("is the store a json file?")
    log.say("Let me check.")
    log.call("Read", {"file_path": f"{CWD}/src/store.ts"}, "const FILE = 'state.json'\n")
    log.say("Yes, the store is one JSON file per session with a `syncState` object.")
    log.user("keep only the conversation id there, the last synced id is already in the list")
    log.say(
        "You're right! Just need to track the `conversationId`; the last entry of "
        "`processedIds` is the delta point. Let me simplify:"
    )
    log.call(
        "Edit",
        {
            "file_path": f"{CWD}/src/state.go",
            "old_string": INTERFACE_OLD,
            "new_string": INTERFACE_NEW,
        },
        f"The file {CWD}/src/state.go has been updated successfully.",
    )
    return log


def test_a_cause_the_agent_stated_is_found_and_a_hedge_is_not(tmp_path: Path) -> None:
    lines = [line.text for line in findings(messages(sync_run(), tmp_path))]
    assert len(lines) == 1
    assert lines[0].startswith("Found (#")
    assert "marks the whole session as processed" in lines[0]
    assert "elsewhere" not in lines[0]


def test_a_fixed_issue_is_no_finding() -> None:
    said = [Message.user("go"), Message.assistant("The issue is fixed now and all 12 tests pass.")]
    assert findings(said) == []


def test_a_question_keeps_the_answer_after_the_look(tmp_path: Path) -> None:
    lines = [line.text for line in answers(messages(sync_run(), tmp_path))]
    asked = [t for t in lines if t.startswith("Asked")]
    assert asked and '"is the store a json file?"' in asked[0]
    assert "one JSON file per session" in asked[0] and "Let me check" not in asked[0]


def test_a_terse_follow_up_names_the_reply_it_points_to(tmp_path: Path) -> None:
    log = ClaudeLog.asking("can the linter typecheck for us?")
    log.say("Yes, but it requires the `oxlint-tsgolint` dependency and the `--type-aware` flag.")
    log.user("add that dep")
    log.call("Bash", {"command": "pnpm add -D oxlint-tsgolint"}, "done")
    lines = [line.text for line in answers(messages(log, tmp_path))]
    follow = [t for t in lines if t.startswith("Request")]
    assert follow and '"add that dep"' in follow[0] and "the answer at" in follow[0]
    assert any("`oxlint-tsgolint`" in t for t in lines if t.startswith("Asked"))


def test_the_design_settled_on_a_correction_drops_the_narration(tmp_path: Path) -> None:
    line = settled(messages(sync_run(), tmp_path))
    assert line is not None
    assert line.text.startswith("Settled (#")
    assert "`conversationId`" in line.text and "Let me" not in line.text
    assert "keep only the conversation id" in line.text


def test_agreement_without_action_settles_nothing() -> None:
    said = [
        Message.user("use one file for both"),
        Message.assistant("You're right, one file for both metrics and conversations is simpler."),
        Message.user("thanks, stop here"),
    ]
    assert settled(said) is None


def test_signatures_come_from_edits_that_took_effect(tmp_path: Path) -> None:
    log = sync_run()
    turned = INTERFACE_NEW.replace("Position", "Rejected")
    args = {"file_path": f"{CWD}/src/x.go", "old_string": INTERFACE_OLD, "new_string": turned}
    log.call("Edit", args, REJECTED, error=True)
    doc = {"file_path": f"{CWD}/DESIGN.md", "content": "```go\nfunc Sketch(a int) error\n```\n"}
    log.call("Write", doc, "File created successfully")
    test = {"file_path": f"{CWD}/src/state_test.go", "content": "func helper(t int) error {\n}\n"}
    log.call("Write", test, "File created successfully")
    found = [s.bullet() for s in signatures(messages(log, tmp_path))]
    assert found == ["signature: `Position(path string) (int, error)` (written in src/state.go)"]


def test_a_codex_patch_and_a_pi_edit_are_read() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/rules.js\n@@\n-function old(a) {\n"
        "+export function makeMove(game, move) {\n+  return game;\n+}\n*** End Patch\n"
    )
    codex = ToolCall(id="call_1", name="apply_patch", raw_arguments=patch)
    pi_edit = {
        "path": "src/lint.py",
        "edits": [
            {"oldText": "x = 1", "newText": "def check(path: str) -> bool:\n    return True"}
        ],
    }
    pi = ToolCall(id="call_2", name="edit", arguments=pi_edit)
    said = [
        Message.user("go"),
        Message.assistant("", tool_calls=[codex]),
        Message.tool(
            "Success. Updated the following files:\nM src/rules.js", tool_call_id="call_1"
        ),
        Message.assistant("", tool_calls=[pi]),
        Message.tool("Successfully replaced text in src/lint.py.", tool_call_id="call_2"),
    ]
    texts = [s.text for s in signatures(said)]
    assert texts == ["def check(path: str) -> bool:", "export function makeMove(game, move)"]


def test_a_file_written_whole_declares_only_what_its_read_had_not_shown() -> None:
    """Judge 4, run A: a LiveView rewritten whole listed ``mount/3`` and ``extract_text/1``
    as written, though the read before showed both."""
    old = "defmodule R do\n  def extract_text(blocks) do\n    blocks\n  end\nend\n"
    new = old.replace("end\nend", "end\n\n  def to_relative_path(path, cwd) do\n  end\nend")
    read = ToolCall(id="r1", name="Read", arguments={"file_path": "/w/lib/r.ex"})
    write = ToolCall(id="w1", name="Write", arguments={"file_path": "/w/lib/r.ex", "content": new})
    numbered = "\n".join(f"{i + 1:6}\u2192{line}" for i, line in enumerate(old.splitlines()))
    said = [
        Message.user("go"),
        Message.assistant("", tool_calls=[read]),
        Message.tool(numbered, tool_call_id="r1"),
        Message.assistant("", tool_calls=[write]),
        Message.tool("The file /w/lib/r.ex has been updated.", tool_call_id="w1"),
    ]
    assert [s.text for s in signatures(said)] == ["def to_relative_path(path, cwd) do"]


def test_the_snapshot_states_what_was_found_and_settled(
    sqlite_store: Store, tmp_path: Path
) -> None:
    log = sync_run()
    for i in range(6):
        log.call("Read", {"file_path": f"{CWD}/docs/page{i}.md"}, "# page\n" * 30)
    log.user("now write the tests")
    log.say("Writing the tests now.")
    summary = compacted(imported(sqlite_store, log.write(tmp_path / "run.jsonl"), checkpoints=0))
    state = "\n".join(section(summary, "current_state"))
    assert "Found (#" in state and "marks the whole session as processed" in state
    assert any(d.startswith("Settled (#") for d in section(summary, "key_decisions"))
    values = "\n".join(section(summary, "important_values"))
    assert "`Position(path string) (int, error)`" in values


_WORDS = st.sampled_from(
    [
        "the",
        "problem",
        "is",
        "that",
        "cache",
        "never",
        "refreshes",
        "because",
        "root",
        "cause",
        "fails",
        "if",
        "fixed",
        "sync",
        "it",
        "was",
        "broken",
        "session",
        "state",
        "file",
    ]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_WORDS, min_size=3, max_size=16).map(" ".join), min_size=1, max_size=6))
def test_found_lines_quote_the_agent_only(sentences: list[str]) -> None:
    said = [Message.user("look")] + [Message.assistant(s.capitalize() + ".") for s in sentences]
    for line in findings(said):
        body = line.text.partition("): ")[2].removesuffix(" \u2026")
        assert said[line.seq - 1].role == "assistant"
        assert body.lower() in said[line.seq - 1].text.lower()


def test_private_helpers_and_fallback_clauses_are_no_signatures(tmp_path: Path) -> None:
    """Judges 3 and 4: ``defp tool_use_preview(_), do: ""`` listed as a value is noise; what
    the file keeps to itself (Elixir ``defp``, Go's lower-case names, Python's ``_x``, Rust
    without ``pub``) and a catch-all clause are not what a continuing engineer calls."""
    log = sync_run()
    body = (
        'defp tool_use_preview(_), do: ""\n'
        'def tool_use_preview(_), do: ""\n'
        "def render(messages, opts) do\n"
        "end\n"
    )
    log.call(
        "Write", {"file_path": f"{CWD}/lib/r.ex", "content": body}, "File created successfully"
    )
    go = "func helper(x int) int {\n}\nfunc (a *Agent) Count(path string) (int, error) {\n}\n"
    log.call("Write", {"file_path": f"{CWD}/src/a.go", "content": go}, "File created successfully")
    names = {s.name for s in signatures(messages(log, tmp_path))}
    assert {"render", "Count"} <= names
    assert not names & {"tool_use_preview", "helper"}


def test_a_cause_that_says_how_outranks_a_headline_of_the_same_message() -> None:
    """Judges (run D): "a fundamental flaw in conversation tracking" names the problem; the
    sentence after it saying what breaks what is what the next engineer must know."""
    report = (
        "CRITICAL ISSUE FOUND: both implementations have a fundamental flaw in conversation "
        "tracking.\n\n"
        "Conversation tracking: session-level tracking breaks incremental sync of messages "
        "added to a session."
    )
    lines = [line.text for line in findings([Message.user("review it"), Message.assistant(report)])]
    assert lines == [
        "Found (#2): Conversation tracking: session-level tracking breaks incremental sync of "
        "messages added to a session."
    ]
    alone = "Both implementations have a fundamental flaw in conversation tracking of sessions."
    lines = [line.text for line in findings([Message.user("review"), Message.assistant(alone)])]
    assert lines == [f"Found (#2): {alone}"]  # a headline alone is still a finding


def test_a_problem_line_of_a_report_is_a_cause_and_breaking_down_is_not() -> None:
    said = [
        Message.user("summarise"),
        Message.assistant("**Problem**: the filter runs once, so every processor gets one list."),
        Message.assistant("Next, this breaks down into three steps we can take one by one."),
        Message.assistant("Let me check whether the new filter breaks the existing sync tests."),
    ]
    lines = [line.text for line in findings(said)]
    assert lines == ["Found (#2): Problem: the filter runs once, so every processor gets one list."]
