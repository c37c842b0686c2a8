"""``Guard``: what every request passes before any route runs.

In order: the ``Host`` header must name this server (``hosts``: DNS rebinding); the
caller must be allowed (``auth.Access``: the bearer token or a browser login, 401/403),
the right token passing whatever failed before; a wrong token from a client that has
sent too many gets 429 instead of 401 (``throttle``), as does a login form or link the
pages refuse; a body may not be over ``max_body_bytes`` (413) nor stall for
``body_timeout`` seconds between bytes (408). Every refusal is tRPC's error shape (``error_body``),
naming the procedure for a ``/trpc/<name>`` call.

Pure ASGI (not ``BaseHTTPMiddleware``) so SSE responses stream untouched.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from threadline.server.auth import LOGIN_PATH, Access, Refusal
from threadline.server.hosts import HostRule
from threadline.server.procedures import ProcedureError, error_body
from threadline.server.throttle import Throttle, client_key

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TRPC_PREFIX = "/trpc/"


class BodyTooLarge(ProcedureError):
    """Raised by the guard's ``receive`` mid-body; any handler maps it to 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "PAYLOAD_TOO_LARGE", f"the request body is over the limit of {limit:,} bytes"
        )


class BodyTimeout(ProcedureError):
    """Raised by the guard's ``receive`` when a body stalls; any handler maps it to 408."""

    def __init__(self, seconds: float) -> None:
        super().__init__("TIMEOUT", f"the request body sent nothing for {seconds:g} seconds")


def procedure_of(path: str) -> str | None:
    """The procedure a ``/trpc/<name>`` path calls (None for a batch or another route)."""
    if not path.startswith(TRPC_PREFIX):
        return None
    name = path[len(TRPC_PREFIX) :]
    return name if name and "," not in name else None


def tries_token(method: str, path: str, query: str, headers: MutableMapping[str, str]) -> bool:
    """Whether the request has a token checked: a bearer header, the login form, a link."""
    if "authorization" in headers:
        return True
    return path == LOGIN_PATH and (method == "POST" or "code=" in query)


@dataclass
class Guard:
    """See the module docstring."""

    app: ASGIApp
    _: KW_ONLY
    access: Access
    max_body_bytes: int
    hosts: HostRule
    throttle: Throttle
    body_timeout: float

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        proc = procedure_of(path)
        host = headers.get("host")
        if host is not None and not self.hosts.allows(host):
            await send_error(send, "BAD_REQUEST", 400, self.hosts.refusal(host), proc)
            return
        client = client_key(str((scope.get("client") or ("",))[0]))
        checked = tries_token(method, path, query, headers)
        refusal = self.access.check(method, path, query, headers, scope.get("scheme", "http"))
        if refusal is not None:
            wrong_token = refusal.status == 401 and "authorization" in headers
            if wrong_token and await self._throttled(send, client, proc):
                return
            await _refuse(send, refusal, proc)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            too_large = BodyTooLarge(self.max_body_bytes)
            await send_error(send, too_large.code, too_large.status, str(too_large), proc)
            return
        seen = 0
        body_done = False
        started = False
        answered = False  # the app's response was replaced by the throttle's 429

        async def guarded_receive() -> Message:
            nonlocal seen, body_done
            if body_done:  # later calls wait for the client to go away: no deadline
                return await receive()
            try:
                async with asyncio.timeout(self.body_timeout):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(self.body_timeout) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
                body_done = not message.get("more_body", False)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started, answered
            if answered:
                return
            if message["type"] == "http.response.start":
                started = True
                if checked and message["status"] == 401:  # the login form or link refused
                    answered = await self._throttled(send, client, proc)
                    if answered:
                        return
            await send(message)

        try:
            await self.app(scope, guarded_receive, tracked_send)
        except (BodyTooLarge, BodyTimeout) as exc:
            if not started:
                close = [(b"connection", b"close")]
                await send_error(send, exc.code, exc.status, str(exc), proc, close)

    async def _throttled(self, send: Send, client: str, proc: str | None) -> bool:
        """For a wrong token from ``client``: send 429 if it must wait (True), else count
        it as a failure (False, and the caller sends its 401)."""
        wait = self.throttle.wait(client)
        if wait <= 0:
            self.throttle.failed(client)
            return False
        seconds = math.ceil(wait)
        message = (
            f"too many wrong tokens; try again in {seconds} s (the right token is always accepted)"
        )
        retry = [(b"retry-after", str(seconds).encode())]
        await send_error(send, "TOO_MANY_REQUESTS", 429, message, proc, retry)
        return True


async def send_error(
    send: Send,
    code: str,
    status: int,
    message: str,
    path: str | None = None,
    more_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """One tRPC-shaped JSON error response."""
    body = json.dumps(error_body(code, status, message, path)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *([(b"www-authenticate", b"Bearer")] if status == 401 else []),
                *(more_headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, refusal: Refusal, proc: str | None) -> None:
    """401/403 as a JSON error; a page sends the browser to the login form instead."""
    if refusal.location is None:
        await send_error(send, refusal.code, refusal.status, refusal.message, proc)
        return
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", refusal.location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
