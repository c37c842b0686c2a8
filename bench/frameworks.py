"""Each framework face beside that framework's own persistence, on the same engine,
in one run (issue 35): the LangGraph saver against ``SqliteSaver`` / ``PostgresSaver``,
the Agents SDK session against ``SQLiteSession`` / ``SQLAlchemySession``, the ADK
service against ``DatabaseSessionService``, and 20 conversations at once through the
LangGraph saver's async methods against ``AsyncSqliteSaver`` / ``AsyncPostgresSaver``.
Each row prints both times and their ratio (threadline / native: below 1 means
threadline is faster); the ratios are what to compare between runs, the
milliseconds depend on the machine's load.

    python bench/frameworks.py [--quick] [--only sqlite,postgres]
        [--faces langgraph,langgraph-async,agents,adk]

PostgreSQL is ``THREADLINE_BENCH_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
every store of a run lives in schemas of its own, dropped at the end.
"""

import argparse
import asyncio
import os
import statistics
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from timing import amedian_ms, apaired_median_ms, paired_median_ms

POSTGRES = os.environ.get("THREADLINE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
Row = tuple[str, str, str, float, float]
"""face, operation, engine, threadline ms, native ms"""


# -- engines: a threadline URL and the native side's, in schemas of their own
@contextmanager
def engines(engine: str, where: Path) -> Iterator[tuple[str, str]]:
    """(threadline store URL, the native side's location) for ``engine``."""
    if engine == "sqlite":
        yield f"sqlite://{where / 'threadline.db'}", str(where / "native.db")
        return
    import psycopg

    tag = uuid.uuid4().hex[:10]
    ours, theirs = f"bench_fw_{tag}", f"bench_fwn_{tag}"
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {theirs}")
    try:
        yield f"{POSTGRES}?schema={ours}", theirs
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            for schema in (ours, theirs):
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def pg_native_url(schema: str, driver: str = "postgresql") -> str:
    base = POSTGRES.replace("postgresql://", f"{driver}://", 1)
    return f"{base}?options=-csearch_path%3D{schema}"


# -- LangGraph
def langgraph_savers(engine: str, url: str, native: str, stack: ExitStack) -> tuple[Any, Any]:
    from threadline.integrations.langgraph import ThreadlineSaver

    ours = stack.enter_context(ThreadlineSaver(url))
    if engine == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        theirs = stack.enter_context(SqliteSaver.from_conn_string(native))
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        theirs = stack.enter_context(PostgresSaver.from_conn_string(pg_native_url(native)))
    theirs.setup()
    return ours, theirs


def chat_graph(saver: Any) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    class State(TypedDict):
        messages: Annotated[list[Any], add_messages]

    def reply(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"reply to {len(state['messages'])} messages")]}

    graph = StateGraph(State)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=saver)


def loop_graph(saver: Any, steps: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        n: int
        log: list[str]

    def step(state: State) -> dict[str, Any]:
        return {"n": state["n"] + 1, "log": [*state["log"][-5:], f"step {state['n']}"]}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: END if s["n"] >= steps else "step")
    return graph.compile(checkpointer=saver)


