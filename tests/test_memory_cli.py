"""``threadline memory ...``, ``/memory`` in chat and ``threadline demo --memory``."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from threadline import open_store
from threadline.agent import Agent, AgentConfig, MemoryConfig
from threadline.cli.app import app
from threadline.cli.chat import ChatController
from threadline.cli.slash import ParsedCommand, dispatch
from threadline.llm.scripted import ScriptedChatModel
from threadline.memory import open_memory

ESC = "\x1b"


def run(url: str, *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, ["--store", url, *args], input=input)


def ok(url: str, *args: str, input: str | None = None) -> Any:
    result = run(url, *args, input=input)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def as_json(url: str, *args: str) -> Any:
    return json.loads(ok(url, *args, "--json").stdout)


def test_add_list_search_show_forget(sqlite_url: str) -> None:
    added = as_json(
        sqlite_url,
        "memory",
        "add",
        "Dana prefers PostgreSQL for new services.",
        "--subject",
        "Dana",
    )
    assert added["scope"] == "agent:default" and added["subject"] == "Dana"
    as_json(sqlite_url, "memory", "add", "Dana lives in Lyon.", "--subject", "Dana")
    listed = as_json(sqlite_url, "memory", "list")
    assert listed["scope"] == "agent:default"
    assert {f["statement"] for f in listed["items"]} >= {
        "Dana prefers PostgreSQL for new services.",
        "Dana lives in Lyon.",
    }
    found = as_json(sqlite_url, "memory", "search", "PostgreSQL")
    assert found["scopes"] == ["agent:default"] and found["items"]
    assert "PostgreSQL" in found["items"][0]["text"]
    shown = as_json(sqlite_url, "memory", "show", "Dana")
    assert shown["entity"]["name"] == "Dana" and len(shown["facts"]) >= 2
    # forget by a unique prefix: kept, marked, no longer listed as current
    gone = as_json(sqlite_url, "memory", "forget", added["id"][:8])
    assert gone == {"id": added["id"], "forgotten": True}
    current = as_json(sqlite_url, "memory", "list")
    assert added["id"] not in {f["id"] for f in current["items"]}
    everything = as_json(sqlite_url, "memory", "list", "--all")
    (kept,) = [f for f in everything["items"] if f["id"] == added["id"]]
    assert kept["retracted"] is True
    human = ok(sqlite_url, "memory", "list", "--all").stdout
    assert "forgotten" in human and "Lyon" in human


def test_scopes_keep_memories_apart(sqlite_url: str) -> None:
    ok(sqlite_url, "memory", "add", "The site deploys on Fridays.", "--scope", "project:site")
    ok(sqlite_url, "memory", "add", "Coder likes tabs.", "--agent", "coder")
    assert [
        f["statement"] for f in as_json(sqlite_url, "memory", "list", "--scope", "site")["items"]
    ] == ["The site deploys on Fridays."]
    assert [
        f["statement"] for f in as_json(sqlite_url, "memory", "list", "-a", "coder")["items"]
    ] == ["Coder likes tabs."]
    assert as_json(sqlite_url, "memory", "list")["items"] == []


def test_the_agent_files_scope_is_used(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.yaml").write_text("memory:\n  enabled: true\n  scope: user:dana\n")
    monkeypatch.chdir(tmp_path)
    ok(sqlite_url, "memory", "add", "Dana uses vim.", "--agent", "helper")
    assert as_json(sqlite_url, "memory", "list", "--scope", "user:dana")["items"]


def test_export_and_import_round_trip(sqlite_url: str, tmp_path: Path) -> None:
    ok(sqlite_url, "memory", "add", "Dana prefers PostgreSQL.", "--subject", "Dana")
    out = tmp_path / "mem.json"
    ok(sqlite_url, "memory", "export", "-o", str(out))
    data = json.loads(out.read_text())
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = as_json(other, "memory", "import", str(out))
    assert imported["imported"] >= 1
    assert [f["statement"] for f in as_json(other, "memory", "list")["items"]] == [
        "Dana prefers PostgreSQL."
    ]
    again = as_json(other, "memory", "import", str(out))  # importing twice adds nothing
    assert len(as_json(other, "memory", "list")["items"]) == 1, again
    piped = ok(sqlite_url, "memory", "export", "-o", "-").stdout
    assert json.loads(piped) == data
    third = f"sqlite:///{tmp_path / 'third.db'}"
    piped_in = ok(third, "memory", "import", "-", "--json", input=piped).stdout
    assert json.loads(piped_in)["imported"] >= 1
    assert len(as_json(third, "memory", "list")["items"]) == 1


def test_import_keeps_present_records_and_takes_one_scope(sqlite_url: str, tmp_path: Path) -> None:
    """An edited export imported back leaves the scope's facts as they are; --replace
    overwrites them; a file of another scope is refused with the scope to name."""
    added = as_json(sqlite_url, "memory", "add", "Alice lives in Oslo.", "--scope", "user:alice")
    out = tmp_path / "alice.json"
    ok(sqlite_url, "memory", "export", "--scope", "user:alice", "-o", str(out))
    data = json.loads(out.read_text())
    for fact in data["facts"]:
        fact["statement"] = "Alice lives in Mordor."
    out.write_text(json.dumps(data))

    def statements() -> list[str]:
        listed = as_json(sqlite_url, "memory", "list", "--scope", "user:alice")
        return [f["statement"] for f in listed["items"]]

    report = as_json(sqlite_url, "memory", "import", str(out), "--scope", "user:alice")
    assert (report["imported"], report["added"], report["replaced"]) == (0, 0, 0)
    assert report["kept"] == len(data["facts"]) and report["scope"] == "user:alice"
    assert statements() == ["Alice lives in Oslo."]
    wrong = run(sqlite_url, "memory", "import", str(out))  # the default agent's scope
    assert wrong.exit_code == 2
    assert "holds no records of agent:default" in wrong.stderr
    assert "user:alice (1 record)" in wrong.stderr and "--scope" in wrong.stderr
    assert statements() == ["Alice lives in Oslo."]
    text = ok(sqlite_url, "memory", "import", str(out), "--scope", "user:alice").stdout
    assert "kept 1 record already present (--replace overwrites those of the scope)" in text
    replaced = as_json(
        sqlite_url, "memory", "import", str(out), "--scope", "user:alice", "--replace"
    )
    assert replaced["replaced"] == 1 and replaced["imported"] == 1
    assert statements() == ["Alice lives in Mordor."]
    assert added["id"] == data["facts"][0]["id"]


def test_bad_input_is_a_clear_error_and_changes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    ok(sqlite_url, "memory", "add", "Dana lives in Lyon.")
    bad = tmp_path / "bad.json"
    for content, needle in (("{not json", "not a JSON document"), ("[1, 2]", "JSON object")):
        bad.write_text(content)
        result = run(sqlite_url, "memory", "import", str(bad))
        assert result.exit_code == 2 and needle in result.stderr
    missing = run(sqlite_url, "memory", "forget", "ffffffff-0000")
    assert missing.exit_code == 3 and "no fact" in missing.stderr
    nobody = run(sqlite_url, "memory", "show", "Nobody")
    assert nobody.exit_code == 3 and "no entity" in nobody.stderr
    scope = run(sqlite_url, "memory", "list", "--scope", "user:../etc")
    assert scope.exit_code == 2 and "scope" in scope.stderr
    empty = run(sqlite_url, "memory", "add", "   ")
    assert empty.exit_code == 2
    assert len(as_json(sqlite_url, "memory", "list")["items"]) == 1


def test_stored_text_is_escaped_for_the_terminal(sqlite_url: str) -> None:
    ok(sqlite_url, "memory", "add", f"evil {ESC}[31mred{ESC}[0m text", "--subject", "Eve")
    for args in (("list",), ("search", "evil"), ("show", "Eve")):
        out = ok(sqlite_url, "memory", *args).stdout
        assert ESC not in out and "\\x1b" in out, args


def test_memory_on_redis_is_not_supported(sqlite_url: str) -> None:
    from threadline.errors import NotSupported

    class RedisLike:
        url = "redis://127.0.0.1:6379/0"

    with pytest.raises(NotSupported, match="Redis"):
        open_memory(RedisLike())  # type: ignore[arg-type]
    with pytest.raises(NotSupported):
        Agent(
            AgentConfig(name="r", memory=MemoryConfig(enabled=True)),
            store=RedisLike(),  # type: ignore[arg-type]
        )


# -- /memory in chat ------------------------------------------------------------------


def controller(url: str, *, enabled: bool = True) -> tuple[ChatController, Console]:
    config = AgentConfig(
        name="unit",
        model="openai/gpt-4o",
        summarizer="extractive",
        memory=MemoryConfig(enabled=enabled, extraction_threshold=1),
    )
    agent = Agent(config, store=open_store(url), model=ScriptedChatModel(default="Noted."))
    console = Console(record=True, width=120, file=io.StringIO())
    return ChatController(agent, console=console, err_console=console), console


def test_slash_memory_lists_searches_and_prints_json(sqlite_url: str) -> None:
    chat, console = controller(sqlite_url)
    try:
        chat.send("I prefer PostgreSQL and I always use pytest.")
        dispatch(chat, ParsedCommand("memory", ""))
        listing = console.export_text()
        assert "PostgreSQL" in listing and "agent:unit" in listing
        dispatch(chat, ParsedCommand("memory", "--json pytest"))
        text = console.export_text()
        data = json.loads(text[text.index("{") :])
        assert data["query"] == "pytest" and data["items"]
        assert all(item["session_id"] for item in data["items"] if item["kind"] == "fact")
    finally:
        chat.close()


def test_slash_memory_says_when_memory_is_off(sqlite_url: str) -> None:
    chat, console = controller(sqlite_url, enabled=False)
    try:
        dispatch(chat, ParsedCommand("memory", "anything"))
        assert "memory is off" in console.export_text()
    finally:
        chat.close()


# -- threadline demo --memory ------------------------------------------------------------


def test_demo_memory_runs_offline_and_shows_the_memory_section(sqlite_url: str) -> None:
    result = run(sqlite_url, "demo", "--memory")
    assert result.exit_code == 0, (result.output, result.exception)
    out = result.stdout
    assert "SIMULATED" in out
    assert "Session one" in out and "Session two" in out
    assert "recalled for this message" in out and "PostgreSQL" in out
    assert re.search(r"^  Memories +\d+ +1 ", out, re.M)  # the report's memory section
    assert "flushed pending extraction" in out
