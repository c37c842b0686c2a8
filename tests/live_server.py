"""A server subprocess for the server tests: a free port, waiting until it answers, stopping it.

Shared by ``tests/test_server.py`` and ``tests/test_server_multiprocess.py`` (and the
port by ``tests/web_live.py``). ``bench/server_load.py`` keeps its own copy of the wait,
because a benchmark must not import from the tests.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(
    proc: subprocess.Popen[bytes], base: str, seconds: float, output: Callable[[], str]
) -> None:
    """Return once ``base`` answers HTTP; if ``proc`` exits or ``seconds`` pass, kill it and
    fail the test with what ``output`` returns (the server's log)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(base + "/openapi.json", timeout=1)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                pytest.fail(f"the server did not start:\n{output()}")
            time.sleep(0.05)


def stop(proc: subprocess.Popen[Any], seconds: float, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (unless it has exited) and wait; kill it if ``seconds`` are not enough."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
