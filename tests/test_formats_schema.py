"""Formats read by their schema (issue 22, point 1): what each tool writes that the
shared files show only in part, or not at all, built here from the tools' schemas or
from a real file changed the way another version of the tool writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import open_store
from threadline.interop.importers import import_sessions, read_transcript_runs
from threadline.interop.sync import Syncer, find_sources
from threadline.messages import group_units
from threadline.report.lineage import relation

CODEX = "codex/communique-parallel-019efb65.jsonl"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def is_user_item(r: dict[str, Any]) -> bool:
    p = r.get("payload") or {}
    return r["type"] == "response_item" and p.get("type") == "message" and p.get("role") == "user"


def test_codex_user_turns_only_in_events_are_imported_once(tmp_path: Path) -> None:
    """Codex Desktop writes a turn's input only as event_msg/user_message: the same
    rollout without its response_item user messages still has every request."""
    records = lines(require_shared(TRANSCRIPTS / CODEX))
    events = [
        r["payload"]["message"]
        for r in records
        if (r.get("payload") or {}).get("type") == "user_message"
    ]
    (full,) = import_sessions(write(tmp_path / "full.jsonl", records))
    assert not [m for m in full.messages if m.metadata.get("codex_event")]  # never both
    desktop = [r for r in records if not is_user_item(r)]
    (only_events,) = import_sessions(write(tmp_path / "desktop.jsonl", desktop))
    users = [m for m in only_events.messages if m.role == "user"]
    assert [m.text for m in users] == events
    assert only_events.title is not None and only_events.title.split()[0] in events[0]
    assert only_events.metadata.get("skipped", {}).get("event_msg:user_message") is None
    assert not group_units(only_events.messages)[1].orphans


def test_codex_resumed_session_keeps_its_first_start(tmp_path: Path) -> None:
    records = lines(
        require_shared(TRANSCRIPTS / "codex/mokiofactory-codex-desktop-websearch-019f4514.jsonl")
    )
    (session,) = import_sessions(write(tmp_path / "r.jsonl", records))
    metas = [r for r in records if r["type"] == "session_meta"]
    assert len(metas) == 2 and session.source_id == metas[0]["payload"]["id"]
    assert session.metadata["source_created_at"].startswith("2026-07-09T04:13")
    assert [e["event"] for e in session.metadata["events"]].count("session_resumed") == 1


LEGACY = [  # OpenHands resolver output (tests/unit/resolver/mock_output/output.jsonl shape)
    {
        "content": "Please fix the following issue for the repository in /workspace.\n"
        "# Problem Statement\nWe can license this repo under the MIT license.",
        "images_urls": None,
        "wait_for_response": False,
        "action": "message",
        "action_risk": None,
    },
    {
        "command": "touch LICENSE",
        "thought": "Let's start by creating the license file.",
        "keep_prompt": True,
        "action": "run",
        "is_confirmed": "confirmed",
        "action_risk": None,
    },
    {
        "content": "root@h:/workspace # ",
        "command_id": -1,
        "command": "touch LICENSE",
        "exit_code": 0,
        "observation": "run",
    },
    {
        "code": "open('LICENSE', 'w').write('MIT')",
        "thought": "Now the text.",
        "action": "run_ipython",
    },
    {
        "content": "[Jupyter current working directory: /workspace]",
        "code": "...",
        "observation": "run_ipython",
    },
    {"content": "Which year?", "wait_for_response": True, "action": "message"},
    {
        "content": "Please continue working on the task.",
        "wait_for_response": False,
        "action": "message",
    },
    {"outputs": {}, "thought": "The license is added.", "action": "finish"},
]


def test_openhands_resolver_output_keeps_task_thoughts_and_commands(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    path.write_text(
        json.dumps({"issue": {"number": 5}, "history": LEGACY, "success": True}) + "\n", "utf-8"
    )
    (s,) = import_sessions(path)
    assert [m.role for m in s.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert s.title is not None and s.title.startswith("Please fix the following issue")
    run, ipython = s.messages[1].tool_calls[0], s.messages[3].tool_calls[0]
    assert run.name == "run" and run.arguments["command"] == "touch LICENSE"
    assert ipython.arguments["code"] == "open('LICENSE', 'w').write('MIT')"
    assert s.messages[1].text == "Let's start by creating the license file."
    assert [m.tool_call_id for m in s.messages if m.role == "tool"] == [run.id, ipython.id]
    assert s.messages[5].text == "Which year?"  # the agent asked; the next message answers
    assert s.repairs == {"unanswered_call": 1}  # finish has no observation


def test_entire_compact_transcript(tmp_path: Path) -> None:
    rows = [
        {
            "v": 1,
            "agent": "codex",
            "cli_version": "0.5",
            "type": "user",
            "ts": "2026-03-01T10:00:00Z",
            "content": [{"id": "u1", "text": "add a LICENSE"}],
        },
        {
            "v": 1,
            "agent": "codex",
            "cli_version": "0.5",
            "type": "assistant",
            "ts": "",
            "id": "m1",
            "input_tokens": 10,
            "output_tokens": 3,
            "content": [
                {"type": "text", "text": "On it."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "write",
                    "input": {"path": "LICENSE"},
                    "result": {"output": "denied", "status": "error"},
                },
                {"type": "tool_use", "name": "write", "input": {"path": "LICENSE"}},
                {"type": "thinking", "thinking": "hidden"},
            ],
        },
        {"v": 1, "type": "assistant", "content": "Done."},
        {"v": 1, "type": "summary", "content": []},
    ]
    (s,) = import_sessions(write(tmp_path / "transcript.jsonl", rows))
    assert s.source_format == "entire" and s.metadata["source_agent"] == "codex"
    assert [m.role for m in s.messages] == ["user", "assistant", "tool", "assistant"]
    call, _ = s.messages[1].tool_calls
    assert s.messages[2].tool_call_id == call.id and s.messages[2].metadata["is_error"]
    assert s.messages[1].usage is not None and s.messages[1].usage.input_tokens == 10
    assert s.repairs == {"unanswered_call": 1}
    assert s.metadata["skipped"] == {"block:thinking": 1, "line:summary": 1}


def test_claude_code_prompts_taken_from_the_queue_mid_turn_are_kept() -> None:
    """Six prompts reached the model mid-turn and are written only as queue operations
    (the file's task notification is delivered as a turn of its own instead)."""
    path = require_shared(TRANSCRIPTS / "claude-code/ta93abe-me-ja-700k-tool-result.jsonl")
    (run,) = read_transcript_runs(path)
    queued = [i for i, m in enumerate(run) if m.metadata.get("queued")]
    assert [run[i].text for i in queued][:2] == [
        "md ではなく mdx にして。",
        "コードブロックのコピー機能をつけたい。",
    ]
    assert len(queued) == 6 and run[queued[-1]].text == "textlintは組み込みたい。"
    assert all(run[i + 1].role == "assistant" for i in queued)  # before the response it got
    _, report = group_units(run)
    assert not report.changed  # no tool chain was split to make room


def test_opencode_compaction_covers_what_came_before_the_kept_tail() -> None:
    path = require_shared(
        TRANSCRIPTS / "other/opencode-export-shui-ja-fork-compaction-ses_ff982d45.json"
    )
    (s,) = import_sessions(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    (cp,) = s.checkpoints
    tail = next(
        p["tail_start_id"]
        for m in data["messages"]
        for p in m["parts"]
        if p["type"] == "compaction"
    )
    first_kept = next(i for i, m in enumerate(s.messages) if m.metadata.get("source_uuid") == tail)
    assert cp["covers_up_to"] == first_kept and cp["summary"].startswith("## Objective")
    assert s.title == data["info"]["title"] and s.source_id == data["info"]["id"]
    assert sum(len(m.metadata.get("patch_files", [])) for m in s.messages) == sum(
        len(p["files"]) for m in data["messages"] for p in m["parts"] if p["type"] == "patch"
    )


def test_pi_branch_left_behind_is_a_linked_conversation() -> None:
    path = require_shared(TRANSCRIPTS / "other/pi-session-herdr-subagents-01a00acb.jsonl")
    main, branch = import_sessions(path)
    assert branch.metadata["parent_source_id"] == main.source_id
    assert branch.source_id == f"{main.source_id}/branch-3eb28a84"
    assert branch.title == "can you tell me the cost of this session?"
    texts = {m.text for m in main.messages}
    assert not any(m.text in texts for m in branch.messages if m.role == "user")


def test_a_pi_branch_left_behind_is_listed_as_a_side_branch_not_a_child(tmp_path: Path) -> None:
    path = require_shared(TRANSCRIPTS / "other/pi-session-herdr-subagents-01a00acb.jsonl")
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    Syncer(store).sync(find_sources([str(path)]))
    infos = store.list_sessions().items
    (top,) = [i for i in infos if i.parent_id is None]
    (branch,) = [i for i in infos if i.parent_id == top.id]
    assert relation(top) == "" and relation(branch) == "side branch"
    store.close()


def test_aider_replies_keep_every_edit_block_whole() -> None:
    path = require_shared(TRANSCRIPTS / "aider/verilog-simulasyonu-tr.aider.chat.history.md")
    text = path.read_text(encoding="utf-8")
    (run,) = read_transcript_runs(path)
    replies = [m for m in run if m.role == "assistant"]
    notes = [n for m in run for n in m.metadata.get("aider_notes", [])]
    marks = ("<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE")
    for mark in marks:
        kept = sum(m.text.count(mark) for m in replies) + sum(n.count(mark) for n in notes)
        assert kept == text.count(mark), mark
    for m in replies:  # each block opened in a reply is closed in it
        assert m.text.count("<<<<<<< SEARCH") == m.text.count(">>>>>>> REPLACE")
    assert sum(n.startswith("Tokens:") for n in notes) == text.count("\n> Tokens:")


def test_an_aider_reply_cut_by_the_output_limit_keeps_its_blocks_and_no_aider_line() -> None:
    """The reply of 28 SEARCH/REPLACE blocks whose last one the model's token limit cut:
    that block ends where the model stopped (aider's blank note lines ``>`` were read
    into its REPLACE side), the reply is marked cut short, the notes are aider's."""
    name = "aider/supplychaintracker2-es-architect.aider.chat.history.md"
    path = require_shared(TRANSCRIPTS / name)
    (run,) = read_transcript_runs(path)
    (reply,) = [m for m in run if m.role == "assistant" and m.text.count("<<<<<<< SEARCH") == 28]
    assert reply.text.count(">>>>>>> REPLACE") == 27  # the 28th was never finished
    assert reply.text.endswith("=======\nexport type"), reply.text[-80:]
    assert reply.metadata["aider_cut_short"] is True
    assert any("has hit a token limit!" in n for n in reply.metadata["aider_notes"])
    source = path.read_text(encoding="utf-8").splitlines()
    aiders = {line.rstrip() for line in source if line.startswith(">") and line.endswith("  ")}
    for m in run:
        if m.role == "assistant" and "```" in m.text:
            assert not aiders & set(m.text.splitlines()) - {"```"}, m.text[-200:]
    whole = [m for m in run if m.role == "assistant" and "aider_cut_short" not in m.metadata]
    for m in whole:
        assert m.text.count("<<<<<<< SEARCH") == m.text.count(">>>>>>> REPLACE")


def test_an_oh_my_pi_title_slot_before_the_header_is_read_as_the_title(tmp_path: Path) -> None:
    """Oh My Pi writes a fixed-width title slot as the first line (``type: title``, a
    version, the time, a source and a ``pad`` of spaces to 256 bytes) before the
    session header: the file is a Pi session, titled by it, also in a directory walk."""
    original = require_shared(TRANSCRIPTS / "other/pi-session-herdr-subagents-01a00acb.jsonl")
    slot = {"type": "title", "v": 1, "title": "Lint with ultracite", "source": "user"}
    slot |= {"updatedAt": "2026-08-16T13:40:00.000Z", "pad": ""}
    line = json.dumps(slot, separators=(",", ":"))
    slot["pad"] = " " * (255 - len(line.encode()))
    line = json.dumps(slot, separators=(",", ":")) + "\n"
    assert len(line.encode()) == 256
    folder = tmp_path / "sessions"
    folder.mkdir()
    path = folder / original.name
    path.write_text(line + original.read_text(encoding="utf-8"), encoding="utf-8")
    main, *_ = import_sessions(path)
    assert main.title == "Lint with ultracite" and main.source_format == "pi"
    assert main.messages and main.source_id == "01a00acb-8247-7c1c-8a21-f62a5d5971ad"
    report = Syncer(open_store("memory://")).sync(find_sources([str(folder)]))
    assert report.counts().get("new") == 2 and not report.failures, report.to_json()


def test_claude_code_queued_slash_commands_and_repeated_prompts_are_not_doubled(
    tmp_path: Path,
) -> None:
    def rec(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "sessionId": "s", **fields}

    def said(uuid: str, role: str, content: Any, msg_id: str | None = None) -> dict[str, Any]:
        message = {"role": role, "content": content, **({"id": msg_id} if msg_id else {})}
        return rec(role, uuid=uuid, message=message)

    call = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]
    records = [
        said("u1", "user", "list the files"),
        said("a1", "assistant", call, "m1"),
        rec("queue-operation", operation="enqueue", content="/mcp"),
        rec("queue-operation", operation="enqueue", content="also count them"),
        rec("queue-operation", operation="remove"),
        rec("queue-operation", operation="remove"),
        said("u2", "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]),
        rec("queue-operation", operation="enqueue", content="then stop"),
        rec("queue-operation", operation="dequeue"),
        said("a2", "assistant", [{"type": "text", "text": "2 files."}], "m2"),
        said("u3", "user", "then stop"),
        rec("queue-operation", operation="enqueue", content="never sent"),
    ]
    (s,) = import_sessions(write(tmp_path / "q.jsonl", records))
    assert [(m.role, m.text) for m in s.messages if m.role != "tool"] == [
        ("user", "list the files"),
        ("assistant", ""),
        ("user", "also count them"),  # taken mid-turn: before the response it got
        ("assistant", "2 files."),
        ("user", "then stop"),  # sent as a turn: once
    ]
    assert s.metadata["skipped"] == {
        "queue-operation": 7,
        "queue-operation:command": 1,
        "queue-operation:undelivered": 1,
    }
