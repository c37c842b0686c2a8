"""Cancelling a model call that is waiting on the network.

A turn is cancelled from another thread (the server's ``agent.cancel``, SIGTERM, a
parent turn whose subagents wait). Checking a flag between streamed pieces is not
enough: a model that accepted the request and sends nothing never yields a piece. A
``CancelToken`` is a ``threading.Event`` that also runs callbacks when set, so the
provider can register "close my sockets" for the time of one call and the call ends
at once, whichever thread is blocked in it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from threadline.errors import ThreadlineError

log = logging.getLogger("threadline.llm")

WATCH_POLL_SECONDS = 0.1
"""How often a plain ``threading.Event`` (no callbacks) is polled while a call runs."""


class CallCancelled(ThreadlineError):
    """The model call was cancelled; its HTTP request was closed, not waited on."""


class CancelToken(threading.Event):
    """An event whose ``set`` also runs the callbacks registered with ``on_cancel``
    (each once, in the setting thread; one registered after ``set`` runs at once)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0
        self._guard = threading.Lock()

    def set(self) -> None:
        with self._guard:
            super().set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            _run(callback)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when the token is set; returns what unregisters it."""
        with self._guard:
            if not self.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback
                return lambda: self._forget(key)
        _run(callback)
        return _nothing

    def _forget(self, key: int) -> None:
        with self._guard:
            self._callbacks.pop(key, None)


def on_cancel(event: threading.Event | None, callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` once ``event`` is set, until the returned function is called.

    A ``CancelToken`` calls back at once; a plain ``threading.Event`` (a caller's own)
    is watched by a daemon thread that polls it."""
    if event is None:
        return _nothing
    if isinstance(event, CancelToken):
        return event.on_cancel(callback)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if event.wait(WATCH_POLL_SECONDS):
                if not done.is_set():
                    _run(callback)
                return

    threading.Thread(target=watch, name="threadline-cancel-watch", daemon=True).start()
    return done.set


def _run(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception as exc:  # one failing abort must not stop the others
        log.warning("a cancel callback failed: %s", exc)


def _nothing() -> None:
    return None
