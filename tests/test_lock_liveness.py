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


def fake_proc(root: Path, pid: int, *, state: str, flags: int, pending: int) -> None:
    """``/proc/<pid>/stat`` and ``status`` as Linux writes them, for a process in ``state``."""
    (root / "self").mkdir(parents=True, exist_ok=True)
    entry = root / str(pid)
    entry.mkdir()
    rest = " ".join(["1", "1", "1", "0", "-1", str(flags)] + ["0"] * 44)
    (entry / "stat").write_text(f"{pid} (threadline serve) {state} {rest}\n")
    (entry / "status").write_text(
        f"Name:\tthreadline\nState:\t{state}\nPid:\t{pid}\n"
        f"SigPnd:\t{pending:016x}\nShdPnd:\t{pending:016x}\nSigBlk:\t0000000000000000\n"
    )


@pytest.mark.parametrize(
    ("flags", "pending"),
    [(0, 1 << 8), (0x4, 0)],
    ids=["sigkill-pending", "exiting"],
)
def test_a_killed_holder_still_freeing_its_memory_is_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: int, pending: int
) -> None:
    """Between SIGKILL and the zombie a large server stays ``R`` while the kernel frees
    it (a second or more); its lock is taken over in that window, not after it."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(locks, "PROC_ROOT", str(tmp_path))
        fake_proc(tmp_path, sleeper.pid, state="R", flags=flags, pending=pending)
        assert not pid_alive(sleeper.pid)
        assert LockHolder(pid=sleeper.pid, host=this_host()).is_stale()
        (tmp_path / str(sleeper.pid) / "status").write_text("SigPnd:\t0000000000000002\n")
        (tmp_path / str(sleeper.pid) / "stat").write_text(f"{sleeper.pid} (x) S 1 1 1 0 -1 0\n")
        assert pid_alive(sleeper.pid), "a pending SIGINT, say, is not death"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_holder_is_dead_the_moment_sigkill_is_sent() -> None:
    """No waiting for the kernel: right after ``kill -9`` returns, the lock is free."""
    code = "import threading, time\n" + (
        "for _ in range(16): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "print('up', flush=True)\ntime.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        assert pid_alive(child.pid)
        os.kill(child.pid, 9)
        assert not pid_alive(child.pid)
        assert LockHolder(pid=child.pid, host=this_host()).is_stale()
    finally:
        child.kill()
        child.wait()
