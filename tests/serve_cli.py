"""The real ``threadline serve`` command in a subprocess, as a user starts it.

``start_serve`` runs ``python -m threadline.cli.app serve ARGS`` (``--port 0`` works: the
port is read from the banner), waits until uvicorn says it runs, keeps reading what
the server prints (never letting the pipe fill) and stops it at the end.
``run_serve`` runs a start that is expected to fail and returns its exit code and
output. Used by ``tests/test_serve_startup.py`` and ``tests/test_trpc_client.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.live_server import stop

SERVE = [sys.executable, "-m", "threadline.cli.app"]
STARTUP_SECONDS = 60
BANNER = re.compile(r"threadline server on (http://\S+) \(store (\S+)\)")
LOGIN_LINK = re.compile(r"(http://\S+/login\?code=\S+)")
RUNNING = "Uvicorn running on"


def serve_env(home: Path) -> dict[str, str]:
    env = dict(os.environ, THREADLINE_CONFIG_DIR=str(home / "config"))
    env.pop("THREADLINE_SERVER_TOKEN", None)
    return env


@dataclass
class ServeProcess:
    proc: subprocess.Popen[str]
    base: str
    store_url: str
    login_link: str
    lines: list[str] = field(default_factory=list)

    def output(self) -> str:
        return "".join(self.lines)


@contextmanager
def start_serve(home: Path, *args: str) -> Iterator[ServeProcess]:
    """``threadline serve ARGS`` once it listens; stopped (SIGTERM) at the end."""
    proc = subprocess.Popen(
        [*SERVE, "serve", *args],
        env=serve_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    stopper = threading.Timer(STARTUP_SECONDS, proc.kill)  # a hung start fails, not hangs
    stopper.start()
    for line in proc.stdout:
        lines.append(line)
        if RUNNING in line:
            break
    stopper.cancel()
    text = "".join(lines)
    banner, link = BANNER.search(text), LOGIN_LINK.search(text)
    if banner is None or link is None or proc.poll() is not None:
        proc.kill()
        proc.wait()
        raise AssertionError("threadline serve did not start:\n" + text)
    stdout = proc.stdout

    def drain() -> None:
        for line in stdout:
            lines.append(line)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    live = ServeProcess(proc, banner.group(1), banner.group(2), link.group(1), lines)
    try:
        yield live
    finally:
        stop(proc, 10)
        reader.join(5)


def run_serve(home: Path, *args: str, timeout: float = STARTUP_SECONDS) -> tuple[int, str]:
    """A start of ``threadline serve ARGS`` that should fail: its exit code and output."""
    done = subprocess.run(
        [*SERVE, "serve", *args],
        env=serve_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr
