"""Every shared transcript imports with the roles, tool calls and results a few lines
of code count in the raw file without the importer (tests/independent_counts.py):
issue 22, point 2."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from tests.independent_counts import counter_for, sources
from threadline.interop.importers import import_sessions

KEYS = ("user", "assistant", "tool", "system", "calls")
NO_REPLY_BOUNDARY = {"aider"}
"""Aider writes no record boundary for a reply: checked by what replies must keep."""
EDIT_MARKS = ("<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE", "@@ ", "+++ ", "--- ")
"""Lines that open SEARCH/REPLACE blocks and unified diffs (udiff), counted at a line start."""


@pytest.mark.transcripts
@pytest.mark.parametrize("relative", sources(TRANSCRIPTS) if TRANSCRIPTS.is_dir() else ["(absent)"])
def test_imported_counts_match_the_raw_file(relative: str) -> None:
    require_shared(TRANSCRIPTS)
    path = TRANSCRIPTS / relative
    raw = counter_for(relative)(path)
    got: Counter[str] = Counter()
    sessions = import_sessions(path)
    for session in sessions:
        for m in session.messages:
            got[m.role] += 1
            got["calls"] += len(m.tool_calls)
    top = relative.split("/", 1)[0]
    keys = [k for k in KEYS if not (top in NO_REPLY_BOUNDARY and k == "assistant")]
    assert {k: got[k] for k in keys} == {k: raw[k] for k in keys}
    if top == "aider":  # every edit block and every note of aider's kept whole
        text = path.read_text(encoding="utf-8")
        messages = [m for s in sessions for m in s.messages]
        notes = [n for m in messages for n in m.metadata.get("aider_notes", [])]
        kept = [m.text for m in messages] + notes
        for mark in EDIT_MARKS:
            line = re.compile(rf"^(?:#### |> )?{re.escape(mark)}", re.M)
            assert sum(len(line.findall(t)) for t in kept) == len(line.findall(text)), mark
        for note in ("Applied edit to ", "Tokens: ", "Commit "):
            assert sum(n.startswith(note) for n in notes) == text.count(f"\n> {note}"), note
