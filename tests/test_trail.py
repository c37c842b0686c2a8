"""The artifact trail: what a run changed, failed, reused and closed, from its stored messages.

Each agent format's tool schema is exercised as the format writes it (Claude Code,
Codex, OpenCode, OpenHands, Pi, Gemini CLI), then the properties: a random sequence of
edits, moves and deletes gives a Files Modified that names exactly the files touched,
once each, the deleted ones as deleted; a trail carried through checkpoint metadata in
any number of pieces equals the trail of one pass.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.compaction.ledger import CLOSED, STATUS
from threadline.compaction.reconcile import reconcile
from threadline.compaction.snapshot import Snapshot, SummaryResult, code_spans, parse
from threadline.compaction.trail import (
    TRAIL_KEY,
    Trail,
    build_trail,
    error_lines,
    exit_status,
    item_changes,
    mentions,
)
from threadline.messages import Message, ToolCall

ROOT = "/home/dev/proj"


def numbered(messages: list[Message]) -> list[Message]:
    for i, m in enumerate(messages, 1):
        m.seq = i
    return messages


def run(
    *steps: tuple[str, dict[str, object]] | tuple[str, dict[str, object], str], **kw: object
) -> list[Message]:
    """A session of tool calls ``(name, arguments[, result])``, each answered ("ok")."""
    out = [Message.user("go", metadata={"cwd": ROOT})]
    for i, step in enumerate(steps):
        name, args = step[0], step[1]
        result = step[2] if len(step) > 2 else "ok"  # type: ignore[misc]
        call = ToolCall(id=f"c{i}", name=name, arguments=dict(args))
        out += [
            Message.assistant("", tool_calls=[call]),
            Message.tool(str(result), tool_call_id=call.id),
        ]
    return numbered(out)


def files_of(trail: Trail) -> dict[str, str]:
    return {p: rec.describe() for p, rec in trail.tracker.files(mentioned=False).items()}


def empty_summary() -> SummaryResult:
    text = Snapshot().render()
    return SummaryResult.counted(text, Snapshot(), [], summarizer="test")


# -- each format's schema ----------------------------------------------------------------


def test_claude_code_editors_and_shell() -> None:
    trail = build_trail(
        run(
            ("Write", {"file_path": f"{ROOT}/src/a.py", "content": "x = 1"}),
            ("Edit", {"file_path": f"{ROOT}/src/a.py", "old_string": "x", "new_string": "y"}),
            ("MultiEdit", {"file_path": f"{ROOT}/src/b.py", "edits": [{"new_string": "z"}]}),
            ("NotebookEdit", {"notebook_path": f"{ROOT}/nb.ipynb", "new_source": "1"}),
            ("Bash", {"command": "rm src/old.py && git rm -q docs/gone.md"}),
            ("Bash", {"command": "mv src/b.py src/c.py"}),
            ("Read", {"file_path": f"{ROOT}/README.md"}),
        )
    )
    assert files_of(trail) == {
        "src/a.py": "written, edited",
        "src/b.py": "edited, moved",
        "nb.ipynb": "edited",
        "src/old.py": "deleted",
        "docs/gone.md": "deleted",
    }
    assert trail.tracker.files()["src/b.py"].other == "src/c.py"


def test_codex_apply_patch_free_form_and_through_the_shell() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: src/new.rs\n+fn main() {}\n"
        "*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Delete File: src/dead.rs\n*** End Patch\n"
    )
    messages = [Message.user("go", metadata={"cwd": ROOT})]
    custom = ToolCall(id="p", name="apply_patch", raw_arguments=patch)
    shell = ToolCall(
        id="s",
        name="shell",
        arguments={
            "command": ["bash", "-lc", f"apply_patch <<'EOF'\n{patch.replace('src/', 'app/')}EOF"]
        },
    )
    messages += [
        Message.assistant("", tool_calls=[custom]),
        Message.tool("Success. Updated the following files", tool_call_id="p"),
        Message.assistant("", tool_calls=[shell]),
        Message.tool("Process exited with code 0", tool_call_id="s"),
    ]
    files = files_of(build_trail(numbered(messages)))
    for where in ("src", "app"):
        assert files[f"{where}/new.rs"] == "created"
        assert files[f"{where}/lib.rs"] == "edited"
        assert files[f"{where}/dead.rs"] == "deleted"


def test_codex_code_mode_exec_scripts() -> None:
    """Codex's ``exec`` tool runs JavaScript: its nested calls are what it changes."""
    patch = "*** Begin Patch\n*** Update File: go/main.go\n@@\n-a\n+b\n*** End Patch"
    script = (
        f"const patch = {json.dumps(patch)};\ntext(await tools.apply_patch(patch));\n"
        'const r = await tools.exec_command({cmd:"rm -f docs/old.md && echo \\"x\\" > '
        'notes.txt","workdir":"/home/dev/proj","yield_time_ms":1000}); text(r.output);\n'
    )
    messages = [Message.user("go", metadata={"cwd": ROOT})]
    call = ToolCall(id="x", name="exec", raw_arguments=script)
    messages += [Message.assistant("", tool_calls=[call]), Message.tool("done", tool_call_id="x")]
    trail = build_trail(numbered(messages))
    assert files_of(trail) == {
        "go/main.go": "edited",
        "docs/old.md": "deleted",
        "notes.txt": "written",
    }
    closing = 'await tools.exec_command({cmd:"bd close web-9k2.1","workdir":"/home/dev/proj"});'
    call = ToolCall(id="y", name="exec", raw_arguments=closing)
    messages = [Message.assistant("", tool_calls=[call]), Message.tool("Closed", tool_call_id="y")]
    assert set(build_trail(numbered(messages)).closed) == {"web-9k2.1"}


