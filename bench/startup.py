"""How fast the ``threadline`` command starts (issues 13, 36): medians of whole process runs.

Times ``threadline --version``, ``threadline --help``, ``threadline sessions list`` and
``threadline sessions show ID`` on a temporary SQLite store (30 sessions of a few messages),
beside ``llm --version`` (Simon Willison's ``llm``, when installed in the same
environment), ``python -c pass`` (the interpreter's own floor), the floor of
the libraries a listing needs (importing Typer and Rich's console and table: the
store's records are dataclasses, and the listing loads neither pydantic nor
the message models), and, for comparison, the same with pydantic and one model
(what every command paid while the records were pydantic models). Each command
runs twice untimed, so Python's bytecode caches exist as they would after
installation (they go to a temporary ``PYTHONPYCACHEPREFIX``, even where
``PYTHONDONTWRITEBYTECODE`` is set), then ``--runs`` times timed; the table shows
the median and fastest wall time, the median CPU time (steadier on a shared machine)
and the ratios to the library floor and to ``llm --version``. The target (issue 36):
``--help``, ``sessions list`` and ``sessions show`` each within 2x the floor.

    python bench/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from threadline import Message, open_store

SESSIONS = 30
LIBRARY_FLOOR = "import typer, rich.console, rich.table"
WITH_PYDANTIC = LIBRARY_FLOOR + ", pydantic\nclass Probe(pydantic.BaseModel):\n    x: int"
WARMUP = 2
FLOOR = "typer + rich (floor)"


def make_store(url: str) -> str:
    """A store of ``SESSIONS`` small sessions; returns one session's id."""
    store = open_store(url)
    try:
        sid = ""
        for i in range(SESSIONS):
            session = store.create_session(agent="coder", model="gpt-4o", title=f"session {i}")
            session.append([Message.user(f"request {i}"), Message.assistant(f"reply {i}")])
            sid = session.id
        return sid
    finally:
        store.close()


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def time_runs(
    command: list[str], env: dict[str, str], runs: int
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of ``runs`` runs after ``WARMUP`` untimed ones; all must
    exit 0. CPU time (the child's user + system) moves less than wall time on a busy machine."""
    walls, cpus = [], []
    for i in range(WARMUP + runs):
        t0, c0 = time.perf_counter(), children_cpu()
        done = subprocess.run(command, env=env, capture_output=True, stdin=subprocess.DEVNULL)
        elapsed, cpu = time.perf_counter() - t0, children_cpu() - c0
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed: {done.stderr.decode(errors='replace')}")
        if i >= WARMUP:
            walls.append(elapsed)
            cpus.append(cpu)
    return walls, cpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    threadline = str(bin_dir / "threadline")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite://{Path(tmp) / 'startup.db'}"
        sid = make_store(url)
        env = dict(os.environ, THREADLINE_STORE=url, PYTHONPYCACHEPREFIX=str(Path(tmp) / "pyc"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            FLOOR: [sys.executable, "-c", LIBRARY_FLOOR],
            "typer + rich + a pydantic model": [sys.executable, "-c", WITH_PYDANTIC],
            "threadline --version": [threadline, "--version"],
            "threadline --help": [threadline, "--help"],
            "threadline sessions list": [threadline, "sessions", "list"],
            "threadline sessions show ID": [threadline, "sessions", "show", sid],
        }
        llm = bin_dir / "llm"
        if llm.exists():
            commands["llm --version"] = [str(llm), "--version"]
        timed = {name: time_runs(cmd, env, args.runs) for name, cmd in commands.items()}
    peer = statistics.median(timed["llm --version"][0]) if "llm --version" in timed else None
    floor = statistics.median(timed[FLOOR][0])
    floor_cpu = statistics.median(timed[FLOOR][1])
    load = os.getloadavg()[0]
    table = Table(title=f"process start, median of {args.runs} runs (load average {load:.2f})")
    columns = ("median ms", "fastest ms", "vs floor", "CPU ms", "CPU vs floor", "vs llm")
    table.add_column("command")
    for column in columns:
        table.add_column(column, justify="right")
    for name, (walls, cpus) in timed.items():
        median, cpu = statistics.median(walls), statistics.median(cpus)
        ratio = f"{median / peer:.2f}x" if peer else "-"
        row = (f"{median * 1000:.0f}", f"{min(walls) * 1000:.0f}", f"{median / floor:.2f}x")
        table.add_row(name, *row, f"{cpu * 1000:.0f}", f"{cpu / floor_cpu:.2f}x", ratio)
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
