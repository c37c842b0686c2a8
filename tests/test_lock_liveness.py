"""Lock liveness: a zombie holder is dead, where /proc says so and where only ps can."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import zombie
from threadline.store import locks
from threadline.store.locks import LockHolder, pid_alive, process_state, this_host


def test_a_zombie_is_not_alive_though_kill_0_succeeds() -> None:
    with zombie() as pid:
        os.kill(pid, 0)  # the check pid_alive used alone: the zombie answers it
        assert not pid_alive(pid)
        assert LockHolder(pid=pid, host=this_host()).is_stale()
    assert pid_alive(os.getpid()) and process_state(os.getpid()) in {"R", "S"}


def test_without_proc_ps_tells_a_zombie(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locks, "PROC_ROOT", str(tmp_path / "no-proc"))
    with zombie() as pid:
        assert process_state(pid) == "Z"
        assert not pid_alive(pid)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not pid_alive(sleeper.pid)
