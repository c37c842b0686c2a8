"""Google ADK's own session-service contract tests, run against ThreadlineSessionService
on SQLite, PostgreSQL and Redis stores.

ADK's tests are read in place from ``../shared/conformance/adk`` (ADK's
``tests/unittests`` at a pinned commit; see its README): this module re-exports
every test that takes the ``session_service`` fixture and supplies that fixture
itself, with ADK's own ``_Backend`` registry, so a divergence would be recorded the
way ADK records its own (a written reason, applied as a strict xfail).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")
pytest_asyncio = pytest.importorskip("pytest_asyncio")

from tests.conformance.backends import clean_store  # noqa: E402
from tests.conftest import IN_CI, SHARED  # noqa: E402
from threadline.integrations.adk import ThreadlineSessionService  # noqa: E402

ADK_TESTS = SHARED / "conformance" / "adk"
if not (ADK_TESTS / "sessions" / "test_session_service.py").is_file():
    if IN_CI:
        raise RuntimeError(f"{ADK_TESTS} is absent: CI runs with ../shared beside the project")
    pytest.skip(f"{ADK_TESTS} is absent (shared test data)", allow_module_level=True)


@contextlib.contextmanager
def _reading_shared() -> Iterator[None]:
    """Import ADK's tests from ../shared without writing __pycache__ there."""
    was = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(ADK_TESTS.parent))
    try:
        yield
    finally:
        sys.dont_write_bytecode = was


with _reading_shared():
    from adk.sessions import test_session_service as adk_tests
    from adk.sessions._conformance import _Backend


def _is_contract_test(name: str, obj: Any) -> bool:
    """Takes the ``session_service`` fixture and does not pin it by parametrize."""
    if not name.startswith("test_") or not callable(obj):
        return False
    if "session_service" not in inspect.signature(obj).parameters:
        return False
    return not any(
        mark.name == "parametrize" and "session_service" in str(mark.args[0])
        for mark in getattr(obj, "pytestmark", [])
    )


CONTRACT = {n: o for n, o in vars(adk_tests).items() if _is_contract_test(n, o)}
globals().update(CONTRACT)
local_timezone_with_dst = adk_tests.local_timezone_with_dst  # one contract test uses it


def _maker(backend: str) -> Any:
    @contextlib.asynccontextmanager
    async def make(tmp_path: Path) -> AsyncIterator[ThreadlineSessionService]:
        with contextlib.contextmanager(clean_store)(backend, tmp_path) as store:
            yield ThreadlineSessionService(store)

    return make


VERBATIM_IDS = {
    "test_padded_session_id_reads_and_deletes": (
        "ThreadlineSessionService stores the session id verbatim, as ADK's "
        "DatabaseSessionService and RedisSessionService do (their recorded divergence), "
        "so a padded id keeps its whitespace instead of being normalized the way the "
        "in-memory service normalizes it."
    ),
}
BACKENDS = [
    _Backend("threadline_sqlite", _maker("sqlite"), divergences=VERBATIM_IDS),
    _Backend("threadline_postgres", _maker("postgres"), divergences=VERBATIM_IDS),
    _Backend("threadline_redis", _maker("redis"), divergences=VERBATIM_IDS),
]
_MARKS = {"threadline_postgres": [pytest.mark.postgres], "threadline_redis": [pytest.mark.redis]}


@pytest_asyncio.fixture(
    params=[pytest.param(b, marks=_MARKS.get(b.name, []), id=b.name) for b in BACKENDS]
)
async def session_service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ThreadlineSessionService]:
    backend = request.param
    divergence = backend.divergences.get(request.node.originalname)
    if divergence is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=divergence))
    async with backend.make(tmp_path) as service:
        yield service


def test_contract_is_the_31_tests() -> None:
    assert len(CONTRACT) == 31, sorted(CONTRACT)


def test_divergences_name_a_contract_test() -> None:
    for backend in BACKENDS:
        for name in backend.divergences:
            assert name in CONTRACT, name
