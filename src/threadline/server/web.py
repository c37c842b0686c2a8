"""The web session browser: HTML pages served at ``/`` by the agent server.

Server-rendered Jinja2 templates (``templates/``) with one small script and one
stylesheet (``static/``), no build step and nothing fetched from the network. Pages:
the session list with search and paging (``/``: the top-level sessions by their own
dates, each with the sessions listed under it, subagents and forks, folded below it),
one session's conversation with its context report, rename, delete and a prompt box
(``/sessions/{id}``, whose header names its parent and children), and the login
form. Everything shown is stored text, so every value goes through the CLI's
``printable`` rule (control characters appear escaped) and then HTML escaping
(autoescaping templates); the script only ever sets ``textContent``.

Browser auth (``auth.Access``): ``/login?code=...`` (a one-time link) or the login
form sets an HttpOnly, SameSite=Strict cookie; the pages' own requests carry it,
EventSource included, and the guard refuses a cookie-authenticated change whose
``Origin`` is not this server. The bearer token never appears in a page or a URL.
A strict Content-Security-Policy allows only this server's script and style.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final
from urllib.parse import parse_qs, urlencode

import jinja2
import markupsafe
from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from threadline.context import ContextReport
from threadline.errors import ContextOverflow, NotSupported, ThreadlineError, UsageError
from threadline.messages import Message
from threadline.report.context import SECTION_LABELS
from threadline.report.lineage import Node, children, forest, relation
from threadline.report.text import (
    bar,
    fmt_int,
    fmt_pct,
    fmt_time,
    printable,
    session_preview,
    shorten,
)
from threadline.server.auth import (
    LOGIN_PATH,
    SESSION_COOKIE,
    STATIC_PREFIX,
    Access,
    LoginCodes,
    local_path,
)
from threadline.server.procedures import (
    DeleteInput,
    GetInput,
    Procedures,
    PromptInput,
    RenameInput,
    classify,
)
from threadline.server.search_gate import TooManySearches
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import MAX_BOUND, MAX_PAGE_SIZE
from threadline.store.protocol import Session
from threadline.store.search_records import SearchHit, SearchPage
from threadline.store.session_info import SessionInfo

HERE = Path(__file__).parent
SESSIONS_PER_PAGE = 50
MESSAGES_PER_PAGE = 100
SEARCH_MAX = MAX_PAGE_SIZE
STOPPED_EARLY = (
    "The search stopped at its time limit: these are the newest matches found by then, "
    "and there may be more (search for rarer words to see them all)."
)
"""Search ranks at most this many hits; pages are cut from them."""
ARGS_SHORT = 120
SNIPPET_SHOWN = 300
"""Characters of a search hit's snippet shown on the list page."""
REPORT_WIDTH = 100
"""Columns of the ``threadline context`` text shown on a session page."""
MAX_FORM_FIELDS = 10

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
"""On every page. ``same-origin`` (not ``no-referrer``) so browsers keep sending a real
``Origin`` on the pages' own form posts, which the guard checks."""


def _shown(value: Any) -> Any:
    """Jinja's ``finalize``: every string printed goes through ``printable`` before it is
    escaped (markup the templates made themselves is left alone)."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return printable(value)
    return value


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        oneline=lambda s: printable(s or "", one_line=True),
        short=lambda s, n=ARGS_SHORT: shorten(s or "", n),
        when=fmt_time,
        num=fmt_int,
        pct=fmt_pct,
        bar=bar,
        label=lambda name: SECTION_LABELS.get(name, name),
        pretty=lambda v: json.dumps(v, indent=2, ensure_ascii=False),
        compact=lambda v: shorten(json.dumps(v, ensure_ascii=False), ARGS_SHORT),
        tokens=lambda m: next(iter(m.token_counts.values()), None),
    )
    env.tests["checkpoint"] = lambda item: isinstance(item, Checkpoint)
    return env


# -- what a page shows ----------------------------------------------------------------


@dataclass
class ContextView:
    """The session's context report, or why it cannot be built."""

    report: ContextReport | None = None
    text: str = ""
    """The report as ``threadline context`` prints it."""
    data: dict[str, Any] | None = None
    """The report as ``threadline context --json`` prints it (its ``report``)."""
    error: str | None = None


