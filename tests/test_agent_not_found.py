"""Which agent runs a session, said where the session is shown: a session whose
``agents/NAME.yaml`` is not found here runs the built-in agent, and ``threadline
context``, the chat, the web page and ``session.get`` of ``serve`` carry a note naming
the agent and where its file was looked for (they used to show the built-in agent's
prompt and tools without a word)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from threadline import Message, open_store
from threadline.cli.app import app

MODEL = "openai/gpt-4o"
CODER = "name: coder\nsystem_prompt: You are the coder agent of this project.\n"


def seed(db: Path) -> dict[str, str]:
    with open_store(f"sqlite://{db}") as store:
        s = store.create_session(agent="coder", model=MODEL, title="coder's session")
        s.append([Message.user("fix the build"), Message.assistant("done")])
        return {"coder": s.id}


def note_for(cwd: Path) -> str:
    return f"agent 'coder' not found (looked for {cwd / 'agents' / 'coder.yaml'}"


def context(url: str, sid: str, *extra: str) -> str:
    done = CliRunner().invoke(app, ["--store", url, "context", sid, *extra])
    assert done.exit_code == 0, done.stderr
    return str(done.stdout)


def squeezed(text: str) -> str:
    """``text`` without white space: Rich wraps a long path wherever the width ends."""
    return "".join(text.split())


def test_context_names_the_agent_whose_file_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THREADLINE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    url = f"sqlite://{tmp_path / 't.db'}"
    sid = seed(tmp_path / "t.db")["coder"]
    # the report wraps long lines, inside a path too: compared without white space
    shown = squeezed(context(url, sid))
    assert squeezed(note_for(tmp_path)) in shown and "usingthebuilt-inagent'sprompt" in shown
    notes = json.loads(context(url, sid, "--json"))["report"]["notes"]
    assert any(n.startswith(note_for(tmp_path)) for n in notes), notes
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "coder.yaml").write_text(CODER, encoding="utf-8")
    found = context(url, sid, "--json")
    assert "not found" not in found and "the coder agent of this project" in found


@pytest.fixture
def live(tmp_path: Path) -> Iterator[object]:
    pytest.importorskip("fastapi")
    from tests.web_live import start

    yield from start(tmp_path, seed)


def test_the_web_page_and_session_get_name_the_missing_agent(live: object, tmp_path: Path) -> None:
    from tests.web_live import TOKEN, LiveServer

    assert isinstance(live, LiveServer)
    sid = live.ids["coder"]
    cookies = {"threadline_session": live.login_cookie()}
    with httpx.Client(base_url=live.base, cookies=cookies, timeout=30) as browser:
        page = browser.get(f"/sessions/{sid}")
    assert page.status_code == 200, page.text
    text = " ".join(page.text.replace("&#39;", "'").split())
    assert f'<p class="note">{note_for(tmp_path)}' in text, text[:2000]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=live.base, headers=headers, timeout=30) as client:
        got = client.get("/trpc/session.get", params={"input": json.dumps({"sessionId": sid})})
    assert got.status_code == 200, got.text
    notes = got.json()["result"]["data"]["context"]["notes"]
    assert any(n.startswith(note_for(tmp_path)) for n in notes), notes


def test_the_chat_resuming_the_session_names_the_missing_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.cli_env import fake_openai_cwd

    url = f"sqlite://{tmp_path / 't.db'}"
    sid = seed(tmp_path / "t.db")["coder"]
    with fake_openai_cwd(monkeypatch, tmp_path, {}) as fake:
        fake.reply_text("on it")
        done = CliRunner().invoke(app, ["--store", url, "chat", "-s", sid, "--message", "go on"])
        assert done.exit_code == 0, done.stderr
        assert done.stdout == "on it\n"
        assert note_for(tmp_path) in " ".join(done.stderr.split())


def test_serve_says_on_its_console_which_agent_a_turn_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A turn's agent is built here (``build_agent``): the note goes to the server's log."""
    pytest.importorskip("fastapi")
    from threadline.server.config import ServerConfig
    from threadline.server.runner import build_agent

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    sid = seed(tmp_path / "t.db")["coder"]
    with (
        open_store(f"sqlite://{tmp_path / 't.db'}") as store,
        caplog.at_level("WARNING", logger="threadline.server.runner"),
    ):
        info = store.session_info(sid)
        build_agent(ServerConfig(token="t" * 32), store, info, "compatible/gpt-4o").close()
    said = [r.getMessage() for r in caplog.records if r.name == "threadline.server.runner"]
    assert any(m.startswith(f"session {sid}: {note_for(tmp_path)}") for m in said), said


def test_switching_to_the_session_in_the_chat_names_the_missing_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/session ID`` from a chat already on the built-in agent: no agent to swap, but
    the note is said (and ``/context`` carries it), once."""
    from tests.fakes.cli_env import fake_openai_cwd
    from tests.test_chat import chat_repl

    url = f"sqlite://{tmp_path / 't.db'}"
    sid = seed(tmp_path / "t.db")["coder"]
    with fake_openai_cwd(monkeypatch, tmp_path, {}):
        done = chat_repl(url, ["-m", MODEL], [f"/session {sid}", "/context"], monkeypatch)
    assert done.exit_code == 0, done.output
    said = squeezed(done.output)
    assert said.count(squeezed(note_for(tmp_path))) == 2, done.output  # on switching, in /context
