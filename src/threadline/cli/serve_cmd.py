"""``threadline serve``: run the agent server (``threadline.server``) on uvicorn.

It starts or says why: the token, the model and the socket are checked before
anything is printed, so the banner and the login link name a server that is
listening (with the port the system chose for ``--port 0``); a bad token or option
exits 2, a port in use 9, a host that is not this machine's 10, a model that cannot
be resolved 11 (a missing API key 7), each with one line and no traceback.

FastAPI and uvicorn are imported inside the command, so every other command
works without the ``server`` extra and starts as fast as before.
"""

from __future__ import annotations

from typing import Annotated

import typer

from threadline.cli.state import get_state
from threadline.errors import UsageError
from threadline.store import open_store

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_IDLE_MINUTES = 30.0
"""As ``server.config.DEFAULT_IDLE_SECONDS`` (not imported: the server extra is optional)."""
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def serve(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option("--store", metavar="URL", help="Store URL (default: the global --store)."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean it.")] = (
        DEFAULT_HOST
    ),
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            help="Bearer token (default: $THREADLINE_SERVER_TOKEN, else the token file, "
            "created on first start).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Default model (default: the offline simulated model).",
            show_default=False,
        ),
    ] = None,
    idle_minutes: Annotated[
        float,
        typer.Option(
            "--idle-minutes",
            min=0.05,
            max=24 * 60,
            help="Drop a session's cached agent (closing its model's connections) after "
            "this long idle; it holds no lock, so other servers run the session meanwhile.",
        ),
    ] = DEFAULT_IDLE_MINUTES,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="NAME",
            help="Another name the Host header may carry (a proxy's public name; '*' for "
            "any). Without it, only the names the server is bound to are answered.",
            show_default=False,
        ),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            metavar="IPS",
            help="Proxies (comma-separated addresses or networks) whose X-Forwarded-For and "
            "X-Forwarded-Proto are believed. Without it, no one's are.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve sessions and agent turns over HTTP (tRPC-style /trpc and REST /v1)."""
    try:
        import uvicorn  # noqa: F401 - only to say which extra is missing

        from threadline.server import ServerConfig, create_app
        from threadline.server.auth import resolve_token, token_source
        from threadline.server.listen import bind, trusted_proxies, url_host
        from threadline.server.listen import serve as run_server
        from threadline.server.models import check_model
    except ImportError as exc:
        raise UsageError(
            f"threadline serve needs the server extra ({exc.name} is missing): "
            "pip install 'threadline[server]'"
        ) from exc
    secret = resolve_token(token)
    if forwarded_allow_ips is not None:
        forwarded_allow_ips = trusted_proxies(forwarded_allow_ips)
    state = get_state(ctx)
    url = store or state.store_url
    config = ServerConfig(
        token=secret,
        idle_seconds=idle_minutes * 60,
        host=host,
        allowed_hosts=tuple(allow_host or ()),
    )
    config.sweep_seconds = min(config.sweep_seconds, max(config.idle_seconds / 4, 1.0))
    if model is not None:
        config.default_model = model
    check_model(config.default_model)
    sockets = bind(host, port)
    try:
        app = create_app(open_store(url), config, owns_store=True)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    port = sockets[0].getsockname()[1]
    if host not in LOOPBACK:
        typer.echo(
            f"threadline: warning: serving on {host}, reachable beyond this machine", err=True
        )
    where = token_source(token, file_note=" (send it as Authorization: Bearer <token>)")
    shown = url_host(host)
    typer.echo(f"threadline server on http://{shown}:{port} (store {url})", err=True)
    typer.echo(f"bearer token: {where}", err=True)
    code = app.state.login_codes.issue()
    typer.echo(
        f"web session browser: http://{shown}:{port}/login?code={code} "
        "(a one-time login link; the login form also takes the token)",
        err=True,
    )
    run_server(
        app,
        sockets,
        host,
        header_timeout=config.header_timeout,
        log_level="info",
        forwarded_allow_ips=forwarded_allow_ips,
    )


def register(root: typer.Typer) -> None:
    root.command("serve")(serve)
