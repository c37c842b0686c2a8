"""Many workers behind a round-robin proxy (issue 34, point 5): errors, 409s, events, cancels.

For each store (PostgreSQL, Redis) and each worker count (1, 2, 3), starts that many
real ``threadline serve`` workers on a fresh schema or key prefix, with their default
model (the offline simulated coding agent), behind HAProxy (``--proxy nginx`` for
nginx) configured by ``bench/balancer.py``: round robin, no sticky routing. Then
``--clients`` concurrent clients (httpx, async, through the proxy only) each own two
sessions and loop for ``--seconds``: ``session.list`` of their workspace, then
``agent.prompt`` on one of their sessions (the next scripted request), then follow
the turn's events over SSE on whatever worker the proxy picks, until
``turn_finished``. One turn in ten is cancelled (``POST /v1/sessions/{id}/cancel``
right after the prompt, on whatever worker); one in twenty is prompted twice at
once (a true race: exactly one may run while the other is refused with 409, or both
run one after the other).

Counted: errors (any other non-2xx, transport error, failed turn or stream), 409s
(those of a racing pair are true races; any other is a false 409, 0 expected),
turns whose events arrived complete and in order (ids consecutive after the
prompt's ``lastEventId``, ``turn_started`` first, ``turn_finished`` last), cancels
(answered ``cancelled: true`` and honoured: the turn ended ``stopped: cancelled``;
answered false because the turn had already ended), follows served by a worker that
did not run the turn, and at the end every session's stored history (consecutive
seqs, one user message per prompt that ran: nothing lost or duplicated). Prints
p50/p99 per call, throughput per worker count and the gain over one worker. Client,
proxy, workers and store share this machine's cores, so the gain is what this
machine gives, not what more cores would.

    python bench/server_scale.py [--clients 50] [--seconds 60] [--workers 1,2,3]
        [--stores postgres,redis] [--proxy haproxy|nginx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from balancer import PROXIES, WORKER_HEADER, start_proxy
from server_load import PAGE, REQUESTS, TOKEN, _why, create_session, start_server
from threadline import open_store

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
CANCEL_EVERY = 10
RACE_EVERY = 20
SESSIONS_PER_CLIENT = 2
FOLLOW_SECONDS = 60.0
TIMEOUT = 60.0


@dataclass
class Tally:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    ran: Counter[str] = field(default_factory=Counter)
    """Prompts that ran, per session."""

    def ok(self, name: str, seconds: float) -> None:
        self.latency[name].append(seconds)

    def error(self, name: str, why: str) -> None:
        self.errors.append(f"{name}: {why}")


def served(response: httpx.Response) -> str:
    return response.headers.get(WORKER_HEADER, "").rpartition(", ")[2]


async def follow(
    client: httpx.AsyncClient, sid: str, after: int, turns: int
) -> tuple[list[tuple[int, str, dict[str, Any]]], str]:
    """The events after ``after`` through ``turns`` ends (``turn_finished`` or
    ``interrupted``), and the worker that served them."""
    events: list[tuple[int, str, dict[str, Any]]] = []
    ended = 0
    headers = {"Last-Event-ID": str(after)}
    url = f"/v1/sessions/{sid}/events"
    async with client.stream("GET", url, headers=headers) as r:
        if r.status_code != 200:
            await r.aread()  # for the error's text
            r.raise_for_status()
        fields: dict[str, str] = {}
        async for line in r.aiter_lines():
            if line == "" and "event" in fields:
                name = fields["event"]
                if "id" in fields:  # ``held_elsewhere`` is said, not logged
                    events.append((int(fields["id"]), name, json.loads(fields["data"])))
                ended += name in ("turn_finished", "interrupted")
                if ended == turns:
                    return events, served(r)
                fields = {}
            elif line and not line.startswith(":"):
                key, _, value = line.partition(": ")
                fields[key] = value
    raise RuntimeError("the event stream ended before the turn did")


def in_order(events: list[tuple[int, str, dict[str, Any]]], after: int, turns: int) -> bool:
    ids = [id for id, _, _ in events]
    names = [name for _, name, _ in events]
    starts = [i for i, name in enumerate(names) if name == "turn_started"]
    return (
        ids == list(range(after + 1, after + 1 + len(ids)))
        and len(starts) == turns
        and starts[0] == 0
        and names[-1] == "turn_finished"
        and "events_lost" not in names
    )


async def prompt(
    client: httpx.AsyncClient, sid: str, text: str, tally: Tally
) -> httpx.Response | None:
    t0 = time.perf_counter()
    try:
        r = await client.post("/trpc/agent.prompt", json={"sessionId": sid, "text": text})
    except httpx.HTTPError as exc:
        tally.error("agent.prompt", _why(exc))
        return None
    if r.status_code == 200:
        tally.ok("agent.prompt", time.perf_counter() - t0)
    return r


async def one_turn(
    client: httpx.AsyncClient, sid: str, text: str, number: int, tally: Tally
) -> None:
    # from early on, so that short runs race and cancel too: the 5th turn, the 25th...;
    # the 3rd, the 13th...
    race = number % RACE_EVERY == RACE_EVERY // 4
    cancel = number % CANCEL_EVERY == 3
    t0 = time.perf_counter()
    tries = 2 if race else 1
    answers = await asyncio.gather(*(prompt(client, sid, text, tally) for _ in range(tries)))
    won = [r for r in answers if r is not None and r.status_code == 200]
    for r in answers:
        if r is None or r.status_code == 200:
            continue
        if r.status_code == 409:
            tally.counts["409 in a true race" if race else "409 not in a race"] += 1
            if not race:
                tally.error("agent.prompt", f"409 with no race: {r.text[:200]}")
        else:
            tally.error("agent.prompt", f"{r.status_code} {r.text[:200]}")
    if not won:
        if race:
            tally.error("agent.prompt", "both racing prompts refused")
        return
    tally.ran[sid] += len(won)
    starts = [int(r.json()["result"]["data"]["lastEventId"]) for r in won]
    ran_on = {served(r) for r in won}
    asked: bool | None = None
    if cancel:
        t1 = time.perf_counter()
        try:
            c = await client.post(f"/v1/sessions/{sid}/cancel")
            c.raise_for_status()
            tally.ok("cancel", time.perf_counter() - t1)
            asked = bool(c.json()["cancelled"])
            tally.counts["cancels sent"] += 1
        except httpx.HTTPError as exc:
            tally.error("cancel", _why(exc))
    try:
        events, follower = await asyncio.wait_for(
            follow(client, sid, min(starts), len(won)), FOLLOW_SECONDS
        )
    except Exception as exc:
        tally.error("events", _why(exc) if isinstance(exc, httpx.HTTPError) else repr(exc))
        return
    tally.ok("turn (prompt to turn_finished)", time.perf_counter() - t0)
    tally.counts["turns followed"] += len(won)
    tally.counts["follows on another worker"] += follower not in ran_on
    if in_order(events, min(starts), len(won)):
        tally.counts["turns with every event in order"] += len(won)
    else:
        tally.error("events", f"out of order or missing: {[(i, n) for i, n, _ in events][:12]}")
    finished = [data for _, name, data in events if name == "turn_finished"]
    if any(not f.get("ok") and f.get("stopped") != "cancelled" for f in finished):
        tally.error("turn", f"failed: {finished[-1]}")
    if asked is True:
        if finished[-1].get("stopped") == "cancelled":
            tally.counts["cancels honoured"] += 1
        else:
            tally.error("cancel", f"answered cancelled but the turn ran on: {finished[-1]}")
    elif asked is False:
        if finished[-1].get("stopped") != "cancelled":
            tally.counts["cancels too late (turn already over)"] += 1
        else:
            tally.error("cancel", f"answered not cancelled but the turn stopped: {finished[-1]}")


async def client_loop(
    client: httpx.AsyncClient, sids: list[str], workspace: str, until: float, tally: Tally
) -> None:
    list_input = json.dumps({"workspaceId": workspace, "limit": PAGE})
    number = 0
    while time.monotonic() < until:
        number += 1
        t0 = time.perf_counter()
        try:
            r = await client.get("/trpc/session.list", params={"input": list_input})
            r.raise_for_status()
            tally.ok("session.list", time.perf_counter() - t0)
        except httpx.HTTPError as exc:
            tally.error("session.list", _why(exc))
        sid = sids[number % len(sids)]
        text = REQUESTS[(number // len(sids)) % len(REQUESTS)]
        await one_turn(client, sid, text, number, tally)


async def load(base: str, clients: int, seconds: float) -> tuple[Tally, float, list[str]]:
    limits = httpx.Limits(max_connections=clients * 4, max_keepalive_connections=clients * 4)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=TIMEOUT, limits=limits
    ) as client:
        owned: list[tuple[list[str], str]] = []
        for i in range(clients):
            workspace = f"scale-{i}"
            sids = [
                await create_session(client, f"client-{i}", workspace)
                for _ in range(SESSIONS_PER_CLIENT)
            ]
            owned.append((sids, workspace))
        tally = Tally()
        t0 = time.perf_counter()
        until = time.monotonic() + seconds
        await asyncio.gather(*(client_loop(client, s, w, until, tally) for s, w in owned))
        elapsed = time.perf_counter() - t0
    return tally, elapsed, [sid for sids, _ in owned for sid in sids]


def check_histories(url: str, sids: list[str], tally: Tally) -> None:
    """Consecutive seqs and one user message per prompt that ran, for every session."""
    with open_store(url) as store:
        for sid in sids:
            seqs, users, after = [], 0, 0
            while True:
                page = store.read_messages(sid, after_seq=after, limit=1000)
                seqs += [m.seq for m in page]
                users += sum(m.role == "user" and m.text in REQUESTS for m in page)
                if len(page) < 1000:
                    break
                after = page[-1].seq or after
            if seqs != list(range(1, len(seqs) + 1)) or users != tally.ran[sid]:
                tally.error(
                    "history", f"{sid}: seqs {len(seqs)}, {users} prompts of {tally.ran[sid]}"
                )
            else:
                tally.counts["histories intact"] += 1


def fresh_url(store: str, tag: str) -> str:
    if store == "postgres":
        return f"{POSTGRES}?schema=bench_scale_{tag}"
    return f"{REDIS}?prefix=threadline-bench:{tag}:"


def drop(store: str, url: str, tag: str) -> None:
    if store == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "bench_scale_{tag}" CASCADE')
    else:
        import redis

        client = redis.Redis.from_url(REDIS)
        keys = list(client.scan_iter(match=f"threadline-bench:{tag}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()


COUNTED = (
    "409 not in a race",
    "409 in a true race",
    "turns followed",
    "turns with every event in order",
    "follows on another worker",
    "cancels sent",
    "cancels honoured",
    "cancels too late (turn already over)",
    "histories intact",
)


@dataclass
class Run:
    store: str
    workers: int
    tally: Tally
    elapsed: float

    @property
    def turns_per_second(self) -> float:
        return len(self.tally.latency["turn (prompt to turn_finished)"]) / self.elapsed

    @property
    def calls_per_second(self) -> float:
        calls = sum(len(v) for v in self.tally.latency.values())
        return (calls + len(self.tally.errors)) / self.elapsed


def run_one(store: str, workers: int, proxy: str, clients: int, seconds: float) -> Run:
    tag = uuid.uuid4().hex[:10]
    url = fresh_url(store, tag)
    open_store(url).close()  # migrate once, before the workers race to
    home = Path(tempfile.mkdtemp(prefix="threadline-scale-"))
    procs = []
    try:
        for n in range(workers):
            (home / f"w{n}").mkdir()
            procs.append(start_server(url, home / f"w{n}"))
        front = start_proxy(proxy, [base.removeprefix("http://") for _, base in procs], home)
        try:
            tally, elapsed, sids = asyncio.run(load(front.base, clients, seconds))
        finally:
            front.stop()
        check_histories(url, sids, tally)
        return Run(store, workers, tally, elapsed)
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            proc.wait(30)
        drop(store, url, tag)


def report(runs: list[Run], clients: int, seconds: float, proxy: str) -> int:
    console = Console(width=140)
    calls = ("session.list", "agent.prompt", "cancel", "turn (prompt to turn_finished)")
    table = Table(title=f"{clients} clients, {seconds:g} s per run, behind {proxy}")
    for column in ("store", "workers", *[f"{c} p50/p99 ms" for c in calls]):
        table.add_column(column, justify="right")
    for run in runs:
        cells = []
        for name in calls:
            lat = sorted(run.tally.latency.get(name, []))
            if len(lat) < 2:
                cells.append("-")
                continue
            p99 = statistics.quantiles(lat, n=100, method="inclusive")[98]
            cells.append(f"{statistics.median(lat) * 1000:,.0f} / {p99 * 1000:,.0f}")
        table.add_row(run.store, str(run.workers), *cells)
    console.print(table)

    one = {r.store: r for r in runs if r.workers == 1}
    rows: dict[str, list[str]] = defaultdict(list)
    for run in runs:
        base = one.get(run.store)
        gain = run.turns_per_second / base.turns_per_second if base else float("nan")
        per = (gain - 1) / (run.workers - 1) if base and run.workers > 1 else float("nan")
        rows["turns/s"].append(f"{run.turns_per_second:,.1f}")
        rows["calls/s"].append(f"{run.calls_per_second:,.1f}")
        rows["gain vs 1 worker"].append("-" if gain != gain else f"{gain:.2f}x")
        rows["gain per added worker"].append("-" if per != per else f"{per:+.0%}")
        rows["errors"].append(str(len(run.tally.errors)))
        for name in COUNTED:
            rows[name].append(f"{run.tally.counts[name]:,}")
    table = Table(title="throughput and correctness")
    table.add_column("")
    for run in runs:
        table.add_column(f"{run.store} x{run.workers}", justify="right")
    for name, cells in rows.items():
        table.add_row(name, *cells)
    console.print(table)
    console.print(
        "gain per added worker: the turns/s each worker past the first adds, "
        "in units of one worker's"
    )
    errors = sum(len(run.tally.errors) for run in runs)
    for run in runs:
        kinds = Counter(re.sub(r"[0-9a-f-]{36}|\d+", "N", why)[:160] for why in run.tally.errors)
        for why, count in kinds.most_common(8):
            console.print(f"{run.store} x{run.workers}: {count} x {why}", markup=False)
    return 1 if errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", default="1,2,3", help="worker counts, comma-separated")
    parser.add_argument("--stores", default="postgres,redis")
    parser.add_argument("--proxy", choices=PROXIES, default="haproxy")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    runs = []
    for store in args.stores.split(","):
        for workers in counts:
            print(f"{store}, {workers} worker(s), {args.clients} clients, {args.seconds:g} s ...")
            runs.append(run_one(store, workers, args.proxy, args.clients, args.seconds))
    return report(runs, args.clients, args.seconds, args.proxy)


if __name__ == "__main__":
    sys.exit(main())
