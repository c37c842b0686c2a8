"""Re-importing a source whose imported part was edited: refused, naming the first
changed record, never "unchanged"; the stored text and the markers stay as they were,
so the difference is seen at every sync. Markers written before content counted do not
make an unchanged source look changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import open_store
from threadline.interop.sync import FINGERPRINT_VERSION, Source, Syncer, SyncStatus
from threadline.messages import Message
from threadline.store import Store

CLAUDE = "claude-code/spotter-tool_heavy.jsonl"
PI = "other/pi-session-herdr-subagents-01a00acb.jsonl"


def sync(store: Store, path: Path) -> Any:
    """The result of the file's first conversation (Pi's file also holds subagents')."""
    return Syncer(store).sync_source(Source(path))[0]


def copy_of(name: str, tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    require_shared(TRANSCRIPTS)
    text = (TRANSCRIPTS / name).read_text(encoding="utf-8")
    path = tmp_path / Path(name).name
    path.write_text(text, encoding="utf-8")
    return path, [json.loads(line) for line in text.splitlines() if line.strip()]


def write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def claude_user_text(rec: dict[str, Any]) -> bool:
    content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
    return isinstance(content, str) and len(content) > 3


def claude_result(rec: dict[str, Any]) -> bool:
    content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "tool_result" for p in content
    )


def edit_claude_user(rec: dict[str, Any]) -> str:
    rec["message"]["content"] = "EDITED " + rec["message"]["content"]
    return str(rec["uuid"])


def edit_claude_result(rec: dict[str, Any]) -> str:
    part = next(p for p in rec["message"]["content"] if p.get("type") == "tool_result")
    part["content"] = "an edited result"
    return str(rec["uuid"])


def pi_user(rec: dict[str, Any]) -> bool:
    return rec.get("type") == "message" and rec["message"].get("role") == "user"


def edit_pi_user(rec: dict[str, Any]) -> str:
    rec["message"]["content"] = [{"type": "text", "text": "an edited request"}]
    return str(rec["id"])


