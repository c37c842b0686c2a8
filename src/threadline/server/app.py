"""``create_app``: the FastAPI app, its two wire formats, its guard and its sweeper.

Wire formats (the same procedures, see ``procedures``):

- tRPC v11 (``trpc``): ``GET /trpc/session.list?input=<url-encoded JSON>`` for
  queries, ``POST /trpc/session.create`` with a JSON body for mutations, batches
  (``/trpc/a,b?batch=1``) as ``httpBatchLink`` sends them; success is
  ``{"result": {"data": ...}}``.
- REST under ``/v1`` (described by FastAPI's ``/openapi.json``):
  ``POST /v1/sessions``, ``GET /v1/sessions``, ``GET|PATCH|DELETE
  /v1/sessions/{id}``, ``POST /v1/sessions/{id}/prompt`` (202) and the SSE
  stream ``GET /v1/sessions/{id}/events`` (``Last-Event-ID`` resumes;
  ``?until=turn_finished`` closes after the next turn ends).

Every error, on both (and from the guard), is tRPC's shape: ``{"error": {"message",
"code": <JSON-RPC number>, "data": {"code": <name>, "httpStatus", "path"?}}}`` with
that HTTP status (``procedures.error_body``).

The web session browser (``web``) is served at ``/`` by the same app; a browser
logs in once and then carries a signed cookie instead of the token (``auth.Access``).

Every request passes the ``guard``: a ``Host`` this server answers to, the bearer
token or that cookie (401 otherwise; pages redirect to the login form), a throttle
on wrong tokens (429), bodies within ``max_body_bytes`` (413) that do not stall
(408); no CORS headers are ever sent, so a web page of another origin cannot read
an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from threadline.errors import ThreadlineError
from threadline.server import trpc
from threadline.server.auth import Access
from threadline.server.config import DEFAULT_MESSAGE_PAGE, ServerConfig
from threadline.server.event_hubs import hub_for
from threadline.server.events import frame
from threadline.server.guard import Guard
from threadline.server.hooks import Hook, HookDispatcher, Webhook
from threadline.server.hosts import HostRule
from threadline.server.procedures import (
    CancelInput,
    CreateInput,
    DeleteInput,
    GetInput,
    ListInput,
    Procedures,
    PromptBody,
    PromptInput,
    RenameInput,
    SearchInput,
    code_for_status,
    error_body,
    validation_message,
)
from threadline.server.runner import HELD_ELSEWHERE, AgentRunner, holder_name
from threadline.server.shared_events import SharedHub
from threadline.server.throttle import Throttle
from threadline.server.web import mount_web
from threadline.store.checks import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_SEARCH_QUERY_LENGTH
from threadline.store.protocol import Store

logger = logging.getLogger(__name__)


def create_app(
    store: Store,
    config: ServerConfig,
    *,
    hooks: Iterable[Hook] = (),
    webhooks: Iterable[Webhook] = (),
    owns_store: bool = False,
) -> FastAPI:
    """The server for ``store``; ``hooks`` are Python callables ``hook(event, payload)``.

    ``owns_store`` closes the store when the app shuts down (the CLI's case)."""
    dispatcher = HookDispatcher(hooks, webhooks)
    hub = hub_for(store, config)
    runner = AgentRunner(store, config, hooks=dispatcher, hub=hub, clock=config.clock)
    procs = Procedures(store, config, runner, dispatcher, hub)

    async def sweep() -> None:
        while True:
            await asyncio.sleep(config.sweep_seconds)
            try:
                await run_in_threadpool(runner.renew)
                evicted = await run_in_threadpool(runner.evict_idle)
                if evicted:
                    logger.info("evicted idle agents: %s", ", ".join(evicted))
                await run_in_threadpool(hub.sweep, runner.cached())  # evicted: events go too
            except Exception as exc:
                logger.warning("sweep failed: %s", exc, exc_info=exc)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(sweep())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await run_in_threadpool(runner.close)
            if isinstance(hub, SharedHub):
                hub.close()
            dispatcher.close()
            if owns_store:
                store.close()

    app = FastAPI(
        title="threadline agent server",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    access = Access(config.token)  # one for the guard and the pages: logouts are shared
    app.add_middleware(
        Guard,
        access=access,
        max_body_bytes=config.max_body_bytes,
        hosts=HostRule.for_bind(config.host, config.allowed_hosts),
        throttle=Throttle(
            limit=config.auth_failures,
            window=config.auth_window,
            global_limit=config.auth_global_failures,
            clock=config.clock or time.monotonic,
        ),
        body_timeout=config.body_timeout,
    )
    app.state.runner = runner
    app.state.procedures = procs
    app.state.hub = hub
    app.state.login_codes = mount_web(app, procs, access)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("BAD_REQUEST", 400, validation_message(exc.errors())), 400)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        code = code_for_status(exc.status_code)
        body = error_body(code, exc.status_code, str(exc.detail))
        return JSONResponse(body, exc.status_code, headers=exc.headers)

    @app.exception_handler(ThreadlineError)
    @app.exception_handler(ValidationError)
    @app.exception_handler(Exception)
    async def _failed(_: Request, exc: Exception) -> JSONResponse:
        return trpc.error_response(exc)

    # -- tRPC ------------------------------------------------------------------------------

    async def trpc_route(request: Request, name: str) -> Response:
        return await trpc.handle(request, name, procs)

    app.add_api_route(
        "/trpc/{name:path}",
        trpc_route,
        methods=["GET", "POST", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"],
        include_in_schema=False,
    )

    # -- REST --------------------------------------------------------------------------------

    @app.post("/v1/sessions", status_code=201, tags=["sessions"])
    def create_session(body: CreateInput) -> dict[str, Any]:
        """Create a session (``session.create``); returns its UUID."""
        return procs.create(body)

    @app.get("/v1/sessions", tags=["sessions"])
    def list_sessions(
        workspaceId: str | None = None,
        agent: str | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        """A page of sessions (``session.list``, 1-200 a page) with the total."""
        return procs.list_sessions(
            ListInput(workspaceId=workspaceId, agent=agent, limit=limit, offset=offset)
        )

    @app.get("/v1/search", tags=["sessions"])
    def search(
        q: Annotated[str, Query(min_length=1, max_length=MAX_SEARCH_QUERY_LENGTH)],
        sessionId: str | None = None,
        agent: str | None = None,
        role: str | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        """Full-text search across sessions (``session.search``): a page of hits, newest
        first, with the total; ``sessionId``, ``agent`` and ``role`` narrow it."""
        inp = SearchInput.model_validate(
            {
                "q": q,
                "sessionId": sessionId,
                "agent": agent,
                "role": role,
                "limit": limit,
                "offset": offset,
            }
        )
        return procs.search(inp)

    @app.get("/v1/sessions/{session_id}", tags=["sessions"])
    def get_session(
        session_id: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_MESSAGE_PAGE,
        beforeSeq: Annotated[int | None, Query(ge=1)] = None,
    ) -> dict[str, Any]:
        """A page of messages and the context report (``session.get``)."""
        return procs.get(GetInput(sessionId=session_id, limit=limit, beforeSeq=beforeSeq))

    @app.patch("/v1/sessions/{session_id}", tags=["sessions"])
    def rename_session(
        session_id: str, title: Annotated[str | None, Body(embed=True, max_length=500)]
    ) -> dict[str, Any]:
        """Rename (``session.rename``); an empty or null title clears it."""
        return procs.rename(RenameInput(sessionId=session_id, title=title))

    @app.delete("/v1/sessions/{session_id}", tags=["sessions"])
    def delete_session(session_id: str) -> dict[str, Any]:
        """Delete (``session.delete``); refused (409) while a turn runs."""
        return procs.delete(DeleteInput(sessionId=session_id))

    @app.post("/v1/sessions/{session_id}/prompt", status_code=202, tags=["agent"])
    def prompt(session_id: str, body: PromptBody) -> dict[str, Any]:
        """Store the user message and start the turn (``agent.prompt``); returns at once."""
        inp = PromptInput(sessionId=session_id, **body.model_dump(exclude_unset=True))
        return procs.prompt(inp)

    @app.post("/v1/sessions/{session_id}/cancel", tags=["agent"])
    def cancel(session_id: str) -> dict[str, Any]:
        """Stop the running turn (``agent.cancel``)."""
        return procs.cancel(CancelInput(sessionId=session_id))

    @app.get("/v1/sessions/{session_id}/events", tags=["agent"])
    async def events(
        session_id: str,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
        after: Annotated[int | None, Query(ge=0)] = None,
        until: Annotated[str | None, Query(pattern="^turn_finished$")] = None,
    ) -> StreamingResponse:
        """The session's events as SSE; resumes after ``Last-Event-ID`` (or ``?after=``)."""
        sid = (await run_in_threadpool(procs.info, GetInput(sessionId=session_id).sessionId)).id
        log = hub.log(sid)
        start = after if after is not None else _event_id(last_event_id)
        if start is None:  # a new subscriber sees what happens from now on
            start = await run_in_threadpool(lambda: log.last_id)
        stream = log.follow(start, until=until)
        elsewhere = await run_in_threadpool(runner.held_elsewhere, sid)
        if elsewhere is not None:  # another worker runs the turn: say which, then follow
            notice = frame(HELD_ELSEWHERE, {"sessionId": sid, "holder": holder_name(elsewhere)})
            stream = _prefixed(notice, stream)
            runner.follow_elsewhere(sid, elsewhere)  # its end (or death) is published here
        return StreamingResponse(
            stream,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return app


async def _prefixed(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    yield first
    async for chunk in rest:
        yield chunk


def _event_id(header: str | None) -> int | None:
    if header is None or not header.strip():
        return None
    if not header.strip().isdigit():
        raise _bad("Last-Event-ID must be a non-negative integer")
    return int(header.strip())


def _bad(message: str) -> Exception:
    return trpc.bad_request(message)
