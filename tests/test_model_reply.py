"""A real model's summary is stored, with every edited file still named (issue 31, point 5).

The shared Claude Code runs hold Claude's own summaries of their spans (the
``isCompactSummary`` user record after each ``compact_boundary``). For every such
compaction, the run up to that boundary is imported as a user imports it (earlier
compactions become checkpoints), and ``threadline compact --summarizer llm`` and
``--summarizer hybrid`` are run against a local server speaking OpenAI's wire format
that answers with Claude's summary laid into the five snapshot sections and cut to 600
words. The checkpoint must hold the model's prose (its decisions and current work,
no fallback) and name every file the run edited up to its cut (read by
``bench/probes.py``'s rules, not the summarizer's).

The Codex runs' compactions carry no summary text of their own (an encrypted item, a
redacted or empty ``message``), so there is no model prose to replay from them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TRANSCRIPTS, require_shared
from tests.fakes import FakeOpenAI
from threadline import open_store
from threadline.cli.app import app
from threadline.compaction.snapshot import SECTION_TITLES, SectionName, clip_words, one_line, parse

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import probes

RUNS = (
    "claude-code/spotter-4d5611e5/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "claude-code/spotter-8463c716/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "claude-code/codemie-session-624a4a58-compacted.jsonl",
    "claude-code/entire-cli-2compactions-b8659b3a4d.jsonl",
)
REPLY_WORDS = 600
LAYOUT: dict[SectionName, tuple[int, tuple[str, ...]]] = {
    "files_modified": (150, ("files and code sections",)),
    "key_decisions": (120, ("problem solving", "errors and fix")),
    "important_values": (100, ("key technical concepts",)),
    "current_state": (130, ("primary request", "current work", "optional next step")),
    "pending_tasks": (100, ("pending tasks",)),
}
"""Per snapshot section: its words of the 600, and the headings of Claude Code's nine
that it holds (the chronological analysis and the user's messages are left out)."""
_HEADING = re.compile(r"^\s*(?:#+\s*)?\d+\.\s+(?P<title>[A-Za-z][^:\n]*):\s*(?P<rest>.*)$")
_FENCE = re.compile(r"^\s*```")
_MARK = re.compile(r"^(?:[-*+]\s+|\d+\.\s+|#+\s*)")


def compactions(path: Path) -> Iterator[tuple[int, str]]:
    """(line index of the ``compact_boundary`` record, the summary text) per compaction."""
    lines = path.read_text(encoding="utf-8").splitlines()
    boundary = -1
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "system" and rec.get("subtype") == "compact_boundary":
            boundary = i
        if rec.get("isCompactSummary"):
            content = rec["message"]["content"]
            text = (
                content
                if isinstance(content, str)
                else "".join(c.get("text", "") for c in content if isinstance(c, dict))
            )
            yield (boundary if boundary >= 0 else i), text
            boundary = -1


def laid_out(summary: str) -> str:
    """Claude's summary in the five snapshot sections, code blocks out, cut to 600 words."""
    body = summary.split("Summary:", 1)[-1]
    sections: dict[SectionName, list[str]] = {name: [] for name in LAYOUT}
    current: SectionName | None = None
    fenced = False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        heading = _HEADING.match(line)
        if heading and not line.startswith((" ", "\t")):
            title = heading.group("title").strip("* ").lower()
            current = next(
                (name for name, (_, keys) in LAYOUT.items() if title.startswith(keys)), None
            )
            line = heading.group("rest")
        text = _MARK.sub("", line.strip()).replace("**", "").strip()
        if fenced or current is None or not text:
            continue
        items = sections[current]
        if items and items[-1].endswith("`") and items[-1].count(" ") == 0:
            items[-1] = f"{items[-1]}: {text}"  # a file's line, then what changed in it
        else:
            items.append(text)
    out: list[str] = []
    for name, (budget, _) in LAYOUT.items():
        out.append(f"## {SECTION_TITLES[name]}")
        for item in sections[name]:
            if budget <= 0:
                break
            clipped = clip_words(one_line(item), budget)
            budget -= len(clipped.split())
            out.append(f"- {clipped}")
        out.append("")
    return "\n".join(out)


def cases() -> list[tuple[str, int]]:
    if not TRANSCRIPTS.is_dir():
        return [(run, 0) for run in RUNS]
    return [(run, n) for run in RUNS for n, _ in enumerate(compactions(TRANSCRIPTS / run))]


@pytest.mark.parametrize("kind", ["llm", "hybrid"])
@pytest.mark.parametrize(("run", "index"), cases())
def test_the_models_prose_is_stored_with_every_edited_file_named(
    run: str,
    index: int,
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    openai_server: FakeOpenAI,
) -> None:
    require_shared(TRANSCRIPTS)
    source = TRANSCRIPTS / run
    boundary, summary = list(compactions(source))[index]
    reply = laid_out(summary)
    written = parse(reply)
    bullets = [b.text for name in LAYOUT for b in written.section(name)]
    assert sum(len(b.split()) for b in bullets) <= REPLY_WORDS
    assert written.key_decisions and written.current_state and written.files_modified
    span = tmp_path / "span.jsonl"  # the run up to this compaction's boundary
    span.write_text(
        "\n".join(source.read_text(encoding="utf-8").splitlines()[:boundary]) + "\n",
        encoding="utf-8",
    )
    url = f"sqlite://{tmp_path / 'reply.db'}"
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url)
    monkeypatch.setenv("THREADLINE_STORE", url)
    runner = CliRunner()
    imported = runner.invoke(app, ["sessions", "import", str(span)])
    assert imported.exit_code == 0, imported.output
    store = open_store(url)
    (info,) = store.list_sessions()
    store.close()
    for _ in range(40):  # one reply per fold, however many the span needs
        openai_server.reply_text(reply, usage=(90_000, 900))
    out = runner.invoke(
        app,
        [
            *("compact", info.id, "--summarizer", kind, "--model", "openai/gpt-4o", "--json"),
            *("--keep-recent", "2", "--keep-turns", "0"),  # the span is what Claude summarized
        ],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)  # stdout alone: a warning under pytest goes to stderr
    assert openai_server.request_count >= 1
    assert doc["fallback"] is None, doc["fallback"]
    assert doc["summarizer"] == kind
    stored = doc["checkpoint"]["summary"]
    kept = parse(stored)
    # the model's prose: its decisions and current work, as it wrote them
    decisions = [b.text for b in written.key_decisions]
    assert kept.key_decisions and all(b.text in decisions for b in kept.key_decisions)
    assert sum(d in stored for d in decisions) >= min(3, len(decisions))
    assert any(b.text in stored for b in written.current_state)
    # every file the run edited up to the cut, by the bench's own reading of the tools
    store = open_store(url)
    session = store.get_session(info.id)
    covered = [m for m in session.iter_messages() if (m.seq or 0) <= doc["covers_up_to"]]
    cwds = {c for m in covered if isinstance(c := m.metadata.get("cwd"), str)}
    store.close()
    edited = probes.edited_files(covered)
    missing = sorted(p for p in edited if not probes.recalled(p, stored, cwds))
    assert not missing, (len(edited), missing)