CASES = {
    "claude-code user text": (CLAUDE, claude_user_text, edit_claude_user),
    "claude-code tool result": (CLAUDE, claude_result, edit_claude_result),
    "pi user text": (PI, pi_user, edit_pi_user),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_edited_record_is_refused_by_name_and_nothing_is_overwritten(
    case: str, tmp_path: Path
) -> None:
    name, pick, edit = CASES[case]
    path, records = copy_of(name, tmp_path)
    store = open_store("memory://")
    first = sync(store, path)
    assert first.status is SyncStatus.NEW
    before = store.session_info(first.session_id)
    stored = [m.model_dump(mode="json") for m in store.read_messages(first.session_id)]
    target = next(i for i, r in enumerate(records) if pick(r))
    record = edit(records[target])
    write(path, records)
    for _ in range(2):  # the second sync sees the change too: no marker was overwritten
        again = sync(store, path)
        assert again.status is SyncStatus.FAILED, again
        assert record in (again.error or ""), again.error
        assert "has other" in (again.error or "")
    after = store.session_info(first.session_id)
    assert after.metadata == before.metadata
    assert [m.model_dump(mode="json") for m in store.read_messages(first.session_id)] == stored


def test_an_edited_record_is_refused_on_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from threadline.cli.app import app

    path, records = copy_of(CLAUDE, tmp_path)
    url = f"sqlite://{tmp_path / 't.db'}"
    runner = CliRunner()
    assert runner.invoke(app, ["--store", url, "sessions", "import", str(path)]).exit_code == 0
    record = edit_claude_user(next(r for r in records if claude_user_text(r)))
    write(path, records)
    done = runner.invoke(app, ["--store", url, "sessions", "import", str(path)])
    assert done.exit_code == 2, done.stderr
    assert "unchanged" not in done.stderr and record in done.stderr
    assert "--new-version" in done.stderr  # the way to keep both is named
    kept = runner.invoke(app, ["--store", url, "sessions", "import", "--new-version", str(path)])
    assert kept.exit_code == 0, kept.stderr
    with open_store(url) as store:
        ids = [info.id for info in store.list_sessions().items]
    assert len(ids) == 2 and kept.stdout.strip() in ids  # the new version's id is printed


def old_fingerprint(messages: list[Message]) -> str:
    """The marker of versions before content counted (role, call id, record id)."""
    digest = hashlib.sha256()
    for m in messages:
        anchor = m.metadata.get("source_uuid")
        key = [m.role, m.tool_call_id, anchor] if anchor else [m.role, m.tool_call_id, m.text]
        digest.update(json.dumps(key, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


OLD_MARKED = [
    "codex/communique-parallel-019efb65.jsonl",
    "swe-agent/gpt4-swe-agent__test-repo-i1.traj",
    "other/gemini-cli-session-2025-12-01T21-45-5b959dae.json",
    "other/opencode-export-shui-ja-fork-compaction-ses_ff982d45.json",
    "aider/haav-catalogservice-ask-diff.aider.chat.history.md",
    "openai-chat/tau-bench-gpt-4o-airline.json",
]
"""One file of each other format: what they store reads back as the same content."""


@pytest.mark.parametrize("name", OLD_MARKED)
def test_an_old_marker_of_any_format_leaves_an_unchanged_source_unchanged(
    name: str, tmp_path: Path
) -> None:
    require_shared(TRANSCRIPTS)
    path = tmp_path / Path(name).name
    path.write_text((TRANSCRIPTS / name).read_text(encoding="utf-8") + "\n", encoding="utf-8")
    store = open_store("memory://")
    firsts = Syncer(store).sync_source(Source(path))
    assert firsts and all(r.status is SyncStatus.NEW for r in firsts), firsts
    for r in firsts:
        old = old_fingerprint(store.read_messages(r.session_id))
        store.update_session(r.session_id, metadata={"source_fingerprint": old})
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    again = Syncer(store).sync_source(Source(path))
    assert [r.status for r in again] == [SyncStatus.UNCHANGED] * len(firsts), again


@pytest.mark.parametrize("name", [CLAUDE, PI])
def test_an_old_marker_is_checked_against_the_store_once_then_rewritten(
    name: str, tmp_path: Path
) -> None:
    path, records = copy_of(name, tmp_path)
    store = open_store("memory://")
    first = sync(store, path)
    stored = store.read_messages(first.session_id)
    store.update_session(first.session_id, metadata={"source_fingerprint": old_fingerprint(stored)})
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # new hash
    again = sync(store, path)
    assert again.status is SyncStatus.UNCHANGED, again.error
    marker = store.session_info(first.session_id).metadata["source_fingerprint"]
    assert marker.startswith(FINGERPRINT_VERSION)
    # an old marker does not hide an edit either
    store.update_session(first.session_id, metadata={"source_fingerprint": old_fingerprint(stored)})
    pick, edit = (claude_user_text, edit_claude_user) if name == CLAUDE else (pi_user, edit_pi_user)
    record = edit(next(r for r in records if pick(r)))
    write(path, records)
    refused = sync(store, path)
    assert refused.status is SyncStatus.FAILED and record in (refused.error or "")


def test_new_version_imports_a_changed_source_as_a_new_session_and_keeps_the_old(
    tmp_path: Path,
) -> None:
    path, records = copy_of(CLAUDE, tmp_path)
    store = open_store("memory://")
    first = sync(store, path)
    old_texts = [m.text for m in store.read_messages(first.session_id)]
    target = next(r for r in records if claude_user_text(r))
    edit_claude_user(target)
    write(path, records)
    (second,) = Syncer(store, new_version=True).sync_source(Source(path))
    assert second.status is SyncStatus.NEW and second.session_id != first.session_id
    new_info = store.session_info(second.session_id)
    assert new_info.metadata["source_previous_version"] == first.session_id
    assert any(m.text.startswith("EDITED ") for m in store.read_messages(second.session_id))
    assert [m.text for m in store.read_messages(first.session_id)] == old_texts  # kept
    assert store.session_info(first.session_id).metadata["source_id"].endswith("#replaced")
    # from now on the source is the new session's: unchanged, then grown
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert sync(store, path).session_id == second.session_id
    assert sync(store, path).status is SyncStatus.UNCHANGED
    records.append({**target, "uuid": "grown-1", "message": {"role": "user", "content": "more"}})
    write(path, records)
    grown = sync(store, path)
    assert (grown.status, grown.session_id, grown.messages_added) == (
        SyncStatus.UPDATED,
        second.session_id,
        1,
    )
    assert store.list_sessions().total == 2
