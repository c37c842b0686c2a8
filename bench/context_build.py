"""Context-build time against history size, beside peers, in one run.

For histories of 1k, 10k, 100k and 1M messages in the embedded SQLite store,
times ``build_context`` (128k window, fresh Session handle each time, so no
state is carried between builds) and, as the peer, the same history stored in
the OpenAI Agents SDK's ``SQLiteSession`` read back with ``get_items()`` and
fitted with langchain-core's ``trim_messages`` (approximate token counter,
strategy "last"). Invariant 4 says our time stays flat: within 2x from 1k to 1M.
The first build of each size is shown too: appends store estimated counts for
gpt-4o, and a build counts exactly the messages it sends, once per process.

    python bench/context_build.py [--sizes 1000,10000,100000,1000000] [--peer-max 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table

from histories import batches
from threadline import ContextPolicy, build_context
from threadline.context import builder
from threadline.store.sqlite import SQLiteStore

LIMIT = 128_000
REPEATS = 15
FILL_BATCH = 2_000


def fill_threadline(path: Path, size: int) -> str:
    # synchronous=off only while filling: the build is what is measured
    store = SQLiteStore(path, synchronous="off")
    sid = store.create_session(agent="bench", model="gpt-4o").id
    for batch in batches(size, FILL_BATCH):
        store.append_messages(sid, batch)
    store.close()
    return sid


def time_threadline(path: Path, sid: str) -> tuple[float, float]:
    """The first build (the window's stored estimates counted exactly, as a new process
    does) and the median of all builds (later ones reuse those counts)."""
    store = SQLiteStore(path)
    policy = ContextPolicy(context_limit=LIMIT)
    times = []
    builder._VIEW_COUNTS.clear()  # as in a new process
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        session = store.get_session(sid)
        w = build_context(session, system_prompt="You are a coding agent.", policy=policy)
        times.append(time.perf_counter() - t0)
        assert w.tokens <= LIMIT - policy.response_reserve
    store.close()
    return times[0], statistics.median(times)


def to_item(m) -> dict:  # type: ignore[no-untyped-def]
    if m.role == "tool":
        return {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text}
    return {"role": m.role, "content": m.text}


async def fill_peer(path: Path, size: int):  # type: ignore[no-untyped-def]
    from agents import SQLiteSession

    session = SQLiteSession("bench", db_path=path)
    for batch in batches(size, FILL_BATCH):
        await session.add_items([to_item(m) for m in batch])
    return session


async def time_peer(session, repeats: int) -> float:  # type: ignore[no-untyped-def]
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, trim_messages

    def convert(item: dict) -> object:
        if item.get("type") == "function_call_output":
            return ToolMessage(content=item["output"], tool_call_id=item["call_id"])
        if item["role"] == "user":
            return HumanMessage(content=item["content"])
        return AIMessage(content=item["content"])

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        items = await session.get_items()
        trimmed = trim_messages(
            [convert(i) for i in items],
            max_tokens=LIMIT - 4096,
            token_counter="approximate",
            strategy="last",
            start_on="human",
        )
        times.append(time.perf_counter() - t0)
        assert trimmed
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument(
        "--peer-max", type=int, default=1_000_000, help="largest history the peer is measured at"
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            path = Path(tmp) / f"tl-{size}.db"
            t0 = time.perf_counter()
            sid = fill_threadline(path, size)
            fill = time.perf_counter() - t0
            first, ours = time_threadline(path, sid)
            peer = None
            if size <= args.peer_max:
                session = asyncio.run(fill_peer(Path(tmp) / f"peer-{size}.db", size))
                repeats = max(1, min(REPEATS, int(2_000_000 / size)))
                peer = asyncio.run(time_peer(session, repeats))
            rows.append((size, fill, ours, peer, first))
            console.print(
                f"  {size:>9,} messages: filled in {fill:.1f}s, build {ours * 1000:.2f} ms "
                f"(first {first * 1000:.1f} ms)" + (f", peer {peer * 1000:.1f} ms" if peer else "")
            )
    base = rows[0][2]
    table = Table(title=f"Context build, {LIMIT:,}-token window (median of up to {REPEATS})")
    for col in [
        "history",
        "threadline build",
        "vs 1k",
        "first build",
        "Agents SDK get_items + trim_messages",
        "peer / threadline",
    ]:
        table.add_column(col, justify="right")
    for size, _fill, ours, peer, first in rows:
        table.add_row(
            f"{size:,}",
            f"{ours * 1000:.2f} ms",
            f"{ours / base:.2f}x",
            f"{first * 1000:.1f} ms",
            f"{peer * 1000:.1f} ms" if peer else "not run",
            f"{peer / ours:.0f}x" if peer else "-",
        )
    console.print(table)
    flat = rows[-1][2] / base
    console.print(f"flatness {sizes[0]:,} -> {sizes[-1]:,}: {flat:.2f}x (target: within 2x)")


if __name__ == "__main__":
    main()
