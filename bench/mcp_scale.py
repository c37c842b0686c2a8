"""``threadline mcp`` on 100,000 sessions (issue 36): each tool's answer time over stdio.

The store is ``bench/scale.py``'s (made once and kept, the same way: a template of
1,000 sessions through the store's API, copied 99 times with direct SQLite inserts),
here with ``--per-session`` messages each and one session of ``--big``. The SDK's own
client (``mcp.client.stdio``) spawns ``threadline mcp`` and calls each tool ``--runs``
times after one warm-up; beside each, its peer measured in the same run: the same
answer from the library in this process (``Store.list_sessions``, ``Store.search``,
``Session.read_messages``), so the ratio is what the MCP face adds (the protocol, the
JSON, the process hop). Target: list and search p95 under 300 ms.

    python bench/mcp_scale.py [--sessions 100000] [--runs 30] [--rebuild]
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import QUERY, Plan, percentiles, prepare, scale_parser
from threadline import open_store

TARGET_MS = 300.0


async def timed(call: Callable[[], Awaitable[Any]], runs: int) -> tuple[float, float]:
    await call()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return samples[len(samples) // 2], p95


def threadline_command() -> str:
    here = Path(sys.executable).parent / "threadline"
    return str(here) if here.exists() else (shutil.which("threadline") or "threadline")


Result = tuple[str, dict[str, Any], float, float, Any]
"""A tool, its arguments, p50 and p95 in ms, and its last answer."""


async def run_mcp(url: str, plan: Plan, runs: int, middle: str, later: str) -> list[Result]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cases: list[tuple[str, dict[str, Any]]] = [
        ("list_sessions", {}),
        ("list_sessions", {"cursor": plan.sessions // 2}),
        ("list_sessions", {"agent": "bench", "limit": 100}),
        ("list_sessions", {"since": middle}),
        ("list_sessions", {"since": middle, "until": later}),
        ("search_sessions", {"query": QUERY}),
        ("search_sessions", {"query": QUERY, "offset": 1_000}),
        ("read_session", {"session_id": plan.middle_id}),
        ("read_session", {"session_id": plan.big_id, "from_seq": plan.big // 2}),
    ]
    params = StdioServerParameters(
        command=threadline_command(),
        args=["--store", url, "mcp"],
        env={k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "PATH")},
    )
    out = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        for name, arguments in cases:

            async def call(name: str = name, arguments: dict[str, Any] = arguments) -> Any:
                result = await client.call_tool(name, arguments)
                if result.is_error:
                    raise SystemExit(f"{name} {arguments}: {result.content}")
                return result

            result = await call()
            p50, p95 = await timed(call, runs)
            out.append((name, arguments, p50, p95, result.structured_content))
    return out


def main() -> None:
    parser = scale_parser(__doc__, big=10_000, runs=30)
    parser.add_argument("--per-session", type=int, default=3)
    args = parser.parse_args()
    plan = Plan(args.sessions, args.sessions * args.per_session + args.big, args.big)
    args.postgres = None
    url, built = prepare("sqlite", args, plan)
    console = Console(width=150)
    if built is not None:
        console.print(f"generated in {built:.1f} s ({url})")
    store = open_store(url, create=False)
    try:
        library = {
            "list_sessions": lambda: store.list_sessions(top_level=True, limit=20),
            "search_sessions": lambda: store.search(QUERY, limit=20),
            "read_session": lambda: store.get_session(plan.middle_id).read_messages(limit=21),
        }
        peers = {name: percentiles(fn, args.runs) for name, fn in library.items()}
        total = store.list_sessions(limit=1).total
        # a date range halfway down the listing: 5,000 sessions are skipped to reach it
        start = store.list_sessions(limit=1, offset=total // 2).items[0].updated_at
        end = store.list_sessions(limit=1, offset=total // 2 - 5_000).items[0].updated_at
        hits = store.search(QUERY, limit=1).total
    finally:
        store.close()
    results = anyio.run(run_mcp, url, plan, args.runs, start.isoformat(), end.isoformat())
    table = Table(
        title=f"threadline mcp over stdio: {total:,} sessions, '{QUERY}' in {hits:,} messages; "
        f"ms over {args.runs} runs"
    )
    for column in ("tool", "arguments", "items", "p50", "p95", "library p50", "ratio", "< 300"):
        table.add_column(column, justify="left" if column in ("tool", "arguments") else "right")
    for name, arguments, p50, p95, answer in results:
        items = answer.get("sessions") or answer.get("hits") or answer.get("messages") or []
        peer = peers[name][0]
        table.add_row(
            name,
            ", ".join(f"{k}={v}" for k, v in arguments.items())[:60] or "-",
            str(len(items)),
            f"{p50:.1f}",
            f"{p95:.1f}",
            f"{peer:.1f}",
            f"{p50 / peer:.1f}x" if peer else "-",
            "yes" if p95 < TARGET_MS else "NO",
        )
    console.print(table)


if __name__ == "__main__":
    main()
