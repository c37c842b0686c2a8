"""Several processes compacting one SQLite session at once (issue 9, item 3).

Each worker process opens the store itself, and in a loop appends a turn and runs
``compact_if_needed`` with a summarizer that takes a random few milliseconds. With
the normal lease, the compaction mark (a compare-and-set on the memo) lets one
compaction run at a time: no two summarizers ever overlap. With a lease of zero
every mark is stale at once, so compactions do overlap and race to write; the
checkpoint's compare-and-set must then still leave one forward chain: each
checkpoint built on the one before it, ``covers_up_to`` strictly increasing, and
exactly as many checkpoints as compactions that reported ``compacted``.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from threadline import Compactor, ContextPolicy, Message, open_store
from threadline.compaction.snapshot import Snapshot, SummaryResult

WORKERS = 6
ROUNDS = int(os.environ.get("THREADLINE_TEST_COMPACTION_ROUNDS", "12"))
JOIN_TIMEOUT_SECONDS = 300
POLICY = ContextPolicy(
    min_recent_messages=2,
    preserve_user_turns=1,
    max_messages_before_summary=6,
    preserve_fill=False,  # a small kept tail: every round has something to compact
)
Interval = tuple[float, float]


class SlowSummarizer:
    """Takes a few random milliseconds, and notes when it ran (``time.monotonic`` is
    one clock for every process on the machine)."""

    name = "slow"

    def __init__(self) -> None:
        self.ran: list[Interval] = []

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        start = time.monotonic()
        time.sleep(random.uniform(0.001, 0.02))
        snap = Snapshot.parse(previous) if previous else Snapshot()
        snap.add("current_state", f"summarized {messages[0].seq}-{messages[-1].seq}", score=1.0)
        self.ran.append((start, time.monotonic()))
        return SummaryResult(text=snap.render(max_words), snapshot=snap, summarizer=self.name)


def compaction_worker(
    url: str, session_id: str, worker: int, lease_seconds: float
) -> tuple[list[str], list[Interval]]:
    """Runs in a child process: the statuses of its compactions and when it summarized."""
    store = open_store(url)
    try:
        session = store.get_session(session_id)
        summarizer = SlowSummarizer()
        compactor = Compactor(summarizer, policy=POLICY, lease=timedelta(seconds=lease_seconds))
        statuses = []
        for i in range(ROUNDS):
            session.append([Message.user(f"w{worker} q{i}"), Message.assistant(f"w{worker} a{i}")])
            result = compactor.compact_if_needed(session)
            assert result.status != "failed", result.error
            statuses.append(result.status)
        return statuses, summarizer.ran
    finally:
        store.close()


@pytest.mark.parametrize(
    "lease_seconds", [pytest.param(900.0, id="live-marks"), pytest.param(0.0, id="stale-marks")]
)
def test_processes_compacting_at_once_keep_one_forward_chain(
    tmp_path: Path, lease_seconds: float
) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    store = open_store(url)
    sid = store.create_session(model="gpt-4o").id
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["threadline", __name__])
    with ctx.Pool(WORKERS) as pool:
        outcomes = pool.starmap(
            compaction_worker,
            [(url, sid, w, lease_seconds) for w in range(WORKERS)],
        )
    checkpoints = store.list_checkpoints(sid)
    store.close()

    statuses = [s for worker_statuses, _ in outcomes for s in worker_statuses]
    assert set(statuses) <= {"compacted", "in_progress", "not_needed", "noop"}
    assert statuses.count("compacted") == len(checkpoints) > 0
    covers = [c.covers_up_to for c in checkpoints]
    assert covers == sorted(set(covers)), covers
    built_on = [c.metadata["previous_checkpoint"] for c in checkpoints]
    assert built_on == [None, *(c.id for c in checkpoints[:-1])]

    intervals = sorted(i for _, ran in outcomes for i in ran)
    overlaps, ended = 0, float("-inf")
    for start, end in intervals:
        overlaps += start < ended
        ended = max(ended, end)
    if lease_seconds > 0:  # one live mark at a time: summaries never overlap
        assert overlaps == 0, f"{overlaps} of {len(intervals)} summaries overlapped"
    else:  # every mark stale at once: they do overlap, and the losers only waste work
        assert len(intervals) >= len(checkpoints)
