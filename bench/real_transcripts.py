"""Context fidelity on every real agent transcript beside the project.

For each conversation under ``../shared/transcripts`` (one row per conversation;
files holding several runs give one row per run), this does what a new user
does: import it into a fresh SQLite store, run ``threadline compact ID`` with
default settings (the extractive summarizer), and build the window at 32,000
tokens (``threadline context ID --limit 32000``). Each row reports:

* messages and user turns (requests a person made, not tool wrappers);
* whether the compaction wrote a checkpoint, and the snapshot's words;
* dropped: stored messages neither in the window nor under the checkpoint
  (the target is 0);
* edited-file recall: of the files the run changed according to its own tool
  calls (read by the rules of ``bench/probes.py``, independent of the
  summarizer's), the share named in the snapshot or present in the window;
* whether the first user request is in the window or the snapshot;
* whether the window is valid by OpenAI's and Anthropic's rules
  (``threadline.interop.provider_rules``).

    python bench/real_transcripts.py [--limit 32000] [--json] [--root DIR]

The test suite asserts the same figures (tests/test_real_transcripts.py).
Nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from probes import edited_files, recalled, visible
from tables import result_table
from threadline import ContextPolicy, Message, build_context, open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import one_line, words
from threadline.interop.importers import import_file, read_transcript_runs
from threadline.interop.provider_rules import anthropic_problems, openai_problems
from threadline.interop.sync import find_sources
from threadline.requests import first_request, is_request, request_text
from threadline.store.encoding import prepare_messages

ROOT = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
LIMIT = 32_000
REQUEST_WORDS = 12
"""The first request counts as present when its opening words appear verbatim."""


@dataclass
class Row:
    conversation: str
    messages: int
    user_turns: int
    compacted: bool
    snapshot_words: int
    dropped: int
    edited_files: int
    edited_recalled: int
    first_request: bool | None
    """None when the conversation has no request a person made."""
    valid_openai: bool
    valid_anthropic: bool
    problems: list[str]

    @property
    def recall(self) -> float | None:
        return self.edited_recalled / self.edited_files if self.edited_files else None


# -- one conversation --------------------------------------------------------------------


def conversations(root: Path, *, only: str | None = None) -> Iterator[tuple[str, list[Message]]]:
    """(name, messages) per conversation under ``root``, its sources found as ``sessions
    import`` finds them (an OpenHands V1 conversation directory is one); ``only``: one
    source's, by its path relative to ``root``."""
    found = sorted(s.path for s in find_sources([str(root)]) if s.path is not None)
    for path in found:
        name = str(path.relative_to(root))
        if only is not None and name != only:
            continue
        runs = read_transcript_runs(path)
        if len(runs) == 1:
            yield name, import_file(path).messages
        else:
            for i, run in enumerate(runs, 1):
                yield f"{name} #{i}", run


def measure(name: str, messages: list[Message], store_dir: str, limit: int = LIMIT) -> Row:
    store = open_store(f"sqlite://{store_dir}/{abs(hash(name))}.db")
    session = store.create_session(agent="bench")
    store.append_messages(session.id, prepare_messages(None, messages))
    session = store.get_session(session.id)
    result = Compactor(ExtractiveSummarizer(), policy=ContextPolicy()).compact(session, force=True)
    session.refresh()
    window = build_context(session, policy=ContextPolicy(context_limit=limit))
    checkpoint = session.latest_checkpoint()
    snapshot = checkpoint.summary if checkpoint else ""
    seen = "\n".join(visible(m) for m in window.messages)
    edited = edited_files(messages)
    cwds = {c for m in messages if isinstance(c := m.metadata.get("cwd"), str) and c}
    first = first_request(messages)
    first_present: bool | None = None
    if first is not None:
        opening = " ".join(one_line(request_text(first) or "").split()[:REQUEST_WORDS])
        flat = " ".join(one_line(seen).split())
        first_present = opening in flat
    oa = openai_problems(window.to_openai())
    an = anthropic_problems(window.to_anthropic())
    return Row(
        conversation=name,
        messages=len(messages),
        user_turns=sum(1 for m in messages if is_request(m)),
        compacted=result.compacted,
        snapshot_words=words(snapshot),
        dropped=window.report.dropped_messages,
        edited_files=len(edited),
        edited_recalled=sum(1 for p in edited if recalled(p, seen, cwds)),
        first_request=first_present,
        valid_openai=not oa,
        valid_anthropic=not an,
        problems=[f"openai: {p}" for p in oa[:3]] + [f"anthropic: {p}" for p in an[:3]],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="transcripts directory")
    ap.add_argument("--limit", type=int, default=LIMIT, help="context limit to build at")
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    args = ap.parse_args()
    if not args.root.is_dir():
        sys.exit(f"no transcripts at {args.root}")
    from rich.console import Console

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="threadline-real-") as tmp:
        for name, messages in conversations(args.root):
            rows.append(measure(name, messages, tmp, args.limit))
    if args.json:
        for row in rows:
            print(json.dumps({**asdict(row), "recall": row.recall}))
        return
    table = result_table(
        f"real transcripts: compact with defaults, build at {args.limit:,} tokens",
        (
            "conversation",
            "msgs",
            "user turns",
            "compacted",
            "words",
            "dropped",
            "edited-file recall",
            "first request",
            "OpenAI",
            "Anthropic",
        ),
    )
    for r in rows:
        table.add_row(
            r.conversation,
            f"{r.messages:,}",
            f"{r.user_turns}",
            "yes" if r.compacted else "no",
            f"{r.snapshot_words}",
            f"{r.dropped}",
            "-" if r.recall is None else f"{r.edited_recalled}/{r.edited_files} ({r.recall:.0%})",
            "-" if r.first_request is None else ("yes" if r.first_request else "NO"),
            "valid" if r.valid_openai else "INVALID",
            "valid" if r.valid_anthropic else "INVALID",
        )
    Console(width=200).print(table)
    with_edits = [r for r in rows if r.recall is not None]
    print(
        f"{len(rows)} conversations; dropped total {sum(r.dropped for r in rows)}; "
        f"edited-file recall min {min((r.recall or 0) for r in with_edits):.0%} over "
        f"{len(with_edits)} that edit files; first request missing in "
        f"{sum(1 for r in rows if r.first_request is False)}; invalid windows: OpenAI "
        f"{sum(1 for r in rows if not r.valid_openai)}, Anthropic "
        f"{sum(1 for r in rows if not r.valid_anthropic)}"
    )
    for r in rows:
        for p in r.problems:
            print(f"  {r.conversation}: {p}")


if __name__ == "__main__":
    main()
