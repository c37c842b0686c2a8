"""``bench/compare.py`` runs a benchmark against an older commit's library and this
checkout's, each importing its own ``threadline``."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_each_run_imports_its_own_library() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "bench/compare.py",
            "--base",
            "HEAD",
            "--rounds",
            "2",
            "--",
            "-c",
            "import threadline; print('from', threadline.__file__)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sources = [
        line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("from ")
    ]
    assert len(sources) == 4  # two rounds of before and after, in turns
    before, after = sources[0], sources[1]
    assert "threadline-base-" in before and str(ROOT / "src") in after
    assert sources[2:] == [before, after]
    assert done.stdout.index("round 1, before") < done.stdout.index("round 1, after")
