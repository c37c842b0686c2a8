"""Fixtures of the conformance suite: a fresh ``store`` for every backend.

Every test that takes ``store`` (or ``backend``) runs once per backend in
``backends.BACKENDS``. Known gaps declared in ``backends.KNOWN_GAPS`` become
strict expected failures here; nothing in the suite is skipped for a backend,
except PostgreSQL and Redis when their server is absent on a developer machine
(under ``CI=true`` that fails instead, see ``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.backends import BACKENDS, KNOWN_GAPS, cleanup_url, make_url
from threadline import Store, open_store

_MARKS = {"postgres": [pytest.mark.postgres], "redis": [pytest.mark.redis]}


@pytest.fixture(params=[pytest.param(b, marks=_MARKS.get(b, []), id=b) for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    url = make_url(backend, tmp_path)
    yield url
    cleanup_url(backend, url)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "backend" not in callspec.params or here not in item.path.parents:
            continue
        name = getattr(item, "originalname", item.name)
        reason = KNOWN_GAPS.get((callspec.params["backend"], name))
        if reason is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
