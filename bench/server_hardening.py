"""What the server's bounds cost and save (issue 20, point 6): event memory, held
connections, login codes.

- ``hub``: one process publishes ``--events`` events of about ``--size`` bytes (a
  tool result's preview) to each of ``--sessions`` sessions' logs, as turns do, and
  reports its RSS growth; then, where the hub has ``sweep``, it forgets the sessions
  (their agents evicted) and reports RSS again. Each run is its own process.
- ``connections``: starts the real ``threadline serve`` on a free port, opens
  ``--connections`` connections that send half a request's headers and then nothing,
  and counts the server's open descriptors right after and ``--wait`` seconds later
  (the header deadline is 10 s).
- ``codes``: issues ``--codes`` login links, then times 1,000 more ``issue`` calls.

Run against the code before a change (``git stash``) and after, for the before/after
figures; the script uses only what both have.

    python bench/server_hardening.py hub [--sessions 80] [--events 5000] [--size 400]
    python bench/server_hardening.py connections [--connections 1000] [--wait 15]
    python bench/server_hardening.py codes [--codes 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

TOKEN = "bench-" + uuid.uuid4().hex
START_SECONDS = 60.0


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def hub(sessions: int, events: int, size: int) -> None:
    from threadline.server.config import EVENT_BUFFER
    from threadline.server.events import EventHub

    before = rss_mb()
    events_hub = EventHub(EVENT_BUFFER)
    text = "r" * size
    started = time.perf_counter()
    for s in range(sessions):
        log = events_hub.log(f"session-{s}")
        for i in range(events):
            log.publish("tool_result", {"step": i, "toolCallId": f"call-{i}", "content": text})
    seconds = time.perf_counter() - started
    published = rss_mb()
    print(
        f"hub: {sessions} sessions x {events} events of {size} B: RSS {before:.0f} -> "
        f"{published:.0f} MB (+{published - before:.0f}), {seconds:.1f} s"
    )
    sweep = getattr(events_hub, "sweep", None)
    if sweep is not None:
        sweep(())
        sweep(())  # untouched for a whole sweep: forgotten
        kept = getattr(events_hub, "count", "?")
        print(f"hub: after the sessions' agents are evicted: {kept} logs, RSS {rss_mb():.0f} MB")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def connections(count: int, wait: float) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 100)), hard))
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, THREADLINE_CONFIG_DIR=tmp)
        command = [sys.executable, "-m", "threadline.cli.app", "--store", f"sqlite://{tmp}/b.db"]
        command += ["serve", "--port", str(port), "--token", TOKEN]
        log = open(Path(tmp) / "server.log", "wb")  # noqa: SIM115 - the server writes it
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + START_SECONDS
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        sys.exit("the server did not start")
                    time.sleep(0.1)
            time.sleep(0.5)
            idle = open_fds(proc.pid)
            held = []
            for _ in range(count):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                held.append(sock)
            time.sleep(1)
            opened = open_fds(proc.pid)
            time.sleep(wait)
            later = open_fds(proc.pid)
            closed = 0
            for sock in held:
                sock.settimeout(0.01)
                with contextlib.suppress(OSError):
                    closed += sock.recv(1) == b""
                sock.close()
            print(
                f"connections: {count} half-sent requests: server fds {idle} idle, {opened} "
                f"with them open, {later} after {wait:g} s; {closed} closed by the server"
            )
        finally:
            proc.terminate()
            proc.wait(10)


def codes(count: int) -> None:
    from threadline.server.auth import LoginCodes

    login_codes = LoginCodes()
    for _ in range(count):
        login_codes.issue()
    started = time.perf_counter()
    for _ in range(1000):
        login_codes.issue()
    per_issue = (time.perf_counter() - started) / 1000
    print(f"codes: after {count:,} links, one more costs {per_issue * 1e6:,.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("hub")
    p.add_argument("--sessions", type=int, default=80)
    p.add_argument("--events", type=int, default=5000)
    p.add_argument("--size", type=int, default=400)
    p = sub.add_parser("connections")
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--wait", type=float, default=15.0)
    p = sub.add_parser("codes")
    p.add_argument("--codes", type=int, default=100_000)
    args = parser.parse_args()
    if args.what == "hub":
        hub(args.sessions, args.events, args.size)
    elif args.what == "connections":
        connections(args.connections, args.wait)
    else:
        codes(args.codes)


if __name__ == "__main__":
    main()
