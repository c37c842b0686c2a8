"""ContextPolicy: every knob of context building and compaction, with defaults.

Defaults come from the reference documents (``shared/seeds``) unless a
measured reason says otherwise; each is a named field here, never a bare
number in a function. The same model validates the ``context:`` block of an
agent's YAML file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from threadline.errors import ConfigError, validation_problems

TrimStrategy = Literal["stable", "greedy"]
SummaryPlacement = Literal["system", "checkpoint_pair"]


class ContextPolicy(BaseModel):
    """How a context window is built, pruned and compacted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # -- budget
    context_limit: int | None = Field(default=None, gt=0)
    """Override the model's context window from the catalog."""
    response_reserve: int = Field(default=4096, ge=0)
    """Tokens kept free for the model's reply."""
    min_recent_messages: int = Field(default=6, ge=0)
    """Always keep at least this many recent messages (rounded up to whole units)."""
    summary_share: float = Field(default=0.30, ge=0.0, le=1.0)
    """The checkpoint summary may use at most this share of the budget."""
    max_messages: int | None = Field(default=None, ge=1)
    """Optional cap on the number of history messages sent (whole units)."""

    # -- trimming
    trim_strategy: TrimStrategy = "stable"
    """``stable``: when full, drop whole units down to ``low_water`` so the prefix holds
    for the following turns (prompt caches keep hitting). ``greedy``: fill newest to
    oldest every turn."""
    low_water: float = Field(default=0.75, gt=0.0, le=1.0)
    """Share of the message budget a ``stable`` re-trim fills to."""

    # -- emergency truncation (only when protected messages alone overflow)
    emergency_truncation: bool = True
    strip_images: bool = True
    truncate_over_chars: int = Field(default=2000, ge=0)
    """Text blocks longer than this are cut in an emergency..."""
    truncate_keep_head: int = Field(default=1000, ge=0)
    """...keeping this many leading characters..."""
    truncate_keep_tail: int = Field(default=500, ge=0)
    """...and this many trailing ones."""

    # -- summary placement
    summary_placement: SummaryPlacement = "system"
    """``system``: the summary is a system message after the prompt. ``checkpoint_pair``:
    a synthetic user boundary message plus an assistant message holding it."""

    # -- tool-result pruning (view-time only)
    pruning: bool = True
    prune_min_chars: int = Field(default=50_000, ge=0)
    """Only a tool result of at least this many characters is eligible; smaller ones are
    never touched (the agent server's rule: a 124-character "file created" result keeps
    its path)."""
    prune_soft_at: float = Field(default=0.30, ge=0.0, le=1.0)
    """Soft trim when the context passes this share of the limit."""
    prune_hard_at: float = Field(default=0.50, ge=0.0, le=1.0)
    """Hard clear when the context passes this share of the limit..."""
    prune_hard_to: float = Field(default=0.40, ge=0.0, le=1.0)
    """...clearing oldest results until it is back under this share: one chunk of
    clears instead of one a turn, so the prefix breaks rarely (invariant 7)."""
    prune_keep_chars: int = Field(default=1500, ge=0)
    """A soft trim keeps this many characters at the head and at the tail."""
    prune_protect_turns: int = Field(default=3, ge=0)
    """Results in the last N assistant turns are never pruned."""
    protected_tools: tuple[str, ...] = ()
    """Results of these tools are never pruned."""
    prune_aggressive_soft_at: float = Field(default=0.10, ge=0.0, le=1.0)
    prune_aggressive_hard_at: float = Field(default=0.20, ge=0.0, le=1.0)
    prune_aggressive_hard_to: float = Field(default=0.15, ge=0.0, le=1.0)
    prune_aggressive_min_chars: int = Field(default=5_000, ge=0)
    """``prune_min_chars`` of the retry after a provider's context-length error."""

    # -- compaction triggers (checked after a turn completes)
    auto_summarize: bool = True
    max_messages_before_summary: int = Field(default=30, ge=1)
    max_tokens_before_summary: int = Field(default=128_000, ge=1)
    compact_at_fraction: float = Field(default=0.80, gt=0.0, le=1.0)
    summary_max_words: int = Field(default=600, ge=50)
    summary_max_values: int = Field(default=25, ge=1)
    """A snapshot's Important Values are ranked and capped at this many items."""
    preserve_user_turns: int = Field(default=4, ge=0)
    """A compaction keeps the last user turns verbatim..."""
    preserve_share: float = Field(default=0.5, gt=0.0, le=1.0)
    """...and ``min_recent_messages``, only while that tail fits this share of the budget.
    Beyond it the cut moves inside the turn, on a unit boundary, so a run of one request
    and hundreds of tool steps can still be compacted."""
    preserve_max_tokens: int = Field(default=20_000, ge=0)
    """...and never more than this many tokens (Codex keeps at most 20k tokens of recent
    user messages through a compaction): a compaction run for a large window still leaves
    a tail that a smaller window shows whole. 0 removes the cap."""
    preserve_fill: bool = True
    """A compaction keeps the newest whole units that fit the share (and the cap), not only
    the last turns: the recent verbatim work an agent most needs, in budget that would
    otherwise stay empty (a 32k window held 2k tokens after compacting a long run). A
    history that fits is not compacted. False keeps only the last ``preserve_user_turns``
    turns, or ``min_recent_messages`` inside a turn (the reference CLI's tail)."""

    def __init__(self, /, **data: Any) -> None:
        """A policy that cannot work fails here, with ``ConfigError`` naming the field,
        not later when a context is built. (``model_validate``, which reads agent files,
        keeps pydantic's ``ValidationError`` for the file loader to word.)"""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(f"invalid ContextPolicy: {validation_problems(exc)}") from exc

    # pydantic's mark for an __init__ that only wraps its own (RootModel does the same): an
    # agent file's ``context:`` block, validated nested, keeps its ValidationError and path.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="after")
    def _check(self) -> ContextPolicy:
        if self.context_limit is not None and self.response_reserve >= self.context_limit:
            raise ValueError(
                f"response_reserve ({self.response_reserve:,}) must be less than "
                f"context_limit ({self.context_limit:,}): no room would be left for messages"
            )
        for prefix in ("prune", "prune_aggressive"):
            soft, hard, to = (
                getattr(self, f"{prefix}_{k}") for k in ("soft_at", "hard_at", "hard_to")
            )
            if hard < soft:
                raise ValueError(f"{prefix}_hard_at must be >= {prefix}_soft_at")
            if to > hard:
                raise ValueError(f"{prefix}_hard_to must be <= {prefix}_hard_at")
        return self
