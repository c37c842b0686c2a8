"""The real ``@trpc/client`` v11 (from the npm registry) against a live ``threadline serve``.

``tests/trpc_client/client.mjs`` calls every procedure through ``httpLink`` and a batch
through ``httpBatchLink``, and reports what each call returned or the
``TRPCClientError`` it threw; this test checks every step, the error steps by
``error.shape.code`` (the JSON-RPC number), ``error.data.code`` and
``error.data.httpStatus`` (issue 20, point 2). Before the server spoke tRPC's error
shape, each error step was "Unable to transform response from server".

The npm packages are installed with ``npm ci`` from the committed lockfile into a
cache directory outside the repository (``$THREADLINE_TEST_CACHE``, else
``~/.cache/threadline-tests``), once per lockfile. Without node or npm the test skips,
except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.serve_cli import ServeProcess, start_serve
from threadline import open_store
from threadline.server.procedures import TRPC_ERROR_CODES
from threadline.store.locks import LockHolder

HERE = Path(__file__).parent / "trpc_client"
TOKEN = "trpc-client-token-0123456789"
NPM_SECONDS = 300
CLIENT_SECONDS = 120


def cache_root() -> Path:
    given = os.environ.get("THREADLINE_TEST_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "threadline-tests"


def node_and_npm() -> tuple[str, str]:
    """Node and npm; the test skips without them, and fails so under ``CI=true``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    require(node is not None, "node is not installed (the @trpc/client test needs Node 18+)")
    require(npm is not None, "npm is not installed (the @trpc/client test needs it)")
    assert node is not None and npm is not None
    return node, npm


@pytest.fixture(scope="module")
def client_dir() -> Path:
    """A directory with ``client.mjs`` and ``node_modules`` installed by ``npm ci``."""
    _, npm = node_and_npm()
    lock = (HERE / "package.json").read_bytes() + (HERE / "package-lock.json").read_bytes()
    target = cache_root() / f"trpc-client-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (target / "node_modules" / "@trpc" / "client").is_dir():
        staging = target.with_name(f"{target.name}.{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(HERE / name, staging / name)
        done = subprocess.run(
            [npm, "ci", "--omit=peer", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=NPM_SECONDS,
        )
        if done.returncode != 0:
            pytest.fail(f"npm ci failed:\n{done.stdout}\n{done.stderr}")
        try:
            staging.rename(target)
        except OSError:  # another worker installed it first
            shutil.rmtree(staging, ignore_errors=True)
    shutil.copy(HERE / "client.mjs", target / "client.mjs")
    return target


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    """A live server over a fresh SQLite store, and a session another process holds."""
    tmp = tmp_path_factory.mktemp("trpc")
    url = f"sqlite://{tmp}/t.db"
    store = open_store(url)
    try:
        locked = store.create_session(model="simulated/gpt-4o").id
        store.acquire_lock(locked, LockHolder(pid=4242, host="another-host"))
    finally:
        store.close()
    with start_serve(tmp, "--store", url, "--port", "0", "--token", TOKEN) as live:
        yield live, locked


def run_client(client_dir: Path, base: str, locked: str) -> dict[str, dict[str, Any]]:
    node, _ = node_and_npm()
    done = subprocess.run(
        [node, "client.mjs", base, TOKEN, locked],
        cwd=client_dir,
        capture_output=True,
        text=True,
        timeout=CLIENT_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    steps = [json.loads(line) for line in done.stdout.splitlines()]
    return {s.pop("step"): s for s in steps}


def trpc_error(outcome: dict[str, Any], code: str, status: int, path: str) -> dict[str, Any]:
    """Assert ``outcome`` is a ``TRPCClientError`` with tRPC's shape; returns its data."""
    assert "error" in outcome, outcome
    error = outcome["error"]
    assert error["code"] == TRPC_ERROR_CODES[code], error
    data: dict[str, Any] = error["data"]
    assert (data["code"], data["httpStatus"], data["path"]) == (code, status, path), error
    assert error["message"] and "Unable to transform" not in error["message"]
    return data


def test_trpc_client_reads_every_answer(client_dir: Path, server: tuple[ServeProcess, str]) -> None:
    live, locked = server
    steps = run_client(client_dir, live.base, locked)
    assert not [s for s in steps.values() if "threw" in s], steps

    sid = steps["session.create"]["data"]["sessionId"]
    listed = steps["session.list"]["data"]
    assert listed["total"] == 1 and listed["items"][0]["title"] == "from node"
    assert steps["session.get"]["data"]["session"]["id"] == sid
    assert steps["session.rename"]["data"]["title"] == "renamed"
    prompted = steps["agent.prompt"]["data"]
    assert (prompted["sessionId"], prompted["seq"]) == (sid, 1)
    assert steps["agent.cancel"]["data"]["sessionId"] == sid
    assert steps["session.list.noInput"]["data"]["total"] >= 2

    trpc_error(steps["unauthorized"], "UNAUTHORIZED", 401, "session.list")
    trpc_error(steps["badRequest"], "BAD_REQUEST", 400, "session.create")
    trpc_error(steps["notFound"], "NOT_FOUND", 404, "session.get")
    held = trpc_error(steps["conflict"], "CONFLICT", 409, "agent.prompt")
    assert held["holder"] == "another-host:4242"
    trpc_error(steps["methodNotSupported"], "METHOD_NOT_SUPPORTED", 405, "session.list")
    trpc_error(steps["noSuchProcedure"], "NOT_FOUND", 404, "session.nope")

    assert steps["batch.list"]["data"]["total"] == 1
    trpc_error(steps["batch.get"], "NOT_FOUND", 404, "session.get")

    assert steps["session.delete"]["data"] == {"sessionId": sid, "deleted": True}
    trpc_error(steps["deleted.get"], "NOT_FOUND", 404, "session.get")

    store = open_store(live.store_url)
    try:
        assert store.count_messages(locked) == 0  # the refused prompt stored nothing
    finally:
        store.close()
    assert "Traceback" not in live.output(), live.output()
