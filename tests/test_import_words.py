"""Odd input gets one clear line (issue 22, point 5): an empty file, JSON of another
shape (named when the shape is well known), a directory of no conversations, and
flags that cannot apply; never a Python error's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import open_store
from threadline.cli.app import app
from threadline.errors import ThreadlineError
from threadline.interop.importers import import_sessions

runner = CliRunner()
PYTHON_WORDS = (
    "unhashable",
    "has no attribute",
    "NoneType",
    "Traceback",
    "object is not",
    "'dict'",
)


def cli(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--store", url, "sessions", "import", *args])


def error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty: nothing to import"),
        ("  \n\n", "empty: nothing to import"),
        (
            json.dumps(
                {
                    "sample_id": "conv-26",
                    "conversation": {"speaker_a": "A", "speaker_b": "B"},
                    "qa": [],
                }
            ),
            "a LoCoMo conversation benchmark file",
        ),
        (
            json.dumps(
                {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": {}}
            )
            + "\n",
            "an OpenAI Batch API input file",
        ),
        (
            json.dumps({"custom_id": "r1", "params": {"model": "m"}}) + "\n",
            "an Anthropic Message Batches",
        ),
        (
            json.dumps({"conversations": [{"from": "human", "value": "hi"}]}),
            "a ShareGPT-style dataset",
        ),
        (json.dumps({"zeta": 1, "alpha": {"b": 2}}), "a JSON object with keys alpha, zeta"),
        (json.dumps([1, 2]), "a JSON array of numbers"),
        ("hello there", "neither JSON nor an aider chat history"),
    ],
)
def test_a_file_that_is_no_conversation_says_what_it_is(
    sqlite_url: str, tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text(text, encoding="utf-8")
    result = cli(sqlite_url, str(path))
    assert result.exit_code == 2
    line = error_line(result)
    assert words in line and str(path) in line


def test_a_directory_of_no_conversations_counts_files_not_conversations(
    sqlite_url: str, tmp_path: Path
) -> None:
    (tmp_path / "package.json").write_text('{"name": "x", "scripts": {}}', encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    result = cli(sqlite_url, str(tmp_path))
    assert result.exit_code == 2
    line = error_line(result)
    assert line.endswith("nothing to import: 2 files skipped (no conversation in them)")
    assert "conversation:" not in line and "conversations:" not in line


def test_a_directory_of_conversations_names_skipped_files_only_when_there_are_some(
    sqlite_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        (folder / name).write_text(json.dumps([{"role": "user", "content": name}]), "utf-8")
    result = cli(sqlite_url, str(folder))
    assert result.exit_code == 0, result.output
    assert "2 conversations: 2 new; 2 messages added" in result.output
    assert "skipped" not in result.output
    (folder / "package.json").write_text('{"name": "x"}', encoding="utf-8")
    result = cli(sqlite_url, str(folder))
    assert "2 conversations: 2 unchanged" in result.output
    assert "1 file skipped (no conversation in it)" in result.output


def test_title_with_several_sources_is_refused_before_anything_is_imported(
    sqlite_url: str, tmp_path: Path
) -> None:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps([{"role": "user", "content": name}]), "utf-8")
    result = cli(sqlite_url, str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--title", "T")
    assert result.exit_code == 2
    assert "--title names one conversation, but 2 sources were given" in error_line(result)
    runs = tmp_path / "runs.json"
    runs.write_text(
        json.dumps([{"traj": [{"role": "user", "content": str(i)}]} for i in range(3)]), "utf-8"
    )
    many = cli(sqlite_url, str(runs), "--title", "T")
    assert many.exit_code == 2 and "holds 3; pick one with --run N" in error_line(many)
    one = cli(sqlite_url, str(runs), "--title", "T", "--run", "2")
    assert one.exit_code == 0, one.stderr
    store = open_store(sqlite_url)
    try:
        assert [s.title for s in store.list_sessions().items] == ["T"]
    finally:
        store.close()


def test_agent_on_an_unchanged_reimport_says_it_was_not_applied(
    sqlite_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hello"}]), "utf-8")
    assert cli(sqlite_url, str(path)).exit_code == 0
    again = cli(sqlite_url, str(path), "--agent", "mine")
    assert again.exit_code == 0
    warning = [line for line in again.stderr.splitlines() if "warning" in line]
    assert warning == [
        "threadline: warning: --agent mine names new sessions only: 1 session imported before "
        "keeps its agent (openai); delete and import again to change it"
    ]


def test_an_openhands_event_file_is_read_as_its_whole_conversation(sqlite_url: str) -> None:
    folder = require_shared(TRANSCRIPTS / "openhands/openhands-cli-v1-events-2496927b")
    one = sorted(folder.iterdir())[7]
    first = cli(sqlite_url, str(one), "--json")
    assert first.exit_code == 0, first.stderr
    (source,) = json.loads(first.stdout)["sources"]
    assert source["source"] == str(folder) and source["messages_added"] == 14
    again = cli(sqlite_url, str(folder), "--json")
    assert json.loads(again.stdout)["counts"]["unchanged"] == 1


KEYS = st.sampled_from(
    [
        "type",
        "role",
        "content",
        "action",
        "args",
        "observation",
        "history",
        "kind",
        "message",
        "messages",
        "parts",
        "info",
        "payload",
        "id",
        "parentId",
        "v",
        "tool_calls",
        "text",
        "session",
    ]
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=5)
    | st.sampled_from(
        ["user", "assistant", "message", "MessageEvent", "response_item", "session", "tool"]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(KEYS, VALUES, min_size=1, max_size=5)
    | st.lists(VALUES, min_size=1, max_size=3),
    st.booleans(),
)
def test_no_json_document_gets_python_words(tmp_path: Path, data: Any, lines: bool) -> None:
    """Whatever JSON a file holds, an import either reads it or says why in threadline's
    words (a ThreadlineError), never a Python exception or its text."""
    path = tmp_path / "doc.jsonl"
    text = (
        "\n".join(json.dumps(d) for d in data)
        if lines and isinstance(data, list)
        else json.dumps(data)
    )
    path.write_text(text, encoding="utf-8")
    try:
        import_sessions(path)
    except ThreadlineError as exc:
        assert not any(w in str(exc) for w in PYTHON_WORDS), str(exc)
