"""The web session browser in headless Chromium (Debian's ``chromium``, driven by Playwright).

One browser for the module, logged in with the one-time link ``threadline serve``
printed. It lists sessions, opens one, expands a tool call, renames, deletes (through
the confirm dialog) and sends a prompt to the offline simulated model, whose reply
streams into the page over SSE. No stored text ever runs as script: the seeded
session's titles and messages are full of ``alert(...)`` payloads, and any dialog
other than the delete confirmation fails the test, as does a CSP violation.

Skips when Playwright or Chromium is missing, except under ``CI=true``.
A screenshot of a session page goes to ``$THREADLINE_SCREENSHOT`` when set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import require
from tests.fakes import FakeOpenAI
from tests.web_live import HOSTILE_TITLE, LiveServer, serve, start
from threadline.cli.render import printable
from threadline.demo.coding_run import coding_run
from threadline.report.context import REPORT_WIDTH, SECTION_LABELS
from threadline.server.config import SIMULATED_TURNS

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")

CHROMIUM = os.environ.get("THREADLINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 15_000
DELETE_QUESTION = "Delete this session and all its messages? This cannot be undone."
TURN = coding_run(SIMULATED_TURNS)[0]
"""The simulated model's first scripted turn: text, tool calls and results."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from start(tmp_path_factory.mktemp("browser"))