def test_opencode_pi_gemini_and_openhands_schemas() -> None:
    patch = "*** Begin Patch\n*** Update File: web/app.ts\n@@\n-a\n+b\n*** End Patch"
    trail = build_trail(
        run(
            # OpenCode: camelCase arguments, a patch tool holding patchText
            ("edit", {"filePath": f"{ROOT}/oc/edit.ts", "oldString": "a", "newString": "b"}),
            ("write", {"filePath": f"{ROOT}/oc/new.ts", "content": "export {}"}),
            ("patch", {"patchText": patch}),
            # Pi: path, oldText / newText
            ("edit", {"path": "pi/mod.py", "oldText": "def a", "newText": "def b"}),
            # Gemini CLI
            ("write_file", {"file_path": f"{ROOT}/gem/out.md", "content": "# x"}),
            (
                "replace",
                {"file_path": f"{ROOT}/gem/cfg.toml", "old_string": "1", "new_string": "2"},
            ),
            ("run_shell_command", {"command": "rm gem/tmp.txt"}),
            # OpenHands (V0 str_replace_editor, V1 file_editor)
            (
                "str_replace_editor",
                {"command": "create", "path": f"{ROOT}/oh/a.py", "file_text": "x"},
            ),
            (
                "file_editor",
                {
                    "command": "str_replace",
                    "path": f"{ROOT}/oh/a.py",
                    "old_str": "x",
                    "new_str": "y",
                },
            ),
            ("str_replace_editor", {"command": "view", "path": f"{ROOT}/oh/b.py"}),
            ("execute_bash", {"command": "echo done > oh/log.txt"}),
        )
    )
    assert files_of(trail) == {
        "oc/edit.ts": "edited",
        "oc/new.ts": "written",
        "web/app.ts": "edited",
        "pi/mod.py": "edited",
        "gem/out.md": "written",
        "gem/cfg.toml": "edited",
        "gem/tmp.txt": "deleted",
        "oh/a.py": "created, edited",
        "oh/log.txt": "written",
    }


def test_todo_tools_of_each_format_give_the_latest_state() -> None:
    for name, key, text_key in (
        ("TodoWrite", "todos", "content"),
        ("todowrite", "todos", "content"),
        ("update_plan", "plan", "step"),
        ("write_todos", "todos", "description"),
    ):
        first = [
            {text_key: "Parse", "status": "in_progress"},
            {text_key: "Test", "status": "pending"},
        ]
        later = [
            {text_key: "Parse", "status": "completed"},
            {text_key: "Test", "status": "in_progress"},
        ]
        trail = build_trail(run((name, {key: first}), (name, {key: later})))
        assert trail.todos is not None, name
        assert trail.todos.items == [("Parse", "completed"), ("Test", "in_progress")], name
        assert files_of(trail) == {}, name  # a todo list is no file


# -- failures, closures, reuse -------------------------------------------------------------


def test_a_failure_is_kept_with_its_error_lines_until_the_command_runs_clean() -> None:
    pytest_out = (
        "Exit code 1\n============ FAILURES ============\n"
        "FAILED tests/test_a.py::test_x - AssertionError: 1 != 2\n"
        "============ 1 failed, 3 passed in 0.2s ============"
    )
    trail = build_trail(
        run(
            ("Bash", {"command": "pytest -q"}, pytest_out),
            ("Bash", {"command": "git push"}, "fatal: no upstream\nProcess exited with code 128"),
        )
    )
    assert [f.command for f in trail.failures] == ["pytest -q", "git push"]
    assert trail.failures[0].errors == [
        "FAILED tests/test_a.py::test_x - AssertionError: 1 != 2",
        "============ 1 failed, 3 passed in 0.2s ============",
    ]
    again = build_trail(
        run(
            ("Bash", {"command": "pytest -q"}, pytest_out),
            ("Bash", {"command": "pytest -q"}, "4 passed"),
        )
    )
    assert again.failures == []


