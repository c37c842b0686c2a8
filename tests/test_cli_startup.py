"""Commands that do not chat load no chat machinery (issue 13, fast startup).

Each case runs the real entry point in a fresh interpreter and reports which of
the heavy modules ended up in ``sys.modules``: a check of what is imported, not
a timing (``bench/startup.py`` times the processes).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from threadline import Message, open_store
from threadline.cli.commands import COMMANDS, SUMMARIES
from threadline.store.fork import fork_session

HEAVY = (
    "prompt_toolkit",
    "openai",
    "anthropic",
    "httpx",
    "threadline.agent.loop",
    "threadline.cli.chat",
    "threadline.llm",
    "threadline.compaction",
    "fastapi",
)
"""The REPL, the model providers and their HTTP client, the agent loop, the server."""

PROBE = """
import json, sys
import threadline.cli.app as app
sys.argv = ["threadline", *json.loads(sys.argv[1])]
code = 0
try:
    app.main()
except SystemExit as exc:
    code = exc.code or 0
print(json.dumps({"code": code, "loaded": [m for m in HEAVY if m in sys.modules]}))
"""


def loaded_after(args: list[str], heavy: tuple[str, ...] = HEAVY) -> dict[str, object]:
    code = PROBE.replace("HEAVY", json.dumps(list(heavy)))
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def store_url(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite://{tmp_path / 'store.db'}"
    store = open_store(url)
    session = store.create_session(agent="coder", model="gpt-4o", title="a session")
    session.append([Message.user("hello"), Message.assistant("hi")])
    store.close()
    return url, session.id


def test_version_imports_nothing_heavy() -> None:
    assert loaded_after(["--version"]) == {"code": 0, "loaded": []}


def test_sessions_list_and_show_import_nothing_heavy(store_url: tuple[str, str]) -> None:
    url, sid = store_url
    assert loaded_after(["--store", url, "sessions", "list"]) == {"code": 0, "loaded": []}
    assert loaded_after(["--store", url, "sessions", "show", sid]) == {"code": 0, "loaded": []}


def test_the_probe_sees_what_chat_loads(store_url: tuple[str, str]) -> None:
    """The same probe does see the chat machinery when a command needs it."""
    url, _ = store_url
    result = loaded_after(["--store", url, "chat", "--help"])
    assert result["code"] == 0
    assert "threadline.cli.chat" in result["loaded"]  # type: ignore[operator]


LISTING_EXTRAS = (
    "threadline.cli.copy_cmd",
    "threadline.store.copy",
    "threadline.interop",
    "threadline.cli.sync_cmd",
    "watchfiles",
)
"""What a listing needs none of: ``sessions copy``, ``sessions sync`` and its file
watcher, the importers and exporters."""


def test_sessions_list_builds_only_what_it_runs(store_url: tuple[str, str]) -> None:
    """A group's subcommands load when one runs: ``sessions list`` imports neither the
    copy command's module nor interop, and ``sessions copy --help`` does load it."""
    url, sid = store_url
    for args in (["sessions", "list"], ["sessions", "show", sid]):
        assert loaded_after(["--store", url, *args], LISTING_EXTRAS) == {"code": 0, "loaded": []}
    copy = loaded_after(["--store", url, "sessions", "copy", "--help"], LISTING_EXTRAS)
    assert copy["code"] == 0 and "threadline.cli.copy_cmd" in copy["loaded"]  # type: ignore[operator]


def test_deferred_models_still_validate() -> None:
    """Models build at first use (``defer_build``): validation, errors and JSON schema
    behave as if they were built at import."""
    from threadline import Message
    from threadline.errors import InvalidMessage

    assert Message.model_validate({"role": "user", "content": "hi"}).text == "hi"
    with pytest.raises(InvalidMessage):
        Message(role="nobody", content="x")  # type: ignore[arg-type]
    assert "content" in Message.model_json_schema()["properties"]


