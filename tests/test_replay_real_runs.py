"""Invariant 8 on real runs, replayed as an agent loop would run them.

Each long conversation under ``../shared/transcripts`` is appended message by message
to a fresh session, and before every model call (each assistant message) the window is
built with ``prepare_context`` at 32,000 tokens, compacting first when it must. No
window may leave a stored message out that it neither shows nor covers with its
summary: ``dropped_messages`` is 0 at every call, and the store agrees (a result that
no view can show, a duplicate or one without a call, is reported as an orphan).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from tests.real_runs import import_into, transcript_files
from threadline import ContextPolicy, open_store
from threadline.compaction.compactor import Compactor, prepare_context
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.context.builder import ContextWindow
from threadline.store.encoding import prepare_messages
from threadline.store.protocol import Session

LIMIT = 32_000
LONG = 100
"""A conversation of at least this many stored messages is replayed."""


def uncovered(session: Session, window: ContextWindow) -> list[int]:
    """Stored seqs neither in the window, nor under its summary, nor reported as results
    no view can show."""
    floor = max(
        (int(m.metadata.get("covers_up_to", 0)) for m in window.messages if m.summary),
        default=0,
    )
    shown = {m.seq for m in window.messages if m.seq is not None}
    unshowable = set(window.report.orphan_results)
    return [q for q in range(floor + 1, session.last_seq + 1) if q not in shown | unshowable]


@pytest.mark.parametrize("name", transcript_files() or ["(none)"])
def test_replaying_a_long_run_call_by_call_drops_nothing(name: str, tmp_path: Path) -> None:
    require_shared(TRANSCRIPTS)
    sessions = import_into(open_store(f"sqlite://{tmp_path / 'import.db'}"), TRANSCRIPTS / name)
    long_runs = [s for s in sessions if s.last_seq >= LONG]
    if not long_runs:
        pytest.skip(f"{name}: no conversation of {LONG}+ messages imports in this build")
    policy = ContextPolicy(context_limit=LIMIT)
    for source in long_runs:
        store = open_store("memory://")
        replay = store.create_session(agent="replay", model=source.model)
        compactor = Compactor(ExtractiveSummarizer(), policy=policy)
        calls = 0
        for m in source.messages():
            if m.role == "assistant" and replay.last_seq:
                window = prepare_context(replay, compactor, policy=policy)
                calls += 1
                where = f"{name}, call {calls} (before seq {replay.last_seq + 1}): "
                assert window.report.dropped_messages == 0, where + str(window.report.notes)
                assert uncovered(replay, window) == [], where
            fresh = m.model_copy(update={"seq": None, "token_counts": {}})
            store.append_messages(replay.id, prepare_messages(replay.model, [fresh]))
            replay.refresh()
        assert calls > 0
