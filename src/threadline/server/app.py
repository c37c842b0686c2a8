"""``create_app``: the FastAPI app, its two wire formats, its guard and its sweeper.

Wire formats (the same procedures, see ``procedures``):

- tRPC-compatible: ``GET /trpc/session.list?input=<url-encoded JSON>`` for
  queries, ``POST /trpc/session.create`` with a JSON body for mutations;
  success is ``{"result": {"data": ...}}``, failure ``{"error": {"code",
  "message", "data": {"code", "httpStatus", "path"}}}`` with that HTTP status.
  An input wrapped as ``{"json": ...}`` (superjson's shape) is unwrapped;
  batching (``?batch=1``) is not supported.
- REST under ``/v1`` (described by FastAPI's ``/openapi.json``):
  ``POST /v1/sessions``, ``GET /v1/sessions``, ``GET|PATCH|DELETE
  /v1/sessions/{id}``, ``POST /v1/sessions/{id}/prompt`` (202) and the SSE
  stream ``GET /v1/sessions/{id}/events`` (``Last-Event-ID`` resumes;
  ``?until=turn_finished`` closes after the next turn ends).

The web session browser (``web``) is served at ``/`` by the same app; a browser
logs in once and then carries a signed cookie instead of the token (``auth.Access``).

Every request needs ``Authorization: Bearer <token>`` or that cookie (401
otherwise; pages redirect to the login form), bodies
over ``max_body_bytes`` are refused (413), and no CORS headers are ever sent,
so a web page of another origin cannot read an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from threadline.errors import ThreadlineError
from threadline.server.auth import Access, Refusal
from threadline.server.config import DEFAULT_MESSAGE_PAGE, EVENT_BUFFER, ServerConfig
from threadline.server.events import EventHub, frame
from threadline.server.hooks import Hook, HookDispatcher, Webhook
from threadline.server.procedures import (
    PROCEDURES,
    CancelInput,
    CreateInput,
    DeleteInput,
    GetInput,
    ListInput,
    ProcedureError,
    Procedures,
    PromptBody,
    PromptInput,
    RenameInput,
    classify,
    error_body,
    error_extra,
    validation_message,
)
from threadline.server.runner import HELD_ELSEWHERE, AgentRunner, holder_name
from threadline.server.web import mount_web
from threadline.store.base import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Store

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyTooLarge(ProcedureError):
    """Raised by the guard's ``receive`` mid-body; any handler maps it to 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "PAYLOAD_TOO_LARGE", 413, f"the request body is over the limit of {limit:,} bytes"
        )


class Guard:
    """ASGI middleware: who may call (``auth.Access``: the bearer token or a browser
    login) and the body size limit, before any route runs.

    Pure ASGI (not ``BaseHTTPMiddleware``) so SSE responses stream untouched."""

    def __init__(self, app: ASGIApp, *, access: Access, max_body_bytes: int) -> None:
        self.app = app
        self.access = access
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.access.check(
            scope["method"],
            scope["path"],
            scope.get("query_string", b"").decode("latin-1"),
            headers,
            scope.get("scheme", "http"),
        )
        if refusal is not None:
            await _refuse(send, refusal)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _send_error(
                send, 413, "PAYLOAD_TOO_LARGE", str(_BodyTooLarge(self.max_body_bytes))
            )
            return
        seen = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyTooLarge as exc:
            if not started:
                await _send_error(send, 413, "PAYLOAD_TOO_LARGE", str(exc))


async def _send_error(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps(error_body(code, status, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *([(b"www-authenticate", b"Bearer")] if status == 401 else []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, refusal: Refusal) -> None:
    """401/403 as a JSON error; a page sends the browser to the login form instead."""
    if refusal.location is None:
        await _send_error(send, refusal.status, refusal.code, refusal.message)
        return
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", refusal.location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def _error_response(exc: Exception, path: str | None = None) -> JSONResponse:
    code, status, message = classify(exc)
    body = error_body(code, status, message, path, error_extra(exc))
    return JSONResponse(body, status_code=status)


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
    hub = EventHub(EVENT_BUFFER)
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
    app.add_middleware(Guard, access=access, max_body_bytes=config.max_body_bytes)
    app.state.runner = runner
    app.state.procedures = procs
    app.state.hub = hub
    app.state.login_codes = mount_web(app, procs, access)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("BAD_REQUEST", 400, validation_message(exc.errors())), 400)

    @app.exception_handler(ThreadlineError)
    @app.exception_handler(ValidationError)
    async def _failed(_: Request, exc: Exception) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(Exception)
    async def _crashed(_: Request, exc: Exception) -> JSONResponse:
        return _error_response(exc)

    # -- tRPC-compatible -----------------------------------------------------------------

    async def trpc(request: Request, name: str) -> JSONResponse:
        proc = PROCEDURES.get(name)
        if proc is None:
            return JSONResponse(
                error_body("NOT_FOUND", 404, f"no procedure {name!r}", name), status_code=404
            )
        wanted = "GET" if proc.kind == "query" else "POST"
        if request.method != wanted:
            message = f"{name} is a {proc.kind}: send it with {wanted}"
            return JSONResponse(
                error_body("METHOD_NOT_SUPPORTED", 405, message, name), status_code=405
            )
        try:
            if request.query_params.get("batch"):
                raise _bad("batched calls are not supported; send one procedure per request")
            if proc.kind == "query":
                text = request.query_params.get("input")
                raw: Any = {} if text is None else json.loads(text)
            else:
                body = await request.body()
                raw = json.loads(body) if body.strip() else {}
            if isinstance(raw, dict) and set(raw) == {"json"}:
                raw = raw["json"]
            if raw is None:
                raw = {}
            inp = proc.input.model_validate(raw)
            data = await run_in_threadpool(proc.call, procs, inp)
        except json.JSONDecodeError as exc:
            return _error_response(_bad(f"the input is not JSON: {exc.msg}"), name)
        except ValidationError as exc:
            return _error_response(_bad(validation_message(exc.errors())), name)
        except Exception as exc:
            return _error_response(exc, name)
        return JSONResponse({"result": {"data": data}})

    app.add_api_route("/trpc/{name}", trpc, methods=["GET", "POST"], include_in_schema=False)

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
        if start is None:
            start = log.last_id  # a new subscriber sees what happens from now on
        stream = log.follow(start, until=until)
        elsewhere = await run_in_threadpool(runner.held_elsewhere, sid)
        if elsewhere is not None:  # another worker runs its turns: say which, then follow
            notice = frame(HELD_ELSEWHERE, {"sessionId": sid, "holder": holder_name(elsewhere)})
            stream = _prefixed(notice, stream)
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
    return ProcedureError("BAD_REQUEST", 400, message)
