"""Through import and compaction: what a turned-down call and an earlier summary leave true.

Claude Code sessions shaped like the shared ``entire-cli`` transcript: the person turns
down the agent's edits and types their answer in the rejection; a native compaction's
summary says the build is broken and lists next steps, and the work after it builds
clean and completes the todo list. The new snapshot must take the typed words as the
latest request and as a correction (the turned-down approach is no decision), count
only the edits that happened, and give the present from the newer span (the earlier
summary's state dropped where the newer span overtook it, else dated as history).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_compaction_truth import ClaudeLog, compacted, imported, section
from threadline.store.protocol import Store

CWD = "/home/dev/shop"
REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). To tell you how to proceed, "
    "the user said:\n"
)
WORDS = "the interface is better no? We don't want if-else call site agent selection logic."


def edit(log: ClaudeLog, name: str, result: str = "", error: bool = False) -> None:
    path = f"{CWD}/{name}"
    done = result or f"The file {path} has been updated successfully."
    log.call("Edit", {"file_path": path, "old_string": "a", "new_string": "b"}, done, error)


def reads(log: ClaudeLog, n: int) -> None:
    for i in range(n):
        log.call("Read", {"file_path": f"{CWD}/docs/page{i}.md"}, "# page\n" * 40)


def turned_down_run() -> ClaudeLog:
    log = ClaudeLog()
    log.user("Add transcript position support to both agents.")
    edit(log, "agent/claude.go")
    log.say(
        "Rather than modifying the Agent interface, I'll add a helper function in the strategy "
        "package that dispatches based on agent type."
    )
    edit(log, "agent/agent.go", REJECTED + WORDS, error=True)
    log.say("Understood, I'll keep the interface and implement it on both agents.")
    edit(
        log,
        "agent/gemini.go",
        "<tool_use_error>String to replace not found in file.</tool_use_error>",
        error=True,
    )
    reads(log, 10)
    return log


def test_words_typed_in_a_rejection_are_the_latest_request_and_a_correction(
    sqlite_store: Store, tmp_path: Path
) -> None:
    text = compacted(
        imported(sqlite_store, turned_down_run().write(tmp_path / "run.jsonl"), checkpoints=0)
    )
    state = section(text, "current_state")
    latest = [s for s in state if s.startswith("Latest request")]
    assert latest and "the interface is better" in latest[0], state
    decisions = section(text, "key_decisions")
    assert not [d for d in decisions if "helper function" in d], decisions
    assert any(d.startswith("User") and "if-else call site" in d for d in decisions), decisions
    files = "\n".join(section(text, "files_modified"))
    assert "`agent/claude.go`: edited" in files and "×" not in files
    assert "agent.go`" not in files.replace("claude.go`", "")  # turned down: never changed
    assert "gemini.go" not in files  # failed: never changed
    assert "doesn't want to proceed" not in text


SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\nSummary:\n1. Primary Request and Intent:\n"
    "   Fix checkpoint id reuse.\n\n"
    "4. Errors and fixes:\n   - Fixed the import cycle by moving the position helper to agent.go\n"
    "   - Still seeing compilation errors from the stashed changes in hooks_gemini.go\n\n"
    "7. Pending Tasks:\n   - Add Agent interface methods for transcript analysis\n\n"
    "8. Current Work:\n   Working on getting the code to compile after `git stash pop`: there "
    "are compilation errors in hooks_gemini.go.\n\n"
    "9. Optional Next Step:\n   Get the code to compile, then:\n"
    "   1. Add interface methods to Agent for transcript analysis\n"
    "   2. Implement for both Claude and Gemini agents\n"
    "Please continue the conversation from where we left it off without asking the user any "
    "further questions."
)
TODOS = [
    {"content": "Add TranscriptAnalyzer interface to both agents", "activeForm": "Adding"},
    {"content": "Run tests and lint", "activeForm": "Running"},
]


def before_compaction() -> ClaudeLog:
    log = ClaudeLog()
    log.user("Fix checkpoint id reuse.")
    edit(log, "hooks_gemini.go")
    log.call(
        "Bash", {"command": "go build ./..."}, "Exit code 1\nhooks_gemini.go:4: undefined: x", True
    )
    log.compact(SUMMARY)
    return log


def test_the_newer_span_decides_the_present(sqlite_store: Store, tmp_path: Path) -> None:
    log = before_compaction()
    log.call("Bash", {"command": "go build ./..."}, "")
    edit(log, "agent/agent.go")
    todos = [{**t, "status": "completed"} for t in TODOS]
    log.call("TodoWrite", {"todos": todos}, "Todos have been modified successfully.")
    log.call("Bash", {"command": "go test ./..."}, "ok  \tshop/agent\t0.4s")
    reads(log, 10)
    text = compacted(imported(sqlite_store, log.write(tmp_path / "run.jsonl"), checkpoints=0))
    state, tasks = section(text, "current_state"), section(text, "pending_tasks")
    assert not [s for s in state if re.search(r"compilation errors|Working on getting", s)], state
    assert not [s for s in state + tasks if "Add interface methods to Agent" in s], state
    assert not [t for t in tasks if "Add Agent interface methods" in t], tasks
    decisions = section(text, "key_decisions")
    assert not [d for d in decisions if "Still seeing compilation errors" in d], decisions
    assert any("Fixed the import cycle" in d for d in decisions), decisions  # a fix stays true


def test_an_earlier_state_nothing_overtook_is_dated_history(
    sqlite_store: Store, tmp_path: Path
) -> None:
    log = before_compaction()
    edit(log, "agent/agent.go")
    reads(log, 10)
    text = compacted(imported(sqlite_store, log.write(tmp_path / "run.jsonl"), checkpoints=0))
    state = section(text, "current_state")
    carried = [s for s in state if "compilation errors" in s]
    assert carried and all(re.match(r"As of #\d+ \(earlier summary\): ", s) for s in carried)
    fresh = [i for i, s in enumerate(state) if s.startswith(("Last action", "Last result"))]
    assert fresh and max(fresh) < state.index(carried[0])  # below the newer state


def test_an_earlier_summarys_intent_stays_as_its_history(
    sqlite_store: Store, tmp_path: Path
) -> None:
    """Judges, run C: the goal Claude Code's earlier summary stated ("Primary Request and
    Intent") was nowhere once a later compaction ran over it."""
    log = before_compaction()
    log.user("let's stash and get the latest updates")
    edit(log, "agent/agent.go")
    reads(log, 10)
    session = imported(sqlite_store, log.write(tmp_path / "run.jsonl"), checkpoints=0)
    state = section(compacted(session), "current_state")
    assert re.match(
        r"Primary request \(earlier summary, #\d+\): .*Fix checkpoint id reuse", state[0]
    )
    assert state[1].startswith("First request (user, #")  # a step, not the task
    assert not any(s.endswith("the task: Fix checkpoint id reuse") for s in state)  # said once
    log.user("now run the tests")
    reads(log, 10)
    session = imported(sqlite_store, log.write(tmp_path / "run.jsonl"), checkpoints=0)
    again = section(compacted(session), "current_state")  # over threadline's own checkpoint
    assert re.match(
        r"Primary request \(earlier summary, #\d+\): .*Fix checkpoint id reuse", again[0]
    )
