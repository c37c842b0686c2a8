"""Imports read a bounded amount, and JSON nested past the limit is refused before any
parse, for files, pipes and devices, through the library and the CLI alike."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from threadline import ConfigError, ImportFormatError, ImportTooLarge, open_store
from threadline.cli.app import app
from threadline.interop.importers import (
    IMPORT_LIMIT_ENV,
    MAX_IMPORT_BYTES,
    import_file,
    import_limit,
)
from threadline.json_limits import MAX_JSON_DEPTH

runner = CliRunner()
CHAT = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]


def run(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--store", url, *args])


def count(url: str) -> int:
    store = open_store(url)
    try:
        return store.list_sessions().total
    finally:
        store.close()


def feed(fifo: Path, data: bytes) -> threading.Thread:
    """Write ``data`` into the named pipe from a thread (a reader that stops early is fine)."""

    def write() -> None:
        try:
            with open(fifo, "wb") as pipe:
                pipe.write(data)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_the_default_limit_and_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMPORT_LIMIT_ENV, raising=False)
    assert import_limit() == MAX_IMPORT_BYTES == 256 * 1024 * 1024
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "1GiB")
    assert import_limit() == 1024**3
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "lots")
    with pytest.raises(ConfigError, match=IMPORT_LIMIT_ENV):
        import_limit()


def test_importing_an_endless_device_fails_fast(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(sqlite_url).close()
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "1MiB")
    started = time.monotonic()
    result = run(sqlite_url, "sessions", "import", "/dev/zero")
    assert time.monotonic() - started < 10
    assert result.exit_code == ImportTooLarge.exit_code == 2, result.stderr
    assert "/dev/zero: more than the import limit of 1,048,576 bytes" in result.stderr
    assert IMPORT_LIMIT_ENV in result.stderr
    assert count(sqlite_url) == 0


def test_a_file_over_the_limit_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT), encoding="utf-8")
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "10")
    with pytest.raises(ImportTooLarge, match=rf"chat\.json: {path.stat().st_size} bytes, more"):
        import_file(path)
    monkeypatch.setenv(IMPORT_LIMIT_ENV, str(path.stat().st_size))
    assert [m.text for m in import_file(path).messages] == ["hello", "hi"]  # at the limit


def test_a_pipe_over_the_limit_is_refused(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(sqlite_url).close()
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "64KiB")
    fifo = tmp_path / "chat.fifo"
    os.mkfifo(fifo)
    writer = feed(fifo, b"[" + b" " * 200_000 + json.dumps(CHAT).encode()[1:])
    result = run(sqlite_url, "sessions", "import", str(fifo))
    writer.join(timeout=10)
    assert result.exit_code == 2 and "more than the import limit of 65,536 bytes" in result.stderr
    assert count(sqlite_url) == 0


@pytest.mark.parametrize("through", ["file", "pipe"])
def test_deep_json_is_refused_by_the_library(tmp_path: Path, through: str) -> None:
    """``import_file`` itself checks the nesting, so library callers and pipes are
    protected (the parser would end in RecursionError)."""
    deep = b'[{"role": "user", "content": "x"},\n' + b"[" * 200_000 + b"]" * 200_000 + b"]"
    path = tmp_path / "deep.json"
    if through == "file":
        path.write_bytes(deep)
    else:
        os.mkfifo(path)
        writer = feed(path, deep)
    with pytest.raises(ImportFormatError, match=f"nests more than {MAX_JSON_DEPTH} levels") as e:
        import_file(path)
    assert e.value.line == 2
    if through == "pipe":
        writer.join(timeout=10)
