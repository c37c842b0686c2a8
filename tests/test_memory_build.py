"""``threadline memory build`` and ``build_memory``: memory from stored sessions (imported
ones too), incremental by a durable per-session watermark; and the small CLI fixes of
issue 23 (plurals, an unknown agent, --scope with --agent, the scope a user typed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from threadline import Message, open_store
from threadline.cli.app import app
from threadline.memory import ExtractiveExtractor, open_memory
from threadline.memory.build import build_memory

STATEMENTS = [
    "I always drink oat milk in my coffee.",
    "My daughter Anneliese is 7 years old.",
    "We moved to São Paulo in 2019 for my new job at the bank.",
    "I'm keen on counseling and I volunteer at the shelter on Sundays.",
]


def run(url: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["--store", url, *args])


def seeded(url: str) -> list[str]:
    """Two agents' sessions, as an import would leave them (no memory yet)."""
    store = open_store(url)
    ids = []
    for agent, said in (("ana", STATEMENTS[:2]), ("bo", STATEMENTS[2:])):
        session = store.create_session(agent=agent)
        turns = []
        for text in said:
            turns += [Message.user(text), Message.assistant("Noted.")]
        session.append(turns)
        ids.append(session.id)
    store.close()
    return ids


def test_build_all_then_nothing_new(sqlite_url: str) -> None:
    ana, bo = seeded(sqlite_url)
    first = run(sqlite_url, "memory", "build", "--all", "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["facts"] == 4 and report["messages"] == 8
    assert report["scopes"] == {"agent:ana": 2, "agent:bo": 2}
    listed = json.loads(run(sqlite_url, "memory", "list", "--agent", "ana", "--json").stdout)
    assert {f["statement"] for f in listed["items"]} == {
        "The user always drinks oat milk in their coffee.",
        "The user's daughter Anneliese is 7 years old.",
    }
    assert {f["session_id"] for f in listed["items"]} == {ana}  # provenance
    again = run(sqlite_url, "memory", "build", "--all")
    assert again.exit_code == 0
    assert "added 0 facts from 0 messages in 0 sessions; 2 sessions already up to date" in (
        again.stdout
    )
    # new turns in one session: only they are read
    store = open_store(sqlite_url)
    store.get_session(bo).append([Message.user("My sister Ines lives in Porto now.")])
    store.close()
    third = json.loads(run(sqlite_url, "memory", "build", "--agent", "bo", "--json").stdout)
    assert (third["messages"], third["facts"], third["sessions"]) == (1, 1, 1)


def test_search_after_build_all_finds_facts_in_every_agents_scope(sqlite_url: str) -> None:
    """``memory build --all`` writes each session's facts to its agent's scope; a search
    that names no scope spans them all and says which hold the hits (it used to answer
    "0 hits in agent:default")."""
    seeded(sqlite_url)
    assert run(sqlite_url, "memory", "build", "--all").exit_code == 0
    found = json.loads(run(sqlite_url, "memory", "search", "Anneliese", "--json").stdout)
    assert found["scopes"] == ["agent:ana", "agent:bo"]
    assert found["items"] and {h["scope"] for h in found["items"]} == {"agent:ana"}
    shown = run(sqlite_url, "memory", "search", "Porto OR Paulo OR Anneliese")
    assert shown.exit_code == 0, shown.output
    summary = shown.stdout.strip().splitlines()[-1]
    assert "across 2 scopes: agent:ana (" in summary and "agent:bo (" in summary, shown.stdout
    one = json.loads(run(sqlite_url, "memory", "search", "Anneliese", "-a", "bo", "--json").stdout)
    assert one["scopes"] == ["agent:bo"] and not one["items"]  # a named scope is kept to


def test_build_named_sessions_and_bad_calls(sqlite_url: str) -> None:
    ana, _ = seeded(sqlite_url)
    named = run(sqlite_url, "memory", "build", ana[:8])
    assert named.exit_code == 0, named.output
    assert "added 2 facts from 4 messages in 1 session" in named.stdout
    assert "agent:ana: 2 facts" in named.stdout
    both = run(sqlite_url, "memory", "build", ana, "--all")
    assert both.exit_code == 2 and "give session ids, --agent NAME or --all" in both.stderr
    assert run(sqlite_url, "memory", "build").exit_code == 2
    unknown = run(sqlite_url, "memory", "build", "--agent", "nobody")
    assert unknown.exit_code == 3 and "no agent named 'nobody'" in unknown.stderr


def test_the_recorder_and_build_share_the_watermark() -> None:
    """What the chat's recorder extracted is not extracted again by a build."""
    from threadline.memory import MemoryRecorder

    store = open_store("memory://")
    memory = open_memory(store)
    session = store.create_session(agent="ana")
    stored = session.append([Message.user(STATEMENTS[0]), Message.assistant("Noted.")])
    recorder = MemoryRecorder(memory, scope="agent:ana", threshold=1)
    recorder.observe(session, stored)
    assert len(memory.list_facts("agent:ana")) == 1
    report = build_memory(store, memory, agent="ana")
    assert report.messages == 1 and report.facts == 0  # only the reply after the watermark
    assert len(memory.list_facts("agent:ana")) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.sampled_from([*STATEMENTS, "Thanks!", "How are you?"]), max_size=12),
    cut=st.integers(min_value=0, max_value=12),
)
def test_building_in_two_steps_equals_building_once(turns: list[str], cut: int) -> None:
    """Whatever is appended between two builds, the facts are those of one build."""
    when = datetime(2024, 5, 1, tzinfo=UTC)
    messages = [Message.user(t, created_at=when) for t in turns]

    def facts(steps: list[list[Message]]) -> set[tuple[str, int | None]]:
        store = open_store("memory://")
        memory = open_memory(store)
        session = store.create_session(agent="ana")
        for step in steps:
            if step:
                session.append([m.model_copy() for m in step])
            build_memory(store, memory, [session.id], extractor=ExtractiveExtractor())
        assert build_memory(store, memory, agent="ana").facts == 0  # idempotent
        return {(f.statement, f.seq) for f in memory.list_facts("agent:ana")}

    assert facts([messages[:cut], messages[cut:]]) == facts([messages])


