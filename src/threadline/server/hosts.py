"""Which ``Host`` headers the server answers: the names it is bound to, nothing else.

A web page of another site can make a browser reach a loopback server by DNS
rebinding: its own name (``evil.example``) starts resolving to 127.0.0.1, and the
browser, thinking it talks to ``evil.example``, sends that as the ``Host`` header.
Refusing every host the server was not bound under stops it (the token stays
unguessable too, but this also stops the page from guessing). The rule:

- bound to loopback (``127.0.0.1``, ``::1``, ``localhost``): ``127.0.0.1``,
  ``localhost`` and ``[::1]``;
- bound to every interface (``0.0.0.0``, ``::``): those, this machine's host name, and
  any IP address (an address is no DNS name, so it cannot be rebound);
- bound to one other address or name: that one;
- plus the names given with ``--allow-host`` (a proxy's public name); ``*`` allows any.

The port is not checked (a proxy may forward from another); a request without a
``Host`` header (HTTP/1.0) is let through, since a browser always sends one.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})
ANY_HOST = "*"


def host_name(header: str) -> str:
    """The name in a ``Host`` header, lowercased, without port, brackets or final dot."""
    text = header.strip().lower()
    if text.startswith("["):  # [::1]:8787
        return text[1 : text.find("]")] if "]" in text else text
    if text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class HostRule:
    """The names a server bound to ``bind_host`` answers to (see the module docstring)."""

    names: frozenset[str]
    any_ip: bool = False
    any_host: bool = False

    @classmethod
    def for_bind(cls, bind_host: str, extra: Iterable[str] = ()) -> HostRule:
        more = {host_name(h) for h in extra if h.strip()}
        any_host = ANY_HOST in more
        bound = host_name(bind_host)
        if bound in LOOPBACK_NAMES:
            return cls(LOOPBACK_NAMES | more, any_host=any_host)
        if bound in WILDCARD_ADDRESSES:
            names = LOOPBACK_NAMES | {host_name(socket.gethostname())} | more
            return cls(frozenset(names), any_ip=True, any_host=any_host)
        return cls(frozenset({bound} | more), any_host=any_host)

    def allows(self, header: str | None) -> bool:
        if header is None or self.any_host:
            return True
        name = host_name(header)
        return name in self.names or (self.any_ip and _is_ip(name))

    def refusal(self, header: str) -> str:
        """Why a request naming ``header`` is refused, with what to do about it."""
        shown = header[:100].encode("ascii", "backslashreplace").decode()
        return (
            f"this server does not answer to the host {shown!r} (it answers to "
            f"{', '.join(sorted(self.names))}); start it with --allow-host NAME to add one"
        )
