"""ADK's ``list_sessions`` at 10,000 sessions: threadline's session service beside
ADK's own ``DatabaseSessionService``, both on SQLite, in the same run.

ADK's listing has no pagination (adk-python #4621: 74 s at 10,000 sessions on its
database service); every call reads and merges every session of the user. Both
services are filled through their own ``create_session`` (``--sessions`` sessions of
one user, each with a little state), then timed, each the median of ``--rounds``:

* threadline, a page: ``list_sessions(app, user, page_size=20)``, the most recently
  updated sessions (what a session picker shows), first page and a page halfway down.
* threadline, everything: ``list_sessions(app, user)`` without a page, ADK's contract.
* ADK ``DatabaseSessionService``: ``list_sessions(app, user)``, the only listing it has.

    python bench/adk_list_sessions.py [--sessions 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from threadline.integrations.adk import ThreadlineSessionService

APP, USER = "bench_app", "bench_user"
PAGE = 20
BUDGET_MS = 50.0
"""What a page must answer in (issue 25)."""


async def fill(service: Any, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await service.create_session(
            app_name=APP, user_id=USER, session_id=f"s{i:05d}", state={"n": i, "topic": "bench"}
        )
    return time.perf_counter() - start


async def timed(call: Callable[[], Awaitable[Any]], rounds: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


async def run(sessions: int, rounds: int, where: Path) -> None:
    from google.adk.sessions.database_session_service import DatabaseSessionService

    console = Console()
    ours = ThreadlineSessionService(f"sqlite://{where / 'threadline.db'}")
    theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{where / 'adk.db'}")
    try:
        fill_ours = await fill(ours, sessions)
        fill_theirs = await fill(theirs, sessions)
        console.print(
            f"filled {sessions:,} sessions: threadline {fill_ours:.1f} s, "
            f"ADK DatabaseSessionService {fill_theirs:.1f} s"
        )
        first_ms, first = await timed(
            lambda: ours.list_sessions(app_name=APP, user_id=USER, page_size=PAGE), rounds
        )
        token = str(sessions // 2)
        middle_ms, middle = await timed(
            lambda: ours.list_sessions(
                app_name=APP, user_id=USER, page_size=PAGE, page_token=token
            ),
            rounds,
        )
        all_ms, everything = await timed(
            lambda: ours.list_sessions(app_name=APP, user_id=USER), rounds
        )
        adk_ms, adk_all = await timed(
            lambda: theirs.list_sessions(app_name=APP, user_id=USER), rounds
        )
    finally:
        ours.close()
        await theirs.close()
    assert len(first.sessions) == len(middle.sessions) == PAGE
    assert len(everything.sessions) == len(adk_all.sessions) == sessions
    assert first.sessions[0].state == {"n": sessions - 1, "topic": "bench"}

    table = Table(title=f"ADK list_sessions, {sessions:,} sessions of one user, SQLite")
    for column in ("service", "call", "sessions returned", "ms (median)", "vs ADK"):
        table.add_column(column, justify="right" if column != "call" else "left")
    rows = [
        ("threadline", f"page of {PAGE}, first", PAGE, first_ms),
        ("threadline", f"page of {PAGE}, halfway", PAGE, middle_ms),
        ("threadline", "all (ADK's contract)", sessions, all_ms),
        ("ADK DatabaseSessionService", "all (no paging)", sessions, adk_ms),
    ]
    for service, call, count, ms in rows:
        table.add_row(service, call, f"{count:,}", f"{ms:.1f}", f"{adk_ms / ms:.0f}x faster")
    console.print(table)
    verdict = "holds" if max(first_ms, middle_ms) < BUDGET_MS else "MISSED"
    console.print(f"a page under {BUDGET_MS:.0f} ms: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="adk-list-") as tmp:
        asyncio.run(run(args.sessions, args.rounds, Path(tmp)))


if __name__ == "__main__":
    main()
