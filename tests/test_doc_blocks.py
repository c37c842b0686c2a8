"""Every code block of the README and of every page under ``docs/`` runs as written, or
says on the line before it why it cannot (``<!-- not-run: REASON -->``: an API key, a
long-running server, the whole test suite); ``test_the_blocks_are_counted`` counts both.
A block's language says how it runs:

- ``python``: in a new interpreter, in a fresh directory of its own (where its relative
  store URL makes a new store), so a block that leans on another's names fails. A block
  that imports a framework runs when that framework is installed (CI installs the dev
  extra, which holds them all) and is skipped naming its extra otherwise; the Agents SDK
  block's model is a local server speaking the Responses API, reached through the SDK's
  own ``OPENAI_BASE_URL``. A block named ``<!-- example: NAME -->`` also prints what it
  says it does (``EXPECTED``).
- ``sh``: every ``sh`` block of a page in order, in one shell, as a newcomer would type
  them: a temporary HOME holding one Claude Code session
  (``~/.claude/projects/...``), the default store under it, ``openai/`` models answered
  by a local fake Chat Completions server, no other network.
- ``yaml``: an agent file (``parse_agent``); ``markdown``: a ``SKILL.md``
  (``parse_skill``); ``toml``: the settings file (``parse_settings``) or an MCP client's
  entry for threadline; ``json``: an MCP client's entry.
- ``text``: a synopsis of ``threadline`` commands: each command exists and every option
  it shows is one of that command's; together the synopses name every command.
- ``tree``: a map of ``src/threadline/``: every path it names exists.

``python tests/test_doc_blocks.py`` prints the blocks per page: run, marked.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # run as a script: the tests package from this checkout
    sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.responses_server import FakeResponses  # noqa: E402

SRC = ROOT / "src"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARK = re.compile(r"^<!-- (example|not-run): (.+?) -->$")
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
    "mcp": "mcp",
    "fastapi": "server",
}
"""Module a block imports -> the extra that installs it."""
EXAMPLE_LINES = 17
"""A framework example stays short."""
AGENT_REPLY = "Hello from the fake model."
CHAT_REPLIES = 8
"""Answers the fake model has ready for one page's shell blocks."""
MOST_MARKED = 0.25
"""At most this share of the blocks may be marked not-run."""
README_MAX_CHARS = 12_000


@dataclass(frozen=True)
class Block:
    page: str
    """Path from the repository root."""
    number: int
    """1-based, within the page."""
    line: int
    lang: str
    code: str
    name: str | None = None
    """``<!-- example: NAME -->``."""
    reason: str | None = None
    """``<!-- not-run: REASON -->``."""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.name or self.number}"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def needs(self) -> list[tuple[str, str]]:
        """(module, extra) of each framework it imports."""
        return [
            (module, extra)
            for module, extra in FRAMEWORKS.items()
            if re.search(rf"^\s*(from|import) {re.escape(module)}\b", self.code, re.M)
        ]


def page_blocks(path: Path) -> list[Block]:
    """The fenced blocks of one page, with the marker on the line before each."""
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        before = next((x.strip() for x in reversed(lines[:start]) if x.strip()), "")
        mark = MARK.match(before)
        kind, value = mark.groups() if mark else (None, None)
        found.append(
            Block(
                page=page,
                number=len(found) + 1,
                line=start + 1,
                lang=opened.group(2) if not opened.group(1) else f"indented {opened.group(2)}",
                code="\n".join(lines[start + 1 : i]) + "\n",
                name=value if kind == "example" else None,
                reason=value if kind == "not-run" else None,
            )
        )
        i += 1
    return found


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in page_blocks(page)]


def to_run(lang: str) -> list[Block]:
    return [b for b in all_blocks() if b.lang == lang and b.reason is None]


RUNS = ("python", "sh", "yaml", "markdown", "toml", "json", "text", "tree")


def counts() -> dict[str, Counter[str]]:
    """Per page: blocks run and marked not-run."""
    table: dict[str, Counter[str]] = {}
    for b in all_blocks():
        table.setdefault(b.page, Counter())["marked" if b.reason else "run"] += 1
    return table


