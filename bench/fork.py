"""Forking a long session: the fork's cost and its first build, beside the parent's.

Fills a SQLite session with ``--messages`` realistic coding-agent messages (1M by
default, through the store's batch append; that takes a few minutes) and a small
one of ``--small`` messages, then times, on fresh store handles:

* ``fork_session`` at the end of the history (what ``/fork`` does), and at a point
  three user turns back (what ``/rewind 3`` does), median of ``--repeats``;
* the fork's first ``build_context`` (128k window) after one message of its own,
  beside a build on the parent itself.

A fork shares history by reference, so its time must not grow with the parent
(large vs small within 2x), and its first build must cost about what a build on
the parent costs (within 2x): reads chain to the parent for the window only.

    python bench/fork.py [--messages 1000000] [--small 1000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table

from context_build import fill_threadline as fill
from threadline import ContextPolicy, Message, build_context
from threadline.store.fork import fork_session, user_turn_seq
from threadline.store.sqlite import SQLiteStore

LIMIT = 128_000
SYSTEM = "You are a coding agent."


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def measure(path: Path, sid: str, repeats: int) -> dict[str, float]:
    store = SQLiteStore(path)
    policy = ContextPolicy(context_limit=LIMIT)
    at_rewind = user_turn_seq(store.get_session(sid), 3)
    fork_end, fork_back, fork_build, parent_build = [], [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        child = fork_session(store.get_session(sid))
        fork_end.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        fork_session(store.get_session(sid), at=at_rewind)
        fork_back.append(time.perf_counter() - t0)

        child.append(Message.user("Try the other approach instead."))
        t0 = time.perf_counter()
        window = build_context(store.get_session(child.id), system_prompt=SYSTEM, policy=policy)
        fork_build.append(time.perf_counter() - t0)
        assert window.messages[-1].text == "Try the other approach instead."

        t0 = time.perf_counter()
        build_context(store.get_session(sid), system_prompt=SYSTEM, policy=policy)
        parent_build.append(time.perf_counter() - t0)
    store.close()
    return {
        "fork at end": median_ms(fork_end),
        "fork 3 turns back": median_ms(fork_back),
        "first build on the fork": median_ms(fork_build),
        "build on the parent": median_ms(parent_build),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000, help="the long parent's length")
    ap.add_argument("--small", type=int, default=1_000, help="the short parent's length")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for size in (args.small, args.messages):
            path = Path(tmp) / f"fork-{size}.db"
            t0 = time.perf_counter()
            sid = fill(path, size)
            console.print(f"  filled {size:,} messages in {time.perf_counter() - t0:.1f}s")
            results[size] = measure(path, sid, args.repeats)
    small, large = results[args.small], results[args.messages]
    table = Table(title=f"Forks (SQLite, {LIMIT:,}-token window, median of {args.repeats})")
    for col in ("", f"{args.small:,} msgs", f"{args.messages:,} msgs", "large / small"):
        table.add_column(col, justify="right")
    for name in small:
        table.add_row(
            name,
            f"{small[name]:.2f} ms",
            f"{large[name]:.2f} ms",
            f"{large[name] / small[name]:.2f}x",
        )
    console.print(table)
    console.print(
        f"fork of a {args.messages:,}-message session: {large['fork at end']:.2f} ms; "
        f"first build on it {large['first build on the fork']:.2f} ms "
        f"({large['first build on the fork'] / large['build on the parent']:.2f}x a build on "
        "the parent; targets: fork within 2x of the small one, build within 2x of the parent's)"
    )


if __name__ == "__main__":
    main()
