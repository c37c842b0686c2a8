"""``threadline doctor``: names what is damaged and why, and salvages the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.damage import overwrite_page_of, three_sessions
from tests.processes import dead_pid
from threadline import Message, UsageError, open_store
from threadline.cli.app import app
from threadline.compaction.compactor import MARK_KEY
from threadline.store.doctor import check_store, salvage
from threadline.store.locks import LockHolder, this_host

runner = CliRunner()


def run(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--store", url, *args])


def doctor_json(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = run(url, "doctor", "--json", *args)
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[str, dict[str, list[str]]]:
    """An SQLite store of three sessions, one of whose pages (bravo's) is overwritten."""
    path = tmp_path / "damaged.db"
    texts = three_sessions(path)
    overwrite_page_of(path, "bravo")
    return f"sqlite://{path}", texts


def test_doctor_names_the_damaged_session(damaged: tuple[str, dict[str, list[str]]]) -> None:
    url, _ = damaged
    code, report = doctor_json(url)
    assert code == 8 and report["ok"] is False
    status = {s["session_id"]: s["status"] for s in report["sessions"]}
    assert status == {"sess-alpha": "ok", "sess-bravo": "unreadable", "sess-charlie": "ok"}
    (bravo,) = [s for s in report["sessions"] if s["session_id"] == "sess-bravo"]
    assert "database disk image is malformed" in bravo["problems"][0]
    assert any(f["kind"] == "integrity" and f["severity"] == "damage" for f in report["findings"])
    shown = run(url, "doctor")
    assert shown.exit_code == 8
    assert "sess-bravo  unreadable" in shown.stdout and "sess-alpha" not in shown.stdout
    assert "damage found" in shown.stdout and "--salvage" in shown.stdout


def test_salvage_recovers_every_readable_session_intact(
    damaged: tuple[str, dict[str, list[str]]], tmp_path: Path
) -> None:
    url, texts = damaged
    new = f"sqlite://{tmp_path / 'salvaged.db'}"
    result = run(url, "doctor", "--salvage", new)
    assert result.exit_code == 8  # the source is still damaged
    assert "2 sessions copied whole" in result.stdout
    assert "sess-bravo: left behind (unreadable)" in result.stdout
    store = open_store(new)
    try:
        assert sorted(s.id for s in store.list_sessions()) == ["sess-alpha", "sess-charlie"]
        for sid in ("sess-alpha", "sess-charlie"):
            assert [m.text for m in store.read_messages(sid)] == texts[sid]
            (checkpoint,) = store.list_checkpoints(sid)
            assert (checkpoint.covers_up_to, checkpoint.summary) == (10, f"summary of {sid[5:]}")
    finally:
        store.close()
    code, report = doctor_json(new)
    assert code == 0 and report["ok"] is True


def test_salvage_only_into_a_new_store(
    damaged: tuple[str, dict[str, list[str]]], tmp_path: Path
) -> None:
    url, _ = damaged
    used = f"sqlite://{tmp_path / 'used.db'}"
    open_store(used).create_session()
    store = open_store(url, create=False)
    report = check_store(store)
    destination = open_store(used)
    with pytest.raises(UsageError, match="already holds sessions"):
        salvage(store, report, destination)
    destination.close()
    result = run(url, "doctor", "--salvage", url)
    assert result.exit_code == 2 and "new store" in result.stderr


def test_a_healthy_store_with_leftovers(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    store = open_store(url)
    locked = store.create_session(id="locked-0001")
    locked.append(Message.user("hi"))
    gone = LockHolder(pid=dead_pid(), host=this_host())
    store.acquire_lock(locked.id, gone)
    marked = store.create_session(id="marked-0001")
    marked.set_memo({MARK_KEY: {"holder": gone.to_dict(), "token": "x"}})
    store.close()
    code, report = doctor_json(url)
    assert code == 0 and report["ok"] is True
    kinds = {(f["kind"], f["session_id"]) for f in report["findings"]}
    assert {("stale-lock", "locked-0001"), ("stale-mark", "marked-0001")} <= kinds
    result = run(url, "doctor")
    assert result.exit_code == 0 and "no damage found" in result.stdout


def test_doctor_on_a_jsonl_store(tmp_path: Path) -> None:
    root = tmp_path / "store"
    url = f"jsonl://{root}"
    store = open_store(url)
    for sid in ("good-0001", "torn-0001", "hand-0001", "junk-0001"):
        store.create_session(id=sid).append([Message.user(f"{sid} {i}") for i in range(3)])
    store.close()
    folder = root / "sessions" / "default"
    torn = folder / "torn-0001.jsonl"
    torn.write_bytes(torn.read_bytes()[:-5])  # the last line of its only batch, damaged
    hand = folder / "hand-0001.jsonl"
    lines = hand.read_bytes().splitlines(keepends=True)
    hand.write_bytes(b"".join([*lines[:2], b"{not json\n", *lines[3:]]))  # an edit gone wrong
    (folder / "junk-0001.jsonl").write_bytes(b"\x00garbage\n")  # listing skips it: named here
    (folder / "gone-0001.meta.json").write_text("{}", encoding="utf-8")
    (folder / "gone-0001_media").mkdir()
    (folder / "good-0001_media").mkdir()
    (folder / "good-0001_media" / "9-0.png").write_bytes(b"png")
    (folder / ".good-0001.meta.json.123.0123abcd.tmp").write_bytes(b"half")
    code, report = doctor_json(url)
    assert code == 8
    status = {s["session_id"]: s for s in report["sessions"]}
    assert status["good-0001"]["status"] == "ok"
    assert status["torn-0001"]["status"] == "damaged"
    assert "torn-0001.jsonl:2: an unfinished batch (3 lines" in status["torn-0001"]["problems"][0]
    assert status["hand-0001"]["status"] == "damaged"
    assert "hand-0001.jsonl:3: skipping a line" in status["hand-0001"]["problems"][0]
    assert status["junk-0001"]["status"] == "unreadable"
    assert "not a threadline session file" in status["junk-0001"]["problems"][0]
    orphans = [f["message"] for f in report["findings"] if f["kind"] == "orphan"]
    assert any("gone-0001.meta.json" in m for m in orphans)
    assert any("gone-0001_media: media folder" in m for m in orphans)
    assert any("9-0.png: media no message refers to" in m for m in orphans)
    assert any(f["kind"] == "temp-file" for f in report["findings"])


def test_doctor_creates_nothing_and_says_when_it_cannot_open(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    result = run(f"sqlite://{missing}", "doctor")
    assert result.exit_code == 8 and "nothing was stored there yet" in result.stderr
    assert not missing.exists()
    cut = tmp_path / "cut.db"
    three_sessions(cut)
    cut.write_bytes(cut.read_bytes()[:5000])
    result = run(f"sqlite://{cut}", "doctor")
    assert result.exit_code == 8
    assert "cannot even be opened" in result.stderr and "--salvage" not in result.stderr
