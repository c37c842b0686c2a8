"""Calls the person turned down, and edits that failed: they did nothing (issue 31).

The records are shaped like the shared transcripts: Claude Code writes a turned-down
call's result as "The user doesn't want to proceed with this tool use. The tool use was
rejected (eg. if it was a file edit, the new_string was NOT written to the file)..."
flagged ``is_error`` (with "To tell you how to proceed, the user said:" and the words
typed), a failed ``Edit`` as ``<tool_use_error>String to replace not found``; Pi flags
its ``edit`` failures ("Each oldText must be unique") ``isError``; Codex's
``apply_patch`` answers "apply_patch verification failed: ..." unflagged.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.bench_scripts import load_bench
from threadline.compaction.trail import build_trail
from threadline.messages import Message, ToolCall
from threadline.rejections import rejected, rejection_words
from threadline.requests import user_words

ROOT = "/home/dev/proj"
REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). "
)
STOP = REJECTED + "STOP what you are doing and wait for the user to tell you how to proceed."
SAID = REJECTED + "To tell you how to proceed, the user said:\n"


def said(words: str) -> str:
    return SAID + words


def test_rejections_are_recognised_by_their_opening() -> None:
    assert rejected(STOP) and rejection_words(STOP) is None  # a bare "no"
    words = "the interface is better no? We don't want if-else call site agent selection"
    assert rejection_words(said(words)) == words
    assert rejection_words("Error: " + said("keep it")) == "keep it"  # ``toolUseResult`` form
    assert rejected("patch rejected by user")  # Codex
    opencode = "The user rejected permission to use this specific tool call"
    assert rejected(opencode + ".") and rejection_words(opencode + ".") is None
    assert rejection_words(opencode + " with the following feedback: use pnpm") == "use pnpm"
    quoted = "cat notes.md\n# Notes\n" + said("this is a quote in a file")
    assert not rejected(quoted) and rejection_words(quoted) is None
    result = Message.tool(said("use the registry"), tool_call_id="c", metadata={"is_error": True})
    assert user_words(result) == "use the registry"
    assert user_words(Message.tool("ok", tool_call_id="c")) is None


# -- the trail -----------------------------------------------------------------------------


def edit(i: int, path: str, why: str = "") -> Message:
    call = ToolCall(
        id=f"c{i}", name="Edit", arguments={"file_path": path, "old_string": "a", "new_string": "b"}
    )
    return Message.assistant(why, tool_calls=[call])


OUTCOMES = {
    "ok": ("The file {path} has been updated successfully.", False),
    "rejected": (said("no, keep the helper"), True),
    "stopped": (STOP, True),
    "failed": ("<tool_use_error>String to replace not found in file.</tool_use_error>", True),
}


def result(i: int, path: str, outcome: str) -> Message:
    text, error = OUTCOMES[outcome]
    meta = {"is_error": True} if error else {}
    return Message.tool(text.format(path=path), tool_call_id=f"c{i}", name="Edit", metadata=meta)


def test_a_turned_down_or_failed_edit_is_no_edit() -> None:
    a, b = f"{ROOT}/a.go", f"{ROOT}/b.go"
    trail = build_trail(
        [
            Message.user("wire the agents", metadata={"cwd": ROOT}),
            edit(1, a, "Let me add the interface methods."),
            result(1, a, "ok"),
            edit(2, a, "Let me revert the interface change and add a helper instead."),
            result(2, a, "rejected"),
            edit(3, b, "Now the Gemini side."),
            result(3, b, "failed"),
        ]
    )
    files = trail.tracker.records
    assert set(files) == {a}  # b.go was never changed
    assert files[a].actions == {"edited": 1} and files[a].failed is None
    assert "revert" not in (files[a].note or "")  # the turned-down edit does not describe it
    assert files[a].note and "interface methods" in files[a].note
    assert trail.latest_request is not None and trail.latest_request[1] == "no, keep the helper"


def test_pi_and_codex_failures_write_nothing() -> None:
    pi = ToolCall(
        id="p", name="edit", arguments={"path": "src/o.ts", "oldText": "x", "newText": "y"}
    )
    patch = "*** Begin Patch\n*** Update File: src/app.js\n@@\n-a\n+b\n*** End Patch\n"
    codex = ToolCall(id="x", name="apply_patch", raw_arguments=patch)
    trail = build_trail(
        [
            Message.user("fix", metadata={"cwd": ROOT}),
            Message.assistant("", tool_calls=[pi]),
            Message.tool(
                "Found 2 occurrences of the text in src/o.ts. Each oldText must be unique.",
                tool_call_id="p",
                name="edit",
                metadata={"is_error": True},
            ),
            Message.assistant("", tool_calls=[codex]),
            Message.tool(
                "apply_patch verification failed: Failed to find expected lines in src/app.js",
                tool_call_id="x",
                name="apply_patch",
            ),
        ]
    )
    assert trail.tracker.records == {}


def test_a_patch_fed_to_a_shell_that_did_not_apply_writes_nothing() -> None:
    """Judges (run E): Codex's ``apply_patch`` through ``shell_command`` failed ("Exit code: 1",
    a shell profile's warning, then "Failed to find expected lines in index.js") and was
    retried; the window counted both as edits."""
    patch = "*** Begin Patch\n*** Update File: index.js\n@@\n-a\n+b\n*** End Patch\n"
    command = f"apply_patch <<'PATCH'\n{patch}PATCH"

    def shell(i: int) -> Message:
        call = ToolCall(id=f"s{i}", name="shell_command", arguments={"command": command})
        return Message.assistant("", tool_calls=[call])

    noise = (
        "/opt/homebrew/Library/Homebrew/cmd/shellenv.sh: line 18: /bin/ps: Operation not permitted"
    )
    head = "Wall time: 0.1 seconds\nOutput:\n" + noise
    failed = f"Exit code: 1\n{head}\nFailed to find expected lines in index.js:\na\n"
    applied = f"Exit code: 0\n{head}\nSuccess. Updated the following files:\nM index.js\n"
    trail = build_trail(
        [
            Message.user("add premoves", metadata={"cwd": ROOT}),
            shell(1),
            Message.tool(failed, tool_call_id="s1", name="shell_command"),
            shell(2),
            Message.tool(applied, tool_call_id="s2", name="shell_command"),
        ]
    )
    assert [rec.actions for rec in trail.tracker.records.values()] == [{"edited": 1}]


def test_a_turned_down_command_neither_fails_nor_settles() -> None:
    def run(i: int, command: str) -> Message:
        call = ToolCall(id=f"r{i}", name="Bash", arguments={"command": command})
        return Message.assistant("", tool_calls=[call])

    trail = build_trail(
        [
            Message.user("test it", metadata={"cwd": ROOT}),
            run(1, "go test ./..."),
            Message.tool(
                "Exit code 1\nFAIL x_test.go", tool_call_id="r1", metadata={"is_error": True}
            ),
            run(2, "go test ./..."),
            Message.tool(STOP, tool_call_id="r2", metadata={"is_error": True}),
            run(3, "rm -rf build"),
            Message.tool(STOP, tool_call_id="r3", metadata={"is_error": True}),
        ]
    )
    assert [f.command for f in trail.failures] == ["go test ./..."]  # still the real failure
    assert trail.last_clean == 0  # nothing ran clean
    assert f"{ROOT}/build" not in trail.tracker.records


@given(
    st.lists(
        st.tuples(st.sampled_from(["a.go", "b.go", "c.go"]), st.sampled_from(list(OUTCOMES))),
        max_size=12,
    )
)
def test_counts_are_the_edits_that_happened(steps: list[tuple[str, str]]) -> None:
    """Invariant: each file's count is its edits whose result shows they happened, and a
    file is listed exactly when at least one did."""
    messages = [Message.user("go", metadata={"cwd": ROOT})]
    for i, (name, outcome) in enumerate(steps):
        messages += [edit(i, f"{ROOT}/{name}"), result(i, f"{ROOT}/{name}", outcome)]
    files = build_trail(messages).tracker.records
    for name in ("a.go", "b.go", "c.go"):
        done = sum(1 for n, o in steps if n == name and o == "ok")
        rec = files.get(f"{ROOT}/{name}")
        assert (rec.count if rec else 0) == done


# -- the probe's own rule -----------------------------------------------------------------


def test_the_files_probe_leaves_out_edits_that_did_not_happen() -> None:
    write = ToolCall(id="w", name="Write", arguments={"file_path": "docs/tools.md", "content": "x"})
    shell = ToolCall(id="s", name="Bash", arguments={"command": "echo x > out.txt && make"})
    messages = [
        Message.user("go"),
        Message.assistant("", tool_calls=[write]),
        Message.tool(STOP, tool_call_id="w", metadata={"is_error": True}),
        edit(1, "src/a.go"),
        result(1, "src/a.go", "failed"),
        Message.assistant("", tool_calls=[shell]),
        Message.tool(
            "Exit code 2\nmake: *** [all] Error 1", tool_call_id="s", metadata={"is_error": True}
        ),
    ]
    probes = load_bench("probes")
    assert probes.edited_files(messages) == {"out.txt"}  # a failed shell command may have written
