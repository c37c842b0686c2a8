"""Context fidelity on every real transcript: the figures ``bench/real_transcripts.py`` prints.

Each conversation is imported, compacted with default settings and built at 32,000
tokens. Asserted for each: no stored message is dropped unsummarized, the window is
valid by OpenAI's and Anthropic's rules, the first user request is present (in the
window or the snapshot), and at least 90% of the files the run edited are named there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_scripts import load_bench
from tests.conftest import TRANSCRIPTS, require_shared
from tests.real_runs import transcript_files

MIN_RECALL = 0.9


bench = load_bench("real_transcripts")
FILES = transcript_files()


@pytest.mark.parametrize("name", FILES or ["(none)"])
def test_compacted_window_keeps_everything_on_real_transcripts(name: str, tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    rows = [
        bench.measure(conv, messages, str(tmp_path))
        for conv, messages in bench.conversations(TRANSCRIPTS, only=name)
    ]
    assert rows
    for row in rows:
        where = f"{row.conversation}: "
        assert row.dropped == 0, where + f"{row.dropped} messages dropped unsummarized"
        assert row.valid_openai and row.valid_anthropic, where + "; ".join(row.problems)
        assert row.first_request is not False, where + "the first request is lost"
        if row.recall is not None:
            assert row.recall >= MIN_RECALL, (
                where + f"edited-file recall {row.edited_recalled}/{row.edited_files}"
            )
