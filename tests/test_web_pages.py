"""The web session browser's pages against a live ``threadline serve`` (httpx as client).

Login (one-time link, form, cookie flags), the guard (redirects, 401, cross-origin
changes refused), every page rendering with hostile stored text escaped, paging,
search, rename, delete and the script-free prompt form. Each page is parsed: the
only script it may load is the server's own file, and no element carries an event
handler or comes from stored text. A hypothesis property renders the session page
in-process for arbitrary text.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.web_live import (
    HOSTILE_ARGS,
    HOSTILE_RESULT,
    HOSTILE_SUMMARY,
    HOSTILE_TEXT,
    HOSTILE_TITLE,
    PLAIN_SESSIONS,
    SEARCH_TEXT,
    SEARCH_WORD,
    TOKEN,
    LiveServer,
    start,
)
from threadline.cli.render import printable
from threadline.server.auth import SESSION_COOKIE

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "link", "script", "body", "header", "main", "form",
    "input", "button", "section", "h1", "h2", "p", "code", "div", "a", "span", "article",
    "details", "summary", "pre", "b", "aside", "dl", "dt", "dd", "table", "thead", "tbody",
    "tr", "th", "td", "textarea", "label", "ol", "ul", "li", "nav", "strong", "q", "mark",
}  # fmt: skip
"""Every element the templates make; an element outside this set came from stored text."""


class Page(HTMLParser):
    """Tags, attributes and the text of a page, as a browser's parser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [
            a
            for t, a in self.tags
            if t == tag and all(a.get(k.rstrip("_")) == v for k, v in attrs.items())
        ]


def assert_safe(html: str) -> Page:
    page = Page(html)
    for tag, attrs in page.tags:
        assert tag in ALLOWED_TAGS, tag
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "script":
            assert attrs == {"src": "/static/app.js", "defer": None}
    assert "\x1b" not in html and "\x00" not in html and "\u202e" not in html
    assert TOKEN not in html
    return page


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from start(tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="module")
def browser(live: LiveServer) -> Iterator[httpx.Client]:
    """A client logged in as a browser is: the cookie and the page's Origin, no token."""
    cookies = {SESSION_COOKIE: live.login_cookie()}
    with httpx.Client(
        base_url=live.base, cookies=cookies, headers={"Origin": live.base}, timeout=10
    ) as c:
        yield c


def page(client: httpx.Client, path: str, status: int = 200, **params: Any) -> Page:
    r = client.get(path, params=params or None)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    return assert_safe(r.text)


# -- login and the guard ---------------------------------------------------------------


def test_the_one_time_login_link_sets_a_strict_httponly_cookie(live: LiveServer) -> None:
    r = httpx.get(live.login_link, timeout=10)
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie
    with httpx.Client(base_url=live.base, cookies=r.cookies, timeout=10) as c:
        assert "Sessions" in page(c, "/").text
        assert c.get("/v1/sessions").status_code == 200  # the pages' script uses the API

    again = httpx.get(live.login_link, timeout=10)  # single use
    assert again.status_code == 401 and SESSION_COOKIE not in again.headers.get("set-cookie", "")
    assert "used already or has expired" in Page(again.text).text
    assert httpx.get(live.base + "/login?code=guessed", timeout=10).status_code == 401


