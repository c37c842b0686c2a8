"""The extractive summarizer on real agent transcripts (``../shared/transcripts``).

Each transcript is loaded through the importers and summarized whole and in
three incremental rounds. The snapshot must have its five sections, stay
under the word limit, and copy rather than invent: every Important Values
bullet must appear verbatim in the source, every Files Modified path too or
relative to the session's working directory. And it must name the files the
run changed: summarized in windows of 100 messages, as the compactor does,
the final snapshot of every transcript that edits files names at least 90% of
them. Run with ``-s`` to see the snapshots (the first is printed in full).
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

import pytest

from tests.conftest import TRANSCRIPTS, require_shared, transcript_files
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import SECTION_NAMES, SECTION_TITLES, code_span, parse, words
from threadline.compaction.toolcalls import edited_files
from threadline.compaction.values import bullet_value
from threadline.interop.importers import read_transcript_runs
from threadline.messages import Message

pytestmark = pytest.mark.transcripts

SUMMARIZER = ExtractiveSummarizer()
MAX_WORDS = 600
SMALL_WORDS = 250
MAX_RUNS = 3
"""tau-bench holds 200 conversations and OpenHands 3; the first few are enough."""
ROUNDS = 3

CASES = {
    "claude-code-tool-heavy": "claude-code/spotter-tool_heavy.jsonl",
    "claude-code-codemie": "claude-code/codemie-session-196820da.jsonl",
    "claude-code-long": "claude-code/spotter-8463c716/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "codex-rollout": "codex/codemie-rollout-2026-05-11T11-26-55-019e1625.jsonl",
    "codex-rtchess": "codex/rtchess-session-019aad50-exported.jsonl",
    "tau-bench": "openai-chat/tau-bench-gpt-4o-airline.json",
    "swe-agent-marshmallow": "swe-agent/function-calling-marshmallow-code__marshmallow-1867.traj",
    "openhands": "openhands/multi-swe-bench-llama4-maverick-output.jsonl",
    "gemini-cli": "other/gemini-cli-session-2025-12-01T21-45-5b959dae.json",
    "aider": "aider/pocketflow-text2sql-gui.aider.chat.history.md",
}
SHOWN = "claude-code-codemie"
"""The snapshot printed in full for a reader to judge."""


def load(name: str) -> list[list[Message]]:
    """The conversations in a transcript (several for tau-bench and OpenHands, else one)."""
    require_shared(TRANSCRIPTS)
    path = TRANSCRIPTS / CASES[name]
    if not path.exists():
        pytest.fail(f"{path} is missing from the shared transcripts")
    return read_transcript_runs(path)[:MAX_RUNS]


def _leaves(value: object) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [str(value)]


def source_text(messages: list[Message]) -> str:
    """Everything a snapshot may copy from: text, part references, call names and arguments."""
    pieces: list[str] = []
    for m in messages:
        pieces.append(m.text)
        pieces.extend(getattr(p, "uri", None) or getattr(p, "url", None) or "" for p in m.parts)
        for call in m.tool_calls:
            pieces.extend([call.name, call.raw_arguments or "", *_leaves(call.arguments)])
    return "\n".join(pieces)


def unquote(bullet: str) -> str:
    """The value of an Important Values bullet (``URL: `https://...``` gives the URL)."""
    return bullet_value(bullet)[1]


def named(path: str, source: str, cwd: str | None) -> bool:
    """A path the source names: as written, under the working directory, or by its name (a
    shell ``cd dir && echo > name`` names the directory and the file apart)."""
    forms = {path, path.replace("/", "\\"), posixpath.basename(path)}
    if cwd:
        forms.add(posixpath.join(cwd, path))
    return any(form in source for form in forms)


def check(text: str, source: str, limit: int, cwd: str | None = None) -> None:
    assert words(text) <= limit
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [f"## {SECTION_TITLES[n]}" for n in SECTION_NAMES]
    snapshot = parse(text)
    for bullet in snapshot.important_values:
        assert unquote(bullet.text) in source, f"invented value: {bullet.text!r}"
    for bullet in snapshot.files_modified:
        quoted = re.findall(r"`([^`]+)`", bullet.text)
        assert quoted, f"a files bullet without a path: {bullet.text!r}"
        assert named(quoted[0], source, cwd), f"invented path: {quoted[0]!r}"
        if bullet.text.startswith("Also changed:") or " to `" in bullet.text:
            for path in quoted[1:]:
                assert named(path, source, cwd), f"invented path: {path!r}"


def cwd_of(messages: list[Message]) -> str | None:
    return next((m.metadata["cwd"] for m in messages if "cwd" in m.metadata), None)


@pytest.mark.parametrize("name", list(CASES))
def test_snapshot_of_a_whole_transcript(name: str) -> None:
    for messages in load(name):
        source, cwd = source_text(messages), cwd_of(messages)
        result = SUMMARIZER.summarize(messages)
        check(result.text, source, MAX_WORDS, cwd)
        small = SUMMARIZER.summarize(messages, max_words=SMALL_WORDS).text
        check(small, source, SMALL_WORDS, cwd)
        assert all(named(v.text, source, cwd) for v in result.values)
        assert result.retention.kept == sum(v.text in result.text for v in result.values)
        state = [b.text for b in parse(result.text).current_state]
        vague = ("Next step: continue from", "Next step: deal with the error from")
        assert not any(s.startswith(vague) for s in state), state
        print(
            f"\n{name}: {len(messages)} messages -> {result.words} words; important values "
            f"kept {result.retention.kept}/{result.retention.total}"
        )
        if name == SHOWN:
            print(result.text)


@pytest.mark.parametrize("name", list(CASES))
def test_incremental_rounds_over_a_transcript(name: str) -> None:
    for messages in load(name):
        source, cwd = source_text(messages), cwd_of(messages)
        step = max(1, -(-len(messages) // ROUNDS))
        previous: str | None = None
        for start in range(0, len(messages), step):
            previous = SUMMARIZER.summarize(messages[start : start + step], previous=previous).text
            check(previous, source, MAX_WORDS, cwd)


RECALL_TARGET = 0.9
WINDOW = 100
"""Messages per compaction round, about what the compactor folds in at a time."""


@pytest.mark.parametrize("relative", transcript_files() or ["(shared transcripts absent)"])
def test_the_final_snapshot_names_the_files_the_run_changed(relative: str) -> None:
    """Edited-file recall >= 90% per conversation, in rounds of 100 messages, within 600 words.

    The files a run changed are what its tool calls did (``edited_files``);
    a file counts as named when the snapshot shows it in backticks.
    """
    require_shared(TRANSCRIPTS)
    for messages in read_transcript_runs(TRANSCRIPTS / relative)[:MAX_RUNS]:
        changed = [p for p, f in edited_files(messages).items() if not f.mentioned_only]
        previous: str | None = None
        for start in range(0, len(messages), WINDOW):
            window = messages[start : start + WINDOW]
            previous = SUMMARIZER.summarize(window, previous=previous).text
            assert words(previous) <= MAX_WORDS
        text = previous or ""
        missing = [p for p in changed if code_span(p) not in text]  # `p`, or ``p`` when p has `
        if changed:
            recall = 1 - len(missing) / len(changed)
            print(f"\n{relative}: {len(changed) - len(missing)}/{len(changed)} files named")
            assert recall >= RECALL_TARGET, missing


def test_shared_transcripts_are_where_the_readme_says(tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    missing = [rel for rel in CASES.values() if not (TRANSCRIPTS / rel).exists()]
    assert not missing
    assert json.loads((TRANSCRIPTS / CASES["tau-bench"]).read_text(encoding="utf-8"))
