"""Checkpoints: the record, and the rule for adding one on an expected predecessor
(``check_checkpoint``, applied inside each backend's atomic step)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from threadline.errors import CheckpointConflict, UsageError
from threadline.stamps import utcnow
from threadline.store.checks import check_checkpoint_fields
from threadline.store.records import Record


@dataclass(kw_only=True)
class Checkpoint(Record):
    """A compaction result: a summary of everything up to ``covers_up_to``."""

    id: int = 0
    """Assigned by the store, increasing per session."""
    session_id: str
    covers_up_to: int
    """The last seq the summary covers; the view resumes after it."""
    summary: str
    created_at: datetime = field(default_factory=utcnow)
    metadata: dict[str, Any] = field(default_factory=dict)


class _AnyPrevious:
    """The type of ``ANY_PREVIOUS``."""

    def __repr__(self) -> str:
        return "ANY_PREVIOUS"


ANY_PREVIOUS: Final = _AnyPrevious()
"""``add_checkpoint``'s default: add after whatever checkpoint is latest (imports, copies)."""


ExpectPrevious = int | None | _AnyPrevious
"""A checkpoint id, ``None`` for "no checkpoint yet", or ``ANY_PREVIOUS``."""


def new_checkpoint(
    session_id: str, *, covers_up_to: int, summary: str, metadata: dict[str, Any] | None
) -> Checkpoint:
    """The checkpoint to add, stamped once before the first attempt, so that a resend
    after a lost reply is recognised as the checkpoint it already stored."""
    check_checkpoint_fields(summary, metadata)
    return Checkpoint(
        session_id=session_id,
        covers_up_to=covers_up_to,
        summary=summary,
        metadata=copy.deepcopy(metadata or {}),
    )


def check_checkpoint(
    new: Checkpoint, *, last_seq: int, latest: Checkpoint | None, expect_previous: ExpectPrevious
) -> Checkpoint | None:
    """The rule for adding a checkpoint, applied by every backend inside the atomic step
    that writes it, with ``last_seq`` and ``latest`` read in that same step.

    Returns ``latest`` when ``new`` is a resend of it (nothing to write). Otherwise
    ``covers_up_to`` must lie within the session (``UsageError``), and with an
    ``expect_previous`` the latest checkpoint must still be that one and ``new`` must
    cover more than it (``CheckpointConflict``): two compactions that built on the same
    checkpoint write one successor between them, and checkpoints only move forward.
    """
    if latest is not None and (latest.covers_up_to, latest.summary, latest.created_at) == (
        new.covers_up_to,
        new.summary,
        new.created_at,
    ):
        return latest
    if not 0 <= new.covers_up_to <= last_seq:
        raise UsageError(
            f"checkpoint covers_up_to={new.covers_up_to} is outside the session "
            f"(last seq {last_seq})"
        )
    if isinstance(expect_previous, _AnyPrevious):
        return None
    latest_id = latest.id if latest is not None else None
    if latest_id != expect_previous:
        raise CheckpointConflict(
            f"session {new.session_id}: checkpoint {latest_id} appeared after checkpoint "
            f"{expect_previous}, which this one was to follow; not written",
            expected=expect_previous,
            latest=latest_id,
        )
    if latest is not None and new.covers_up_to <= latest.covers_up_to:
        raise CheckpointConflict(
            f"session {new.session_id}: a checkpoint covering up to {new.covers_up_to} "
            f"cannot follow checkpoint {latest_id}, which covers up to {latest.covers_up_to}",
            expected=expect_previous,
            latest=latest_id,
        )
    return None


def numbered_checkpoints(checkpoints: Iterable[Checkpoint]) -> list[dict[str, Any]]:
    """A session's checkpoints (oldest first) as JSON records, each with its ``number``
    within the session (#1 its first, as reports and pages show it) beside its store id."""
    return [{"number": n, **c.to_dict()} for n, c in enumerate(checkpoints, start=1)]
