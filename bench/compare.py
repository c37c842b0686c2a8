"""Run one benchmark against an older commit's threadline and this checkout's, in turns.

Before/after figures only mean something measured in the same run on the same machine:
this extracts ``src/`` of ``--base`` (``git archive``) into a temporary folder, then
runs the benchmark script of this checkout ``--rounds`` times against each library in
turn (old, new, old, new, ...), with ``PYTHONPATH`` choosing which one it imports, and
prints every run's output under a heading. The ratios each benchmark prints against
its named peers (raw sqlite3, the Agents SDK, ...) are then comparable line by line.

    python bench/compare.py --base 1ddf1ff [--rounds 2] -- bench/append.py --single 500

The benchmark must run on both libraries: it is this checkout's script, so it may not
use an API the old commit lacks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def extract_src(rev: str, into: Path) -> Path:
    """``src/`` of ``rev`` under ``into`` (no worktree, nothing left in the repository)."""
    archive = into / "src.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def describe(rev: str) -> str:
    done = subprocess.run(
        ["git", "log", "-1", "--format=%h %s", rev],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()[:72]


def run(script: list[str], src: Path) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the older commit (any git revision)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each, in turns")
    ap.add_argument("bench", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    args = ap.parse_args()
    script = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    if not script:
        ap.error("name the benchmark after --, e.g. -- bench/append.py")
    with tempfile.TemporaryDirectory(prefix="threadline-base-") as tmp:
        libraries = [
            (f"before: {describe(args.base)}", extract_src(args.base, Path(tmp))),
            (f"after: {describe('HEAD')} (this checkout)", ROOT / "src"),
        ]
        failed = 0
        for round_no in range(1, args.rounds + 1):
            for label, src in libraries:
                code, output, seconds = run(script, src)
                print(f"\n===== round {round_no}, {label} [{seconds:.0f} s] =====")
                print(output.rstrip())
                if code:
                    print(f"(exit status {code})")
                    failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
