"""A bounded load run of ``threadline serve`` on loopback (issue 11): latency and errors.

Starts the real command (``threadline serve``, one uvicorn process) on a fresh
SQLite store in a temporary directory, or on ``--store URL`` (PostgreSQL), with
its default model, the offline simulated coding agent. Then ``--clients``
concurrent clients (httpx, async) each own one session and loop for
``--seconds``: ``session.list`` of their workspace (20 a page), then
``agent.prompt`` with the next scripted request of the simulated coding run
(tool calls, results, compactions as the history grows), then follow the turn's
events over SSE until ``turn_finished``. ``agent.prompt`` returns when the user
message is stored and the turn has started; the ``turn`` row is prompt to
``turn_finished``. Any non-2xx answer, transport error or failed turn is an
error (0 expected). Client and server share this machine's cores.

    python bench/server_load.py [--clients 50] [--seconds 30] [--store URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from tables import result_table
from threadline.demo.coding_run import coding_run
from threadline.server.config import SIMULATED_TURNS

TOKEN = "bench-" + uuid.uuid4().hex
PAGE = 20
START_SECONDS = 60.0
TIMEOUT = 120.0
REQUESTS = [turn.user for turn in coding_run(SIMULATED_TURNS)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(url: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(home / "server.log", "wb")  # noqa: SIM115 - the server writes it
    env = dict(os.environ, THREADLINE_CONFIG_DIR=str(home))
    command = [sys.executable, "-m", "threadline.cli.app", "--store", url, "serve"]
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--token", TOKEN], env=env, stdout=log, stderr=log
    )
    log.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            httpx.get(base + "/openapi.json", timeout=1)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                sys.exit("the server did not start:\n" + (home / "server.log").read_text())
            time.sleep(0.05)


class Results:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, list[str]] = defaultdict(list)

    def ok(self, name: str, seconds: float) -> None:
        self.latency[name].append(seconds)

    def failed(self, name: str, why: str) -> None:
        self.errors[name].append(why)


async def follow_turn(client: httpx.AsyncClient, sid: str, last_id: int) -> dict[str, Any]:
    """The ``turn_finished`` event's data, read over SSE from after ``last_id``."""
    headers = {"Last-Event-ID": str(last_id)}
    url = f"/v1/sessions/{sid}/events"
    async with client.stream("GET", url, params={"until": "turn_finished"}, headers=headers) as r:
        r.raise_for_status()
        event = ""
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "turn_finished":
                return dict(json.loads(line[6:]))
    raise RuntimeError("the event stream ended before turn_finished")


async def client_loop(
    client: httpx.AsyncClient, sid: str, workspace: str, until: float, results: Results
) -> None:
    list_input = json.dumps({"workspaceId": workspace, "limit": PAGE})
    turn = 0
    while time.monotonic() < until:
        t0 = time.perf_counter()
        try:
            r = await client.get("/trpc/session.list", params={"input": list_input})
            r.raise_for_status()
            results.ok("session.list", time.perf_counter() - t0)
        except Exception as exc:
            results.failed("session.list", _why(exc))
        text = REQUESTS[turn % len(REQUESTS)]
        turn += 1
        t0 = time.perf_counter()
        try:
            r = await client.post("/trpc/agent.prompt", json={"sessionId": sid, "text": text})
            r.raise_for_status()
            started = time.perf_counter()
            results.ok("agent.prompt", started - t0)
        except Exception as exc:
            results.failed("agent.prompt", _why(exc))
            continue
        try:
            finished = await follow_turn(client, sid, r.json()["result"]["data"]["lastEventId"])
            if not finished.get("ok"):
                raise RuntimeError(f"turn failed: {finished}")
            results.ok("turn (prompt to turn_finished)", time.perf_counter() - t0)
        except Exception as exc:
            results.failed("turn (prompt to turn_finished)", _why(exc))


def _why(exc: Exception) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{exc.response.status_code} {exc.response.text[:200]}"
    return f"{type(exc).__name__}: {exc}"


async def create_session(client: httpx.AsyncClient, worker: str, workspace: str) -> str:
    """A new session over tRPC, as a coding agent's worker opens one; its id."""
    body = {"workerId": worker, "workspaceId": workspace}
    r = await client.post("/trpc/session.create", json=body)
    r.raise_for_status()
    return str(r.json()["result"]["data"]["sessionId"])


async def run(base: str, clients: int, seconds: float) -> tuple[Results, float]:
    workspace = "load-" + uuid.uuid4().hex[:8]
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=TIMEOUT, limits=limits
    ) as client:
        sids = [await create_session(client, f"worker-{i}", workspace) for i in range(clients)]
        results = Results()
        t0 = time.perf_counter()
        until = time.monotonic() + seconds
        await asyncio.gather(*(client_loop(client, s, workspace, until, results) for s in sids))
        elapsed = time.perf_counter() - t0
        for sid in sids:  # a shared --store keeps nothing of the run
            await client.delete(f"/v1/sessions/{sid}")
    return results, elapsed


def report(results: Results, elapsed: float, clients: int, store: str) -> int:
    table = result_table(
        f"threadline serve, {clients} clients, {elapsed:.1f} s, store {store}",
        ("procedure", "requests", "per s", "p50 ms", "p99 ms", "max ms", "errors"),
    )
    names = list(dict.fromkeys([*results.latency, *results.errors]))
    total = 0
    for name in names:
        lat = sorted(results.latency.get(name, []))
        errors = len(results.errors.get(name, []))
        total += len(lat) + errors
        p50 = statistics.median(lat) * 1000 if lat else float("nan")
        p99 = (
            statistics.quantiles(lat, n=100, method="inclusive")[98] * 1000 if len(lat) > 1 else p50
        )
        peak = lat[-1] * 1000 if lat else float("nan")
        table.add_row(
            name,
            f"{len(lat) + errors:,}",
            f"{(len(lat) + errors) / elapsed:,.1f}",
            f"{p50:,.1f}",
            f"{p99:,.1f}",
            f"{peak:,.1f}",
            str(errors),
        )
    console = Console()
    console.print(table)
    http = sum(len(results.latency.get(n, [])) for n in ("session.list", "agent.prompt"))
    console.print(f"throughput: {http / elapsed:,.1f} HTTP calls/s (list + prompt)")
    errors = sum(len(v) for v in results.errors.values())
    for name, whys in results.errors.items():
        for why in sorted(set(whys))[:3]:
            console.print(f"error in {name}: {why}", markup=False)
    return 1 if errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--store", help="store URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        url = args.store or f"sqlite://{home / 'load.db'}"
        proc, base = start_server(url, home)
        try:
            results, elapsed = asyncio.run(run(base, args.clients, args.seconds))
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        return report(results, elapsed, args.clients, url.split("?", 1)[0])


if __name__ == "__main__":
    sys.exit(main())