def conversation(
    messages: Sequence[Message], checkpoints: Sequence[Checkpoint]
) -> list[Message | Checkpoint]:
    """Messages oldest first with each checkpoint where it cuts: after the last message it
    summarises, when that falls on this page."""
    marks = sorted(checkpoints, key=lambda c: (c.covers_up_to, c.id))
    items: list[Message | Checkpoint] = []
    prev: int | None = None
    for m in messages:
        seq = m.seq or 0
        low = seq - 1 if prev is None else prev
        items += [c for c in marks if low <= c.covers_up_to < seq]
        items.append(m)
        prev = seq
    if prev is not None:
        items += [c for c in marks if c.covers_up_to >= prev]
    return items


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """Tool call id -> tool name, to label the results on a page."""
    return {c.id: c.name for m in messages for c in m.tool_calls}


def context_view(procs: Procedures, session: Session) -> ContextView:
    """The report ``threadline context`` prints for the session and its agent, as bars
    and as its text (one function builds it for both: ``report.context``)."""
    try:
        report = procs.context_report(session)
    except ContextOverflow as exc:
        return ContextView(error=str(exc))
    return ContextView(
        report=report.window.report,
        text=report.text(REPORT_WIDTH),
        data=report.as_json()["report"],
    )


@dataclass(frozen=True)
class Hit:
    session_id: str
    title: str
    seq: int
    role: str
    pieces: list[tuple[str, bool]]
    """The snippet to show: text, and whether it is a match (shown as ``<mark>``)."""

    parent_id: str | None = None
    parent_title: str | None = None
    """The session the hit's session is listed under (a subagent's), when it is."""


def snippet_pieces(hit: SearchHit, limit: int = SNIPPET_SHOWN) -> list[tuple[str, bool]]:
    """A hit's snippet as pieces, its matches (``hit.marks``) without their brackets,
    each piece on one line with control characters escaped, cut at ``limit`` characters."""
    raw: list[tuple[str, bool]] = []
    at = 0
    for mark in sorted(hit.marks, key=lambda m: m.start):
        if mark.start < at or mark.end > len(hit.snippet):
            continue  # not where a bracketed match can be: show the text as it is
        raw.append((hit.snippet[at : mark.start], False))
        raw.append((hit.snippet[mark.start + 1 : mark.end - 1], True))
        at = mark.end
    raw.append((hit.snippet[at:], False))
    pieces: list[tuple[str, bool]] = []
    room = limit
    for text, marked in raw:
        shown = printable(text, one_line=True)
        if not shown or room <= 0:
            continue
        if len(shown) > room:
            shown = shown[: max(0, room - 1)] + "…"
        pieces.append((shown, marked))
        room -= len(shown)
    return pieces


@dataclass(frozen=True)
class Row:
    """A listed session: its record, title or preview, what it is to the session it is
    listed under, how many are listed under it, and those (as rows)."""

    info: SessionInfo
    title: str
    relation: str
    child_count: int
    children: list[Row]


# -- the pages --------------------------------------------------------------------------


