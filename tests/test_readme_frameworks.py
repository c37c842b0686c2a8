"""The README's framework examples run as written (each in a fresh directory, where
its relative store URL makes a new store) and print what they say they do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)```", re.S)
EXPECTED = {
    "agents-budgeted": re.compile(r"^[1-7]?\d items in the window; 80 stored; .*[Ss]ummary"),
    "langgraph": re.compile(r"^you said: again$"),
    "adk": re.compile(r"^\{'user:tier': 'gold'\} \{'tier': 'gold'\}$"),
    "pydantic-ai": re.compile(r"^4 messages stored$"),
}
NEEDS = {
    "agents-budgeted": "agents",
    "langgraph": "langgraph",
    "adk": "google.adk",
    "pydantic-ai": "pydantic_ai",
}


def examples() -> dict[str, str]:
    return dict(EXAMPLE.findall(README.read_text(encoding="utf-8")))


def test_every_framework_has_an_example() -> None:
    assert set(examples()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_as_written(name: str, tmp_path: Path) -> None:
    pytest.importorskip(NEEDS[name])
    code = examples()[name]
    assert len(code.strip().splitlines()) <= 17, "an example stays short"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert EXPECTED[name].match(last), done.stdout