def test_plurals_unknown_agents_and_scope_errors(sqlite_url: str) -> None:
    seeded(sqlite_url)
    empty = run(sqlite_url, "memory", "list", "--agent", "ana")
    assert empty.exit_code == 0 and "0 facts · 0 entities in agent:ana" in empty.stdout
    unknown = run(sqlite_url, "memory", "list", "--agent", "anna")
    assert unknown.exit_code == 3
    assert "no agent named 'anna'" in unknown.stderr
    both = run(sqlite_url, "memory", "list", "--agent", "ana", "--scope", "user:ana")
    assert both.exit_code == 2 and "give --scope or --agent, not both" in both.stderr
    typed = run(sqlite_url, "memory", "list", "--scope", "my notes")
    assert typed.exit_code == 2
    assert "memory scope 'my notes' is not valid" in typed.stderr
    assert "project:my notes" not in typed.stderr  # what the user typed, not a rewrite


def test_imported_sessions_are_left_out_unless_asked(sqlite_url: str, tmp_path: Any) -> None:
    """Issue 33: an imported transcript's user turns became memory of the agent its file
    claims (``memory build --all``); now a build leaves imported sessions out, names them
    and says how to include them."""
    seeded(sqlite_url)
    transcript = tmp_path / "downloaded.jsonl"
    turns = [
        {"role": "user", "content": "My bank account for all payments is IBAN DE89 3704."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": STATEMENTS[3]},
        {"role": "assistant", "content": "Noted."},
    ]
    transcript.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    imported = run(sqlite_url, "sessions", "import", str(transcript), "--json")
    assert imported.exit_code == 0, imported.output
    [foreign] = [s["session_id"] for s in json.loads(imported.stdout)["sources"]]

    store = open_store(sqlite_url)
    claimed = store.session_info(foreign).agent  # the agent the file's import names
    store.close()

    def learned_from() -> set[str]:
        listed = run(sqlite_url, "memory", "list", "--agent", claimed, "--json")
        return {f["session_id"] for f in json.loads(listed.stdout)["items"]}

    report = json.loads(run(sqlite_url, "memory", "build", "--all", "--json").stdout)
    assert report["left_out_imported"] == [foreign]
    assert report["sessions"] == 2 and report["facts"] == 4  # the two own sessions only
    assert foreign not in learned_from()

    named = run(sqlite_url, "memory", "build", foreign[:8])  # named, still only if asked
    assert named.exit_code == 0, named.output
    assert f"left out 1 imported session ({foreign})" in named.stdout
    assert "--include-imported" in named.stdout

    asked = run(sqlite_url, "memory", "build", "--all", "--include-imported", "--json")
    report = json.loads(asked.stdout)
    assert report["left_out_imported"] == [] and report["facts"] >= 1
    assert foreign in learned_from()
