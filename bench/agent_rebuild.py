"""What it costs a worker to run a session another worker ran last (issue 34, point 1).

A worker's cached agent is rebuilt from the store when the store's last seq moved
since the agent last ran. This runs, in one process on one store (a temporary
SQLite file, or ``--store URL``), a session of ``--messages`` stored messages with
the offline simulated model, ``--turns`` times each: a turn on the cached agent
(nobody else wrote), and a turn after another writer appended a message pair (the
agent rebuilt). Printed: the median prompt-to-``turn_finished`` time of both, the
agent build alone, and the ratio of rebuilt to cached.

    python bench/agent_rebuild.py [--messages 400] [--turns 15] [--store URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from threadline import Message, open_store
from threadline.server.config import ServerConfig
from threadline.server.runner import AgentRunner, build_agent

MODEL = "simulated/gpt-4o"
TOKEN = "bench-token-0123456789abcdef"


def turn_ms(runner: AgentRunner, sid: str, text: str) -> float:
    started = time.perf_counter()
    before = runner.run_turn(sid, text, MODEL)
    while True:
        events, _ = runner.hub.log(sid).after(before)
        if any(e.name == "turn_finished" for e in events):
            return (time.perf_counter() - started) * 1000
        time.sleep(0.001)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--store", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'store.db'}"
        store = open_store(url)
        config = ServerConfig(token=TOKEN)
        builds: list[float] = []

        def factory(store: Any, info: Any, spec: str) -> Any:
            started = time.perf_counter()
            agent = build_agent(config, store, info, spec)
            builds.append((time.perf_counter() - started) * 1000)
            return agent

        runner = AgentRunner(store, config, agent_factory=factory)
        session = store.create_session(model=MODEL)
        pairs = [
            (Message.user(f"q{n}"), Message.assistant(f"a{n}")) for n in range(args.messages // 2)
        ]
        session.append([m for pair in pairs for m in pair])
        turn_ms(runner, session.id, "warm up")
        cached, rebuilt = [], []
        for n in range(args.turns):
            cached.append(turn_ms(runner, session.id, f"cached {n}"))
            session.append([Message.user(f"elsewhere {n}"), Message.assistant("ok")])
            rebuilt.append(turn_ms(runner, session.id, f"rebuilt {n}"))
        runner.close()
        store.close()
    c, r, b = (statistics.median(x) for x in (cached, rebuilt, builds))
    backend = url.split("://")[0]
    print(f"store {backend}, {args.messages} messages, {args.turns} turns each")
    print(f"turn on the cached agent:        {c:8.1f} ms (median)")
    print(f"turn after another writer:       {r:8.1f} ms (median; agent rebuilt)")
    print(f"agent build alone:               {b:8.1f} ms (median of {len(builds)})")
    print(f"rebuilt / cached:                {r / c:8.2f}x")


if __name__ == "__main__":
    main()
