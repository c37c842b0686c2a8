"""Real child processes in the states lock liveness must tell apart."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from threadline.store.locks import process_state

ZOMBIE_WAIT_STEPS = 1000
ZOMBIE_WAIT_STEP_SECONDS = 0.01


@contextlib.contextmanager
def zombie() -> Iterator[int]:
    """The pid of a child killed with SIGKILL and not yet reaped (a zombie) for the block;
    reaped afterwards. ``os.kill(pid, 0)`` still succeeds on it."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        child.send_signal(signal.SIGKILL)
        for _ in range(ZOMBIE_WAIT_STEPS):  # the kernel makes it a zombie asynchronously
            if process_state(child.pid) == "Z":
                break
            time.sleep(ZOMBIE_WAIT_STEP_SECONDS)
        assert process_state(child.pid) == "Z", "the killed child never became a zombie"
        yield child.pid
    finally:
        child.kill()
        child.wait()


def dead_pid() -> int:
    """The pid of a child that has exited and been reaped (a lock holder that died)."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(child.stdout)
