"""The server's sockets: bound before anything is printed, served by uvicorn with deadlines.

``bind`` resolves the host and binds every address it names (``localhost`` may be
both 127.0.0.1 and ::1) on one port, so ``threadline serve`` prints its banner and
login link only once they are real: port 0 becomes the port the system chose, and a
port in use or a host that is not this machine's is one line and its own exit code
(``PortUnavailable`` 9, ``HostUnavailable`` 10) instead of a banner followed by
uvicorn's error.

``deadline_protocol`` is uvicorn's h11 protocol with a header deadline: a connection
must complete a request's headers within ``seconds`` of its start (or, between
requests, of the next request's first byte), else it is closed. uvicorn itself has
only ``timeout_keep_alive``, armed after a response, so a client that connects and
sends nothing, or half a header, was held forever (1,000 such held 1,000 descriptors).
A stalled body is the guard's (``BodyTimeout``); a header over 16 KiB is h11's
(``h11_max_incomplete_event_size``).

Forwarded headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only from
the proxies ``forwarded_allow_ips`` names (``serve --forwarded-allow-ips``). uvicorn's
own default believes them from 127.0.0.1, where every local process connects from, so
any of them could pose as any client to the token throttle (issue 33).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from threadline.errors import HostUnavailable, PortUnavailable, UsageError

BACKLOG = 2048
"""uvicorn's default listen backlog."""
KEEP_ALIVE_SECONDS = 5
"""uvicorn's default: an idle keep-alive connection is closed after this."""


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to, all on one port (the
    system's choice when ``port`` is 0). An address of a family this machine does not
    have (``::1`` without IPv6) is passed over, as asyncio does, while another binds.
    Raises ``HostUnavailable`` or ``PortUnavailable``."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise HostUnavailable(f"cannot serve on host {host!r}: {reason}") from exc
    sockets: list[socket.socket] = []
    passed_over: OSError | None = None
    seen: set[tuple[Any, ...]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            chosen = sockets[0].getsockname()[1] if sockets else port
            try:
                sock = _listening(family, kind, proto, (address[0], chosen, *address[2:]))
            except OSError as exc:
                if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    raise _bind_error(exc, host, chosen) from exc
                passed_over = exc
                continue
            sockets.append(sock)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        assert passed_over is not None  # getaddrinfo names at least one address
        raise _bind_error(passed_over, host, port) from passed_over
    return sockets


def _listening(family: int, kind: int, proto: int, address: tuple[Any, ...]) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:  # as asyncio does: IPv6 only, IPv4 binds apart
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def _bind_error(exc: OSError, host: str, port: int) -> Exception:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return PortUnavailable(
            f"cannot serve on {where}: the port is already in use (another server "
            "listens on it); choose another with --port, or --port 0 for a free one"
        )
    if exc.errno == errno.EACCES:
        return PortUnavailable(
            f"cannot serve on {where}: binding port {port} is not permitted "
            "(ports below 1024 need privileges); choose another with --port"
        )
    return HostUnavailable(
        f"cannot serve on {where}: {exc.strerror or exc} (is {host!r} an address of this machine?)"
    )


def trusted_proxies(value: str) -> str:
    """``--forwarded-allow-ips`` checked and written as uvicorn reads it: addresses and
    networks (``10.0.0.0/8``), comma-separated, or ``*`` for any. uvicorn would take a
    misspelt entry as a name no client ever has, and so quietly trust no one."""
    entries = [item.strip() for item in value.split(",")]
    if entries == ["*"]:
        return "*"
    shown = []
    for entry in entries:
        try:
            shown.append(
                str(ipaddress.ip_network(entry, strict=False))
                if "/" in entry
                else str(ipaddress.ip_address(entry))
            )
        except ValueError:
            raise UsageError(
                f"--forwarded-allow-ips: {entry!r} is not an IP address or network "
                "(give proxies as 10.0.0.5,10.1.0.0/16, or * for any)"
            ) from None
    return ",".join(shown)


def url_host(host: str) -> str:
    """How to write a bound host in a URL: a wildcard as 127.0.0.1, IPv6 in brackets."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"[{shown}]" if ":" in shown else shown


def deadline_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers take longer
    than ``seconds`` (see the module docstring)."""

    class HeaderDeadline(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _waiting_for: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)
            if self._timer is not None and self.cycle is not self._waiting_for:
                self._disarm()  # its headers are complete: the request runs

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._waiting_for = self.cycle
            self._timer = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self) -> None:
            self._timer = None
            if self.cycle is self._waiting_for and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline


def server(
    app: Any,
    sockets: list[socket.socket],
    host: str,
    *,
    header_timeout: float,
    log_level: str,
    forwarded_allow_ips: str | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app`` on the bound ``sockets``, with the header deadline,
    reading forwarded headers only from ``forwarded_allow_ips`` (comma-separated
    addresses or networks; None: from nobody); ``.run(sockets=sockets)`` serves until
    interrupted (or ``should_exit`` is set)."""

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:  # uvicorn says where it listens only for sockets it bound
                logging.getLogger("uvicorn.error").info(
                    "Uvicorn running on http://%s:%d (Press CTRL+C to quit)",
                    url_host(host),
                    config.port,
                )

    config = uvicorn.Config(
        app,
        host=host,
        port=sockets[0].getsockname()[1],
        http=deadline_protocol(header_timeout),
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        log_level=log_level,
        server_header=False,
        proxy_headers=forwarded_allow_ips is not None,
        forwarded_allow_ips=forwarded_allow_ips or "",
    )
    return Server(config)


def serve(app: Any, sockets: list[socket.socket], host: str, **options: Any) -> None:
    """Run ``app`` on the bound ``sockets`` until interrupted (``options``: ``server``'s)."""
    server(app, sockets, host, **options).run(sockets=sockets)