class Dialogs:
    """Every dialog the page opens: recorded, and answered with ``accept``."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.accept = False

    def __call__(self, dialog: Any) -> None:
        self.seen.append(dialog.message)
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()


@pytest.fixture(scope="module")
def chromium() -> str:
    """Checked before the server starts, so a skip costs nothing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require(False, "Playwright is not installed (pip install playwright)")
    require(os.path.exists(CHROMIUM), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser_page(chromium: str, live: LiveServer) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # root cannot use the sandbox
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.dialogs = Dialogs()
        page.on("dialog", page.dialogs)
        page.goto(live.login_link)
        try:
            yield page
        finally:
            browser.close()
    # no stored payload ran (its alert would be a dialog), no CSP violation, no failed load
    alerts = [m for m in page.dialogs.seen if not m.startswith("Delete this session")]
    if errors or alerts:
        pytest.fail(f"the browser saw console errors {errors} and dialogs {alerts}")


def test_list_sessions_and_open_one(browser_page: Any, live: LiveServer) -> None:
    page = browser_page
    page.goto(live.base + "/")
    rows = page.locator("tr.session-row")
    assert rows.count() >= len(live.ids) - 1  # another test may have deleted one
    shown = printable(HOSTILE_TITLE, one_line=True)
    page.get_by_role("link", name=shown).click()
    page.wait_for_url(f"**/sessions/{live.ids['hostile']}")
    assert page.locator("#session-title").inner_text() == shown
    assert page.locator("article.msg").count() == 5
    assert page.locator(".checkpoint .cut").inner_text().startswith("Checkpoint #1")
    assert "Recent messages" in page.locator("aside.context").inner_text()


def test_expand_a_tool_call(browser_page: Any, live: LiveServer) -> None:
    page = browser_page
    page.goto(f"{live.base}/sessions/{live.ids['hostile']}")
    call = page.locator("details.tool-call").first
    arguments = call.locator("pre")
    assert call.get_attribute("open") is None and not arguments.is_visible()
    call.locator("summary").click()
    assert call.get_attribute("open") is not None
    assert "<script>alert(4)</script>" in arguments.inner_text()
    result = page.locator("details.tool-result").first
    result.locator("summary").click()
    assert "<iframe src=javascript:alert(6)>" in result.locator("pre").inner_text()


def test_send_a_prompt_and_see_the_reply_stream_in(browser_page: Any, live: LiveServer) -> None:
    page = browser_page
    page.goto(f"{live.base}/sessions/{live.ids['hostile']}")
    page.fill("#prompt-form textarea", TURN.user)
    page.click("#prompt-form button[type=submit]")
    page.wait_for_selector("#live-status[data-state=finished]")
    live_turn = page.locator("#live")
    assert TURN.user in live_turn.locator(".role-user").inner_text()
    assert TURN.final in live_turn.inner_text()
    names = [c.name for s in TURN.steps for c in s.calls]
    calls = live_turn.locator("details.tool-call")
    assert calls.count() == len(names) > 0
    calls.first.locator("summary").click()
    assert calls.first.locator("pre").is_visible()
    assert live_turn.locator("details.tool-result").count() == len(names)
    shot = os.environ.get("THREADLINE_SCREENSHOT")
    if shot:
        page.locator("details.tool-call").first.locator("summary").click()
        page.screenshot(path=shot, full_page=True)
    # the stored turn is on the page after a reload
    page.locator("#live a.reload").click()
    page.wait_for_selector("#live-status[data-state=idle]", state="attached")
    stored = page.locator("section.conversation article.role-assistant").last
    assert TURN.final in stored.inner_text()


def test_rename(browser_page: Any, live: LiveServer) -> None:
    page = browser_page
    sid = live.ids["plain0"]
    page.goto(f"{live.base}/sessions/{sid}")
    page.fill("form.rename input[name=title]", 'renamed <b>"in the browser"</b>')
    page.click("form.rename button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("#session-title").inner_text() == 'renamed <b>"in the browser"</b>'
    page.goto(live.base + "/")
    assert page.get_by_role("link", name='renamed <b>"in the browser"</b>').count() == 1


def test_delete_asks_first(browser_page: Any, live: LiveServer) -> None:
    page = browser_page
    sid = live.ids["plain1"]
    page.goto(f"{live.base}/sessions/{sid}")
    dialogs: Dialogs = page.dialogs
    before = len(dialogs.seen)
    dialogs.accept = False  # "Cancel": nothing happens
    page.click("form.delete button[type=submit]")
    assert page.url.endswith(f"/sessions/{sid}")
    assert page.locator("#session-title").is_visible()

    dialogs.accept = True
    try:
        with page.expect_navigation():
            page.click("form.delete button[type=submit]")
    finally:
        dialogs.accept = False
    assert dialogs.seen[before:] == [DELETE_QUESTION, DELETE_QUESTION]
    assert page.url == f"{live.base}/?deleted={sid}"
    assert f"Deleted session {sid}" in page.locator("p.notice").inner_text()
    assert page.locator(f'tr.session-row[data-session="{sid}"]').count() == 0


# -- a session made by ``threadline chat`` --------------------------------------------------

CHAT_MODEL = "compatible/gpt-4o"
CHAT_AGENT = """\
name: tester
model: openai/gpt-4o
system_prompt: You are a test agent with a prompt of a few dozen tokens, to be counted.
summarizer: extractive
tools: [scratchpad_write, scratchpad_read, scratchpad_list]
memory:
  enabled: true
  auto_extract: false
"""
"""An agent with a system prompt, tools and memory, so the report has all three to count."""
WEB_REPLY = "The real model answers the web prompt."


@dataclass
class ChatSession:
    live: LiveServer
    fake: FakeOpenAI
    sid: str
    cli: Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def chat_session(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatSession]:
    """A session ``threadline chat`` made on an OpenAI-compatible model (the fake server),
    and ``threadline serve`` over its store, both with that model's URL and key."""
    tmp = tmp_path_factory.mktemp("chat-web")
    (tmp / "agents").mkdir()
    (tmp / "agents" / "tester.yaml").write_text(CHAT_AGENT, encoding="utf-8")
    db = tmp / "chat.db"
    with FakeOpenAI() as fake:
        env = {
            "OPENAI_BASE_URL": fake.url,
            "OPENAI_API_KEY": "test",
            "THREADLINE_CONFIG_DIR": str(tmp / "config"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "COLUMNS": str(REPORT_WIDTH),
        }

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "threadline.cli.app", "--store", f"sqlite://{db}"]
            return subprocess.run(
                [*command, *args],
                cwd=tmp,
                env=dict(os.environ, **env),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        fake.reply_text("Hello from the chat.", usage=(120, 5))
        made = cli("chat", "tester", "--model", CHAT_MODEL, "--message", "hello")
        assert made.returncode == 0, made.stderr
        created = re.search(r"session (\S+) created", made.stderr)
        assert created is not None, made.stderr
        assert len(fake.requests) == 1
        for live in serve(db, {"chat": created.group(1)}, cwd=tmp, env=env):
            yield ChatSession(live, fake, created.group(1), cli)


def test_a_chat_session_answers_a_web_prompt_through_its_own_model(
    browser_page: Any, chat_session: ChatSession
) -> None:
    live, fake, sid = chat_session.live, chat_session.fake, chat_session.sid
    fake.reply_text(WEB_REPLY, usage=(300, 8))
    context = browser_page.context.browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(live.login_link)
        page.goto(f"{live.base}/sessions/{sid}")
        # the page names the model that will answer, before anything is sent
        assert page.locator("#prompt-model").inner_text() == CHAT_MODEL
        page.fill("#prompt-form textarea", "what does the web page run?")
        page.click("#prompt-form button[type=submit]")
        page.wait_for_selector("#live-status[data-state=finished]")
        assert WEB_REPLY in page.locator("#live").inner_text()
        assert CHAT_MODEL in page.locator("#live .role-user").inner_text()
        # the fake server saw the turn: its model, and the web prompt as the last message
        assert len(fake.requests) == 2
        sent = fake.requests[-1].json()
        assert sent["model"] == "gpt-4o"
        assert sent["messages"][-1]["content"] == "what does the web page run?"
        assert sent["messages"][0]["role"] == "system"
        assert {t["function"]["name"] for t in sent["tools"]} >= {"scratchpad_read"}
        page.locator("#live a.reload").click()
        page.wait_for_selector("#live-status[data-state=idle]", state="attached")
        stored = page.locator("section.conversation article.role-assistant").last
        assert WEB_REPLY in stored.inner_text()
        panel = page.locator("aside.context")
        shown = json.loads(panel.get_attribute("data-report") or "null")
        rows = [
            [td.inner_text() for td in row.locator("td").all()[:3]]
            for row in panel.locator("tr.section").all()
        ]
        text = panel.locator("details.context-text pre").text_content()
        assert not errors, errors
    finally:
        context.close()

    # nothing simulated reached the conversation
    out = chat_session.cli("sessions", "history", sid, "--json", "-n", "20")
    history = json.loads(out.stdout)["items"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[-1]["content"] == WEB_REPLY and "simulated" not in out.stdout

    # the context panel is `threadline context` for that session: its JSON, rows and text
    report = json.loads(chat_session.cli("context", sid, "--json").stdout)["report"]
    assert shown == report
    assert report["memory_reserve"] > 0
    sections = {s["name"]: s for s in report["sections"]}
    assert sections["system"]["tokens"] > 0 and sections["tools"]["detail"] == "6 tools"
    assert rows == [
        [SECTION_LABELS.get(s["name"], s["name"]), f"{s['tokens']:,}", f"{s['messages']:,}"]
        for s in report["sections"]
    ]
    printed = chat_session.cli("context", sid)
    assert printed.returncode == 0, printed.stderr
    assert text == printed.stdout


def test_a_prompt_naming_a_model_that_cannot_run_is_refused_before_storing(
    chat_session: ChatSession,
) -> None:
    live, sid = chat_session.live, chat_session.sid
    cookie = {"threadline_session": live.login_cookie()}
    before = json.loads(chat_session.cli("sessions", "show", sid, "--json").stdout)
    logged = len(live.output)
    with httpx.Client(base_url=live.base, cookies=cookie, headers={"Origin": live.base}) as c:
        rest = c.post(f"/v1/sessions/{sid}/prompt", json={"text": "x", "model": "bogus/x"})
        trpc = c.post(
            "/trpc/agent.prompt", json={"sessionId": sid, "text": "x", "model": "bogus/x"}
        )
    assert rest.status_code == 400 and "bogus" in rest.json()["error"]["message"]
    assert trpc.status_code == 400
    after = json.loads(chat_session.cli("sessions", "show", sid, "--json").stdout)
    assert after["session"]["message_count"] == before["session"]["message_count"]
    assert not any("Traceback" in line for line in live.output[logged:])
