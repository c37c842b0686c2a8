"""supyagent sessions (``.supyagent/sessions/<agent>/<id>.jsonl`` + ``_summary.json``):
import as a sync, the summary as a checkpoint, and export back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from threadline import ContextPolicy, build_context, open_store
from threadline.cli.app import app
from threadline.errors import ImportFormatError
from threadline.interop.importers import detect_format, import_sessions
from threadline.interop.supyagent import parse, summary_text, to_supyagent
from threadline.interop.sync import Syncer, SyncStatus, find_sources
from threadline.messages import Message

runner = CliRunner()

META = {
    "type": "meta",
    "session_id": "a1b2c3d4",
    "agent": "myagent",
    "model": "openai/gpt-4o",
    "title": "List all Python files",
    "created_at": "2025-01-15T10:30:00+00:00",
    "updated_at": "2025-01-15T10:31:05+00:00",
}
CALL = {
    "id": "call_abc",
    "type": "function",
    "function": {"name": "find__find_files", "arguments": '{"pattern": "*.py"}'},
}
LINES: list[dict[str, Any]] = [
    {"type": "user", "content": "List all Python files", "ts": "2025-01-15T10:30:00Z"},
    {
        "type": "assistant",
        "content": "I'll search for Python files.",
        "tool_calls": [CALL],
        "ts": "2025-01-15T10:30:02Z",
    },
    {
        "type": "tool_result",
        "tool_call_id": "call_abc",
        "name": "find__find_files",
        "content": '{"ok": true, "data": ["a.py"]}',
        "ts": "2025-01-15T10:30:03Z",
    },
    {"type": "assistant", "content": "I found 1 Python file.", "ts": "2025-01-15T10:30:04Z"},
    {"type": "user", "content": "Now count lines", "timestamp": "2025-01-15T10:31:00Z"},
    {"type": "assistant", "content": "a.py has 10 lines.", "ts": "2025-01-15T10:31:05Z"},
]
SUMMARY = {
    "content": "User asked for Python files; a.py was found.",
    "messages_summarized": 4,
    "first_message_idx": 0,
    "last_message_idx": 3,
    "created_at": "2025-01-15T10:30:30+00:00",
    "token_count": 12,
}


def write_session(root: Path, lines: list[dict[str, Any]], summary: Any = None) -> Path:
    folder = root / ".supyagent" / "sessions" / "myagent"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "a1b2c3d4.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [META, *lines]), encoding="utf-8")
    if summary is not None:
        (folder / "a1b2c3d4_summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (folder / "current.json").write_text('{"session_id": "a1b2c3d4"}', encoding="utf-8")
    return path


def test_session_and_summary_import_faithfully(tmp_path: Path) -> None:
    path = write_session(tmp_path, LINES, SUMMARY)
    assert detect_format(path) == "supyagent"
    store = open_store("memory://")
    report = Syncer(store).sync(find_sources([str(tmp_path / ".supyagent")]))
    statuses = sorted(r.status.value for r in report.results)
    assert statuses == ["new", "skipped", "skipped"]  # current.json and the summary file
    (result,) = [r for r in report.results if r.status is SyncStatus.NEW]
    session = store.get_session(result.session_id)
    meta = session.info.metadata
    assert meta["source_id"] == "myagent/a1b2c3d4" and meta["source_format"] == "supyagent"
    assert meta["source_created_at"] == "2025-01-15T10:30:00+00:00"
    assert meta["source_updated_at"] == "2025-01-15T10:31:05+00:00"
    assert session.model == "openai/gpt-4o" and session.title == "List all Python files"
    messages = session.messages()
    roles = [r["type"].replace("tool_result", "tool") for r in LINES]
    assert [m.role for m in messages] == roles
    call = messages[1].tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "call_abc",
        "find__find_files",
        {"pattern": "*.py"},
    )
    assert messages[2].name == "find__find_files" and messages[2].tool_call_id == "call_abc"
    assert messages[4].created_at.isoformat() == "2025-01-15T10:31:00+00:00"  # "timestamp"
    (cp,) = session.checkpoints()
    assert cp.covers_up_to == 4 and cp.summary == SUMMARY["content"]
    assert cp.metadata["native"] == "supyagent" and cp.metadata["last_message_idx"] == 3
    window = build_context(session, policy=ContextPolicy(context_limit=100_000))
    assert window.report.checkpoint_id == cp.id and window.report.first_seq == 5
    assert not any(m.seq is not None and m.seq <= 4 for m in window.messages if not m.summary)


def test_reimport_is_a_no_op_and_growth_appends(tmp_path: Path) -> None:
    path = write_session(tmp_path, LINES[:4])
    store = open_store("memory://")
    (first,) = Syncer(store).sync_source(find_sources([str(path)])[0])
    assert first.status is SyncStatus.NEW and first.messages_added == 4
    (again,) = Syncer(store).sync_source(find_sources([str(path)])[0])
    assert again.status is SyncStatus.UNCHANGED and again.session_id == first.session_id
    write_session(tmp_path, LINES, SUMMARY)  # two more lines, and a summary written
    (grown,) = Syncer(store).sync_source(find_sources([str(path)])[0])
    assert grown.status is SyncStatus.UPDATED
    assert (grown.messages_added, grown.checkpoints_added) == (2, 1)
    newer = {**SUMMARY, "last_message_idx": 5, "content": "Later summary."}
    write_session(tmp_path, LINES, newer)  # supyagent overwrites its one summary
    (later,) = Syncer(store).sync_source(find_sources([str(path)])[0])
    assert (later.status, later.messages_added, later.checkpoints_added) == (
        SyncStatus.UPDATED,
        0,
        1,
    )
    cps = store.get_session(first.session_id).checkpoints()
    assert [c.covers_up_to for c in cps] == [4, 6]


def test_layout_without_meta_line_and_structured_summary(tmp_path: Path) -> None:
    folder = tmp_path / "coder"
    folder.mkdir()
    path = folder / "e5f6g7h8.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in LINES[:2]), encoding="utf-8")
    (imported,) = import_sessions(path)
    assert imported.source_id == "coder/e5f6g7h8" and imported.source_format == "supyagent"
    text = summary_text({"Files Modified": ["a.py: added x"], "Current State": "testing"})
    assert text == "## Files Modified\n- a.py: added x\n\n## Current State\ntesting"


def test_a_summary_beyond_the_file_is_counted_not_applied(tmp_path: Path) -> None:
    parsed = parse(
        "".join(json.dumps(r) + "\n" for r in LINES[:2]),
        tmp_path / "x.jsonl",
        json.dumps({**SUMMARY, "last_message_idx": 9}),
    )
    assert parsed.skipped["summary_beyond_messages"] == 1
    assert not parsed.extra(0).get("compactions")


@pytest.mark.parametrize(
    ("summary", "needle"),
    [("{not json", "invalid JSON"), (json.dumps({"content": "x"}), "last_message_idx")],
)
def test_a_bad_summary_is_refused_naming_it(tmp_path: Path, summary: str, needle: str) -> None:
    with pytest.raises(ImportFormatError, match=needle) as info:
        parse(json.dumps(LINES[0]) + "\n", tmp_path / "s.jsonl", summary)
    assert "s_summary.json" in str(info.value)


def test_export_writes_the_layout_and_the_latest_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    path = write_session(tmp_path / "src", LINES, SUMMARY)
    assert runner.invoke(app, ["--store", url, "sessions", "import", str(path)]).exit_code == 0
    sid = open_store(url).list_sessions().items[0].id
    out = tmp_path / "out" / "exported.jsonl"
    out.parent.mkdir()
    done = runner.invoke(
        app, ["--store", url, "sessions", "export", sid, "-f", "supyagent", "-o", str(out)]
    )
    assert done.exit_code == 0, done.output
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "meta" and lines[0]["session_id"] == sid
    assert [x["type"] for x in lines[1:]] == [r["type"] for r in LINES]
    summary = json.loads((out.parent / "exported_summary.json").read_text(encoding="utf-8"))
    assert summary["last_message_idx"] == 3 and summary["content"] == SUMMARY["content"]
    (back,) = import_sessions(out)
    assert back.checkpoints[0]["covers_up_to"] == 4
    assert [m.text for m in back.messages] == [
        m.text for m in open_store(url).get_session(sid).messages()
    ]


def test_writer_keeps_timestamps_and_tool_results() -> None:
    messages = [
        Message.user("hi"),
        Message.assistant("", tool_calls=[]),
    ]
    text, summary = to_supyagent({"id": "s", "agent": "a"}, messages)
    assert summary is None
    records = [json.loads(x) for x in text.splitlines()]
    assert records[1]["ts"] == messages[0].created_at.isoformat()
