"""A temp working directory whose ``agents/`` holds the given agent files and whose
environment points ``openai/`` models at a ``FakeOpenAI`` server: what CLI chat tests run in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI


@contextmanager
def fake_openai_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, agents: Mapping[str, str]
) -> Iterator[FakeOpenAI]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.delenv("THREADLINE_MODEL", raising=False)
    (tmp_path / "agents").mkdir()
    for name, text in agents.items():
        (tmp_path / "agents" / f"{name}.yaml").write_text(text)
    with FakeOpenAI() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        yield srv
