"""``threadline mcp --http``: the MCP server over streamable HTTP, behind the server's token.

Any local process can reach a loopback port, so every request carries
``Authorization: Bearer <token>``, the same token ``threadline serve`` takes
(``server.auth``: ``--token``, ``$THREADLINE_SERVER_TOKEN``, else the token file).
The sockets are bound and served as ``serve`` does them (``server.listen``).
"""

from __future__ import annotations

import json
import socket
from typing import Any

from mcp.server.mcpserver import MCPServer

from threadline.server.auth import bearer_matches
from threadline.server.config import HEADER_TIMEOUT
from threadline.server.listen import serve

MCP_PATH = "/mcp"
_REFUSED = json.dumps(
    {"error": {"code": "UNAUTHORIZED", "message": "missing or wrong bearer token"}}
).encode()

ASGIApp = Any


def guarded(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` answering only requests that carry the bearer token (401 otherwise);
    lifespan events pass through, so the SDK's session manager starts and stops."""

    async def guard(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", ())}
            raw = headers.get("authorization")
            if not bearer_matches(raw.decode("latin-1") if raw else None, token):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": _REFUSED})
                return
        await app(scope, receive, send)

    return guard


def serve_http(server: MCPServer[Any], sockets: list[socket.socket], host: str, token: str) -> None:
    """Serve ``server`` at ``/mcp`` on the bound ``sockets`` until interrupted."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    serve(
        guarded(app, token),
        sockets,
        host,
        header_timeout=HEADER_TIMEOUT,
        log_level="warning",
    )
