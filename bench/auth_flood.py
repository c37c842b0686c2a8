"""Whether the token's holder gets in while someone floods the server with wrong tokens
(issue 33, point 1).

Starts the real ``threadline serve`` on a free loopback port. For each rate of
``--rates`` (wrong tokens a second; 0 is the run without a flood, the peer the others
are compared with), one thread sends wrong bearer tokens at that rate for
``--seconds`` while a right-token client, from the same address, calls once a second:
a bearer ``GET /v1/sessions`` (200 expected) and a login form with the token (303
expected). It prints, per rate, the right calls that succeeded (N/N), how the wrong
ones were answered (401, 429) and the right client's success ratio against the run
without a flood. ``--forge-forwarded`` gives each wrong token its own
``X-Forwarded-For`` (which a server trusting loopback's forwarded headers believed).

Loopback only, bounded in time (rates x seconds). Before/after on one machine:

    python bench/compare.py --base e2f21e4 --rounds 1 -- bench/auth_flood.py --seconds 30
    python bench/auth_flood.py [--rates 0,19,200] [--seconds 30] [--forge-forwarded]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

from server_load import TOKEN, start_server


def flood(base: str, rate: float, stop: threading.Event, forge: bool, seen: Counter[str]) -> None:
    """Wrong bearer tokens at ``rate`` a second until ``stop``; counts the answers."""
    interval = 1.0 / rate
    due = time.monotonic()
    with httpx.Client(base_url=base, timeout=10) as client:
        n = 0
        while not stop.is_set():
            n += 1
            headers = {"Authorization": f"Bearer wrong-{uuid.uuid4().hex}"}
            if forge:
                headers["X-Forwarded-For"] = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
            try:
                seen[str(client.get("/v1/sessions", headers=headers).status_code)] += 1
            except httpx.HTTPError as exc:
                seen[type(exc).__name__] += 1
            due += interval
            time.sleep(max(0.0, due - time.monotonic()))


def right_calls(base: str, seconds: float) -> tuple[int, int, int, Counter[str]]:
    """Once a second for ``seconds``: a bearer call and a login with the right token.
    Returns (calls, bearer successes, login successes, the failures' answers)."""
    failures: Counter[str] = Counter()
    calls = bearer_ok = login_ok = 0
    start = time.monotonic()
    with httpx.Client(base_url=base, timeout=10) as client:
        while (due := start + calls) < start + seconds:
            time.sleep(max(0.0, due - time.monotonic()))
            calls += 1
            r = client.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
            bearer_ok += r.status_code == 200
            if r.status_code != 200:
                failures[f"bearer {r.status_code}"] += 1
            r = client.post("/login", data={"token": TOKEN}, headers={"Origin": base})
            login_ok += r.status_code == 303
            if r.status_code != 303:
                failures[f"login {r.status_code}"] += 1
            client.cookies.clear()
    return calls, bearer_ok, login_ok, failures


def phase(base: str, rate: float, seconds: float, forge: bool) -> float:
    seen: Counter[str] = Counter()
    stop = threading.Event()
    thread = threading.Thread(target=flood, args=(base, rate, stop, forge, seen), daemon=True)
    if rate > 0:
        thread.start()
    started = time.monotonic()
    calls, bearer_ok, login_ok, failures = right_calls(base, seconds)
    stop.set()
    if rate > 0:
        thread.join(15)
    elapsed = time.monotonic() - started
    wrong = sum(seen.values())
    answers = ", ".join(f"{k} x{v}" for k, v in sorted(seen.items())) or "none"
    print(
        f"rate {rate:g}/s for {elapsed:.0f} s: right-token calls bearer {bearer_ok}/{calls}, "
        f"login {login_ok}/{calls}; wrong tokens {wrong} ({wrong / elapsed:.1f}/s): {answers}"
        + (f"; right calls refused: {dict(failures)}" if failures else "")
    )
    return (bearer_ok + login_ok) / (2 * calls) if calls else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="0,19,200", help="wrong tokens a second, per phase")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--forge-forwarded", action="store_true")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start_server("memory://", Path(tmp))
        try:
            results = {r: phase(base, r, args.seconds, args.forge_forwarded) for r in rates}
        finally:
            proc.terminate()
            proc.wait(30)
    peer = results.get(0.0)
    for rate, share in results.items():
        if rate and peer:
            ratio = share / peer
            print(f"rate {rate:g}/s: right-token success {share:.0%}, x{ratio:.2f} of no flood")
    return 0 if all(share == 1.0 for share in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