def filled_thread(saver: Any, thread: str, count: int) -> list[str]:
    """``count`` checkpoints put directly (each with a changed channel); their ids."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ids, version = [], None
    for i in range(count):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=i))
        version = saver.get_next_version(version, None)
        checkpoint["channel_values"] = {"n": i, "note": f"value {i}"}
        checkpoint["channel_versions"] = {"n": version, "note": version}
        metadata = {"source": "loop", "step": i, "parents": {}}
        config = saver.put(config, checkpoint, metadata, {"n": version, "note": version})
        ids.append(checkpoint["id"])
    return ids


def bench_langgraph(engine: str, url: str, native: str, quick: bool) -> list[Row]:
    from langchain_core.messages import HumanMessage

    steps, turns, size = (60, 30, 300) if quick else (200, 100, 1000)
    rows: list[Row] = []
    with ExitStack() as stack:
        ours, theirs = langgraph_savers(engine, url, native, stack)
        pair = {"ours": ours, "theirs": theirs}

        def run_of(saver: Any, key: str) -> Callable[[], Any]:
            graph = loop_graph(saver, steps)
            cfg = {"configurable": {"thread_id": f"run-{key}"}, "recursion_limit": steps + 10}
            return lambda: graph.invoke({"n": 0, "log": []}, cfg)

        times = paired_median_ms({k: run_of(s, k) for k, s in pair.items()}, 3)
        rows.append(("LangGraph saver", f"{steps}-step run", engine, *times.values()))

        def turn_of(saver: Any, threads: int, prefix: str) -> Callable[[], Any]:
            """The next turn of a chat over ``threads`` threads, one a call."""
            graph = chat_graph(saver)
            count = iter(range(10**6))

            def turn() -> None:
                n = next(count)
                cfg = {"configurable": {"thread_id": f"{prefix}-{n % threads}"}}
                graph.invoke({"messages": [HumanMessage(content=f"turn {n}")]}, cfg)

            return turn

        # the savers take turns, turn by turn: the median turn of each
        times = paired_median_ms({k: turn_of(s, 1, "chat") for k, s in pair.items()}, turns)
        rows.append(("", f"{turns}-turn chat (per turn)", engine, times["ours"], times["theirs"]))
        many = 70
        rr = {k: turn_of(s, many, "rr") for k, s in pair.items()}
        for turn in rr.values():  # every thread's first turns, not timed
            for _ in range(turns):
                turn()
        times = paired_median_ms(rr, turns)
        rows.append(("", f"chat, {many} threads round robin (per turn)", engine, *times.values()))

        ids = {k: filled_thread(s, "big", size) for k, s in pair.items()}
        latest = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}
        times = paired_median_ms({k: lambda s=s: s.get_tuple(latest) for k, s in pair.items()}, 50)
        rows.append(
            ("", f"get_tuple latest, thread of {size:,}", engine, times["ours"], times["theirs"])
        )

        def middle_of(key: str) -> dict[str, Any]:
            cid = ids[key][size // 2]
            return {"configurable": {"thread_id": "big", "checkpoint_ns": "", "checkpoint_id": cid}}

        times = paired_median_ms(
            {k: lambda s=s, c=middle_of(k): s.get_tuple(c) for k, s in pair.items()}, 50
        )
        rows.append(("", "get_tuple of a middle checkpoint", engine, *times.values()))

        counter = iter(range(10**6))

        def writes_of(saver: Any, key: str) -> Callable[[], Any]:
            cfg = {
                "configurable": {
                    "thread_id": "big",
                    "checkpoint_ns": "",
                    "checkpoint_id": ids[key][-1],
                }
            }
            return lambda: saver.put_writes(
                cfg, [("n", 1), ("note", "written")], f"task-{next(counter)}"
            )

        times = paired_median_ms({k: writes_of(s, k) for k, s in pair.items()}, 20)
        rows.append(("", "put_writes (2 writes)", engine, *times.values()))

        times = paired_median_ms(
            {k: lambda s=s: list(s.list(latest, limit=10)) for k, s in pair.items()}, 30
        )
        rows.append(("", "list(limit=10)", engine, *times.values()))
    return rows


async def bench_langgraph_async(engine: str, url: str, native: str, quick: bool) -> list[Row]:
    """Conversations at once on one saver, each turn an ``ainvoke``: threadline's
    saver (its async methods) against ``AsyncSqliteSaver`` / ``AsyncPostgresSaver``."""
    from langchain_core.messages import HumanMessage

    from threadline.integrations.langgraph import ThreadlineSaver

    conversations, turns = 20, (5 if quick else 15)
    async with AsyncExitStack() as stack:
        ours = stack.enter_context(ThreadlineSaver(url))
        if engine == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            theirs: Any = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(native))
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            theirs = await stack.enter_async_context(
                AsyncPostgresSaver.from_conn_string(pg_native_url(native))
            )
        await theirs.setup()

        async def talk(saver: Any, prefix: str) -> None:
            graph = chat_graph(saver)

            async def conversation(n: int) -> None:
                cfg = {"configurable": {"thread_id": f"{prefix}-{n}"}}
                for turn in range(turns):
                    await graph.ainvoke({"messages": [HumanMessage(content=f"turn {turn}")]}, cfg)

            await asyncio.gather(*(conversation(n) for n in range(conversations)))

        pair = {"ours": ours, "theirs": theirs}
        for key, saver in pair.items():  # warm up: imports, tables, first threads
            await talk(saver, f"warm-{key}")
        taken: dict[str, list[float]] = {"ours": [], "theirs": []}
        for round in range(1 if quick else 5):  # alternating, so load falls on both
            for key in sorted(pair, reverse=round % 2 == 1):
                saver = pair[key]
                taken[key].append(await amedian_ms(lambda s=saver, r=round: talk(s, f"c{r}"), 1))
        times = {k: statistics.median(v) for k, v in taken.items()}
    per_turn = conversations * turns
    return [
        (
            "LangGraph async",
            f"{conversations} conversations at once, {turns} turns (per turn)",
            engine,
            times["ours"] / per_turn,
            times["theirs"] / per_turn,
        )
    ]


# -- the Agents SDK
def turn_items(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {i}: what about the thing we said?"},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{i}",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {i} " * 8, "annotations": []}],
        },
        {"role": "user", "content": f"thanks for {i}"},
    ]


async def bench_agents(engine: str, url: str, native: str, quick: bool) -> list[Row]:
    from agents import SQLiteSession

    from threadline.integrations.openai_agents import ThreadlineSession

    turns = 100 if quick else 300
    closers: list[Callable[[], Any]] = []

    def make(kind: str, key: str) -> Any:
        if kind == "ours":
            session = ThreadlineSession(key, url)
            closers.append(session.close)
            return session
        if engine == "sqlite":
            session = SQLiteSession(key, db_path=native)
            closers.append(session.close)
            return session
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        return SQLAlchemySession.from_url(
            key, url=pg_native_url(native, "postgresql+psycopg"), create_tables=True
        )

    rows: list[Row] = []
    try:
        sessions = {k: make(k, "conv") for k in ("ours", "theirs")}

        def turn_of(session: Any) -> Callable[[], Any]:
            """The next turn: what Runner reads before it, then what it adds."""
            count = iter(range(10**6))

            async def turn() -> None:
                await session.get_items()
                await session.add_items(turn_items(next(count)))

            return turn

        # the sessions take turns, turn by turn: the median turn of each
        times = await apaired_median_ms({k: turn_of(s) for k, s in sessions.items()}, turns)
        rows.append(
            (
                "Agents SDK session",
                f"{turns} turns (get_items + add_items, as Runner), per turn",
                engine,
                *times.values(),
            )
        )
        items = turns * 3
        times = await apaired_median_ms(
            {k: lambda s=s: s.get_items() for k, s in sessions.items()}, 10
        )
        rows.append(("", f"get_items() of {items} items", engine, *times.values()))
        times = await apaired_median_ms(
            {k: lambda s=s: s.get_items(limit=20) for k, s in sessions.items()}, 20
        )
        rows.append(("", "get_items(limit=20)", engine, *times.values()))
    finally:
        for close in closers:
            close()
    return rows


# -- ADK
async def bench_adk(engine: str, url: str, native: str, quick: bool) -> list[Row]:
    from google.adk.events.event import Event
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.genai import types

    from threadline.integrations.adk import ThreadlineSessionService

    count = 60 if quick else 200
    ours = ThreadlineSessionService(url)
    if engine == "sqlite":
        theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{native}")
    else:
        theirs = DatabaseSessionService(pg_native_url(native, "postgresql+psycopg"))
    services = {"ours": ours, "theirs": theirs}
    rows: list[Row] = []
    made: dict[str, list[Any]] = {"ours": [], "theirs": []}

    async def create(key: str) -> None:
        n = len(made[key])
        made[key].append(
            await services[key].create_session(
                app_name="app", user_id="user", session_id=f"s{n:05d}", state={"n": n}
            )
        )

    # the services take turns, call by call, as the other faces' rows do
    times = await apaired_median_ms({k: lambda k=k: create(k) for k in services}, count)
    rows.append(("ADK service", "create_session", engine, *times.values()))

    def event(i: int) -> Event:
        return Event(
            author="user", content=types.Content(role="user", parts=[types.Part(text=f"hi {i}")])
        )

    counter = iter(range(10**6))
    pairs = list(services.items())
    first = {k: made[k][0] for k in services}
    appends = {k: lambda k=k, s=s: s.append_event(first[k], event(next(counter))) for k, s in pairs}
    times = await apaired_median_ms(appends, count)
    rows.append(("", "append_event", engine, *times.values()))
    times = await apaired_median_ms(
        {
            k: lambda k=k: services[k].get_session(
                app_name="app", user_id="user", session_id="s00000"
            )
            for k in services
        },
        20,
    )
    rows.append(("", "get_session", engine, *times.values()))
    lists = {k: lambda s=s: s.list_sessions(app_name="app", user_id="user") for k, s in pairs}
    times = await apaired_median_ms(lists, 20)
    rows.append(("", f"list_sessions (all {count})", engine, *times.values()))
    ours.close()
    await theirs.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--only", default="sqlite,postgres")
    parser.add_argument("--faces", default="langgraph,langgraph-async,agents,adk")
    args = parser.parse_args()
    faces = args.faces.split(",")
    rows: list[Row] = []
    for engine in args.only.split(","):
        for face in faces:
            with tempfile.TemporaryDirectory() as tmp, engines(engine, Path(tmp)) as (url, nat):
                if face == "langgraph":
                    rows += bench_langgraph(engine, url, nat, args.quick)
                elif face == "langgraph-async":
                    rows += asyncio.run(bench_langgraph_async(engine, url, nat, args.quick))
                elif face == "agents":
                    rows += asyncio.run(bench_agents(engine, url, nat, args.quick))
                elif face == "adk":
                    rows += asyncio.run(bench_adk(engine, url, nat, args.quick))
    print(f"{'face':20} {'operation':48} {'engine':9} {'threadline':>11} {'native':>9} ratio")
    for face, op, engine, ours, theirs in rows:
        ratio = ours / theirs if theirs else float("nan")
        print(f"{face:20} {op:48} {engine:9} {ours:9.2f}ms {theirs:7.2f}ms {ratio:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
