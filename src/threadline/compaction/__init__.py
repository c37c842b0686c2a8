"""Compaction: older history replaced, in the view only, by a structured state snapshot.

A compaction appends a checkpoint (never edits history): a snapshot of five
sections (Files Modified, Key Decisions, Important Values, Current State,
Pending Tasks) under a word limit, with exact paths, URLs, ids, error lines
and settings kept verbatim. Snapshots are incremental: each one is the
previous snapshot updated with the messages since, so the cost follows the
new messages, not the history; what they say was changed, failed or is left
to do comes from the trail of the whole covered range (invariant 11).

    snapshot.py    the snapshot model: sections, ranked bullets, render / parse
    values.py      extraction of the exact values to keep, and retention reports
    toolcalls.py   what tool calls did to files, and tool results in brief
    extractive.py  the offline, deterministic summarizer (no model)
    llm.py         the summarizer that asks a chat model
    gate.py        a model's snapshot is kept unless unusable (empty, no section, unknown files)
    overlay.py     the offline snapshot's evidence laid over a model's prose
    trail.py       the artifact trail of the whole covered range, carried in metadata
    reconcile.py   a snapshot rebuilt against the trail and later evidence
    triggers.py    when to compact
    compactor.py   runs a compaction and appends the checkpoint
"""

from threadline.compaction.compactor import CompactionResult, Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.llm import HybridSummarizer, LLMSummarizer, make_summarizer
from threadline.compaction.snapshot import Snapshot, SummaryResult
from threadline.compaction.triggers import TriggerDecision, check_triggers
from threadline.compaction.values import RetentionReport, extract_values, retention

__all__ = [
    "CompactionResult",
    "Compactor",
    "ExtractiveSummarizer",
    "HybridSummarizer",
    "LLMSummarizer",
    "RetentionReport",
    "Snapshot",
    "SummaryResult",
    "TriggerDecision",
    "check_triggers",
    "extract_values",
    "make_summarizer",
    "retention",
]
