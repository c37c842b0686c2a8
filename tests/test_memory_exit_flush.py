"""Nothing pending is lost (issue 23): a fact said just before the end of a chat is stored
on ``/quit``, Ctrl-D and the end of ``--message``, on the server's eviction and on
``Agent.close()``; a killed process's pending state is flushed by the agent's next run.

The chat runs the real OpenAI-compatible provider against the fake server
(``tests.fakes.FakeOpenAI``), as ``tests/test_chat.py`` does; the memory is read back
with ``threadline memory list --agent mt1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from typer.testing import CliRunner

from tests.fakes import FakeOpenAI
from tests.fakes.cli_env import fake_openai_cwd
from threadline import open_store
from threadline.agent import Agent, AgentConfig
from threadline.agent.config import MemoryConfig
from threadline.cli import chat as chat_module
from threadline.cli.app import app
from threadline.llm.scripted import ScriptedChatModel
from threadline.memory import open_memory

MODEL = "compatible/gpt-4o"
OAT_MILK = "I always drink oat milk in my coffee."
STORED = "The user always drinks oat milk in their coffee."
AGENT_YAML = """\
name: mt1
model: openai/gpt-4o
system_prompt: You are a test agent.
summarizer: extractive
memory:
  enabled: true
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAI]:
    with fake_openai_cwd(monkeypatch, tmp_path, {"mt1": AGENT_YAML}) as srv:
        yield srv


def chat_repl(url: str, lines: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``threadline chat mt1 --new`` as if in a terminal, typing ``lines`` then Ctrl-D."""
    monkeypatch.setattr(chat_module, "stdin_is_interactive", lambda: True)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text("".join(line + "\r" for line in lines) + "\x04")
        return CliRunner().invoke(app, ["--store", url, "chat", "mt1", "--new", "--model", MODEL])


def listed(url: str) -> list[str]:
    result = CliRunner().invoke(app, ["--store", url, "memory", "list", "--agent", "mt1", "--json"])
    assert result.exit_code == 0, result.stderr
    return [f["statement"] for f in json.loads(result.stdout)["items"]]


def test_quit_stores_the_pending_fact(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_text("Noted.")
    result = chat_repl(sqlite_url, [OAT_MILK, "/quit"], monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert listed(sqlite_url) == [STORED]


def test_ctrl_d_stores_the_pending_fact(
    fake: FakeOpenAI, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.reply_text("Noted.")
    result = chat_repl(sqlite_url, [OAT_MILK], monkeypatch)  # then Ctrl-D
    assert result.exit_code == 0, result.stderr
    assert listed(sqlite_url) == [STORED]


def test_the_end_of_message_stores_the_pending_fact(fake: FakeOpenAI, sqlite_url: str) -> None:
    fake.reply_text("Noted.")
    result = CliRunner().invoke(
        app,
        ["--store", sqlite_url, "chat", "mt1", "--new", "--model", MODEL, "--message", OAT_MILK],
    )
    assert result.exit_code == 0, result.stderr
    assert listed(sqlite_url) == [STORED]


def memory_agent(store: Any, name: str = "mt1") -> Agent:
    config = AgentConfig(name=name, model="scripted", memory=MemoryConfig(enabled=True))
    return Agent(config, store=store, model=ScriptedChatModel(default="Noted."))


def test_agent_close_flushes_below_the_threshold() -> None:
    store = open_store("memory://")
    agent = memory_agent(store)
    session = agent.new_session()
    agent.run_turn(session, OAT_MILK)
    assert open_memory(store).list_facts("agent:mt1") == []  # 1 flagged, threshold 5
    agent.close()
    assert [f.statement for f in open_memory(store).list_facts("agent:mt1")] == [STORED]


KILLED_RUN = """
import os, sys
from threadline import open_store
from threadline.agent import Agent, AgentConfig
from threadline.agent.config import MemoryConfig
from threadline.llm.scripted import ScriptedChatModel
store = open_store(sys.argv[1])
config = AgentConfig(name="mt1", model="scripted", memory=MemoryConfig(enabled=True))
agent = Agent(config, store=store, model=ScriptedChatModel(default="Noted."))
session = agent.new_session(lock=None)
agent.run_turn(session, sys.argv[2])
print(session.id, flush=True)
os._exit(9)  # killed: no close, no flush
"""


def test_a_killed_runs_pending_state_is_flushed_by_the_next_run(sqlite_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, sqlite_url, OAT_MILK],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr
    killed_session = done.stdout.split()[0]
    store = open_store(sqlite_url)
    memory = open_memory(store)
    assert memory.list_facts("agent:mt1") == []
    assert memory.pending_sessions() == [killed_session]  # durable
    other = memory_agent(store, "someone-else")  # another agent's run leaves it alone
    other.run_turn(other.new_session(), "hello")
    other.close()
    assert memory.pending_sessions() == [killed_session]
    agent = memory_agent(store)
    agent.run_turn(agent.new_session(), "What do I drink?")
    facts = memory.list_facts("agent:mt1")
    assert [(f.statement, f.session_id) for f in facts] == [(STORED, killed_session)]
    assert memory.pending_sessions() == []
    agent.close()
    store.close()


def test_server_eviction_flushes(fake: FakeOpenAI, tmp_path: Path) -> None:
    from threadline.server.config import ServerConfig
    from threadline.server.runner import AgentRunner

    fake.reply_text("Noted.")
    now = [1000.0]
    store = open_store(f"sqlite:///{tmp_path}/server.db")
    runner = AgentRunner(store, ServerConfig(token="t" * 32, idle_seconds=60), clock=lambda: now[0])
    session = store.create_session(agent="mt1", model=MODEL)
    runner.run_turn(session.id, OAT_MILK, MODEL)
    deadline = time.monotonic() + 10
    while runner.is_running(session.id) and time.monotonic() < deadline:
        time.sleep(0.01)
    memory = open_memory(store)
    assert memory.list_facts("agent:mt1") == []
    now[0] += 61
    assert runner.evict_idle() == [session.id]
    assert [f.statement for f in memory.list_facts("agent:mt1")] == [STORED]
    runner.close()
    store.close()
