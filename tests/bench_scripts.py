"""Load a script of ``bench/`` as a module, as it runs from there (its siblings importable),
so tests can call its functions on small data."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

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