class WebPages:
    """The browser's routes over one server's procedures."""

    def __init__(self, procs: Procedures, access: Access, codes: LoginCodes) -> None:
        self.procs = procs
        self.access = access
        self.codes = codes
        self.env = _environment()

    # -- rendering

    def render(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def failed(self, exc: Exception) -> HTMLResponse:
        code, status, message = classify(exc)
        return self.render("error.html", status, code=code, http_status=status, message=message)

    def preview(self, info: SessionInfo) -> str:
        return session_preview(self.procs.store, info) or "(untitled)"

    def rows(self, nodes: Sequence[Node]) -> list[Row]:
        """The listed sessions with the ones under them, as the list page shows them."""
        return [
            Row(
                n.info, self.preview(n.info), relation(n.info), n.child_count, self.rows(n.children)
            )
            for n in nodes
        ]

    def title_of(self, session_id: str) -> str | None:
        """A session's title or preview; ``None`` when it is gone."""
        try:
            return self.preview(self.procs.store.session_info(session_id))
        except ThreadlineError:  # deleted since it was named
            return None

    # -- session list and search

    def index(self, q: str | None, offset: int, limit: int, deleted: str | None) -> HTMLResponse:
        try:
            if q and q.strip():
                return self._search(q, offset, limit)
            store = self.procs.store
            page = store.list_sessions(limit=limit, offset=offset, top_level=True)
            rows = self.rows(forest(store, page.items, nested=True))
        except Exception as exc:
            return self.failed(exc)
        return self.render(
            "list.html",
            rows=rows,
            q="",
            total=page.total,
            offset=offset,
            limit=limit,
            prev_url=_page_url(None, offset - limit, limit) if offset > 0 else None,
            next_url=(
                _page_url(None, offset + limit, limit) if offset + limit < page.total else None
            ),
            deleted=deleted,
        )

    def _search(self, q: str, offset: int, limit: int) -> HTMLResponse:
        wanted = min(SEARCH_MAX, offset + limit + 1)
        try:
            if offset < SEARCH_MAX:
                with self.procs.searches.slot():
                    found = self.procs.store.search(q, limit=wanted)
            else:
                found = SearchPage()
        except NotSupported as exc:
            return self.render("list.html", 501, **_search_page(q, [], 0, limit, error=str(exc)))
        except TooManySearches as exc:
            return self.render("list.html", 429, **_search_page(q, [], 0, limit, error=str(exc)))
        titles: dict[str, str | None] = {}
        hits = []
        for h in found[offset : offset + limit]:
            for sid in (h.session_id, h.parent_id):
                if sid is not None and sid not in titles:
                    titles[sid] = self.title_of(sid)
            title = titles[h.session_id]
            if title is not None:
                parent = titles.get(h.parent_id) if h.parent_id else None
                hits.append(
                    Hit(h.session_id, title, h.seq, h.role, snippet_pieces(h), h.parent_id, parent)
                )
        more = len(found) > offset + limit
        return self.render(
            "list.html",
            **_search_page(
                q,
                hits,
                offset,
                limit,
                prev_url=_page_url(q, offset - limit, limit) if offset > 0 else None,
                next_url=_page_url(q, offset + limit, limit) if more else None,
                note=None if found.exact else STOPPED_EARLY,
            ),
        )

    # -- one session

    def session(self, session_id: str, before: int | None, limit: int) -> HTMLResponse:
        try:
            sid = self.procs.info(GetInput(sessionId=session_id).sessionId).id
            session = self.procs.store.get_session(sid)
            messages = list(reversed(session.tail(limit, before_seq=before)))
            ctx = context_view(self.procs, session)
            checkpoints = session.checkpoints()
            under = children(self.procs.store, sid)
        except Exception as exc:
            return self.failed(exc)
        first = messages[0].seq if messages else None
        running = self.procs.runner.is_running(sid)
        parent = session.info.parent_id
        return self.render(
            "session.html",
            info=session.info,
            title=self.preview(session.info),
            relation=relation(session.info),
            parent_title=self.title_of(parent) if parent else None,
            children=self.rows(forest(self.procs.store, under, nested=False)),
            items=conversation(messages, checkpoints),
            checkpoint_numbers={c.id: n for n, c in enumerate(checkpoints, start=1)},
            tool_names=tool_names(messages),
            ctx=ctx,
            model=self.procs.turn_model(session.info),
            older_url=(
                f"/sessions/{sid}?{urlencode({'before': first, 'limit': limit})}"
                if first is not None and first > 1
                else None
            ),
            newest_url=f"/sessions/{sid}" if before is not None else None,
            running=running,
            follow_after=self.procs.hub.log(sid).last_id if running else None,
        )

    def rename(self, session_id: str, form: Mapping[str, str]) -> Response:
        try:
            info = self.procs.rename(RenameInput(sessionId=session_id, title=form.get("title")))
        except Exception as exc:
            return self.failed(exc)
        return _see_other(f"/sessions/{info['id']}")

    def delete(self, session_id: str, form: Mapping[str, str]) -> Response:
        try:
            inp = DeleteInput(sessionId=session_id)
            if form.get("confirm") != "yes":  # no script to ask: ask with a page
                info = self.procs.info(inp.sessionId)
                return self.render("confirm_delete.html", info=info, title=self.preview(info))
            self.procs.delete(inp)
        except Exception as exc:
            return self.failed(exc)
        return _see_other("/?" + urlencode({"deleted": inp.sessionId}))

    def prompt(self, session_id: str, form: Mapping[str, str]) -> Response:
        """The prompt box without script: start the turn, then show the session."""
        try:
            out = self.procs.prompt(PromptInput(sessionId=session_id, text=form.get("text", "")))
        except Exception as exc:
            return self.failed(exc)
        return _see_other(f"/sessions/{out['sessionId']}")

    # -- login

    def login_form(
        self, next_url: str | None, error: str | None = None, status: int = 200
    ) -> HTMLResponse:
        return self.render("login.html", status, next=local_path(next_url), error=error)

    def logged_in(self, request: Request, next_url: str | None) -> Response:
        response = _see_other(local_path(next_url))
        response.set_cookie(
            SESSION_COOKIE,
            self.access.new_cookie(),
            max_age=int(self.access.session_seconds),
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response


def _search_page(
    q: str,
    hits: list[Hit],
    offset: int,
    limit: int,
    *,
    error: str | None = None,
    prev_url: str | None = None,
    next_url: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    return {
        "rows": [],
        "q": q,
        "hits": hits,
        "total": None,
        "offset": offset,
        "limit": limit,
        "search_error": error,
        "search_note": note,
        "prev_url": prev_url,
        "next_url": next_url,
        "deleted": None,
    }


def _page_url(q: str | None, offset: int, limit: int) -> str:
    params: dict[str, str | int] = {"offset": max(0, offset), "limit": limit}
    if q:
        params["q"] = q
    return "/?" + urlencode(params)


def _see_other(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)


async def read_form(request: Request) -> dict[str, str]:
    """A urlencoded form body (the only kind the pages send); the last value of a field
    wins. The guard has already bounded the body's size."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise UsageError("send the form as application/x-www-form-urlencoded")
    body = await request.body()
    try:
        text = body.decode("utf-8")
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"the form is not valid: {exc}") from exc
    return {k: v[-1] for k, v in fields.items()}


PerPage = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
Offset = Annotated[int, Query(ge=0, le=MAX_BOUND)]


def mount_web(app: FastAPI, procs: Procedures, access: Access) -> LoginCodes:
    """Add the browser's pages and static files to ``app``; returns its login codes
    (``threadline serve`` issues the first one-time link from them)."""
    codes = LoginCodes()
    pages = WebPages(procs, access, codes)
    router = APIRouter(include_in_schema=False)

    async def form_action(
        request: Request, action: Callable[[str, Mapping[str, str]], Response], sid: str
    ) -> Response:
        try:
            form = await read_form(request)
        except UsageError as exc:
            return pages.failed(exc)
        return await run_in_threadpool(action, sid, form)

    @router.get("/")
    def index(
        q: Annotated[str | None, Query(max_length=1000)] = None,
        offset: Offset = 0,
        limit: PerPage = SESSIONS_PER_PAGE,
        deleted: Annotated[str | None, Query(max_length=200)] = None,
    ) -> HTMLResponse:
        return pages.index(q, offset, limit, deleted)

    @router.get("/sessions/{session_id}")
    def session(
        session_id: str,
        before: Annotated[int | None, Query(ge=1)] = None,
        limit: PerPage = MESSAGES_PER_PAGE,
    ) -> HTMLResponse:
        return pages.session(session_id, before, limit)

    @router.post("/sessions/{session_id}/rename")
    async def rename(session_id: str, request: Request) -> Response:
        return await form_action(request, pages.rename, session_id)

    @router.post("/sessions/{session_id}/delete")
    async def delete(session_id: str, request: Request) -> Response:
        return await form_action(request, pages.delete, session_id)

    @router.post("/sessions/{session_id}/prompt")
    async def prompt(session_id: str, request: Request) -> Response:
        return await form_action(request, pages.prompt, session_id)

    @router.get(LOGIN_PATH)
    def login_page(
        request: Request,
        code: Annotated[str | None, Query(max_length=200)] = None,
        next: Annotated[str | None, Query(max_length=2000)] = None,
    ) -> Response:
        if code is None:
            return pages.login_form(next)
        if codes.redeem(code):
            return pages.logged_in(request, next)
        return pages.login_form(next, "This login link was used already or has expired.", 401)

    @router.post(LOGIN_PATH)
    async def login(request: Request) -> Response:
        try:
            form = await read_form(request)
        except UsageError as exc:
            return pages.login_form(None, str(exc), 400)
        given = form.get("token", "").strip()
        if not hmac.compare_digest(given.encode(), access.token.encode()):
            return pages.login_form(form.get("next"), "That is not the server's token.", 401)
        return pages.logged_in(request, form.get("next"))

    @router.post("/logout")
    def logout(request: Request) -> Response:
        access.log_out(request.headers.get("cookie"))
        response = _see_other(LOGIN_PATH)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    @router.post("/v1/login-links", include_in_schema=True, tags=["browser"])
    def login_link(request: Request) -> JSONResponse:
        """A one-time link that logs a browser in (valid once, for 15 minutes)."""
        path = f"{LOGIN_PATH}?{urlencode({'code': codes.issue()})}"
        return JSONResponse({"url": str(request.base_url).rstrip("/") + path, "path": path})

    app.include_router(router)
    app.mount(STATIC_PREFIX.rstrip("/"), StaticFiles(directory=HERE / "static"), name="static")
    return codes