# -- what every page must hold ------------------------------------------------------------


def test_every_block_runs_or_says_why_not() -> None:
    """A block in a language nothing runs (or indented, or unlabelled) fails here
    instead of going unchecked."""
    for b in all_blocks():
        assert b.reason is not None or b.lang in RUNS, (
            f"{b.where}: a ```{b.lang} block runs nowhere: use one of {RUNS} "
            "or put <!-- not-run: REASON --> on the line before it"
        )
        assert b.reason is None or len(b.reason) >= 10, f"{b.where}: say why it cannot run"


def test_the_blocks_are_counted() -> None:
    table = counts()
    run = sum(c["run"] for c in table.values())
    marked = sum(c["marked"] for c in table.values())
    assert len(table) >= 10 and run >= 30, table
    assert marked <= MOST_MARKED * (run + marked), f"{marked} of {run + marked} marked not-run"
    named = {b.name for b in all_blocks() if b.name}
    assert named == set(EXPECTED), named


def test_the_readme_is_short_and_names_the_ci_test_command() -> None:
    """The README's test command is the one CI runs (``.ci/run``: ``make test``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= README_MAX_CHARS, f"README.md is {len(text):,} characters"
    (first,) = [b for b in page_blocks(ROOT / "README.md") if "make test" in b.code]
    assert re.search(r"^make demo\b", first.code, re.M) and re.search(
        r"^make test\b", first.code, re.M
    )
    assert re.search(r"^make test$", (ROOT / ".ci/run").read_text(), re.M)


def test_no_page_sends_anyone_to_the_test_data() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text and "/work/" not in text, page


# -- python ------------------------------------------------------------------------------


def run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end in ``cwd``, its output kept as text."""
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=timeout
    )


