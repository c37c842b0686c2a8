"""``threadline mcp``: serve sessions, search and memory to other agents over MCP.

stdio by default (an agent spawns it); ``--http HOST:PORT`` serves streamable HTTP
at ``/mcp`` behind the bearer token ``serve`` uses. The SDK is imported inside the
command, so every other command starts without it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from threadline.cli.state import store_of
from threadline.errors import UsageError


def split_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port number."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--http takes HOST:PORT (127.0.0.1:8788), got {value!r}")
    return host, int(port)


def mcp(
    ctx: typer.Context,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp (bearer token required) "
            "instead of stdio.",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="With --http: the bearer token (default: $THREADLINE_SERVER_TOKEN, else "
            "serve's token file).",
            show_default=False,
        ),
    ] = None,
    allow_writes: Annotated[
        bool,
        typer.Option("--allow-writes", help="Add the remember tool (writes memory facts)."),
    ] = False,
) -> None:
    """Serve sessions, search and memory to other agents over MCP (read-only by default)."""
    try:
        from threadline.mcp.server import build_server
    except ImportError as exc:
        raise UsageError(
            f"threadline mcp needs the mcp extra ({exc.name} is missing): "
            "pip install 'threadline[mcp]'"
        ) from exc
    if token is not None and http is None:
        raise UsageError("--token is for --http (stdio needs no token)")
    address = split_address(http) if http is not None else None
    store = store_of(ctx, create=False)
    server, memory = build_server(store, allow_writes=allow_writes)
    try:
        if address is None:
            server.run("stdio")
            return
        from threadline.mcp.http import serve_http
        from threadline.server.auth import resolve_token, token_source
        from threadline.server.listen import bind, url_host

        secret = resolve_token(token)
        host, port = address
        sockets = bind(host, port)
        port = sockets[0].getsockname()[1]
        typer.echo(f"threadline mcp on http://{url_host(host)}:{port}/mcp", err=True)
        typer.echo(f"bearer token: {token_source(token)}", err=True)
        serve_http(server, sockets, host, secret)
    finally:
        memory.close()


def register(root: typer.Typer) -> None:
    root.command("mcp")(mcp)