def test_exit_status_and_error_lines() -> None:
    assert exit_status("Chunk ID: 1\nWall time: 0.1s\nProcess exited with code 2\nOutput:\n") == 2
    assert exit_status('{"output": "", "exit_code": 0}') == 0
    assert exit_status("all good") is None
    assert error_lines("Exit code 3\nsomething odd") == ["something odd"]


@given(st.sampled_from(sorted(STATUS)))
def test_a_status_flag_reads_on_the_ledgers_scale(word: str) -> None:
    """``--status S`` closes or reopens exactly as the ledger's scale says S does."""
    assert item_changes(f"tracker update PROJ-7 --status {word}") == [
        ("PROJ-7", STATUS[word] == CLOSED)
    ]


def test_closing_commands_and_commits_name_the_items_they_close() -> None:
    assert item_changes('bd close spotter-4te.4 spotter-4te.5 --reason "Done" 2>&1') == [
        ("spotter-4te.4", True),
        ("spotter-4te.5", True),
    ]
    assert item_changes("gh issue close 12 && gh issue reopen 13") == [("12", True), ("13", False)]
    assert item_changes(
        "tracker update PROJ-7 --status done; tracker update PROJ-8 --status=in_progress"
    ) == [
        ("PROJ-7", True),
        ("PROJ-8", False),
    ]
    commit = (
        "git add -A && git commit -m \"$(cat <<'EOF'\nfix: the parser (spotter-4te.3)\n\n"
        'Closes #41\nEOF\n)"'
    )
    assert item_changes(commit) == [("spotter-4te.3", True), ("41", True)]
    assert item_changes("bd show spotter-4te.4 && git log --oneline -3") == []
    # a close that failed closes nothing; a later reopen undoes a close
    trail = build_trail(
        run(
            ("Bash", {"command": "bd close a1b-x9.1"}, "Error: not found\nExit code 1"),
            ("Bash", {"command": "bd close a1b-x9.2"}),
            ("Bash", {"command": "bd close a1b-x9.3"}),
            ("Bash", {"command": "bd reopen a1b-x9.3"}),
        )
    )
    assert set(trail.closed) == {"a1b-x9.2"}


def test_mentions_are_whole_ids() -> None:
    closed = {"spotter-4te", "12"}
    assert mentions("spotter-4te.3 is open", closed) == []
    assert mentions("epic spotter-4te: done", closed) == ["spotter-4te"]
    assert mentions("see #12 and 120", closed) == ["12"]


def test_reused_values_count_messages_and_ids_inside_paths() -> None:
    uuid = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    trail = build_trail(
        run(
            ("Bash", {"command": f"cat ~/.claude/projects/x/{uuid}.jsonl | head"}),
            ("WebFetch", {"url": "https://docs.example.com/api"}),
            ("Bash", {"command": f"wc -l ~/.claude/projects/x/{uuid}.jsonl"}),
            ("Write", {"file_path": "cfg.py", "content": 'URL = "https://only.in/code"'}),
            ("Bash", {"command": 'echo url = "https://docs.example.com/api"'}),
        )
    )
    reused = dict(trail.reused())
    assert reused[uuid].count == 2 and reused[uuid].kind == "uuid"
    assert reused["https://docs.example.com/api"].count == 2
    assert "https://only.in/code" not in trail.used  # code the agent wrote is not a use


# -- properties ------------------------------------------------------------------------------

NAMES = [f"src/m{i}.py" for i in range(6)] + ["docs/guide.md", "cfg/app.toml"]


