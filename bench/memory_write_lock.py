"""How long a memory flush holds SQLite's write lock, and what it makes other writers wait.

One extraction of ``--facts`` facts (each with its subject entity and its turn as an
episode, as the offline extractor makes them) is stored with ``store_extraction`` in
a temporary SQLite store, while another process creates sessions in the same store
in a loop. Printed per batch size: the time to store it all, the longest single
write transaction (the write lock held), and the longest ``create_session`` the
other process waited for. The rows are threadline's ``EXTRACTION_BATCH`` and one
transaction for the whole extraction (what a flush did before), measured in the
same run.

    python bench/memory_write_lock.py [--facts 1800] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from threadline import open_store
from threadline.memory import Entity, Episode, Extraction, Fact, open_memory
from threadline.memory import core as memory_core

WRITER = """
import sys, time
from pathlib import Path
from threadline import open_store
store = open_store(sys.argv[1])
stop = Path(sys.argv[2])
store.create_session(agent="writer")  # imports and first-use set-up, not measured
print("ready", flush=True)
worst = 0.0
made = 0
while not stop.exists():
    started = time.perf_counter()
    store.create_session(agent="writer")
    worst = max(worst, time.perf_counter() - started)
    made += 1
    time.sleep(0.01)
print(f"{worst} {made}", flush=True)
"""


def extraction(n: int, scope: str, session_id: str) -> Extraction:
    out = Extraction()
    for i in range(n):
        name = f"Person {i}"
        out.entities.append(Entity(scope=scope, name=name, kind="person"))
        out.episodes.append(
            Episode(scope=scope, session_id=session_id, seq=i + 1, text=f"{name} moved to Town {i}")
        )
        out.facts.append(
            Fact(
                scope=scope,
                subject=name,
                statement=f"{name} lives in Town {i}",
                session_id=session_id,
                seq=i + 1,
            )
        )
    return out


@contextlib.contextmanager
def timed_transactions(records: Any, held: list[float]) -> Iterator[None]:
    """Record how long each outermost write transaction of ``records`` lasts."""
    original = records.transaction
    depth = [0]

    @contextlib.contextmanager
    def transaction() -> Iterator[None]:
        depth[0] += 1
        started = time.perf_counter()
        try:
            with original():
                yield
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                held.append(time.perf_counter() - started)

    records.transaction = transaction
    try:
        yield
    finally:
        records.transaction = original


def run(facts: int, batch: int, slice_seconds: float, tmp: Path) -> dict[str, Any]:
    tag = f"{batch}-{slice_seconds}"
    url = f"sqlite://{tmp / f'store-{tag}.db'}"
    store = open_store(url)
    memory = open_memory(store)
    session = store.create_session(agent="flush")
    stop = tmp / f"stop-{tag}"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, url, str(stop)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None
    writer.stdout.readline()  # connected and about to write
    held: list[float] = []
    saved = memory_core.EXTRACTION_BATCH, memory_core.WRITE_SLICE_SECONDS
    memory_core.EXTRACTION_BATCH, memory_core.WRITE_SLICE_SECONDS = batch, slice_seconds
    try:
        with timed_transactions(memory.records, held):
            started = time.perf_counter()
            written = memory.store_extraction(
                "agent:flush", extraction(facts, "agent:flush", session.id)
            )
            seconds = time.perf_counter() - started
    finally:
        memory_core.EXTRACTION_BATCH, memory_core.WRITE_SLICE_SECONDS = saved
        stop.touch()
    worst, made = writer.communicate()[0].split()
    memory.close()
    store.close()
    return {
        "batch": batch,
        "pauses": math.isfinite(slice_seconds),
        "facts": written,
        "seconds": seconds,
        "transactions": len(held),
        "longest_lock_s": max(held),
        "worst_create_session_s": float(worst),
        "sessions_created": int(made),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=1800)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="threadline-memlock-") as name:
        tmp = Path(name)
        rows = [
            run(args.facts, memory_core.EXTRACTION_BATCH, memory_core.WRITE_SLICE_SECONDS, tmp),
            # small transactions without pauses, and one transaction (the flush before)
            run(args.facts, memory_core.EXTRACTION_BATCH, math.inf, tmp),
            run(args.facts, args.facts * 10, math.inf, tmp),
        ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"store_extraction of {args.facts:,} facts on SQLite, a writer beside it")
    for col in (
        "records a transaction",
        "pauses",
        "transactions",
        "total s",
        "longest lock s",
        "worst create_session s",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        label = f"{r['batch']:,}" if r["batch"] == memory_core.EXTRACTION_BATCH else "all (one)"
        table.add_row(
            label,
            "yes" if r["pauses"] else "no",
            f"{r['transactions']:,}",
            f"{r['seconds']:.2f}",
            f"{r['longest_lock_s']:.3f}",
            f"{r['worst_create_session_s']:.3f}",
        )
    Console().print(table)
    ratio = rows[2]["worst_create_session_s"] / max(rows[0]["worst_create_session_s"], 1e-9)
    print(f"worst create_session wait: {ratio:.0f}x shorter than with one transaction")


if __name__ == "__main__":
    main()