MODELS = (
    "pydantic",
    "pydantic_core",
    "tiktoken",
    "threadline.messages",
    "threadline.tokens",
    "threadline.context",
    "threadline.llm",
)
"""What loading messages costs: pydantic (about 100 ms with the first model), the token
counters, the context builder, the providers. A listing reads records, not messages."""


@pytest.fixture
def listed_store(tmp_path: Path) -> tuple[str, str]:
    """Titled sessions as a listing meets them: one with a retraction, and a fork."""
    url = f"sqlite://{tmp_path / 'store.db'}"
    store = open_store(url)
    first = store.create_session(agent="coder", model="gpt-4o", title="first")
    first.append([Message.user("hello"), Message.assistant("hi"), Message.user("oops")])
    first.retract([3])
    first.add_checkpoint(covers_up_to=2, summary="said hello")
    first.scratchpad_write("plan", "step 1")
    fork = fork_session(first, title="the fork")
    fork.append(Message.user("and then"))
    store.close()
    return url, first.id


@pytest.mark.parametrize(
    "args",
    [["sessions", "list"], ["sessions", "list", "--json"], ["sessions", "list", "--tree"]],
    ids=["table", "json", "tree"],
)
def test_sessions_list_loads_no_message_models(
    listed_store: tuple[str, str], args: list[str]
) -> None:
    url, _ = listed_store
    assert loaded_after(["--store", url, *args], MODELS) == {"code": 0, "loaded": []}


def test_sessions_show_loads_no_message_models(listed_store: tuple[str, str]) -> None:
    url, sid = listed_store
    for args in (["sessions", "show", sid], ["sessions", "show", sid, "--json"]):
        assert loaded_after(["--store", url, *args], MODELS) == {"code": 0, "loaded": []}


def test_the_probe_sees_message_models_when_messages_are_read(
    listed_store: tuple[str, str],
) -> None:
    """``sessions history`` decodes messages, and the probe does see it load them."""
    url, sid = listed_store
    result = loaded_after(["--store", url, "sessions", "history", sid], MODELS)
    assert result["code"] == 0
    assert {"pydantic", "threadline.messages"} <= set(result["loaded"])  # type: ignore[arg-type]


COMMAND_MODULES = tuple(
    dict.fromkeys(m for modules in COMMANDS.values() for m in modules if m != "threadline.cli.root")
)
HELP_LOADS_NONE = (
    *HEAVY,
    *MODELS,
    *COMMAND_MODULES,
    "threadline.agent",
    "threadline.store",
    "threadline.server",
    "threadline.interop",
    "threadline.memory",
)
"""``threadline --help`` lists the commands and imports none of them (issue 36): no
agent stack, no store, no pydantic."""


@pytest.mark.parametrize("args", [["--help"], ["-h"], []], ids=["--help", "-h", "no-args"])
def test_help_imports_no_command(args: list[str]) -> None:
    result = loaded_after(args, HELP_LOADS_NONE)
    assert result["loaded"] == []
    assert result["code"] == (0 if args else 2)


def test_help_lines_are_the_commands_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The help written from ``SUMMARIES`` is the help the built commands write: every
    command has a line, and each line is the first paragraph of the command's own help."""
    from typer.testing import CliRunner

    import threadline.cli.root as root

    assert set(SUMMARIES) == set(COMMANDS)
    monkeypatch.setattr(root, "_loaded", {})
    runner = CliRunner()
    listed = runner.invoke(root.app, ["--help"], terminal_width=200)
    assert listed.exit_code == 0 and not root._loaded
    for name in COMMANDS:
        root.load_command(name)
    built = runner.invoke(root.app, ["--help"], terminal_width=200)
    assert set(root._loaded) == set(COMMANDS)
    assert listed.output == built.output
    for name in COMMANDS:
        own = root._loaded[name]
        first = inspect.cleandoc(own.short_help or own.help or "").split("\n\n")[0]
        assert " ".join(first.split()) == SUMMARIES[name]