def test_a_new_login_link_needs_the_token(live: LiveServer) -> None:
    assert httpx.post(live.base + "/v1/login-links", timeout=10).status_code == 401
    r = httpx.post(
        live.base + "/v1/login-links", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    link = r.json()["url"]
    assert link.startswith(live.base + "/login?code=")
    assert httpx.get(link, timeout=10).status_code == 303


def test_pages_send_the_browser_to_log_in_and_the_api_says_401(live: LiveServer) -> None:
    sid = live.ids["plain0"]
    r = httpx.get(f"{live.base}/sessions/{sid}?limit=5", timeout=10)
    assert r.status_code == 303
    assert r.headers["location"] == f"/login?next=%2Fsessions%2F{sid}%3Flimit%3D5"
    form = page(httpx.Client(base_url=live.base), r.headers["location"])
    assert form.find("input", name="next")[0]["value"] == f"/sessions/{sid}?limit=5"
    assert form.find("input", name="token", type="password")
    for cookie in ("forged", "v1.1.x.y", ""):
        r = httpx.get(live.base + "/v1/sessions", cookies={SESSION_COOKIE: cookie}, timeout=10)
        assert r.status_code == 401 and r.json()["error"]["data"]["code"] == "UNAUTHORIZED"
    # static files are public: the login page needs them
    js = httpx.get(live.base + "/static/app.js", timeout=10)
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert "innerHTML" not in js.text


def test_the_login_form(live: LiveServer) -> None:
    url = live.base + "/login"
    same = {"Origin": live.base}
    wrong = httpx.post(url, data={"token": "not-the-token-at-all"}, headers=same, timeout=10)
    assert wrong.status_code == 401 and "not the server's token" in Page(wrong.text).text
    assert SESSION_COOKIE not in wrong.cookies
    # a cross-site form post, or one that says nothing of its origin, is refused
    for headers in ({"Origin": "http://evil.example"}, {}):
        r = httpx.post(url, data={"token": TOKEN}, headers=headers, timeout=10)
        assert r.status_code == 403 and SESSION_COOKIE not in r.cookies
    # ``next`` is followed only to a path of this server
    for target, where in [
        ("/sessions/x?a=1", "/sessions/x?a=1"),
        ("//evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
    ]:
        r = httpx.post(url, data={"token": TOKEN, "next": target}, headers=same, timeout=10)
        assert r.status_code == 303 and r.headers["location"] == where
    r = httpx.post(url, content=b"token=x", headers={**same, "Content-Type": "text/plain"})
    assert r.status_code == 400


def test_cookie_authenticated_changes_must_come_from_the_pages(
    live: LiveServer, browser: httpx.Client
) -> None:
    sid = live.ids["plain1"]
    cookies = dict(browser.cookies)
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"}):
        with httpx.Client(base_url=live.base, cookies=cookies, headers=headers) as c:
            for method, path, kw in [
                ("POST", f"/sessions/{sid}/rename", {"data": {"title": "pwned"}}),
                ("POST", f"/sessions/{sid}/delete", {"data": {"confirm": "yes"}}),
                ("PATCH", f"/v1/sessions/{sid}", {"json": {"title": "pwned"}}),
                ("POST", f"/v1/sessions/{sid}/prompt", {"json": {"text": "hi"}}),
                ("POST", "/trpc/session.delete", {"json": {"sessionId": sid}}),
                ("POST", "/logout", {}),
            ]:
                r = c.request(method, path, **kw)
                assert r.status_code == 403, (headers, path, r.text)
                assert r.json()["error"]["data"]["code"] == "FORBIDDEN"
    info = browser.get(f"/v1/sessions/{sid}").json()["session"]
    assert info["title"] == "plain session 1" and info["messageCount"] == 1
    # the Referer of one of the pages is accepted where a browser sends no Origin
    with httpx.Client(
        base_url=live.base, cookies=cookies, headers={"Referer": live.base + "/"}
    ) as c:
        assert c.post(f"/sessions/{sid}/rename", data={"title": "plain session 1"}).is_redirect


# -- the pages -------------------------------------------------------------------------------


def test_the_session_list_pages_with_totals(live: LiveServer, browser: httpx.Client) -> None:
    first = page(browser, "/", limit=3)
    rows = first.find("tr", class_="session-row")
    assert len(rows) == 3
    total = PLAIN_SESSIONS + 1
    assert f"1–3 of {total}" in first.text
    assert first.find("a", rel="next")[0]["href"] == "/?offset=3&limit=3"
    assert not first.find("a", rel="prev")
    seen = [r["data-session"] for r in rows]
    offset = 3
    while offset < total:
        p = page(browser, "/", limit=3, offset=offset)
        seen += [r["data-session"] for r in p.find("tr", class_="session-row")]
        assert p.find("a", rel="prev")
        offset += 3
    assert not p.find("a", rel="next")
    assert sorted(s for s in seen if s) == sorted(live.ids.values())
    # the hostile title is shown as text, once escaped, control characters visible
    listing = page(browser, "/", limit=200)
    assert printable(HOSTILE_TITLE, one_line=True) in listing.text
    for bad in ({"limit": 0}, {"limit": 201}, {"offset": -1}):
        assert browser.get("/", params=bad).status_code == 400


def test_search_finds_messages_and_links_to_them(live: LiveServer, browser: httpx.Client) -> None:
    found = page(browser, "/", q=SEARCH_WORD)
    [link] = [a for t, a in found.tags if t == "a" and "#m" in (a.get("href") or "")]
    assert link["href"] == f"/sessions/{live.ids['hostile']}?before=54#m4"
    assert printable(HOSTILE_TITLE, one_line=True) in found.text
    target = page(browser, str(link["href"]).split("#")[0])
    assert target.find("article", id="m4")
    assert "No message matches" in page(browser, "/", q="nothingmatchesthisword").text
    hostile_query = page(browser, "/", q='"><script>alert(1)</script>')
    assert '"><script>alert(1)</script>' in hostile_query.text


def test_search_snippets_mark_their_matches(live: LiveServer, browser: httpx.Client) -> None:
    """Matches are ``<mark>`` elements; the text's own brackets and markup are text."""
    r = browser.get("/", params={"q": SEARCH_WORD})
    found = assert_safe(r.text)
    assert r.text.count("<mark>") == 1  # the stored "<mark>" is escaped, not an element
    snippet = r.text.split('<div class="snippet">', 1)[1].split("</div>", 1)[0]
    assert f"[<mark>{SEARCH_WORD}</mark>-fum]" in snippet
    assert "&lt;mark&gt;not a match&lt;/mark&gt;" in snippet
    assert SEARCH_TEXT in found.text and "[[" not in found.text


def test_the_session_page_escapes_everything(live: LiveServer, browser: httpx.Client) -> None:
    sid = live.ids["hostile"]
    p = page(browser, f"/sessions/{sid}")
    text = p.text
    for stored in (HOSTILE_TEXT, HOSTILE_RESULT, HOSTILE_SUMMARY):
        assert printable(stored) in text
    assert printable(HOSTILE_TITLE, one_line=True) in text
    assert HOSTILE_ARGS["path"] in text and "svg onload" in text
    [title_input] = p.find("input", name="title")
    assert title_input["value"] == printable(HOSTILE_TITLE, one_line=True)

    # tool calls and results are collapsed; the checkpoint cuts after seq 2
    assert [a.get("data-call") for a in p.find("details", class_="tool-call")] == ["call-1"]
    assert p.find("details", class_="tool-result")
    order = [
        a.get("id")
        for t, a in p.tags
        if t in ("article", "div") and str(a.get("id", "")).startswith(("m", "checkpoint-"))
    ]
    assert order == ["m1", "m2", "checkpoint-1", "m3", "m4", "m5"]
    assert p.find("details", class_="checkpoint-summary")

    # the context report: the CLI's section names and bars, and its text
    for label in ("System prompt", "Tool definitions", "Summary", "Recent messages"):
        assert label in text
    assert "[█" in text and "░]" in text
    assert "Context Status" in text and "checkpoint #1: 2 messages" in text
    # its store-wide id is 2 (another session's checkpoint came first): no page shows it
    assert "checkpoint #2" not in text.lower() and "checkpoint 2 " not in text.lower()


def test_rename_delete_and_the_prompt_form(live: LiveServer, browser: httpx.Client) -> None:
    sid = live.ids["plain2"]
    r = browser.post(f"/sessions/{sid}/rename", data={"title": "<i>renamed</i>\x1b"})
    assert r.status_code == 303 and r.headers["location"] == f"/sessions/{sid}"
    p = page(browser, f"/sessions/{sid}")
    assert p.find("h1", id="session-title") and "<i>renamed</i>\\x1b" in p.text
    assert browser.get(f"/v1/sessions/{sid}").json()["session"]["title"] == "<i>renamed</i>\x1b"
    too_long = browser.post(f"/sessions/{sid}/rename", data={"title": "x" * 501})
    assert too_long.status_code == 400 and "BAD_REQUEST" in assert_safe(too_long.text).text

    # the prompt box without script: the turn starts, the page shows it when done
    r = browser.post(f"/sessions/{sid}/prompt", data={"text": "hello from a form"})
    assert r.status_code == 303

    def finished() -> bool:
        got = browser.get(f"/v1/sessions/{sid}").json()
        return bool(
            got["session"]["messageCount"] >= 3 and got["messages"][-1]["role"] == "assistant"
        )

    deadline = time.monotonic() + 15
    while not finished():
        assert time.monotonic() < deadline, "the turn did not finish"
        time.sleep(0.05)
    assert "hello from a form" in page(browser, f"/sessions/{sid}").text
    assert browser.post(f"/sessions/{sid}/prompt", data={"text": ""}).status_code == 400

    # delete: without confirmation a page asks; with it the session is gone
    asked = browser.post(f"/sessions/{sid}/delete", data={"confirm": ""})
    assert asked.status_code == 200
    confirm = assert_safe(asked.text)
    assert confirm.find("input", name="confirm", value="yes")
    assert browser.get(f"/v1/sessions/{sid}").status_code == 200
    r = browser.post(f"/sessions/{sid}/delete", data={"confirm": "yes"})
    assert r.status_code == 303 and r.headers["location"] == f"/?deleted={sid}"
    assert f"Deleted session {sid}" in page(browser, r.headers["location"]).text
    gone = page(browser, f"/sessions/{sid}", status=404)
    assert "NOT_FOUND" in gone.text
    assert browser.post(f"/sessions/{sid}/delete", data={"confirm": "yes"}).status_code == 404


def test_bad_session_ids_are_escaped_errors(browser: httpx.Client) -> None:
    r = browser.get("/sessions/%3Cscript%3Ealert(1)%3C%5Cscript%3E")
    assert r.status_code == 400 and "BAD_REQUEST" in assert_safe(r.text).text
    page(browser, "/sessions/no-such-session", status=404)


def test_logout_clears_the_cookie_and_ends_the_login(live: LiveServer) -> None:
    cookie = live.login_cookie()
    with httpx.Client(base_url=live.base, headers={"Origin": live.base}) as c:
        c.cookies.set(SESSION_COOKIE, cookie)
        assert c.get("/v1/sessions").status_code == 200
        r = c.post("/logout")
        assert r.status_code == 303 and r.headers["location"] == "/login"
        assert f'{SESSION_COOKIE}=""' in r.headers["set-cookie"]
    # a copy of the cookie kept elsewhere no longer logs in (in this server process)
    with httpx.Client(base_url=live.base, cookies={SESSION_COOKIE: cookie}) as c:
        assert c.get("/v1/sessions").status_code == 401


# -- in-process ---------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    title=st.text(max_size=40),
    text=st.text(min_size=1, max_size=80),
    result=st.text(max_size=80),
)
def test_any_stored_text_renders_as_text(title: str, text: str, result: str) -> None:
    """Whatever a session holds, the page's parsed text shows it (``printable``) and its
    elements are only the templates' own."""
    from threadline.messages import Message, ToolCall
    from threadline.server.web import ContextView, Row, _environment, conversation, tool_names
    from threadline.store.session_info import SessionInfo

    messages = [
        Message.user(text, seq=1),
        Message.assistant(
            text, tool_calls=[ToolCall(id="c", name=text, arguments={"a": text})], seq=2
        ),
        Message.tool(result or "-", tool_call_id="c", seq=3),
    ]
    now = datetime.now(UTC)
    info = SessionInfo(
        id="s-1", title=title, created_at=now, updated_at=now, message_count=3, parent_id="p-1"
    )
    kid = SessionInfo(id="k-1", title=text, created_at=now, updated_at=now, parent_id="s-1")
    html = (
        _environment()
        .get_template("session.html")
        .render(
            info=info,
            title=title or "(untitled)",
            relation=result,
            parent_title=text,  # the header names the parent and the children by stored text
            children=[Row(kid, text, result, 0, [])],
            items=conversation(messages, []),
            tool_names=tool_names(messages),
            ctx=ContextView(error=text),
            model="simulated/x",
            older_url=None,
            newest_url=None,
            running=False,
            follow_after=None,
        )
    )
    p = assert_safe(html)
    shown = p.text
    assert printable(text) in shown
    assert printable(result or "-") in shown


def test_login_cookies_expire_and_cannot_be_forged() -> None:
    from threadline.server.auth import make_session_cookie, session_cookie_valid

    cookie = make_session_cookie(TOKEN, now=1_000_000)
    assert session_cookie_valid(cookie, TOKEN, max_age=3600, now=1_000_000 + 3600)
    assert not session_cookie_valid(cookie, TOKEN, max_age=3600, now=1_000_000 + 3601)
    assert not session_cookie_valid(cookie, "another-token-0123456789", now=1_000_000)
    body, _, mac = cookie.rpartition(".")
    later = body.replace("1000000", "1999999")
    assert not session_cookie_valid(f"{later}.{mac}", TOKEN, now=1_999_999)
    assert make_session_cookie(TOKEN, now=1) != make_session_cookie(TOKEN, now=1)


def test_login_codes_open_one_login_within_their_time() -> None:
    from threadline.server.auth import LoginCodes

    now = [0.0]
    codes = LoginCodes(ttl=60, clock=lambda: now[0])
    first, second = codes.issue(), codes.issue()
    assert codes.redeem(first) and not codes.redeem(first)
    now[0] = 61
    assert not codes.redeem(second)
    assert not codes.redeem("never-issued")
