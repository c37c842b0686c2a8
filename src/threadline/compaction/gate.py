"""A sanity gate on model-written snapshots: worse than the offline one, it is not kept.

A model can return a snapshot that reads well and holds less: a section left
empty although the messages had something for it, or paraphrased paths and
ids. Before a compaction stores an LLM or hybrid snapshot, ``check`` sets it
beside the extractive snapshot of the same messages: when the model's leaves
empty a section the extractive one fills, or keeps verbatim a smaller share of
the exact values the extractive summarizer found than the extractive snapshot
does, the compaction stores the extractive snapshot instead and notes why in
the checkpoint's metadata (``FALLBACK_KEY``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.snapshot import SECTION_NAMES, SECTION_TITLES, SummaryResult, parse
from threadline.compaction.values import retention

FALLBACK_KEY = "fallback"
"""Checkpoint metadata key of the note a fallback leaves."""
GATED = frozenset({"llm", "hybrid"})
"""The summarizers whose snapshots the gate checks (what a model wrote)."""


@dataclass(slots=True)
class Verdict:
    """What the gate found: why the model's snapshot fails, if it does."""

    empty_sections: list[str] = field(default_factory=list)
    """Sections the model left empty while the extractive snapshot fills them."""
    model_retention: float = 1.0
    extractive_retention: float = 1.0
    """Shares of the extractive summarizer's values each snapshot keeps verbatim."""

    @property
    def passed(self) -> bool:
        return not self.empty_sections and self.model_retention >= self.extractive_retention

    def reasons(self) -> list[str]:
        out = []
        if self.empty_sections:
            out.append(f"empty sections: {', '.join(self.empty_sections)}")
        if self.model_retention < self.extractive_retention:
            out.append(
                f"exact-value retention {self.model_retention:.0%} below the extractive "
                f"snapshot's {self.extractive_retention:.0%}"
            )
        return out


def check(model: SummaryResult, extractive: SummaryResult) -> Verdict:
    """The model's snapshot against the extractive one of the same messages."""
    written = parse(model.text)
    empty = [
        SECTION_TITLES[name]
        for name in SECTION_NAMES
        if not written.section(name) and extractive.snapshot.section(name)
    ]
    values = extractive.values
    return Verdict(
        empty,
        retention(values, model.text).ratio,
        retention(values, extractive.text).ratio,
    )


def fallback_note(model: SummaryResult, verdict: Verdict) -> dict[str, Any]:
    """What a checkpoint's metadata says when the extractive snapshot replaced the model's."""
    return {
        "from": model.summarizer,
        "reasons": verdict.reasons(),
        "model_retention": round(verdict.model_retention, 4),
        "extractive_retention": round(verdict.extractive_retention, 4),
        "input_tokens": model.input_tokens,
        "output_tokens": model.output_tokens,
    }


__all__ = ["FALLBACK_KEY", "GATED", "Verdict", "check", "fallback_note"]