def clean_env(home: Path) -> dict[str, str]:
    """This process's environment without threadline's or OpenAI's settings, the home
    (and so the default store, the config and the agents folder) under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THREADLINE_"))}
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env.pop(name, None)
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        PYTHONWARNINGS="ignore",
        OPENAI_AGENTS_DISABLE_TRACING="1",
    )
    return env


@pytest.mark.parametrize("block", to_run("python"), ids=lambda b: b.id)
def test_python_block(block: Block, tmp_path: Path) -> None:
    for module, extra in block.needs():
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"needs pip install 'threadline[{extra}]'")
    if block.name is not None:
        assert len(block.code.strip().splitlines()) <= EXAMPLE_LINES, "an example stays short"
    env = clean_env(tmp_path / "home")
    if "Runner.run(" in block.code:
        with FakeResponses() as server:
            server.reply_text(AGENT_REPLY)
            env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="test")
            done = run([sys.executable, "-c", block.code], tmp_path, env)
            assert done.returncode == 0, done.stderr
            assert server.last_json["input"][-1]["content"] == "hello"
        assert AGENT_REPLY in done.stdout and "'hello'" in done.stdout, done.stdout
        return
    done = run([sys.executable, "-c", block.code], tmp_path, env)
    assert done.returncode == 0, f"{block.where}\n{done.stderr}"
    if block.name is not None:
        last = done.stdout.strip().splitlines()[-1]
        assert EXPECTED[block.name].match(last), done.stdout


# -- sh: one shell per page --------------------------------------------------------------

CLAUDE_SESSION = "5f0c6d3e-8a41-4c55-9d7e-2b1f3a9c7e10"


def claude_code_session(home: Path, steps: int = 40) -> Path:
    """A Claude Code transcript where Claude Code keeps them: a migration run as tool
    calls with long test output, long enough that compaction has work to do."""
    records: list[dict[str, Any]] = []

    def add(kind: str, message: dict[str, Any]) -> None:
        n = len(records) + 1
        records.append(
            {
                "type": kind,
                "uuid": f"u{n}",
                "parentUuid": f"u{n - 1}" if n > 1 else None,
                "sessionId": CLAUDE_SESSION,
                "timestamp": f"2026-03-02T10:{n // 60:02d}:{n % 60:02d}Z",
                "cwd": "/home/dana/shop",
                "gitBranch": "orders-pg",
                "message": message,
            }
        )

    add("user", {"role": "user", "content": "Migrate the orders table to PostgreSQL."})
    for step in range(steps):
        call = f"toolu_{step:04d}"
        command = f"pytest tests/test_orders.py -k step{step}"
        content: list[dict[str, Any]] = [
            {"type": "text", "text": f"Step {step}: running the migration tests."},
            {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": command}},
        ]
        add(
            "assistant",
            {
                "role": "assistant",
                "id": f"m{step}",
                "model": "claude-sonnet-4-5",
                "content": content,
            },
        )
        output = "collected 12 items\n" + "tests/test_orders.py::test_ids PASSED\n" * 60
        result = {"type": "tool_result", "tool_use_id": call, "content": output}
        add("user", {"role": "user", "content": [result]})
    done = "The orders table now lives in PostgreSQL; the old ids are kept in legacy_id."
    add(
        "assistant",
        {
            "role": "assistant",
            "id": "mend",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": done}],
        },
    )
    path = home / ".claude" / "projects" / "-home-dana-shop" / f"{CLAUDE_SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def shell_script(blocks: list[Block]) -> str:
    """The page's blocks in one bash script; a failing command names its block."""
    parts = ["set -euo pipefail", "trap 'echo \"doc block failed: $__block\" >&2' ERR"]
    for b in blocks:
        parts += [f"__block='{b.where}'", b.code]
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize("page", sorted({b.page for b in to_run("sh")}))
def test_shell_blocks_of_the_page(page: str, tmp_path: Path) -> None:
    blocks = [b for b in to_run("sh") if b.page == page]
    home, work = tmp_path / "home", tmp_path / "work"
    env = clean_env(home)
    claude_code_session(home)
    work.mkdir()
    with FakeOpenAI() as model:
        for _ in range(CHAT_REPLIES):
            model.reply_text("We kept the old ids in legacy_id.")
        env.update(OPENAI_BASE_URL=model.url, OPENAI_API_KEY="test")
        done = run(["bash", "-c", shell_script(blocks)], work, env, timeout=300)
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n--- stdout ---\n{done.stdout[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr


# -- files a user writes: agents, skills, settings, MCP clients -------------------------


@pytest.mark.parametrize("block", to_run("yaml"), ids=lambda b: b.id)
def test_agent_file(block: Block) -> None:
    from threadline.agent.config import parse_agent

    parse_agent(block.code, source=block.where, default_name="example")


@pytest.mark.parametrize("block", to_run("markdown"), ids=lambda b: b.id)
def test_skill_file(block: Block, tmp_path: Path) -> None:
    from threadline.agent.skills import parse_skill

    skill = parse_skill(block.code, source=block.where, folder=tmp_path)
    assert skill.body


def mcp_entry(data: Any, block: Block) -> list[str]:
    """The command line an MCP client's config starts threadline with."""
    servers = data.get("mcpServers") or data.get("mcp_servers")
    assert isinstance(servers, dict) and "threadline" in servers, block.where
    entry = servers["threadline"]
    return [entry["command"], *entry.get("args", [])]


@functools.cache
def serves_mcp(argv: tuple[str, ...]) -> frozenset[str]:
    """The tools ``argv`` offers the MCP SDK's own client over stdio, in a home whose
    store holds an imported session (``threadline mcp`` serves a store that exists).
    Cached: the README and the MCP page give the same entry to several clients."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    assert argv[0] == "threadline", argv
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = clean_env(home)
        claude_code_session(home)
        imported = subprocess.run(
            ["threadline", "sessions", "import", str(home / ".claude")],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert imported.returncode == 0, imported.stderr
        params = StdioServerParameters(
            command=str(Path(sys.executable).parent / "threadline"),
            args=list(argv[1:]),
            env=env,
            cwd=tmp,
        )

        async def main() -> frozenset[str]:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                return frozenset(t.name for t in (await client.list_tools()).tools)

        return anyio.run(main)


@pytest.mark.parametrize("block", to_run("toml") + to_run("json"), ids=lambda b: b.id)
def test_config_file(block: Block, tmp_path: Path) -> None:
    data = json.loads(block.code) if block.lang == "json" else tomllib.loads(block.code)
    if "mcp_servers" in data or "mcpServers" in data:
        if importlib.util.find_spec("mcp") is None:
            pytest.skip("needs pip install 'threadline[mcp]'")
        assert "search_sessions" in serves_mcp(tuple(mcp_entry(data, block)))
        return
    from threadline.config import parse_settings

    parse_settings(block.code, source=block.where)


# -- synopses and the source map ---------------------------------------------------------


def cli_options() -> dict[tuple[str, ...], set[str]]:
    """Every ``threadline`` command by its words, with its option names."""
    import typer
    from typer._click import Context

    from threadline.cli.root import app

    root = typer.main.get_group(app)
    ctx = Context(root)
    found: dict[tuple[str, ...], set[str]] = {}

    def walk(command: Any, words: tuple[str, ...]) -> None:
        names = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        found[words] = {n for n in names if n.startswith("-")} | {"-h", "--help"}
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*words, name))

    walk(root, ())
    return found


OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def synopsis_commands(block: Block, known: dict[tuple[str, ...], set[str]]) -> set[tuple[str, ...]]:
    """The commands a synopsis shows. A line that starts with ``threadline`` or is
    indented at most two spaces names a command; deeper lines go on about it. Every
    option on a command's lines must be one of that command's."""
    shown: set[tuple[str, ...]] = set()
    current: tuple[str, ...] | None = None
    for n, line in enumerate(block.code.splitlines(), start=1):
        words = line.split()
        if not words:
            continue
        if words[0] == "threadline" or len(line) - len(line.lstrip()) <= 2:
            words = words[1:] if words[0] == "threadline" else words
            path = next((tuple(words[:k]) for k in (2, 1, 0) if tuple(words[:k]) in known), None)
            assert path is not None, f"{block.where}+{n}: no threadline command in {line!r}"
            current = path
            shown.add(path)
        assert current is not None, f"{block.where}+{n}: no command before {line!r}"
        for option in OPTION.findall(line):
            assert option in known[current], (
                f"{block.where}+{n}: threadline {' '.join(current)} has no {option}"
            )
    return shown


def test_synopses_show_real_commands_and_options_and_every_command() -> None:
    known = cli_options()
    shown: set[tuple[str, ...]] = set()
    for block in to_run("text"):
        shown |= synopsis_commands(block, known)
    leaves = {c for c in known if c and not any(o[: len(c)] == c and o != c for o in known)}
    assert leaves <= shown, f"commands no synopsis shows: {sorted(leaves - shown)}"


@pytest.mark.parametrize("block", to_run("tree"), ids=lambda b: b.id)
def test_source_map(block: Block) -> None:
    """Every path the map names exists, and it names every package."""
    first, *entries = block.code.splitlines()
    root = ROOT / first.strip()
    assert root.is_dir(), f"{block.where}: {first}"
    named: set[str] = set()
    for line in entries:
        if not line.startswith("  ") or line.startswith("   "):
            continue  # a description's continuation
        column = re.split(r"\s{2,}", line.strip())[0]
        for name in column.split(", "):
            assert (root / name).exists(), f"{block.where}: {name} is not in {first.strip()}"
            named.add(name.rstrip("/"))
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    assert packages <= named, f"{block.where}: packages missing: {sorted(packages - named)}"


def main() -> None:
    table = counts()
    for page, c in table.items():
        print(f"{page:32} {c['run']:3} run {c['marked']:3} marked not-run")
    run_total = sum(c["run"] for c in table.values())
    marked = sum(c["marked"] for c in table.values())
    print(f"{len(table)} pages with code: {run_total} blocks run, {marked} marked not-run")
    for b in all_blocks():
        if b.reason:
            print(f"  not run: {b.where}: {b.reason}")


if __name__ == "__main__":
    main()
