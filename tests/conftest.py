"""Shared test set-up: where ../shared is, and how absent services are treated.

Under ``CI=true`` a missing PostgreSQL or Redis server, or a missing ``../shared``,
is a failure; on a developer's machine those tests skip with a reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# No timed asserts: hypothesis's per-example deadline (200 ms) fails tests on a loaded
# machine (CI, parallel workers) for speed alone; speed is measured in bench/ instead.
settings.register_profile("threadline", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("threadline")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRANSCRIPTS = SHARED / "transcripts"
TIKTOKEN_DIR = SHARED / "tiktoken"
IN_CI = os.environ.get("CI", "").lower() == "true"

POSTGRES_URL = os.environ.get(
    "THREADLINE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("THREADLINE_TEST_REDIS", "redis://127.0.0.1:6379/0")

if TIKTOKEN_DIR.is_dir() and "TIKTOKEN_CACHE_DIR" not in os.environ:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(TIKTOKEN_DIR)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def require(condition: bool, reason: str) -> None:
    """Skip with ``reason`` on a developer machine; fail under CI."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required under CI=true: {reason}")
    pytest.skip(reason)


def require_postgres() -> str:
    require(_port_open("127.0.0.1", 5432), "PostgreSQL is not reachable on 127.0.0.1:5432")
    return POSTGRES_URL


def require_redis() -> str:
    require(_port_open("127.0.0.1", 6379), "Redis is not reachable on 127.0.0.1:6379")
    return REDIS_URL


def require_shared(path: Path = SHARED) -> Path:
    require(path.exists(), f"{path} is absent (the shared test data lives beside the project)")
    return path


def transcript_files() -> list[str]:
    """Every shared transcript, relative to ``TRANSCRIPTS`` (none when they are absent:
    the tests parametrized over them then skip or fail through ``require_shared``)."""
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(
        str(p.relative_to(TRANSCRIPTS))
        for p in TRANSCRIPTS.rglob("*")
        if p.is_file() and p.name != "README.md"
    )


@pytest.fixture
def openai_server() -> Iterator[Any]:
    """A local server speaking OpenAI Chat Completions (``tests.fakes.FakeOpenAI``)."""
    from tests.fakes import FakeOpenAI

    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def silent_model() -> Iterator[Any]:
    """A fake OpenAI server that never answers, for a module: a turn on it runs until it
    is cancelled, deleted or its worker dies."""
    from tests.fakes import FakeOpenAI

    with FakeOpenAI() as server:
        server.silent_forever = True
        yield server


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'store.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Any]:
    """An SQLite store in the test's own directory, closed afterwards."""
    from threadline import open_store

    store = open_store(sqlite_url)
    yield store
    store.close()


def _mount_works(directory: Path) -> bool:
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", 'mount --bind -o ro "$0" "$0"', str(directory)],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """Runs the CLI (``read_only("--store", URL, "sessions", "list")``) where ``tmp_path``
    cannot be written: as a user whom a chmod'ed tree stops, or, as root (whom
    permissions do not stop), in a private mount namespace with ``tmp_path`` bound
    read-only. Skips only when neither is possible."""
    as_root = os.geteuid() == 0
    if as_root and not (shutil.which("unshare") and _mount_works(tmp_path)):
        pytest.skip("running as root without unshare/mount: nothing can make a path read-only")
    cli = [sys.executable, "-c", "from threadline.cli.app import main; main()"]

    def run_read_only(*args: str) -> subprocess.CompletedProcess[str]:
        command = [*cli, *args]
        if as_root:
            script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
            command = ["unshare", "--mount", "sh", "-c", script, str(tmp_path), *command]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)

    modes: dict[Path, int] = {}
    if not as_root:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            modes[path] = path.stat().st_mode
            path.chmod(modes[path] & ~0o222)
    try:
        yield run_read_only
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


SERVER_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]
"""The backends a framework face is run on: SQLite and the two servers."""


@pytest.fixture(params=SERVER_BACKENDS)
def face_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A clean store on each of ``SERVER_BACKENDS`` (skipped, or failed under CI, when
    its server is absent), closed and dropped afterwards."""
    from tests.conformance.backends import clean_store

    yield from clean_store(request.param, tmp_path)
