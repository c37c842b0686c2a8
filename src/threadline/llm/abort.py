"""Model calls whose sockets can be shut from another thread, with a whole-call deadline.

The SDKs talk through httpx (``httpx2``/``httpcore2``), which blocks the calling thread
in ``recv`` and offers no way to interrupt it: closing the client from elsewhere closes
the file descriptor but, on Linux, leaves a ``recv`` blocked on it waiting. Shutting the
socket down wakes it (the read sees the end of the stream) and sends the server a FIN,
so the request is closed, not waited on.

So every SDK model gets an httpx client whose network backend wraps each connection:
while the calling thread reads or writes it inside a ``CallScope`` (one model call),
the connection is registered with that scope, and ``CallScope.abort`` shuts down what is
registered (and anything that registers later). Reads also stop at the scope's
deadline, which makes the model's ``timeout`` a bound on the whole request rather than
on each wait for data; ``first_byte_timeout`` bounds each wait (the first byte and
every gap between chunks).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore2
import httpx2

_current = threading.local()


class CallScope:
    """The connections one model call is using, and whether it was aborted."""

    def __init__(self, timeout: float | None = None) -> None:
        self._lock = threading.Lock()
        self._streams: set[_TrackedStream] = set()
        self.aborted = False
        self.timeout = timeout
        self.deadline: float | None = None

    def restart(self) -> None:
        """A new attempt: its whole-call deadline starts now."""
        self.deadline = None if self.timeout is None else time.monotonic() + self.timeout

    @contextlib.contextmanager
    def active(self) -> Iterator[CallScope]:
        """The calling thread's network I/O belongs to this call for the block."""
        previous = getattr(_current, "scope", None)
        _current.scope = self
        try:
            yield self
        finally:
            _current.scope = previous

    def abort(self) -> None:
        """Shut down every connection the call uses now or later: its reads end at once."""
        with self._lock:
            self.aborted = True
            streams = list(self._streams)
        for stream in streams:
            stream.shutdown()

    def _enter(self, stream: _TrackedStream) -> None:
        with self._lock:
            if not self.aborted:
                self._streams.add(stream)
                return
        stream.shutdown()
        raise httpcore2.ReadError("the model call was cancelled")

    def _leave(self, stream: _TrackedStream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


class _TrackedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    @contextlib.contextmanager
    def _used(self, timeout: float | None) -> Iterator[float | None]:
        scope: CallScope | None = getattr(_current, "scope", None)
        if scope is None:
            yield timeout
            return
        scope._enter(self)
        try:
            left = scope.remaining()
            if left is not None:
                if left <= 0:
                    raise httpcore2.ReadTimeout("the model call's whole-call timeout passed")
                timeout = left if timeout is None else min(timeout, left)
            yield timeout
        finally:
            scope._leave(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with self._used(timeout) as wait:
            return self._inner.read(max_bytes, wait)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with self._used(timeout) as wait:
            self._inner.write(buffer, wait)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.NetworkStream:
        with self._used(timeout) as wait:
            return _TrackedStream(self._inner.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def shutdown(self) -> None:
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                # socket.socket's own: an SSLSocket's would drop its TLS state mid-read
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _TrackingBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = _TrackedStream(
            self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        )
        scope: CallScope | None = getattr(_current, "scope", None)
        if scope is not None and scope.aborted:
            stream.close()
            raise httpcore2.ConnectError("the model call was cancelled")
        return stream

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        return _TrackedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def abortable_transport(**options: Any) -> httpx2.HTTPTransport:
    """httpx's own transport (``options`` are its), its connections tracked by scope.

    httpx does not take a network backend, so the pool it built gets ours wrapped
    around its own; a pool without one (a future httpx) is left as it is, and calls on
    it can then only be cancelled between streamed pieces."""
    transport = httpx2.HTTPTransport(**options)
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if isinstance(inner, httpcore2.NetworkBackend):
        pool._network_backend = _TrackingBackend(inner)  # type: ignore[union-attr]
    return transport


def model_timeout(whole: float, first_byte: float, connect: float) -> httpx2.Timeout:
    """httpx's timeouts for one model request: ``first_byte`` for each wait for data,
    ``connect`` to connect; the whole-call bound is the scope's deadline."""
    return httpx2.Timeout(whole, read=first_byte, connect=min(connect, whole))
