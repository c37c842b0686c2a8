"""A model's snapshot with the history's evidence laid over it.

When ``gate`` finds a model's snapshot usable, the checkpoint keeps its prose, and
the sections a resumed agent must be able to trust come from the offline snapshot of
the same messages (reconciled against the trail, like every snapshot):

* **Files Modified**: the model's snapshot reconciled (the trail's files, in the model's
  words where it said what changed), then any file the offline snapshot names beside;
* **Key Decisions** and **Current State**: the model's, reconciled (narration, wrappers
  and items closed since are gone);
* **Important Values**: the offline snapshot's unresolved failures first, then the
  values as the model wrote them;
* **Pending Tasks**: the offline snapshot's open items first, then the model's that are
  not among them.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.compaction.reconcile import SHARES, bare, paths_of, same_file
from threadline.compaction.snapshot import Bullet, SectionName, Snapshot, SummaryResult, parse
from threadline.compaction.values import COMMAND_LABEL, bullet_value

FILE_SCORE = 3.0
EXTRA_FILE_SCORE = 2.9
DECISION_SCORE = 2.5
FAILURE_SCORE = 2.8
VALUE_SCORE = 2.4
STATE_SCORE = 9.0
OPEN_ITEM_SCORE = 3.2
TASK_SCORE = 2.2
STEP = 0.01


def _is_failure(text: str) -> bool:
    label, _ = bullet_value(text)
    return label is not None and label.lower() == COMMAND_LABEL


def _add(snapshot: Snapshot, name: SectionName, bullets: Sequence[Bullet], score: float) -> None:
    for i, b in enumerate(bullets):
        snapshot.add(name, b.text, score - i * STEP)


def _listed(text: str, listed: Sequence[str]) -> bool:
    flat = bare(text)
    return bool(flat) and any(flat in t or t in flat for t in listed)


def _named(bullets: Sequence[Bullet]) -> list[str]:
    return [p for b in bullets for p in paths_of(b.text)]


def overlay(
    model: SummaryResult, written: Snapshot, offline: SummaryResult, *, max_words: int
) -> SummaryResult:
    """``model`` (the model's snapshot reconciled) with ``offline``'s evidence laid over it;
    ``written`` is the model's snapshot as it wrote it, whose values are kept as written."""
    ours, theirs = parse(model.text), parse(offline.text)
    out = Snapshot()
    _add(out, "files_modified", ours.files_modified, FILE_SCORE)
    named = _named(ours.files_modified)
    extra = [
        b
        for b in theirs.files_modified
        if any(not any(same_file(p, n) for n in named) for p in paths_of(b.text))
    ]
    _add(out, "files_modified", extra, EXTRA_FILE_SCORE)
    _add(out, "key_decisions", ours.key_decisions, DECISION_SCORE)
    failures = [b for b in theirs.important_values if _is_failure(b.text)]
    _add(out, "important_values", failures, FAILURE_SCORE)
    values = [b for b in written.important_values if not _is_failure(b.text)]
    _add(out, "important_values", values, VALUE_SCORE)
    _add(out, "current_state", ours.current_state, STATE_SCORE)
    _add(out, "pending_tasks", theirs.pending_tasks, OPEN_ITEM_SCORE)
    listed = [bare(b.text) for b in theirs.pending_tasks]
    own = [b for b in ours.pending_tasks if not _listed(b.text, listed)]
    _add(out, "pending_tasks", own, TASK_SCORE)
    return model.rewritten(out.render(max_words, shares=SHARES))


__all__ = ["overlay"]
