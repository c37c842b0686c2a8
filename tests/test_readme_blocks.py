"""Every Python block of the README runs as written: each in a fresh directory of its
own (where its relative store URL makes a new store) in a new interpreter, so a block
that leans on another's names or session fails here. The framework examples also print
what they say they do. A block that imports a framework runs when that framework is
installed (CI installs the dev extra, which holds them all) and is skipped naming its
extra otherwise; the Agents SDK block's model is a local server speaking the Responses
API, reached through the SDK's own ``OPENAI_BASE_URL``."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.responses_server import FakeResponses

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(?:<!-- example: ([\w-]+) -->\n)?```python\n(.*?)```", re.S)
EXPECTED = {
    "agents-budgeted": re.compile(r"^[1-7]?\d items in the window; 80 stored; .*[Ss]ummary"),
    "langgraph": re.compile(r"^you said: again$"),
    "adk": re.compile(r"^\{'user:tier': 'gold'\} \{'tier': 'gold'\}$"),
    "pydantic-ai": re.compile(r"^4 messages stored$"),
}
"""The last line each framework example prints."""
FRAMEWORKS = {
    "agents": "agents",
    "langchain_core": "langchain",
    "langgraph": "langgraph",
    "google.adk": "adk",
    "pydantic_ai": "pydantic-ai",
}
"""Module a block imports -> the extra that installs it."""
EXAMPLE_LINES = 17
"""A framework example stays short."""
AGENT_REPLY = "Hello from the fake model."


@dataclass(frozen=True)
class Block:
    number: int
    name: str | None
    code: str

    @property
    def id(self) -> str:
        return self.name or f"block-{self.number}"

    def needs(self) -> list[tuple[str, str]]:
        """(module, extra) of each framework it imports."""
        return [
            (module, extra)
            for module, extra in FRAMEWORKS.items()
            if re.search(rf"^\s*(from|import) {re.escape(module)}\b", self.code, re.M)
        ]


def blocks() -> list[Block]:
    found = BLOCK.findall(README.read_text(encoding="utf-8"))
    return [Block(i, name or None, code) for i, (name, code) in enumerate(found, start=1)]


def test_the_readme_blocks_are_all_found() -> None:
    found = blocks()
    assert len(found) >= 8
    assert {b.name for b in found if b.name} == set(EXPECTED)


def run(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=180,
    )


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b.id)
def test_the_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    for module, extra in block.needs():
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"needs pip install 'threadline[{extra}]'")
    if block.name is not None:
        assert len(block.code.strip().splitlines()) <= EXAMPLE_LINES, "an example stays short"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THREADLINE_"))}
    env.update(PYTHONWARNINGS="ignore", OPENAI_AGENTS_DISABLE_TRACING="1")
    if "Runner.run(" in block.code:
        with FakeResponses() as server:
            server.reply_text(AGENT_REPLY)
            env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="test")
            done = run(block.code, tmp_path, env)
            assert done.returncode == 0, done.stderr
            assert server.last_json["input"][-1]["content"] == "hello"
        assert AGENT_REPLY in done.stdout and "'hello'" in done.stdout, done.stdout
        return
    done = run(block.code, tmp_path, env)
    assert done.returncode == 0, done.stderr
    if block.name is not None:
        last = done.stdout.strip().splitlines()[-1]
        assert EXPECTED[block.name].match(last), done.stdout
