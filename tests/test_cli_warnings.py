"""Warnings on the command line: threadline's own as ``threadline: warning:`` lines; a
dependency's never under threadline's name (its deprecations, such as the
``SelectableGroups`` one that importing redis raises inside opentelemetry, are for its
callers' developers, as Python's own filters have it)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import threadline.catalog
from tests.conftest import require_redis
from threadline.cli.errors import one_line_warnings


def warn_from(filename: str, module: str, message: str, category: type[Warning]) -> None:
    """``warnings.warn`` as code in ``filename`` (module ``module``) calls it."""
    code = compile("warnings.warn(message, category)", filename, "exec")
    exec(code, {"__name__": module, "warnings": warnings, "message": message, "category": category})


def test_a_dependencys_warning_is_never_threadlines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dependency = str(tmp_path / "site-packages" / "fakedep" / "util.py")
    ours = threadline.catalog.__file__
    with one_line_warnings():
        warn_from(dependency, "fakedep.util", "old interface", DeprecationWarning)
        warn_from(dependency, "fakedep.util", "odd input", UserWarning)
        warn_from(ours, "threadline.catalog", "unknown model", UserWarning)
        warn_from(ours, "threadline.catalog", "old option", DeprecationWarning)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "fakedep: UserWarning: odd input",
        "threadline: warning: unknown model",
        "threadline: warning: old option",
    ]


def test_opening_a_redis_store_prints_no_dependency_deprecation(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    url = require_redis().rsplit("/", 1)[0] + "/15"
    done = subprocess.run(
        [sys.executable, "-m", "threadline.cli.app", "--store", url, "sessions", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "threadline: warning" not in done.stderr and "deprecated" not in done.stderr
