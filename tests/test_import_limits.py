"""Imports read a bounded amount, and JSON nested past the limit is refused before any
parse, for files, pipes and devices, through the library and the CLI alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
HANG_GUARD_SECONDS = 120
"""A CLI run that blocks on a pipe would never end: it is stopped (and fails) here."""
CHAT = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]


def run(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--store", url, *args])


def count(url: str) -> int:
    store = open_store(url)
    try:
        return store.list_sessions().total
    finally:
        store.close()


def test_the_default_limit_and_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMPORT_LIMIT_ENV, raising=False)
    assert import_limit() == MAX_IMPORT_BYTES == 256 * 1024 * 1024
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "1GiB")
    assert import_limit() == 1024**3
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "lots")
    with pytest.raises(ConfigError, match=IMPORT_LIMIT_ENV):
        import_limit()


def test_a_device_is_refused_before_it_is_read(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(sqlite_url).close()
    result = run(sqlite_url, "sessions", "import", "/dev/zero")
    assert result.exit_code == ImportFormatError.exit_code == 2, result.stderr
    assert "/dev/zero: a character device, not a regular file" in result.stderr
    assert "sessions import -" in result.stderr
    assert count(sqlite_url) == 0


def test_an_endless_stream_on_standard_input_fails_at_the_limit(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(sqlite_url).close()
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "1MiB")
    cli = [sys.executable, "-c", "from threadline.cli.app import main; main()"]
    with open("/dev/zero", "rb") as endless:
        result = subprocess.run(
            [*cli, "--store", sqlite_url, "sessions", "import", "-"],
            stdin=endless,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_SECONDS,
            check=False,
        )
    assert result.returncode == ImportTooLarge.exit_code == 2, result.stderr
    assert "-: more than the import limit of 1,048,576 bytes" in result.stderr
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


def test_standard_input_over_the_limit_is_refused(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(sqlite_url).close()
    monkeypatch.setenv(IMPORT_LIMIT_ENV, "64KiB")
    data = b"[" + b" " * 200_000 + json.dumps(CHAT).encode()[1:]
    result = runner.invoke(app, ["--store", sqlite_url, "sessions", "import", "-"], input=data)
    assert result.exit_code == 2 and "more than the import limit of 65,536 bytes" in result.stderr
    assert count(sqlite_url) == 0


def test_deep_json_is_refused_by_the_library(tmp_path: Path) -> None:
    """``import_file`` itself checks the nesting, so library callers are protected (the
    parser would end in RecursionError)."""
    deep = b'[{"role": "user", "content": "x"},\n' + b"[" * 200_000 + b"]" * 200_000 + b"]"
    path = tmp_path / "deep.json"
    path.write_bytes(deep)
    with pytest.raises(ImportFormatError, match=f"nests more than {MAX_JSON_DEPTH} levels") as e:
        import_file(path)
    assert e.value.line == 2


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """A FIFO named like a transcript, with no writer: opening it for reading would
    block forever (it did, directly and inside a directory)."""
    fifo = tmp_path / "chat.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ImportFormatError, match="named pipe"):
        import_file(fifo)


def test_a_named_pipe_fails_its_own_source_in_a_directory_import(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Directly or found in a directory, a FIFO is reported per source (exit 2) and the
    rest of the directory is imported."""
    folder = tmp_path / "transcripts"
    folder.mkdir()
    (folder / "a-chat.json").write_text(json.dumps(CHAT), encoding="utf-8")
    os.mkfifo(folder / "b-pipe.jsonl")
    cli = [sys.executable, "-c", "from threadline.cli.app import main; main()"]
    cli += ["--store", sqlite_url, "sessions", "import"]
    alone = subprocess.run(
        [*cli, str(folder / "b-pipe.jsonl")],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert alone.returncode == 2 and "a named pipe (FIFO), not a regular file" in alone.stderr
    found = subprocess.run(
        [*cli, str(folder), "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert found.returncode == 2, found.stderr
    report = json.loads(found.stdout)
    assert report["counts"]["new"] == 1 and report["counts"]["failed"] == 1
    failed = next(r for r in report["sources"] if r["status"] == "failed")
    assert failed["source"].endswith("b-pipe.jsonl") and "named pipe" in failed["error"]
    assert count(sqlite_url) == 1