def op_call(kind: str, path: str, i: int) -> ToolCall:
    """One change to ``path`` in one of the formats' own schemas."""
    absolute = f"{ROOT}/{path}"
    if kind == "claude_edit":
        return ToolCall(
            id=f"k{i}",
            name="Edit",
            arguments={"file_path": absolute, "old_string": "a", "new_string": "b"},
        )
    if kind == "opencode_write":
        return ToolCall(id=f"k{i}", name="write", arguments={"filePath": absolute, "content": "x"})
    if kind == "codex_patch":
        patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch\n"
        return ToolCall(id=f"k{i}", name="apply_patch", raw_arguments=patch)
    if kind == "pi_edit":
        return ToolCall(
            id=f"k{i}", name="edit", arguments={"path": path, "oldText": "a", "newText": "b"}
        )
    if kind == "rm":
        return ToolCall(id=f"k{i}", name="Bash", arguments={"command": f"rm -f {path}"})
    if kind == "git_rm":
        return ToolCall(id=f"k{i}", name="shell", arguments={"command": ["git", "rm", path]})
    if kind == "codex_delete":
        patch = f"*** Begin Patch\n*** Delete File: {path}\n*** End Patch\n"
        return ToolCall(id=f"k{i}", name="apply_patch", raw_arguments=patch)
    raise AssertionError(kind)


DELETES = {"rm", "git_rm", "codex_delete"}
operations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "claude_edit",
                "opencode_write",
                "codex_patch",
                "pi_edit",
                "rm",
                "git_rm",
                "codex_delete",
            ]
        ),
        st.sampled_from(NAMES),
    ),
    min_size=1,
    max_size=30,
)


def session_of(ops: list[tuple[str, str]]) -> list[Message]:
    out = [Message.user("go", metadata={"cwd": ROOT})]
    for i, (kind, path) in enumerate(ops):
        call = op_call(kind, path, i)
        out += [Message.assistant("", tool_calls=[call]), Message.tool("ok", tool_call_id=call.id)]
    return numbered(out)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_files_modified_names_every_file_once_and_the_deleted_as_deleted(
    ops: list[tuple[str, str]],
) -> None:
    last = {path: kind for kind, path in ops}
    trail = build_trail(session_of(ops))
    text = reconcile(empty_summary(), trail, max_words=600).text
    bullets = [b.text for b in parse(text).files_modified]
    named = [path for b in bullets for path in code_spans(b)]
    assert sorted(named) == sorted(last)  # every file touched, once
    for path, kind in last.items():
        (bullet,) = [b for b in bullets if f"`{path}`" in b]
        deleted = bullet.startswith("Deleted:") or bullet.startswith(f"`{path}`: deleted")
        assert deleted == (kind in DELETES), (path, bullet)


@settings(max_examples=60, deadline=None)
@given(ops=operations, cuts=st.lists(st.integers(1, 60), max_size=4))
def test_a_trail_carried_in_pieces_equals_one_pass(
    ops: list[tuple[str, str]], cuts: list[int]
) -> None:
    messages = session_of(ops)
    whole = build_trail(messages)
    carried: Trail | None = None
    start = 0
    for cut in [*sorted({c for c in cuts if c < len(messages)}), len(messages)]:
        trail = carried.copy() if carried is not None else Trail()
        trail.extend(messages[start:cut])
        # through checkpoint metadata, as the next compaction finds it
        carried = Trail.from_metadata({TRAIL_KEY: trail.to_metadata()}[TRAIL_KEY])
        assert carried is not None
        start = cut
    assert carried is not None
    assert carried.to_metadata() == whole.to_metadata()


def test_unreadable_trail_metadata_is_ignored() -> None:
    assert Trail.from_metadata(None) is None
    assert Trail.from_metadata({"version": 99}) is None
    good = build_trail(run(("Write", {"file_path": "a.py", "content": "x"}))).to_metadata()
    assert Trail.from_metadata({**good, "files": {"files": {"a.py": {"actions": "bad"}}}}) is None
    assert Trail.from_metadata(good) is not None


@settings(max_examples=60, deadline=None)
@given(ops=operations, extra=st.lists(st.sampled_from(["out/log.jsonl", "notes.md"]), max_size=2))
def test_a_summarizer_s_line_of_names_adds_only_files_no_line_names_yet(
    ops: list[tuple[str, str]], extra: list[str]
) -> None:
    """The summarizer's own "Also changed:" line (its tracker's word) beside the trail's: a
    file both name is listed once (run E listed twelve SVG files twice)."""
    trail = build_trail(session_of(ops))
    names = [*{p: None for _, p in ops}, *dict.fromkeys(extra)]
    old = Snapshot()
    old.add("files_modified", "Also changed: " + ", ".join(f"`{n}`" for n in names), 1.0)
    summary = SummaryResult.counted(old.render(), old, [], summarizer="test")
    text = reconcile(summary, trail, max_words=600).text
    named = [p for b in parse(text).files_modified for p in code_spans(b.text)]
    assert sorted(named) == sorted(set(named))  # each once
    assert set(extra) <= set(named)  # only the summarizer knows these: still said
