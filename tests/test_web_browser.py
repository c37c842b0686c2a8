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

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import require
from tests.web_live import HOSTILE_TITLE, LiveServer, start
from threadline.cli.render import printable
from threadline.demo.coding_run import coding_run
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
