"""When to compact: the message-count, token-count and window-fraction triggers.

The reference CLI compacts when either N messages have arrived since the last
summary or the conversation passes K tokens; the agent server compacts when
the context uses 80% of the model's window. threadline checks all three after
a turn completes (never in the middle of a tool loop), reports which one fired
and how far each one is from firing (the ``/context`` progress bars).

A check is cheap by construction: it reads the session's info (already on the
handle) and the latest checkpoint, never the history. The token trigger counts
tokens *since the last checkpoint*, not the session's total: once a long
session passes ``max_tokens_before_summary`` its total never falls again
(history is append-only), so a total-based trigger would fire on every turn
forever after one compaction. The compactor records in each checkpoint's
metadata the session's cumulative token count through the checkpoint
(``tokens_through``), so "tokens since" is one subtraction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from threadline.catalog import lookup
from threadline.context.policy import ContextPolicy
from threadline.store.base import Checkpoint, Session

TriggerName = Literal["messages", "tokens", "context"]

TOKENS_THROUGH_KEY = "tokens_through"
"""Checkpoint metadata: the session's cumulative tokens through ``covers_up_to``."""
MIN_MESSAGES_MARGIN = 4
"""No trigger fires before ``min_recent_messages + MIN_MESSAGES_MARGIN`` new messages
(the reference CLI's rule): below that, a compaction would summarize next to nothing."""
TRIGGER_ORDER: tuple[TriggerName, ...] = ("context", "tokens", "messages")
"""Tie-break when several triggers are over their thresholds by the same share: the
most urgent first (a nearly full window beats a long but roomy session)."""


@dataclass(frozen=True, slots=True)
class TriggerProgress:
    """How far one trigger is from firing; ``percent`` is ``value / threshold * 100``."""

    name: TriggerName
    value: int
    threshold: int
    percent: float
    fired: bool = False
    """Over its threshold and allowed to fire (the minimum is met, auto is on)."""
    available: bool = True
    """False when the value is unknown (no built context was passed for ``context``)."""

    @property
    def reached(self) -> bool:
        return self.available and self.value >= self.threshold


@dataclass(frozen=True, slots=True)
class TriggerDecision:
    """Whether to compact now, which trigger said so, and every trigger's progress."""

    fire: bool
    reason: TriggerName | None
    """The trigger that fired: the one furthest past its threshold."""
    progress: list[TriggerProgress] = field(default_factory=list)
    messages_since_checkpoint: int = 0
    minimum_messages: int = 0
    """Messages since the checkpoint needed before any trigger may fire."""
    auto_summarize: bool = True
    note: str = ""
    """Why nothing fired although a threshold was reached, or what fired, in words."""

    def get(self, name: TriggerName) -> TriggerProgress | None:
        return next((p for p in self.progress if p.name == name), None)


def tokens_since_checkpoint(session: Session, checkpoint: Checkpoint | None) -> int:
    """Tokens stored after the checkpoint, from the session total and the checkpoint's record.

    A checkpoint written without ``tokens_through`` (by another tool, or by hand)
    counts as covering nothing: the trigger may then fire once too early, and the
    checkpoint that compaction writes carries the number from then on.
    """
    total = session.total_tokens
    if checkpoint is None:
        return total
    through = checkpoint.metadata.get(TOKENS_THROUGH_KEY)
    if not isinstance(through, int) or isinstance(through, bool) or through < 0:
        return total
    return max(0, total - through)


def messages_since_checkpoint(session: Session, checkpoint: Checkpoint | None) -> int:
    floor = checkpoint.covers_up_to if checkpoint else 0
    return max(0, session.last_seq - floor)


def window_size(model: str | None, policy: ContextPolicy) -> int:
    """The context window the fraction trigger measures against."""
    return policy.context_limit or lookup(model or None).context_window


def _progress(
    name: TriggerName, value: int, threshold: int, *, allowed: bool, available: bool = True
) -> TriggerProgress:
    percent = value / threshold * 100.0 if available else 0.0
    return TriggerProgress(
        name=name,
        value=value,
        threshold=threshold,
        percent=percent,
        fired=allowed and available and value >= threshold,
        available=available,
    )


def check_triggers(
    session: Session,
    policy: ContextPolicy,
    *,
    model: str | None = None,
    context_tokens: int | None = None,
    checkpoint: Checkpoint | None = None,
) -> TriggerDecision:
    """Decide whether the session should be compacted now.

    ``context_tokens`` is the size of the last context built for the model
    (``ContextWindow.tokens``); without it the fraction trigger is reported as
    unavailable and cannot fire. ``checkpoint`` saves the one store read when
    the caller already holds the latest checkpoint. ``session.info`` is used as
    it is on the handle: call ``session.refresh()`` first if another process
    may have appended.
    """
    if checkpoint is None:
        checkpoint = session.latest_checkpoint()
    since = messages_since_checkpoint(session, checkpoint)
    minimum = policy.min_recent_messages + MIN_MESSAGES_MARGIN
    window = window_size(model or session.model, policy)
    context_threshold = max(1, int(window * policy.compact_at_fraction))

    allowed = policy.auto_summarize and since >= minimum
    progress = [
        _progress("messages", since, policy.max_messages_before_summary, allowed=allowed),
        _progress(
            "tokens",
            tokens_since_checkpoint(session, checkpoint),
            policy.max_tokens_before_summary,
            allowed=allowed,
        ),
        _progress(
            "context",
            context_tokens or 0,
            context_threshold,
            allowed=allowed,
            available=context_tokens is not None,
        ),
    ]
    fired = [p for p in progress if p.fired]
    if fired:
        best = max(fired, key=lambda p: (p.percent, -TRIGGER_ORDER.index(p.name)))
        note = f"{best.name}: {best.value:,} >= {best.threshold:,} ({best.percent:.0f}%)"
        return TriggerDecision(
            fire=True,
            reason=best.name,
            progress=progress,
            messages_since_checkpoint=since,
            minimum_messages=minimum,
            auto_summarize=policy.auto_summarize,
            note=note,
        )
    note = ""
    if any(p.reached for p in progress):
        if not policy.auto_summarize:
            note = "a threshold is reached but auto_summarize is off"
        else:
            note = (
                f"a threshold is reached but only {since} messages arrived since the last "
                f"checkpoint; compaction waits for {minimum}"
            )
    return TriggerDecision(
        fire=False,
        reason=None,
        progress=progress,
        messages_since_checkpoint=since,
        minimum_messages=minimum,
        auto_summarize=policy.auto_summarize,
        note=note,
    )
