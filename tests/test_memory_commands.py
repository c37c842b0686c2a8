"""``threadline context`` and ``threadline compact`` for sessions of an agent with memory.

``context`` shows the memories the next call would get; ``compact`` flushes pending
memory extraction before it summarizes, as chat does; both number checkpoints within
the session, as ``sessions show`` does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from threadline import open_store
from threadline.agent import Agent
from threadline.agent.config import load_agent
from threadline.cli.app import app
from threadline.llm.scripted import ScriptedChatModel
from threadline.memory import open_memory

AGENT_FILE = """model: openai/gpt-4o
summarizer: extractive
memory:
  enabled: true
  scope: user:dana
  auto_extract: false
"""


def ok(url: str, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--store", url, *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture
def helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An agent file ``./agents/helper.yaml`` with memory on (extraction only on flush)."""
    agents = tmp_path / "agents"
    agents.mkdir()
    path = agents / "helper.yaml"
    path.write_text(AGENT_FILE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return path


def chat(url: str, *texts: str) -> str:
    """A session of ``helper`` with these turns; its flagged exchanges stay pending."""
    store = open_store(url)
    agent = Agent(load_agent("helper"), store=store, model=ScriptedChatModel(default="Got it."))
    try:
        session = agent.new_session()
        for text in texts:
            agent.run_turn(session, text)
        return session.id
    finally:
        agent.close()
        store.close()


def facts(url: str) -> list[str]:
    with open_store(url) as store:
        memory = open_memory(store)
        try:
            return [f.statement for f in memory.list_facts("user:dana")]
        finally:
            memory.close()


def test_compact_flushes_pending_memory_extraction_before_it_summarizes(
    sqlite_url: str, helper: Path
) -> None:
    sid = chat(sqlite_url, "I prefer PostgreSQL for new services.", "I live in Lyon now.")
    assert facts(sqlite_url) == []  # flagged, pending: auto_extract is off
    data = json.loads(
        ok(sqlite_url, "compact", sid, "--keep-recent", "1", "--keep-turns", "0", "--json").stdout
    )
    assert data["status"] == "compacted"
    assert "The user prefers PostgreSQL for new services." in facts(sqlite_url)


def test_compact_with_a_memoryless_agent_leaves_memory_alone(sqlite_url: str, helper: Path) -> None:
    sid = chat(sqlite_url, "I prefer PostgreSQL for new services.", "I live in Lyon now.")
    ok(sqlite_url, "compact", sid, "--keep-recent", "1", "--keep-turns", "0", "--agent", "default")
    assert facts(sqlite_url) == []


def test_context_shows_the_memories_the_next_call_would_get(sqlite_url: str, helper: Path) -> None:
    ok(sqlite_url, "memory", "add", "Dana prefers PostgreSQL for new services.", "-a", "helper")
    sid = chat(sqlite_url, "Which database should the reports service use?")
    text = ok(sqlite_url, "context", sid).stdout
    assert re.search(r"^  Memories +\d+ +1 ", text, re.M), text
    assert "tools - memory reserve)" in " ".join(text.split())  # what the budget leaves out
    report = json.loads(ok(sqlite_url, "context", sid, "--json").stdout)["report"]
    assert (
        report["memories"] == [line for line in report["memories"] if "PostgreSQL" in line]
        and report["memories"]
    )
    assert report["memory_reserve"] > 0
    off = json.loads(ok(sqlite_url, "context", sid, "--agent", "default", "--json").stdout)
    assert (off["report"]["memories"], off["report"]["memory_reserve"]) == ([], 0)
    assert "memory reserve" not in ok(sqlite_url, "context", sid, "--agent", "default").stdout


def test_checkpoints_are_numbered_within_their_session(sqlite_url: str, helper: Path) -> None:
    first = chat(sqlite_url, "We decided to ship on Friday.", "I use pytest.")
    second = chat(sqlite_url, "We decided to deploy on Fly.io.", "I use ruff.")
    ok(sqlite_url, "compact", first, "--keep-recent", "1", "--keep-turns", "0")
    data = json.loads(
        ok(
            sqlite_url, "compact", second, "--keep-recent", "1", "--keep-turns", "0", "--json"
        ).stdout
    )
    assert data["checkpoint_number"] == 1 and data["checkpoint"]["id"] != 1  # store ids are not
    shown = ok(sqlite_url, "compact", second, "--keep-recent", "0", "--keep-turns", "0").stdout
    assert "checkpoint #2" in shown
    assert "Summary:          checkpoint #2:" in ok(sqlite_url, "context", second).stdout
