"""A file the run wrote whole and ``git status`` calls untracked is one it created (issue
31, run F: ``oxfmt.config.ts`` written by Pi's ``write``, then edited, read as "edited")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.compaction.trail import build_trail
from threadline.compaction.untracked import untracked_paths
from threadline.messages import Message, ToolCall

LONG = (
    "On branch main\nChanges not staged for commit:\n"
    '  (use "git add <file>..." to update what will be committed)\n'
    "\tmodified:   package.json\n\n"
    "Untracked files:\n"
    '  (use "git add <file>..." to include in what will be committed)\n'
    "\toxfmt.config.ts\n\tnotes/\n\n"
    'no changes added to commit (use "git add" and/or "git commit -a")\n'
)


def test_short_and_long_git_status_forms() -> None:
    short = " M package.json\n D .oxfmtrc.json\n?? oxfmt.config.ts\n?? tools/\n"
    assert untracked_paths("git status --short", short) == ["oxfmt.config.ts"]
    assert untracked_paths("cd /w && git status", LONG) == ["oxfmt.config.ts"]
    assert untracked_paths("cat status.txt", "?? oxfmt.config.ts") == []  # not git's word


@given(st.lists(st.from_regex(r"[a-z]{1,8}\.(ts|md|json)", fullmatch=True), max_size=6))
def test_every_untracked_file_of_a_short_status_is_found(names: list[str]) -> None:
    text = "".join(f"?? {n}\n M src/{n}\n" for n in names)
    assert untracked_paths("git status -s", text) == names


def run(status: str) -> dict[str, dict[str, int]]:
    write = ToolCall(id="w1", name="write", arguments={"path": "oxfmt.config.ts", "content": "x"})
    over = ToolCall(id="w2", name="write", arguments={"path": "README.md", "content": "y"})
    edit = ToolCall(id="e1", name="edit", arguments={"path": "oxfmt.config.ts", "edits": []})
    git = ToolCall(id="g1", name="bash", arguments={"command": "git status --short"})
    messages = [
        Message.user("Use the ultracite config."),
        Message.assistant("", tool_calls=[write, over]),
        Message.tool("Successfully wrote 149 bytes to oxfmt.config.ts", tool_call_id="w1"),
        Message.tool("Successfully wrote 12 bytes to README.md", tool_call_id="w2"),
        Message.assistant("", tool_calls=[edit]),
        Message.tool("Successfully replaced 1 block(s) in oxfmt.config.ts.", tool_call_id="e1"),
        Message.assistant("", tool_calls=[git]),
        Message.tool(status, tool_call_id="g1"),
    ]
    for n, m in enumerate(messages, 1):
        m.seq = n
    return {p: r.actions for p, r in build_trail(messages, "/w").tracker.files().items()}


def test_a_written_file_git_calls_untracked_was_created_an_overwritten_one_was_not() -> None:
    files = run(" M README.md\n?? oxfmt.config.ts\n")
    assert files["oxfmt.config.ts"] == {"edited": 1, "created": 1}
    assert files["README.md"] == {"written": 1}  # tracked: it was there before
    assert run(" M README.md\n M oxfmt.config.ts\n")["oxfmt.config.ts"] == {
        "written": 1,
        "edited": 1,
    }
