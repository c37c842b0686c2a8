"""Load a script of ``bench/`` as a module, as it runs from there (its siblings importable),
so tests can call its functions on small data."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/NAME.py`` as module ``bench_NAME`` (registered in ``sys.modules``: dataclasses
    look their module up there)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def locomo_conversation(*sessions: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A LoCoMo ``conversation`` between Rosa and Tom: ``sessions`` as (date, turns)."""
    conversation: dict[str, Any] = {"speaker_a": "Rosa", "speaker_b": "Tom"}
    for number, (date, turns) in enumerate(sessions, 1):
        conversation[f"session_{number}_date_time"] = date
        conversation[f"session_{number}"] = turns
    return conversation


def run_json(
    bench: ModuleType,
    samples: list[Any],
    tmp_path: Path,
    out: pytest.CaptureFixture[str],
    *extra: str,
) -> dict[str, Any]:
    """``bench.main`` over ``samples`` written as a data file, its ``--json`` figures."""
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(samples))
    assert bench.main(["--data", str(data), "--json", *extra]) == 0
    figures: dict[str, Any] = json.loads(out.readouterr().out)
    return figures
