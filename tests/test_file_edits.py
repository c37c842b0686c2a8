"""Which files a session changed, however its agent changed them, named once.

One test per edit mechanism (Codex ``apply_patch``, shell heredocs and
redirections, ``sed -i``, Claude Code's editors, ``str_replace_editor``,
SWE-agent's commands, Aider's log), then the working directory: paths shown
relative to it, one entry per file however it was written, and the importers
recording it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadline.compaction.toolcalls import (
    FileEdit,
    FileOp,
    call_file_ops,
    edited_files,
    patch_ops,
    shell_file_ops,
    swe_agent_ops,
)
from threadline.interop.importers import read_transcript
from threadline.messages import Message, ToolCall

ROOT = "/home/USER/proj"


def ops_of(ops: list[FileOp]) -> list[tuple[str, str]]:
    return [(op.action, op.path) for op in ops]


def call(name: str, raw: str | None = None, **arguments: object) -> ToolCall:
    return ToolCall(id=f"c-{name}", name=name, arguments=dict(arguments), raw_arguments=raw)


def session(*calls: ToolCall, cwd: str | None = ROOT) -> list[Message]:
    """Each call in its own assistant message, answered by an "ok"."""
    out = [Message.user("go", metadata={"cwd": cwd} if cwd else {})]
    for i, c in enumerate(calls):
        c = c.model_copy(update={"id": f"call-{i}"})
        out += [Message.assistant("", tool_calls=[c]), Message.tool("ok", tool_call_id=c.id)]
    return out


def summary(files: dict[str, FileEdit]) -> dict[str, str]:
    return {path: edit.describe() for path, edit in files.items()}


# -- apply_patch ---------------------------------------------------------------------

PATCH = (
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n@@ def run(job):\n-    return job\n+    return job.result()\n"
    "*** Add File: docs/usage.md\n+# Usage\n"
    "*** Update File: src/old_name.py\n*** Move to: src/new_name.py\n@@\n-a\n+b\n"
    "*** Delete File: src/legacy.py\n"
    "*** End Patch\n"
)


def test_codex_apply_patch_as_a_custom_tool() -> None:
    files = edited_files(session(call("apply_patch", raw=PATCH)))
    assert summary(files) == {
        "src/app.py": "edited",
        "docs/usage.md": "created",
        "src/old_name.py": "moved",
        "src/legacy.py": "deleted",
    }
    assert files["src/old_name.py"].other == "src/new_name.py"
    assert files["src/app.py"].symbols == ["run"]  # the @@ context names what changed


def test_apply_patch_through_a_shell_heredoc_and_a_command_list() -> None:
    heredoc = f"apply_patch <<'PATCH'\n{PATCH}PATCH"
    files = edited_files(
        session(
            call("exec_command", cmd=heredoc, workdir=f"{ROOT}/pkg"),
            call("shell", command=["apply_patch", PATCH]),
            call("shell_command", command=heredoc, workdir="."),
        )
    )
    assert "pkg/src/app.py" in files  # relative to the call's workdir
    assert files["src/app.py"].actions == {"edited": 2}  # the list form and the "." workdir
    assert "PATCH" not in " ".join(files)  # the heredoc's delimiter is no file


def test_a_heredoc_that_only_writes_a_patch_file_applies_nothing() -> None:
    ops = call_file_ops(call("Bash", command=f"cat > fix.diff <<'EOF'\n{PATCH}EOF"))
    assert ops_of(ops) == [("written", "fix.diff")]


def test_unified_diffs() -> None:
    diff = (
        "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@ class Parser:\n-a\n+b\n"
        "--- /dev/null\n+++ b/new.py\n@@\n+x\n--- a/gone.py\n+++ /dev/null\n@@\n-y\n"
    )
    ops = patch_ops(diff)
    assert ops_of(ops) == [("edited", "x.py"), ("created", "new.py"), ("deleted", "gone.py")]
    assert ops[0].symbols == ("Parser",)
    assert ops_of(call_file_ops(call("Bash", command=f"git apply <<'EOF'\n{diff}EOF"))) == ops_of(
        ops
    )


# -- shell ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi > notes.md", [("written", "notes.md")]),
        ("echo hi >> notes.md", [("edited", "notes.md")]),
        ("printf 'x' | tee out/a.txt b.txt", [("written", "out/a.txt"), ("written", "b.txt")]),
        ("make 2>&1 | tee -a build.log", [("edited", "build.log")]),
        ("cat > gen.py <<'EOF'\nprint(1 > 0)\nrm -rf /\nEOF", [("written", "gen.py")]),
        ("cat <<EOF > cfg/app.toml\nport = 1\nEOF", [("written", "cfg/app.toml")]),
        ("cmd > /dev/null 2>&1; cmd 2>/dev/null >&2", []),
        ("pytest -q > /tmp/out.log 2>&1; cat /tmp/out.log", []),
        ("cmd &> all.log; cmd 2> err.log", [("written", "all.log"), ("written", "err.log")]),
        ('echo "a > b" > "my file.txt"', [("written", "my file.txt")]),
        ("python -c 'print(1 > 0)'; awk '$3 > 5' data.csv", []),
        ("[[ $a > $b ]] && echo yes > flag.txt", [("written", "flag.txt")]),
        ('echo x > "$OUT"; echo y > $(mktemp)', []),
        ("sed -i 's/a/b/' src/x.py src/y.py", [("edited", "src/x.py"), ("edited", "src/y.py")]),
        ("sed -i.bak -e 's/a/b/' -e 's/c/d/' conf.ini", [("edited", "conf.ini")]),
        ("sed -i '' 's/a/b/' mac.txt", [("edited", "mac.txt")]),
        ("sed -n '1,20p' src/x.py", []),
        ("perl -pi -e 's/a/b/' lib/a.pm", [("edited", "lib/a.pm")]),
        (
            "rm -f a.txt b.txt && rm -rf node_modules build",
            [("deleted", "a.txt"), ("deleted", "b.txt")],
        ),
        ("git rm old.py", [("deleted", "old.py")]),
        ("git checkout -- src/a.py", [("reverted", "src/a.py")]),
        ("mv a.py src/", [("moved", "a.py")]),
        ("cp template.env .env", [("copied", ".env")]),
        ("touch src/__init__.py", [("created", "src/__init__.py")]),
        ("for f in *.py; do sed -i 's/a/b/' $f; done", []),
        ("mix test test/file_1_test.exs 2>&1 | tail -20", []),
        ("grep -rn 'x > 1' src | head", []),
        ("git commit -m \"$(cat <<'EOF'\nfix: a > b\nEOF\n)\"", []),
    ],
)
def test_shell_commands(command: str, expected: list[tuple[str, str]]) -> None:
    assert ops_of(shell_file_ops(command)) == expected


def test_shell_moves_copies_and_cd() -> None:
    ops = shell_file_ops("mv a.py src/ && cp -r template/ proj2 && cd web && echo x > out.txt")
    assert [(op.action, op.path, op.other, op.base) for op in ops] == [
        ("moved", "a.py", "src/a.py", None),
        ("copied", "proj2", "template/", None),
        ("written", "out.txt", None, "web"),
    ]
    files = edited_files(session(call("Bash", command="cd web && echo x > out.txt")))
    assert list(files) == ["web/out.txt"]


# -- editor tools --------------------------------------------------------------------


def test_claude_code_editors() -> None:
    files = edited_files(
        session(
            call("Write", file_path=f"{ROOT}/src/a.py", content="def x(): pass"),
            call("Edit", file_path=f"{ROOT}/src/a.py", old_string="def x", new_string="def y"),
            call("MultiEdit", file_path=f"{ROOT}/src/b.py", edits=[{"new_string": "class B:"}]),
            call("NotebookEdit", notebook_path=f"{ROOT}/nb/explore.ipynb", new_source="x = 1"),
            call("Read", file_path=f"{ROOT}/README.md"),
            call("Grep", pattern="TODO", path=f"{ROOT}/src"),
        )
    )
    assert summary(files) == {
        "src/a.py": "written, edited",
        "src/b.py": "edited",
        "nb/explore.ipynb": "edited",
    }
    assert files["src/a.py"].symbols == ["x", "y"]
    assert files["src/b.py"].symbols == ["B"]


def test_a_write_that_created_the_file_says_created() -> None:
    msgs = [
        Message.assistant("", tool_calls=[call("Write", file_path="new.py", content="x")]),
        Message.tool("File created successfully at: new.py", tool_call_id="c-Write"),
    ]
    assert summary(edited_files(msgs)) == {"new.py": "created"}


def test_a_failed_edit_changes_nothing_and_is_marked_until_one_succeeds() -> None:
    edit = call("Edit", file_path="a.py", old_string="x", new_string="y")
    failed = Message.tool("Error: String to replace not found", tool_call_id=edit.id)
    failed.metadata["is_error"] = True

    def ok() -> list[Message]:
        return [Message.assistant("", tool_calls=[edit]), Message.tool("ok", tool_call_id=edit.id)]

    msgs = [Message.assistant("", tool_calls=[edit]), failed]
    assert "a.py" not in edited_files(msgs)  # only ever failed: never changed
    msgs = [*ok(), *msgs]
    assert edited_files(msgs)["a.py"].failed == "Error: String to replace not found"
    assert edited_files(msgs)["a.py"].count == 1
    msgs += ok()
    assert edited_files(msgs)["a.py"].failed is None
    assert edited_files(msgs)["a.py"].count == 2


def test_str_replace_editor_commands() -> None:
    def editor(command: str, path: str) -> ToolCall:
        return call("str_replace_editor", command=command, path=path, old_str="a", new_str="b")

    files = edited_files(
        session(
            editor("create", "/workspace/repo/reproduce.py"),
            editor("str_replace", "/workspace/repo/src/parser.c"),
            editor("insert", "/workspace/repo/src/parser.c"),
            editor("view", "/workspace/repo/src/lexer.c"),
            editor("undo_edit", "/workspace/repo/src/lexer.h"),
            cwd="/workspace/repo",
        )
    )
    assert summary(files) == {
        "reproduce.py": "created",
        "src/parser.c": "edited ×2",
        "src/lexer.h": "edited",
    }


def test_swe_agent_function_calls_edit_the_open_file() -> None:
    msgs: list[Message] = [Message.user("fix it", metadata={"cwd": "/testbed"})]
    steps = [
        (
            call("open", path="src/fields.py"),
            "[File: src/fields.py]\n(Open file: /testbed/src/fields.py)",
        ),
        (call("edit", search="x", replace="y"), "(Open file: /testbed/src/fields.py)"),
        (call("create", filename="reproduce.py"), "(Open file: /testbed/reproduce.py)"),
        (call("insert", text="print(1)"), "(Open file: /testbed/reproduce.py)"),
        (call("bash", command="rm reproduce.py"), "(Open file: /testbed/reproduce.py)"),
    ]
    for i, (c, observation) in enumerate(steps):
        c = c.model_copy(update={"id": f"s{i}"})
        msgs += [
            Message.assistant("", tool_calls=[c]),
            Message.tool(observation, tool_call_id=c.id),
        ]
    assert summary(edited_files(msgs)) == {
        "src/fields.py": "edited",
        "reproduce.py": "deleted (after created, edited)",
    }


def test_swe_agent_text_commands() -> None:
    msgs = [
        Message.user("fix it", metadata={"cwd": "/repo"}),
        Message.assistant("Open it.", metadata={"action": "open tests/missing_colon.py\n"}),
        Message.user(
            "[File: /repo/tests/missing_colon.py (10 lines total)]\n"
            "(Open file: /repo/tests/missing_colon.py)"
        ),
        Message.assistant(
            "Fix line 4.", metadata={"action": "edit 4:4\ndef f(a) -> int:\nend_of_edit\n"}
        ),
        Message.user("File updated.\n(Open file: /repo/tests/missing_colon.py)"),
        Message.assistant("Add a script.", metadata={"action": "create printenv.pl\n"}),
        Message.user("(Open file: /repo/printenv.pl)"),
        Message.assistant("Log it.", metadata={"action": "echo done > status.txt\n"}),
    ]
    assert summary(edited_files(msgs)) == {
        "tests/missing_colon.py": "edited",
        "printenv.pl": "created",
        "status.txt": "written",
    }
    assert ops_of(swe_agent_ops("edit 1:1\nrm -rf /\nend_of_edit", open_file="a.py")) == [
        ("edited", "a.py")
    ]


def test_aider_applied_edits() -> None:
    notes = [
        "Tokens: 3.7k sent, 2.2k received.",
        "backend/app.py",
        "Create new file? (Y)es/(N)o [Yes]: y",
        "Applied edit to backend/app.py",
        "Applied edit to backend\\db.py",
    ]
    msgs = [Message.assistant("Here are the files.", metadata={"aider_notes": notes})]
    assert summary(edited_files(msgs)) == {
        "backend/app.py": "created, edited",
        "backend/db.py": "edited",
    }


# -- the working directory -----------------------------------------------------------


def test_paths_are_relative_to_the_working_directory_and_named_once() -> None:
    files = edited_files(
        session(
            call("Edit", file_path=f"{ROOT}/lib/a.ex", old_string="a", new_string="b"),
            call("Bash", command="sed -i 's/a/b/' lib/a.ex"),
            call("Bash", command="echo x >> ./lib/a.ex"),
            call("Write", file_path=f"{ROOT}/../other/b.ex", content="x"),
        )
    )
    assert summary(files) == {"lib/a.ex": "edited ×3", "/home/USER/other/b.ex": "written"}


def test_the_root_stays_while_the_shell_moves_inside_the_project() -> None:
    msgs = session(call("Edit", file_path=f"{ROOT}/assets/js/app.js", old_string="a"))
    msgs += [Message.user("again", metadata={"cwd": f"{ROOT}/assets"})]
    msgs += session(call("Bash", command="echo x > build.js"), cwd=None)[1:]
    msgs += [Message.user("and", metadata={"cwd": "/home/USER"})]
    msgs += session(call("Edit", file_path=f"{ROOT}/mix.exs", old_string="a"), cwd=None)[1:]
    assert list(edited_files(msgs)) == ["assets/js/app.js", "assets/build.js", "mix.exs"]
    moved = [Message.user("elsewhere", metadata={"cwd": "/srv/other"})]
    moved += session(call("Edit", file_path="/srv/other/x.py", old_string="a"), cwd=None)[1:]
    assert list(edited_files(msgs + moved))[-1] == "x.py"  # an unrelated project: a new root


def test_without_a_working_directory_an_absolute_path_ends_in_its_relative_one() -> None:
    files = edited_files(
        session(
            call("Edit", file_path=f"{ROOT}/lib/a.ex", old_string="a"),
            call("Bash", command="sed -i 's/a/b/' lib/a.ex"),
            cwd=None,
        )
    )
    assert summary(files) == {"lib/a.ex": "edited ×2"}
    assert list(edited_files(session(call("Bash", command="touch a.ex"), cwd=None), cwd=ROOT)) == [
        "a.ex"
    ]


# -- the importers record it ---------------------------------------------------------


def _jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_claude_code_lines_give_the_cwd_when_it_changes(tmp_path: Path) -> None:
    def line(n: int, cwd: str, role: str = "user") -> dict[str, object]:
        return {
            "type": role,
            "uuid": f"u{n}",
            "sessionId": "s",
            "cwd": cwd,
            "message": {"role": role, "content": f"message {n}"},
        }

    path = _jsonl(
        tmp_path / "s.jsonl",
        [line(1, ROOT), line(2, ROOT, "assistant"), line(3, f"{ROOT}/assets"), line(4, ROOT)],
    )
    assert [m.metadata.get("cwd") for m in read_transcript(path)] == [
        ROOT,
        None,
        f"{ROOT}/assets",
        ROOT,
    ]


def test_codex_session_meta_and_turn_context_give_the_cwd(tmp_path: Path) -> None:
    def item(role: str, text: str) -> dict[str, object]:
        kind = "input_text" if role == "user" else "output_text"
        return {
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        }

    path = _jsonl(
        tmp_path / "rollout.jsonl",
        [
            {"type": "session_meta", "payload": {"id": "x", "cwd": ROOT}},
            item("user", "hi"),
            {"type": "turn_context", "payload": {"cwd": ROOT, "model": "m"}},
            item("assistant", "hello"),
            {"type": "turn_context", "payload": {"cwd": "/srv/other", "model": "m"}},
            item("user", "move"),
        ],
    )
    assert [m.metadata.get("cwd") for m in read_transcript(path)] == [ROOT, None, "/srv/other"]


def test_swe_agent_and_openhands_give_the_repository_root(tmp_path: Path) -> None:
    traj = {
        "history": [
            {"role": "system", "content": "You are a programmer."},
            {"role": "user", "content": "fix it"},
        ],
        "trajectory": [{"action": "ls", "state": json.dumps({"working_dir": "/testbed"})}],
        "info": {},
    }
    (tmp_path / "run.traj").write_text(json.dumps(traj), encoding="utf-8")
    assert read_transcript(tmp_path / "run.traj")[0].metadata["cwd"] == "/testbed"
    events = [
        {"id": 0, "action": "message", "source": "user", "args": {"content": "fix it"}},
        {"id": 1, "action": "run", "source": "agent", "args": {"command": "ls"}},
        {
            "id": 2,
            "observation": "run",
            "cause": 1,
            "content": "a.c",
            "extras": {"metadata": {"working_dir": "/workspace/repo"}},
        },
    ]
    (tmp_path / "events.json").write_text(json.dumps(events), encoding="utf-8")
    messages = read_transcript(tmp_path / "events.json")
    assert messages[0].metadata["cwd"] == "/workspace/repo"
    assert [m.metadata.get("cwd") for m in messages[1:]] == [None, None]


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        pytest.param(
            "func SanitizePathForGemini(p string) string {\n\treturn p\n}\n",
            "func SanitizePathForGemini(p string) string {\n\treturn p\n}\n\n"
            "func (g *Gemini) GetTranscriptPosition(path string) (int, error) {\n",
            ("GetTranscriptPosition",),
            id="a definition added after an anchor names the added one (run C)",
        ),
        pytest.param(
            "def total(cart):\n    return sum(cart)\n",
            "def total(cart):\n    return round(sum(cart), 2)\n",
            ("total",),
            id="a body changed names its function",
        ),
    ],
)
def test_an_edit_names_the_definitions_it_changed(
    old: str, new: str, named: tuple[str, ...]
) -> None:
    ops = call_file_ops(call("Edit", file_path="/w/a.go", old_string=old, new_string=new))
    assert ops[0].symbols == named
