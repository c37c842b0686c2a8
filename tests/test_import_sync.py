"""``sessions import`` as a sync: faithful mapping of real transcripts, re-import as a no-op,
growth appended, native compactions as checkpoints, and repairs flagged and counted."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import ContextPolicy, build_context, open_store
from threadline.cli.app import app
from threadline.interop.importers import TITLE_LENGTH, import_sessions, session_title
from threadline.interop.sync import Source, Syncer, SyncStatus, find_sources
from threadline.messages import Message
from threadline.requests import first_request, request_text
from threadline.store import Store

runner = CliRunner()

S1 = "claude-code/spotter-4d5611e5/4d5611e5-241a-462a-8d15-5122611a9569"
S2 = "claude-code/spotter-8463c716/8463c716-a2ea-4c14-9efa-87158ebd9f20"
CLAUDE_CODE = [
    f"{S1}.jsonl",
    f"{S1}/subagents/agent-a2898e3.jsonl",
    f"{S1}/subagents/agent-acompact-e1f845.jsonl",
    f"{S2}.jsonl",
    f"{S2}/subagents/agent-a7be2f0.jsonl",
    f"{S2}/subagents/agent-acompact-f46190.jsonl",
    "claude-code/spotter-tool_heavy.jsonl",
    "claude-code/spotter-subagent-task.jsonl",
    "claude-code/codemie-session-624a4a58-compacted.jsonl",
    "claude-code/codemie-session-9eda1058-summary-lines.jsonl",
    "claude-code/codemie-session-196820da.jsonl",
]
CODEX = [
    "codex/codemie-rollout-2026-05-11T11-26-55-019e1625.jsonl",
    "codex/rtchess-session-019aad50-exported.jsonl",
    "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl",
    "codex/localpush-redacted-rollout-2026-02-23T12-40-23.jsonl",
]
NATIVE_COMPACTIONS = {  # from the transcripts' README
    f"{S1}.jsonl": 1,
    f"{S2}.jsonl": 1,
    "claude-code/codemie-session-624a4a58-compacted.jsonl": 1,
    "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl": 1,
}
REDACTED = {n for n in CODEX if "redacted" in n}
"""Every user text there is ``[REDACTED_TEXT ...]``: no genuine request, so no title."""
BIG = ContextPolicy(context_limit=2_000_000)
"""A window that fits any of these sessions whole, so only the checkpoint decides."""


def cli(url: str, *args: str, input: bytes | str | None = None) -> Any:
    return runner.invoke(app, ["--store", url, "sessions", "import", *args], input=input)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def all_sessions(store: Store) -> list[Any]:
    found, offset = [], 0
    while True:
        page = store.list_sessions(limit=200, offset=offset)
        found.extend(page.items)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return found


def sync_file(store: Store, path: Path, **kw: Any) -> list[Any]:
    return Syncer(store, **kw).sync_source(Source(path))


def shape(messages: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.role, m.text, m.tool_call_id, [c.id for c in m.tool_calls]) for m in messages]


def expected_facts(name: str) -> tuple[str, str, str]:
    """(source id, earliest timestamp, model) read straight from the raw file (Claude
    Code's lines are not always in time order: a caveat is written after its command)."""
    recs = records(TRANSCRIPTS / name)
    if name.startswith("codex/"):
        meta = next(r["payload"] for r in recs if r["type"] == "session_meta")
        models = [r["payload"]["model"] for r in recs if r["type"] == "turn_context"]
        return meta["id"], meta["timestamp"], models[-1]
    sid = next(r["sessionId"] for r in recs if r.get("sessionId"))
    agent = next((r["agentId"] for r in recs if r.get("agentId")), None)
    stamps = [r["timestamp"] for r in recs if r.get("type") in ("user", "assistant")]
    first = min(stamps, key=lambda t: datetime.fromisoformat(t.replace("Z", "+00:00")))
    models = [
        r["message"]["model"]
        for r in recs
        if r.get("type") == "assistant" and r["message"].get("model") != "<synthetic>"
    ]
    return (f"{sid}/agent-{agent}" if agent else sid), first, models[-1]


def same_time(a: str, b: str) -> bool:
    return datetime.fromisoformat(a.replace("Z", "+00:00")) == datetime.fromisoformat(
        b.replace("Z", "+00:00")
    )


# -- faithful mapping, per real file ---------------------------------------------------


@pytest.mark.parametrize("name", CLAUDE_CODE + CODEX)
def test_real_session_maps_faithfully(name: str) -> None:
    require_shared(TRANSCRIPTS)
    store = open_store("memory://")
    began = datetime.now(UTC)
    (result,) = sync_file(store, TRANSCRIPTS / name)
    assert result.status is SyncStatus.NEW, result.error
    session = store.get_session(result.session_id)
    meta = session.info.metadata
    source_id, first_at, model = expected_facts(name)

    assert meta["source_id"] == source_id and result.source_id == source_id
    assert same_time(meta["source_created_at"], first_at)
    messages = session.messages()
    assert all(m.created_at < began for m in messages)  # the source's times, not the import's
    assert same_time(meta["source_updated_at"], max(m.created_at for m in messages).isoformat())
    # the session is dated by its transcript: first and last message, not the import
    assert session.info.created_at == datetime.fromisoformat(first_at.replace("Z", "+00:00"))
    assert session.info.updated_at == max(m.created_at for m in messages)
    assert session.model == model
    assert all(m.model for m in messages if m.role == "assistant")
    assert meta.get("cwd") and (name.startswith("codex/rtchess") or meta.get("git_branch"))

    if name in REDACTED:
        assert session.title is None
    elif "/agent-acompact-" in name:  # the summariser's prompt is no title: its parent is
        parent = name.split("/subagents/")[0].rsplit("/", 1)[-1]
        assert session.title == f"Compaction summary of session {parent}"
        assert meta["child_kind"] == "compaction"
    else:
        found = first_request(messages)
        request = request_text(found) if found is not None else None
        assert request and session.title and session.title == session_title(messages)
        assert " ".join(request.split()).startswith(session.title.rstrip("\u2026"))
        assert not session.title.startswith(("Caveat", "<", "# AGENTS.md", "This session is"))

    checkpoints = session.checkpoints()
    assert len(checkpoints) == NATIVE_COMPACTIONS.get(name, 0)
    assert not any(m.metadata.get("compact_summary") for m in messages)
    if checkpoints:
        (cp,) = checkpoints
        assert cp.metadata["native"] in ("claude-code", "codex") and cp.summary
        window = build_context(session, policy=BIG)
        assert window.report.checkpoint_id == cp.id
        assert window.report.covered_by_summary == cp.covers_up_to
        assert (
            window.report.first_seq == cp.covers_up_to + 1 and window.report.dropped_messages == 0
        )
        history = [m for m in window.messages if not m.summary]
        assert all(m.seq is None or m.seq > cp.covers_up_to for m in history)
        head = cp.summary[:200]
        assert [m for m in window.messages if head in m.text and not m.summary] == []
        assert any(head in m.text for m in window.messages if m.summary)


def test_compaction_covers_exactly_the_messages_before_the_boundary() -> None:
    require_shared(TRANSCRIPTS)
    path = TRANSCRIPTS / "claude-code/codemie-session-624a4a58-compacted.jsonl"
    (imported,) = import_sessions(path)
    (cp,) = imported.checkpoints
    boundary = next(
        i for i, r in enumerate(records(path)) if r.get("subtype") == "compact_boundary"
    )
    before = {r.get("uuid") for r in records(path)[:boundary]}
    covered = imported.messages[: cp["covers_up_to"]]
    after = imported.messages[cp["covers_up_to"] :]
    assert all(m.metadata["source_uuid"] in before for m in covered)
    assert not any(m.metadata["source_uuid"] in before for m in after)
    assert cp["summary"].startswith("This session is being continued")
    assert cp["metadata"]["trigger"] == "auto" and cp["metadata"]["pre_tokens"] == 155979


def test_subagents_become_children_of_their_session(tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    report = Syncer(store).sync(find_sources([str(TRANSCRIPTS / "claude-code/spotter-4d5611e5")]))
    assert report.counts()["new"] == 3 and not report.failures
    by_source = {s.metadata["source_id"]: s for s in all_sessions(store)}
    parent = by_source["4d5611e5-241a-462a-8d15-5122611a9569"]
    children = [s for s in by_source.values() if s.parent_id is not None]
    assert len(children) == 2
    for child in children:
        assert child.parent_id == parent.id
        assert child.metadata["parent_source_id"] == parent.metadata["source_id"]
        assert child.metadata["source_id"].startswith(parent.metadata["source_id"] + "/agent-")
    assert [s.id for s in store.list_sessions(top_level=True)] == [parent.id]
    assert {s.id for s in store.list_sessions(parent=parent.id)} == {c.id for c in children}
    (summariser,) = [c for c in children if "/agent-acompact-" in c.metadata["source_id"]]
    assert summariser.title == f"Compaction summary of {parent.title}"
    assert summariser.metadata["child_kind"] == "compaction"


def test_a_session_file_import_brings_its_subagents_as_the_folder_import_does(
    tmp_path: Path,
) -> None:
    """``threadline sessions import <session>.jsonl`` imports ``<session>/subagents/*``
    too, linked as children, exactly as importing the folder does."""
    require_shared(TRANSCRIPTS)
    folder = TRANSCRIPTS / "claude-code/spotter-4d5611e5"
    by_file = open_store(f"sqlite://{tmp_path / 'f.db'}")
    session = next(folder.glob("*.jsonl"))
    report = Syncer(by_file).sync(find_sources([str(session)]))
    assert not report.failures
    by_folder = open_store(f"sqlite://{tmp_path / 'd.db'}")
    Syncer(by_folder).sync(find_sources([str(folder)]))

    def tree(store: Store) -> set[tuple[str, str | None]]:
        sessions = {s.id: s for s in all_sessions(store)}
        return {
            (s.metadata["source_id"], sessions[s.parent_id].metadata["source_id"])
            if s.parent_id
            else (s.metadata["source_id"], None)
            for s in sessions.values()
        }

    assert len(tree(by_file)) == 3 and tree(by_file) == tree(by_folder)


def test_a_session_file_import_prints_one_id_its_folder_import_all(sqlite_url: str) -> None:
    """``sid=$(threadline sessions import <session>.jsonl)`` names that session alone: the
    subagents it brings along are listed under it; a folder import names every session."""
    require_shared(TRANSCRIPTS)
    folder = TRANSCRIPTS / "claude-code/spotter-8463c716"
    one = cli(sqlite_url, str(folder / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"))
    assert one.exit_code == 0 and "3 conversations: 3 new" in one.stderr
    (sid,) = one.stdout.split()
    store = open_store(sqlite_url)
    assert store.session_info(sid).parent_id is None
    assert len(store.list_sessions(parent=sid)) == 2
    assert len(cli(sqlite_url, str(folder)).stdout.split()) == 3


def test_a_session_file_s_subagents_come_after_it_and_only_its_own(tmp_path: Path) -> None:
    """The ``subagents`` folder of the named file only (a sibling session's stays out), each
    file once when the folder is named as well, after the session it belongs to."""
    for stem in ("s1", "s2"):
        (tmp_path / f"{stem}.jsonl").write_text("{}\n", encoding="utf-8")
        agents = tmp_path / stem / "subagents"
        agents.mkdir(parents=True)
        (agents / "agent-a1.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "notes.txt.jsonl").write_text("{}\n", encoding="utf-8")
    named = find_sources([str(tmp_path / "s1.jsonl"), str(tmp_path / "s1")])
    assert [s.path.relative_to(tmp_path).as_posix() for s in named if s.path] == [
        "s1.jsonl",
        "s1/subagents/agent-a1.jsonl",
    ]
    assert [s.found for s in named] == [False, True]  # found: skipped if no conversation
    alone = find_sources([str(tmp_path / "notes.txt.jsonl")])
    assert len(alone) == 1


def test_a_subagent_imported_first_is_linked_when_its_parent_arrives(tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    (child,) = sync_file(store, TRANSCRIPTS / f"{S2}/subagents/agent-a7be2f0.jsonl")
    (summariser,) = sync_file(store, TRANSCRIPTS / f"{S2}/subagents/agent-acompact-f46190.jsonl")
    for early in (child, summariser):
        assert store.session_info(early.session_id).parent_id is None
    placeholder = "Compaction summary of session 8463c716-a2ea-4c14-9efa-87158ebd9f20"
    assert store.session_info(summariser.session_id).title == placeholder
    dated = store.session_info(child.session_id).updated_at
    Syncer(store).sync(find_sources([str(TRANSCRIPTS / "claude-code/spotter-8463c716")]))
    parent = next(
        s
        for s in all_sessions(store)
        if s.metadata["source_id"] == expected_facts(f"{S2}.jsonl")[0]
    )
    linked = store.session_info(child.session_id)
    assert linked.parent_id == parent.id and linked.updated_at == dated  # linking is no edit
    titled = store.session_info(summariser.session_id)
    assert titled.parent_id == parent.id
    assert titled.title == f"Compaction summary of {parent.title}"


# -- the whole directory, twice ----------------------------------------------------------


SOURCES = 35 + 1 + 200 + 3 + 2


def test_whole_directory_imports_then_is_unchanged(sqlite_url: str) -> None:
    require_shared(TRANSCRIPTS)
    first = cli(sqlite_url, str(TRANSCRIPTS), "--json")
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["counts"]["failed"] == 0 and report["counts"]["new"] == len(report["sources"])
    # 35 files of one conversation, an OpenHands V1 directory of one file per event,
    # 200 tau-bench runs, 3 OpenHands runs and a Pi session's main path and branch
    assert len(report["sources"]) == SOURCES
    store = open_store(sqlite_url)
    try:
        before = sorted(s.id for s in all_sessions(store))
        assert len(before) == SOURCES
        ids = {s.metadata["source_id"] for s in all_sessions(store)}
        assert len(ids) == SOURCES  # every source distinct, none null
    finally:
        store.close()
    again = cli(sqlite_url, str(TRANSCRIPTS), "--json")
    assert again.exit_code == 0, again.stderr
    counts = json.loads(again.stdout)["counts"]
    assert counts == {"new": 0, "updated": 0, "unchanged": SOURCES, "failed": 0, "skipped": 0}
    store = open_store(sqlite_url)
    try:
        assert sorted(s.id for s in all_sessions(store)) == before
    finally:
        store.close()
    human = cli(sqlite_url, str(TRANSCRIPTS / "claude-code"))
    assert human.exit_code == 0
    assert "16 conversations: 16 unchanged; 0 messages added" in human.stderr


def dated_listing(store: Store) -> list[tuple[Any, ...]]:
    """Every session as the listing shows it: id, dates, parent, title."""
    return [(s.id, s.created_at, s.updated_at, s.parent_id, s.title) for s in all_sessions(store)]


def test_a_directory_reimported_keeps_every_date_and_link(tmp_path: Path) -> None:
    """Issue 22: the whole shared directory, imported twice. The second import changes
    nothing, dates and parent links included; every session with a time in its source is
    dated by it; every Claude Code subagent whose session is there is listed under it."""
    require_shared(TRANSCRIPTS)
    url = f"sqlite://{tmp_path / 's.db'}"
    began = datetime.now(UTC)
    first = json.loads(cli(url, str(TRANSCRIPTS), "--json").stdout)
    imported = {r["session_id"] for r in first["sources"] if r["status"] == "new"}
    assert len(imported) > 200 and first["counts"]["updated"] == 0
    with open_store(url) as store:
        before = dated_listing(store)
        infos = all_sessions(store)
    again = json.loads(cli(url, str(TRANSCRIPTS), "--json").stdout)
    assert again["counts"]["new"] == again["counts"]["updated"] == 0
    assert again["counts"]["unchanged"] == len(imported)
    assert again["counts"]["failed"] == first["counts"]["failed"]  # formats of other work
    with open_store(url) as store:
        assert dated_listing(store) == before
        top = [s.id for s in all_sessions_top(store)]
    for info in infos:
        stamped = info.metadata.get("source_updated_at")
        if stamped:  # the transcript's own dates, never the import's
            assert info.updated_at < began and info.created_at <= info.updated_at
            assert same_time(info.updated_at.isoformat(), stamped) or info.updated_at == (
                info.created_at
            )
    by_source = {(i.metadata["source_format"], i.metadata["source_id"]): i for i in infos}
    children = [i for i in infos if i.metadata.get("parent_source_id")]
    assert len(children) >= 4
    for child in children:
        key = (child.metadata["source_format"], child.metadata["parent_source_id"])
        parent = by_source.get(key)
        assert child.parent_id == (parent.id if parent else None)
        assert (child.id in top) == (parent is None)
    summarisers = [c for c in children if "/agent-acompact-" in c.metadata["source_id"]]
    assert len(summarisers) == 2
    assert all(c.title and c.title.startswith("Compaction summary of Work on") for c in summarisers)
    assert top == [s.id for s in sorted(
        (i for i in infos if i.parent_id is None), key=lambda i: (-i.updated_at.timestamp(), i.id)
    )]  # fmt: skip


def all_sessions_top(store: Store) -> list[Any]:
    found, offset = [], 0
    while True:
        page = store.list_sessions(top_level=True, limit=200, offset=offset)
        found.extend(page.items)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return found


def test_a_copy_elsewhere_is_still_the_same_source(tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    store = open_store("memory://")
    original = TRANSCRIPTS / "claude-code/spotter-tool_heavy.jsonl"
    (first,) = sync_file(store, original)
    copy = tmp_path / "elsewhere.jsonl"
    shutil.copyfile(original, copy)
    (again,) = sync_file(store, copy)
    assert again.status is SyncStatus.UNCHANGED and again.session_id == first.session_id
    assert len(all_sessions(store)) == 1


# -- growth: only the new messages are appended ------------------------------------------


def _split(lines: list[str], fraction: float, starts_turn: Any) -> int:
    """The first line index at or after ``fraction`` of the file that starts a turn."""
    start = int(len(lines) * fraction)
    return next(i for i in range(start, len(lines)) if starts_turn(json.loads(lines[i])))


def _claude_prompt(rec: dict[str, Any]) -> bool:
    return rec.get("type") == "user" and isinstance(rec["message"].get("content"), str)


def _codex_turn(rec: dict[str, Any]) -> bool:
    return rec.get("type") == "turn_context"


@pytest.mark.parametrize(
    ("name", "fraction", "starts_turn"),
    [
        ("claude-code/spotter-tool_heavy.jsonl", 0.3, _claude_prompt),
        ("claude-code/codemie-session-624a4a58-compacted.jsonl", 0.2, _claude_prompt),
        ("codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl", 0.3, _codex_turn),
        ("codex/rtchess-session-019aad50-exported.jsonl", 0.5, _codex_turn),
    ],
)
def test_a_grown_transcript_gets_only_its_new_messages(
    name: str, fraction: float, starts_turn: Any, tmp_path: Path
) -> None:
    require_shared(TRANSCRIPTS)
    original = TRANSCRIPTS / name
    lines = original.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = _split(lines, fraction, starts_turn)
    live = tmp_path / original.name
    live.write_text("".join(lines[:cut]), encoding="utf-8")
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    (first,) = sync_file(store, live)
    assert first.status is SyncStatus.NEW
    had = store.session_info(first.session_id).message_count
    dated = store.session_info(first.session_id)

    with live.open("a", encoding="utf-8") as grow:
        grow.write("".join(lines[cut:]))
    (second,) = sync_file(store, live)
    assert second.status is SyncStatus.UPDATED and second.session_id == first.session_id

    reference = open_store("memory://")
    (whole,) = sync_file(reference, original)
    expected = reference.get_session(whole.session_id)
    session = store.get_session(first.session_id)
    assert second.messages_added == expected.message_count - had
    assert shape(session.messages()) == shape(expected.messages())
    assert [(c.covers_up_to, c.summary) for c in session.checkpoints()] == [
        (c.covers_up_to, c.summary) for c in expected.checkpoints()
    ]
    # every cut is before the compaction: its checkpoint arrives with the growth
    assert (first.checkpoints_added, second.checkpoints_added) == (
        0,
        NATIVE_COMPACTIONS.get(name, 0),
    )
    assert len(all_sessions(store)) == 1
    # the growth moves the session's date to the transcript's new end, not to today
    grown = store.session_info(first.session_id)
    assert grown.created_at == dated.created_at == expected.info.created_at
    assert dated.updated_at < grown.updated_at == expected.info.updated_at
    (third,) = sync_file(store, live)
    assert third.status is SyncStatus.UNCHANGED and third.messages_added == 0
    assert store.session_info(first.session_id).updated_at == grown.updated_at


def test_a_rewritten_source_fails_instead_of_guessing(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "first version"}) + "\n", "utf-8")
    assert cli(sqlite_url, str(path)).exit_code == 0
    path.write_text(json.dumps({"role": "user", "content": "rewritten"}) + "\n", "utf-8")
    result = cli(sqlite_url, str(path))
    assert result.exit_code == 2 and "no longer begins with the messages" in result.stderr
    store = open_store(sqlite_url)
    try:
        assert len(all_sessions(store)) == 1
    finally:
        store.close()


# -- stdin, --run, single files --------------------------------------------------------


def test_stdin_import_and_reimport(sqlite_url: str) -> None:
    body = "\n".join(
        json.dumps(m)
        for m in (
            {"role": "user", "content": "what is 2+2?"},
            {"role": "assistant", "content": "4"},
        )
    )
    first = cli(sqlite_url, "-", input=body)
    assert first.exit_code == 0, first.stderr
    sid = first.stdout.strip()
    assert "imported 2 messages from -" in first.stderr
    again = cli(sqlite_url, "-", input=body)
    assert again.exit_code == 0 and again.stdout.strip() == sid
    assert "unchanged" in again.stderr
    store = open_store(sqlite_url)
    try:
        info = store.session_info(sid)
        assert info.title == "what is 2+2?"
        assert info.metadata["source_id"].startswith("stdin:sha256:")
        assert info.metadata["source_path"] == "-"
    finally:
        store.close()
    bad = cli(sqlite_url, "-", input='{"role": "user", "content": "x"\n')
    assert bad.exit_code == 2 and "threadline: error: -:" in bad.stderr


def test_run_picks_one_conversation(sqlite_url: str) -> None:
    require_shared(TRANSCRIPTS)
    tau = TRANSCRIPTS / "openai-chat/tau-bench-gpt-4o-airline.json"
    result = cli(sqlite_url, str(tau), "--run", "3", "--json")
    assert result.exit_code == 0, result.stderr
    (source,) = json.loads(result.stdout)["sources"]
    assert source["status"] == "new" and source["run"] == 3
    assert source["source_id"] == f"file:{tau.resolve()}#run-3"
    runs = json.loads(tau.read_text(encoding="utf-8"))
    store = open_store(sqlite_url)
    try:
        info = store.session_info(source["session_id"])
        assert info.metadata["task_id"] == runs[2]["task_id"] and info.metadata["source_run"] == 3
        assert info.message_count == len(runs[2]["traj"])
    finally:
        store.close()
    assert (
        json.loads(cli(sqlite_url, str(tau), "--run", "3", "--json").stdout)["counts"]["unchanged"]
        == 1
    )
    missing = cli(sqlite_url, str(tau), "--run", "201")
    assert (
        missing.exit_code == 2 and "holds 200 conversations; there is no run 201" in missing.stderr
    )
    openhands = TRANSCRIPTS / "openhands/multi-swe-bench-llama4-maverick-output.jsonl"
    two = json.loads(cli(sqlite_url, str(openhands), "--run", "2", "--json").stdout)["sources"]
    assert [s["run"] for s in two] == [2]


def test_single_file_prints_its_id_on_every_import(sqlite_url: str) -> None:
    require_shared(TRANSCRIPTS)
    path = TRANSCRIPTS / "codex/codemie-rollout-2026-05-11T11-26-55-019e1625.jsonl"
    first = cli(sqlite_url, str(path))
    assert first.exit_code == 0 and "imported 178 messages" in first.stderr
    again = cli(sqlite_url, str(path))
    assert (
        again.stdout == first.stdout
        and f"is already session {first.stdout.strip()}" in again.stderr
    )


def test_directory_walk_skips_files_that_are_not_conversations(
    sqlite_url: str, tmp_path: Path
) -> None:
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1"}', encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "chat.json").write_text(
        json.dumps([{"role": "user", "content": "hello"}]), encoding="utf-8"
    )
    result = cli(sqlite_url, str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    by_name = {Path(s["source"]).name: s["status"] for s in json.loads(result.stdout)["sources"]}
    assert by_name == {"chat.json": "new", "empty.jsonl": "skipped", "package.json": "skipped"}
    named = cli(sqlite_url, str(tmp_path / "package.json"))
    assert named.exit_code == 2
    assert "not a conversation threadline can import: a JSON object with keys name, version" in (
        named.stderr
    )


# -- environment events and repairs ----------------------------------------------------


def test_openhands_environment_events_are_not_tool_calls(tmp_path: Path) -> None:
    events = [
        {"id": 0, "timestamp": "2025-05-01T10:00:00", "source": "agent", "action": "system",
         "args": {"content": "You are OpenHands agent."}, "message": "You are OpenHands agent."},
        {"id": 1, "timestamp": "2025-05-01T10:00:01", "source": "environment",
         "action": "change_agent_state", "args": {"agent_state": "running", "thought": ""},
         "message": ""},
        {"id": 2, "timestamp": "2025-05-01T10:00:01", "source": "environment",
         "observation": "null", "content": "", "extras": {}, "cause": 1, "message": ""},
        {"id": 3, "timestamp": "2025-05-01T10:00:02", "source": "environment",
         "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running"}, "message": ""},
        {"id": 4, "timestamp": "2025-05-01T10:00:03", "source": "user", "action": "message",
         "args": {"content": "Fix the failing test in calc.py"}, "message": "Fix it"},
        {"id": 5, "timestamp": "2025-05-01T10:00:05", "source": "agent", "action": "run",
         "args": {"command": "pytest", "thought": "run the tests"}, "message": "pytest"},
        {"id": 6, "timestamp": "2025-05-01T10:00:09", "source": "agent", "observation": "run",
         "content": "1 passed", "cause": 5, "extras": {}, "message": "done"},
        {"id": 7, "timestamp": "2025-05-01T10:00:10", "source": "environment",
         "action": "change_agent_state", "args": {"agent_state": "finished"}, "message": ""},
    ]  # fmt: skip
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    (imported,) = import_sessions(path)
    ms = imported.messages
    assert [m.role for m in ms] == ["system", "user", "assistant", "tool"]
    assert ms[0].metadata["event"] == "system"
    calls = [c.name for m in ms for c in m.tool_calls]
    assert calls == ["run"]
    assert [m.name for m in ms if m.role == "tool"] == ["run"]
    assert imported.repairs == {}
    got = [
        (e["event"], e.get("agent_state"), e["after_message"]) for e in imported.metadata["events"]
    ]
    assert got == [
        ("change_agent_state", "running", 1),
        ("observation:null", None, 1),
        ("observation:agent_state_changed", "running", 1),
        ("change_agent_state", "finished", 4),
    ]
    assert imported.title == "Fix the failing test in calc.py"


def test_repairs_are_kept_flagged_and_counted(sqlite_url: str, tmp_path: Path) -> None:
    def call(cid: str, arguments: str) -> dict[str, Any]:
        return {"id": cid, "type": "function", "function": {"name": "calc", "arguments": arguments}}

    lines = [
        {"role": "user", "content": "add things"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan output"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", '{"expr": "1+')]},
        {"role": "tool", "tool_call_id": "c1", "content": "error: bad arguments"},
        {"role": "assistant", "content": None, "tool_calls": [call("c2", '{"expr": "2"}')]},
        {"role": "user", "content": "never mind"},
    ]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    result = cli(sqlite_url, str(path), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    expected = {"malformed_arguments": 1, "orphan_result": 1, "unanswered_call": 1}
    assert report["repairs"] == expected and report["sources"][0]["repairs"] == expected
    sid = report["sources"][0]["session_id"]
    store = open_store(sqlite_url)
    try:
        session = store.get_session(sid)
        ms = session.messages()
        assert len(ms) == len(lines)  # nothing dropped
        assert (
            ms[1].metadata["import_repair"] == ["orphan_result"] and ms[1].text == "orphan output"
        )
        assert ms[2].metadata["import_repair"] == ["malformed_arguments"]
        assert ms[2].metadata["malformed_calls"] == ["c1"]
        assert ms[2].tool_calls[0].raw_arguments == '{"expr": "1+'
        assert ms[4].metadata["import_repair"] == ["unanswered_call"]
        assert ms[4].metadata["unanswered_calls"] == ["c2"]
        assert session.info.metadata["import_repairs"] == expected
    finally:
        store.close()
    human = cli(sqlite_url, str(path))
    assert "unchanged" in human.stderr
    fresh = tmp_path / "again.jsonl"
    shutil.copyfile(path, fresh)
    fresh.write_text(fresh.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    line = cli(sqlite_url, str(tmp_path / "broken.jsonl"), str(tmp_path / "again.jsonl")).stderr
    assert "1 new" in line and "repairs flagged: 1 malformed_arguments" in line


def test_a_result_for_a_call_stored_before_is_flagged_against_the_store(tmp_path: Path) -> None:
    """A response still streaming when first imported: its late tool call is not stored,
    so the result that answers it is an orphan in the store, and flagged as one."""
    require_shared(TRANSCRIPTS)
    original = TRANSCRIPTS / "claude-code/spotter-tool_heavy.jsonl"
    recs = records(original)
    lines = original.read_text(encoding="utf-8").splitlines(keepends=True)
    ids = [r["message"].get("id") for r in recs if r.get("type") == "assistant"]
    streamed = next(i for i in ids if ids.count(i) > 1)  # one response over two lines
    second = [i for i, r in enumerate(recs) if r.get("message", {}).get("id") == streamed][1]
    live = tmp_path / original.name
    live.write_text("".join(lines[:second]), encoding="utf-8")
    store = open_store("memory://")
    (first,) = sync_file(store, live)
    live.write_text("".join(lines), encoding="utf-8")
    (grown,) = sync_file(store, live)
    assert grown.status is SyncStatus.UPDATED
    assert grown.repairs.get("orphan_result", 0) >= 1
    stored = store.get_session(first.session_id).messages()
    orphans = [m for m in stored if "orphan_result" in m.metadata.get("import_repair", [])]
    assert orphans and all(m.role == "tool" for m in orphans)


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
        | st.sampled_from([" ", "\n\n", "\t", " " * 400]),
        max_size=200,
    )
)
def test_a_title_reads_the_start_of_a_request_as_the_whole_would(words: list[str]) -> None:
    """The title reads only the first characters of a long request: the same title as a
    split of the whole text, whitespace runs and cut words included."""
    m = Message.user(" ".join(words) or "x")
    found = first_request([m])
    request = request_text(found) if found is not None else None
    whole = " ".join((request or "").split())
    expected = whole if len(whole) <= TITLE_LENGTH else None
    if expected is None:
        cut = whole[: TITLE_LENGTH - 1]
        space = cut.rfind(" ")
        expected = (cut[:space] if space > TITLE_LENGTH // 2 else cut).rstrip(" ,.;:") + "\u2026"
    assert session_title([m]) == (expected or None)
