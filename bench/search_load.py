"""Ten concurrent worst-case searches on a scanning store: memory (RSS) and time.

Issue 33: on Redis a search decoded every message and kept every hit before cutting
the page; ten concurrent ``e*`` searches over 100,000 messages took a minute each and
grew the process by gigabytes. This fills a Redis store (kept under a fixed key prefix,
so a second run, or ``bench/compare.py`` running the old library, reuses it), then runs
``--concurrent`` searches at once in threads, as the server's thread pool does, and
prints the process's RSS before and at its peak (sampled every 20 ms) and each
search's time, beside a peer measured in the same run: reading every message once with
redis-py and ``json.loads`` (the least any scan must do).

``--server`` runs the searches as ``GET /v1/search`` against a ``threadline serve`` of
the same library (a subprocess, its RSS sampled the same way), and counts the answers
by status: a server now runs a few searches at once and refuses the rest with 429.

    python bench/search_load.py [--messages 100000] [--concurrent 10] [--query 'e*']
    python bench/compare.py --base e2f21e4 -- bench/search_load.py [--server]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from threadline import Message, open_store

PREFIX = "threadline-bench-search:"
WORDS = "every error entry echoes each event; engineers expect eventual exits"
"""Every message matches ``e*`` many times over: the worst case for a scan."""
BATCH = 1000


TOKEN = "bench-search-token-0123456789"
SERVE = [sys.executable, "-m", "threadline.cli.app", "serve"]
BANNER = re.compile(r"threadline server on (http://\S+)")


def rss_mb(pid: int | None = None) -> float:
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class PeakRSS:
    """The highest RSS seen while the block runs."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.peak = rss_mb(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb(self.pid))

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb(self.pid))


def fill(url: str, messages: int, sessions: int) -> None:
    store = open_store(url)
    try:
        have = sum(i.message_count for i in store.list_sessions(limit=200).items)
        if have == messages:
            return
        store.delete_all(force=True)
        per = messages // sessions
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        for n in range(sessions):
            session = store.create_session(agent="bench")
            for start in range(0, per, BATCH):
                session.append(
                    [
                        Message.user(
                            f"{WORDS} {n}.{k}",
                            created_at=t0 + timedelta(seconds=n * per + k),
                        )
                        for k in range(start, min(per, start + BATCH))
                    ]
                )
    finally:
        store.close()


def raw_read_seconds(redis_url: str) -> float:
    """The peer: every message's JSON read and parsed once, no threadline."""
    import redis

    client = redis.Redis.from_url(redis_url)
    started = time.perf_counter()
    count = 0
    for key in client.scan_iter(match=PREFIX + "*", count=1000):
        if client.type(key) == b"list":
            for start in range(0, client.llen(key), BATCH):
                for body in client.lrange(key, start, start + BATCH - 1):
                    try:
                        json.loads(body)
                        count += 1
                    except ValueError:
                        pass
    client.close()
    return time.perf_counter() - started


def serve(url: str, home: str) -> tuple[subprocess.Popen[str], str]:
    """``threadline serve`` on ``url`` (a free port), once it listens."""
    env = {**os.environ, "THREADLINE_CONFIG_DIR": home}
    env.pop("THREADLINE_SERVER_TOKEN", None)
    proc = subprocess.Popen(
        [*SERVE, "--store", url, "--port", "0", "--token", TOKEN],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    base = None
    for line in proc.stdout:
        found = BANNER.search(line)
        base = found.group(1) if found else base
        if "Uvicorn running on" in line:
            break
    if base is None or proc.poll() is not None:
        raise SystemExit("threadline serve did not start")
    stdout = proc.stdout
    threading.Thread(target=lambda: [None for _ in stdout], daemon=True).start()
    return proc, base


def over_http(url: str, query: str, concurrent: int) -> None:
    import httpx

    with tempfile.TemporaryDirectory() as home:
        proc, base = serve(url, home)
        try:
            statuses: list[int] = []
            times: list[float] = []
            lock = threading.Lock()

            def one() -> None:
                started = time.perf_counter()
                r = httpx.get(
                    f"{base}/v1/search",
                    params={"q": query, "limit": 20},
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=600,
                )
                with lock:
                    statuses.append(r.status_code)
                    times.append(time.perf_counter() - started)

            before = rss_mb(proc.pid)
            started = time.perf_counter()
            with PeakRSS(proc.pid) as peak:
                threads = [threading.Thread(target=one) for _ in range(concurrent)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            wall = time.perf_counter() - started
        finally:
            proc.terminate()
            proc.wait(60)
    counted = ", ".join(f"{n} x {s}" for s, n in sorted(collections.Counter(statuses).items()))
    print(f"{concurrent} concurrent GET /v1/search?q={query} against threadline serve")
    print(f"  answers: {counted}")
    grew = peak.peak - before
    print(f"  server RSS before {before:.0f} MB, peak {peak.peak:.0f} MB: +{grew:.0f} MB")
    print(
        f"  per request: median {statistics.median(times):.2f} s, max {max(times):.2f} s; "
        f"all done in {wall:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--concurrent", type=int, default=10)
    parser.add_argument("--query", default="e*")
    parser.add_argument("--server", action="store_true", help="through threadline serve")
    args = parser.parse_args()
    url = f"{args.redis}?prefix={PREFIX}"
    fill(url, args.messages, args.sessions)
    if args.server:
        over_http(url, args.query, args.concurrent)
        return
    peer = raw_read_seconds(args.redis)

    store = open_store(url)
    times: list[float] = []
    results: list[Any] = []
    lock = threading.Lock()

    def one() -> None:
        started = time.perf_counter()
        page = store.search(args.query, limit=20)
        took = time.perf_counter() - started
        with lock:
            times.append(took)
            results.append(page)

    before = rss_mb()
    started = time.perf_counter()
    with PeakRSS() as peak:
        threads = [threading.Thread(target=one) for _ in range(args.concurrent)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.perf_counter() - started
    store.close()
    page = results[0]
    exact = getattr(page, "exact", True)
    total = page.total if exact else f"more than {page.total}"
    print(
        f"{args.concurrent} concurrent searches for {args.query!r} over "
        f"{args.messages:,} messages on Redis"
    )
    print(f"  hits: {total}; page of {len(page)}")
    print(f"  RSS before {before:.0f} MB, peak {peak.peak:.0f} MB: +{peak.peak - before:.0f} MB")
    print(
        f"  per search: median {statistics.median(times):.2f} s, max {max(times):.2f} s; "
        f"all done in {wall:.2f} s"
    )
    print(
        f"  peer (read and parse every message once, raw redis-py): {peer:.2f} s; "
        f"median search / peer = {statistics.median(times) / peer:.1f}x"
    )


if __name__ == "__main__":
    main()
