"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``)
against ``ThreadlineSaver`` on SQLite, PostgreSQL and Redis.

``validate`` runs every capability the suite knows; a fresh store backs each
capability's run. The test asserts every base capability passes and every optional
one is implemented and passes, and prints LangGraph's own report.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    ALL_CAPABILITIES,
    BASE_CAPABILITIES,
)

from tests.conformance.backends import cleanup_url, make_url
from threadline.integrations.langgraph import ThreadlineSaver

BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_langgraph_conformance(backend: str, tmp_path: Path) -> None:
    counter = itertools.count()
    urls: list[str] = []

    @checkpointer_test(name=f"ThreadlineSaver[{backend}]")
    async def threadline_saver() -> AsyncIterator[ThreadlineSaver]:
        where = tmp_path / f"run{next(counter)}"
        where.mkdir()
        url = make_url(backend, where)
        urls.append(url)
        saver = ThreadlineSaver(url)
        try:
            yield saver
        finally:
            saver.close()

    try:
        report = asyncio.run(validate(threadline_saver))
    finally:
        for url in urls:
            cleanup_url(backend, url)
    report.print_report()
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all_base(), failures
    assert report.passed_all(), failures
    implemented = {name for name, r in report.results.items() if r.detected}
    assert implemented == {c.value for c in ALL_CAPABILITIES}
    assert {c.value for c in BASE_CAPABILITIES} <= implemented
