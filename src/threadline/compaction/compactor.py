"""Run a compaction: plan the cut, summarize incrementally, append a checkpoint.

A compaction never changes stored messages (invariant 1). It appends a
*checkpoint*: a structured snapshot of everything up to a cut point, which the
context builder shows in place of those messages. Each compaction summarizes
only what lies between the previous checkpoint and the new cut, handing the
summarizer the previous snapshot to update, so its cost follows the new
messages, not the history.

Where to cut and whether to compact at all is one decision, shared with the
trigger check and ``threadline context`` (``triggers.plan_compaction``): the
cut sits on a unit boundary, keeps ``min_recent_messages`` and the last user
turns while they fit a share of the budget, and moves inside the turn when
they do not. Every snapshot then carries the session's first request and its
latest one, verbatim and clipped, at the top of Current State, so the task
survives any number of compactions. ``compact_to_fit`` is the guarantee an
agent loop needs (invariant 8): it builds the window and, when that window
would leave stored messages neither in it nor under a checkpoint, compacts
first and builds again.

Two compactions of one session must not run at once, and must never both write
a checkpoint on the same predecessor. Both rest on compare-and-set steps every
backend supplies (``threadline.store.protocol``):

* The *mark* is a record in the session memo (holder, token, start time), taken
  and cleared with ``Session.update_memo``, so of two compactors that find no
  mark exactly one takes it. It goes stale when its holder's pid is dead on this
  host or its lease expires, and another compactor then takes it over. Within
  one process it is also guarded by a real lock, so threads never race. The mark
  saves work; it does not protect the checkpoints.
* The *checkpoint* is written with ``expect_previous`` set to the checkpoint the
  compaction built on: if another compaction wrote a successor meanwhile (it took
  over a mark that looked stale, say), this one's summary is discarded
  (``CheckpointConflict``, reported as ``in_progress``). So each checkpoint has one
  successor, and ``covers_up_to`` only grows along the chain: concurrent
  compactions waste work at most.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Protocol, TypedDict, Unpack

from threadline.compaction.events import CompactionHooks, EventName, Hook, HookError
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.gate import FALLBACK_KEY, GATED, fallback_note
from threadline.compaction.gate import check as check_snapshot
from threadline.compaction.llm import evidence_text
from threadline.compaction.orientation import orientation_metadata
from threadline.compaction.overlay import overlay
from threadline.compaction.pins import (
    earlier_task,
    pin_requests,
    pinned_bullets,
    pinned_words,
    request_metadata,
    requests_to_pin,
)
from threadline.compaction.reconcile import reconcile
from threadline.compaction.snapshot import SKELETON_WORDS, SummaryResult, words
from threadline.compaction.trail import TRAIL_KEY, Trail
from threadline.compaction.triggers import (
    TOKENS_THROUGH_KEY,
    WRITTEN_AT_KEY,
    CompactionPlan,
    TriggerDecision,
    TriggerName,
    plan_compaction,
)
from threadline.context.builder import ContextReport, ContextWindow, build_context
from threadline.context.policy import ContextPolicy
from threadline.errors import CheckpointConflict, CompactionInProgress, ThreadlineError
from threadline.messages import Message
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import format_ts
from threadline.store.locks import LockHolder
from threadline.store.protocol import COMPACTION_MARK_KEY, Session

logger = logging.getLogger(__name__)

MARK_KEY = COMPACTION_MARK_KEY
"""Memo key of the in-progress mark. Keys starting ``threadline.`` are reserved."""
COMPACTION_LEASE = timedelta(minutes=15)
"""A mark older than this is stale even when its holder is alive on another host:
long enough for a chunked LLM summary of a large backlog, short enough that a
crashed machine does not block compaction for long."""
READ_BATCH = 1000

Status = Literal["compacted", "dry_run", "noop", "not_needed", "in_progress", "failed"]


class Summarizer(Protocol):
    """Anything that turns messages (and the previous snapshot) into a snapshot.

    A summarizer that also accepts ``focus: str | None`` (the built-in ones do) is
    given the user's focus text when a compaction has one; others are never passed it.
    """

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = ...
    ) -> SummaryResult: ...


@dataclass
class CompactionResult:
    """What a compaction did, or why it did nothing."""

    session_id: str
    status: Status
    reason: str = ""
    """Why it did nothing, or which trigger started it."""
    checkpoint: Checkpoint | None = None
    summary: SummaryResult | None = None
    previous_checkpoint_id: int | None = None
    covers_from: int | None = None
    """First seq summarized this time (the previous checkpoint's ``covers_up_to + 1``)."""
    covers_up_to: int | None = None
    """The cut: the last seq the new snapshot covers."""
    messages_summarized: int = 0
    messages_kept: int = 0
    """Messages after the cut, left verbatim."""
    duration_ms: float = 0.0
    trigger: TriggerDecision | None = None
    error: str | None = None
    """Set when the compaction failed or another process holds the mark."""
    hook_errors: list[HookError] = field(default_factory=list)
    fallback: dict[str, Any] | None = None
    """Set when a model's snapshot was unusable and the offline one was kept instead: the
    model, why, and what the model's reply cost (``gate.fallback_note``)."""

    @property
    def compacted(self) -> bool:
        return self.status == "compacted"


# -- the mark -------------------------------------------------------------------------

_local_guard = threading.Lock()
_local_active: set[tuple[int, str]] = set()


def _mark_holder(mark: Any) -> LockHolder | None:
    if not isinstance(mark, Mapping):
        return None
    try:
        return LockHolder.from_dict(mark.get("holder"))
    except ValueError:
        return None


def current_mark(session: Session) -> dict[str, Any] | None:
    """The in-progress mark in the session memo, if any (stale or not)."""
    mark = session.get_memo().get(MARK_KEY)
    return dict(mark) if isinstance(mark, Mapping) else None


class _Mark:
    """The in-progress mark of one compaction: taken and released by compare-and-set."""

    def __init__(self, session: Session, *, lease: timedelta) -> None:
        self.session = session
        self.token = uuid.uuid4().hex
        self.holder = LockHolder.current(lease=lease)
        self._key = (id(session.store), session.id)
        self._local = False

    def acquire(self) -> None:
        with _local_guard:
            if self._key in _local_active:
                raise CompactionInProgress(
                    f"session {self.session.id} is already being compacted in this process"
                )
            _local_active.add(self._key)
            self._local = True
        try:
            self.session.update_memo(self._take)
        except BaseException:
            self._release_local()
            raise

    def _take(self, memo: dict[str, Any]) -> dict[str, Any] | None:
        """The memo with our mark, decided on the memo as it is stored right now."""
        existing = memo.get(MARK_KEY)
        if self._ours(existing):
            return None  # a resent swap already stored it
        holder = _mark_holder(existing)
        if holder is not None and not holder.is_stale():
            raise CompactionInProgress(
                f"session {self.session.id} is being compacted by {holder}; "
                "try again when it finishes"
            )
        if holder is not None:
            logger.info("taking over a stale compaction mark of %s", holder)
        memo[MARK_KEY] = {
            "holder": self.holder.to_dict(),
            "token": self.token,
            "started_at": format_ts(self.holder.started_at),
        }
        return memo

    def _drop(self, memo: dict[str, Any]) -> dict[str, Any] | None:
        """The memo without our mark; a mark someone took over is theirs to clear."""
        if not self._ours(memo.get(MARK_KEY)):
            return None
        del memo[MARK_KEY]
        return memo

    def _ours(self, mark: Any) -> bool:
        return isinstance(mark, Mapping) and mark.get("token") == self.token

    def release(self) -> None:
        try:
            self.session.update_memo(self._drop)
        except ThreadlineError as exc:  # the lease makes a leftover mark harmless
            logger.warning("could not clear the compaction mark of %s: %s", self.session.id, exc)
        finally:
            self._release_local()

    def _release_local(self) -> None:
        if self._local:
            with _local_guard:
                _local_active.discard(self._key)
            self._local = False


# -- the compactor ----------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """A retention report (pydantic model, dataclass or mapping) as plain JSON data."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class _PlanOptions(TypedDict, total=False):
    """What ``compact`` passes on to ``plan_compaction``."""

    force: bool
    model: str | None
    context_tokens: int | None
    budget: int | None
    window: ContextReport | None
    keep_recent: int | None
    keep_turns: int | None


class Compactor:
    """Compacts sessions with one summarizer under one policy.

    ``hooks`` maps event names to callables (or lists of them); more can be
    added with ``on``. See ``threadline.compaction.events`` for the signatures.
    Each checkpoint carries an orientation block: the session's own working directory,
    git branch and latest message date, the todo list, the scratchpad index and the
    skills loaded (``threadline.compaction.orientation``).
    """

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        policy: ContextPolicy | None = None,
        hooks: Mapping[EventName, Hook | Sequence[Hook]] | None = None,
        lease: timedelta = COMPACTION_LEASE,
    ) -> None:
        self.summarizer = summarizer
        self.policy = policy or ContextPolicy()
        self.hooks = CompactionHooks()
        self.lease = lease
        for event, value in (hooks or {}).items():
            for hook in value if isinstance(value, Sequence) else [value]:
                self.hooks.on(event, hook)

    def on(self, event: EventName, hook: Hook) -> Hook:
        return self.hooks.on(event, hook)

    # -- planning

    def plan(
        self,
        session: Session,
        *,
        model: str | None = None,
        budget: int | None = None,
        keep_recent: int | None = None,
        keep_turns: int | None = None,
    ) -> CompactionPlan:
        """What a forced compaction would cover now. Reads only the tail back to the cut."""
        return plan_compaction(
            session,
            self.policy,
            model=model,
            budget=budget,
            force=True,
            keep_recent=keep_recent,
            keep_turns=keep_turns,
        )

    # -- running

    def compact(
        self,
        session: Session,
        *,
        force: bool = False,
        dry_run: bool = False,
        model: str | None = None,
        context_tokens: int | None = None,
        budget: int | None = None,
        window: ContextReport | None = None,
        keep_recent: int | None = None,
        keep_turns: int | None = None,
        focus: str | None = None,
    ) -> CompactionResult:
        """Compact now if a trigger fires (always with ``force``).

        ``budget`` is the message budget of the window the session is built for
        (``ContextWindow.budget``; default: the model's window less the reply
        reserve): the tail a compaction keeps must fit ``preserve_share`` of it.
        ``keep_recent`` / ``keep_turns`` override ``min_recent_messages`` /
        ``preserve_user_turns`` for this compaction; ``focus`` asks the
        summarizer to give one subject more room (Claude Code's ``/compact
        <instructions>``). ``dry_run`` summarizes and reports but writes
        nothing: no mark, no checkpoint, no hooks. ``CompactionInProgress``
        means another live process holds the mark, or (``CheckpointConflict``)
        another compaction wrote a checkpoint on the same base first; any other
        failure is logged, fires ``compaction_failed`` and is raised after the
        mark is cleared.
        """
        result, error = self._attempt(
            session,
            force=force,
            dry_run=dry_run,
            model=model,
            context_tokens=context_tokens,
            budget=budget,
            window=window,
            keep_recent=keep_recent,
            keep_turns=keep_turns,
            focus=focus,
        )
        if error is not None:
            raise error
        return result

    def compact_if_needed(
        self,
        session: Session,
        *,
        model: str | None = None,
        context_tokens: int | None = None,
        budget: int | None = None,
        window: ContextReport | None = None,
    ) -> CompactionResult:
        """Check the triggers and compact; never raises (call it after a turn completes).

        ``context_tokens`` is the size of the context last sent to ``model``
        (``ContextWindow.tokens``, or the provider's count), for the
        fraction-of-window trigger; ``window`` is that window's report. A failure
        comes back as ``status="failed"`` with ``error`` set (already logged,
        ``compaction_failed`` already fired); a session another process is
        compacting, or just compacted on the same base, comes back as
        ``in_progress``.
        """
        result, _ = self._attempt(
            session, model=model, context_tokens=context_tokens, budget=budget, window=window
        )
        return result

    def compact_to_fit(
        self,
        session: Session,
        build: Callable[[], ContextWindow],
        *,
        model: str | None = None,
    ) -> tuple[ContextWindow, CompactionResult | None]:
        """Build with ``build`` and, when the window would drop stored messages that no
        checkpoint covers, compact first and build again (invariant 8).

        The compaction keeps a tail that fits ``preserve_share`` of the window's budget,
        so the rebuilt window holds everything since the new checkpoint. Never raises
        for a failed compaction (the window is then sent as built, its report saying
        what it dropped); returns the window and the compaction, if one ran.
        """
        window = build()
        if window.report.dropped_messages <= 0 or not self.policy.auto_summarize:
            return window, None
        result, error = self._attempt(
            session,
            model=model or window.model,
            budget=window.budget,
            window=window.report,
            trigger_only="window",
        )
        if isinstance(error, CheckpointConflict):  # another compaction just wrote one
            rebuilt = build()
            if rebuilt.report.dropped_messages <= 0:
                rebuilt.report.notes.append(
                    "another compaction wrote a checkpoint meanwhile; the window builds on it"
                )
                return rebuilt, result
        if not result.compacted:
            why = result.error or result.reason
            window.report.notes.append(
                f"{window.report.dropped_messages} stored message(s) are neither in this "
                f"window nor summarized: compaction {result.status} ({why})"
            )
            return window, result
        rebuilt = build()
        rebuilt.report.notes.append(
            f"compacted messages {result.covers_from}-{result.covers_up_to} first, so no stored "
            "message falls out unsummarized"
        )
        return rebuilt, result

    def _attempt(
        self,
        session: Session,
        *,
        dry_run: bool = False,
        focus: str | None = None,
        trigger_only: TriggerName | None = None,
        **options: Unpack[_PlanOptions],
    ) -> tuple[CompactionResult, Exception | None]:
        force = options.get("force", False)
        started = time.perf_counter()
        result = CompactionResult(session_id=session.id, status="noop")
        mark: _Mark | None = None
        try:
            session.refresh()
            plan = plan_compaction(session, self.policy, **options)
            result.trigger = plan.decision
            if not force:
                fired = plan.decision.fire and (
                    trigger_only is None or plan.decision.reason == trigger_only
                )
                if not fired:
                    result.status = "not_needed"
                    result.reason = plan.decision.note or "no trigger fired"
                    return result, None
            if not dry_run and plan.has_work:
                mark = _Mark(session, lease=self.lease)
                mark.acquire()
            self._run(session, result, plan, dry_run=dry_run, focus=focus)
        except CompactionInProgress as exc:
            result.status = "in_progress"
            result.error = str(exc)
            return result, exc
        except Exception as exc:
            result.status = "failed"
            result.error = f"{type(exc).__name__}: {exc}"
            logger.warning("compaction of session %s failed: %s", session.id, exc, exc_info=exc)
            if mark is not None:
                mark.release()
                mark = None
            if not dry_run:
                result.hook_errors += self.hooks.emit("compaction_failed", session, exc, result)
            return result, exc
        finally:
            if mark is not None:
                mark.release()
            result.duration_ms = (time.perf_counter() - started) * 1000
        if result.checkpoint is not None:
            result.hook_errors += self.hooks.emit(
                "context_compacted", session, result.checkpoint, result
            )
        return result, None

    # -- the work

    def _run(
        self,
        session: Session,
        result: CompactionResult,
        plan: CompactionPlan,
        *,
        dry_run: bool,
        focus: str | None,
    ) -> None:
        total_tokens = session.total_tokens
        written_at = session.last_seq
        previous, cut = plan.checkpoint, plan.cut
        floor = plan.floor
        result.previous_checkpoint_id = previous.id if previous else None
        result.messages_kept = len(cut.kept) if cut is not None else 0
        if cut is None or cut.seq is None or not plan.has_work:
            result.status = "noop"
            result.reason = plan.nothing_reason(self.policy)
            return
        if not plan.forced and plan.decision.reason:
            result.reason = f"trigger: {plan.decision.note}"
        messages = _read_range(session, floor, cut.seq)
        result.covers_from = floor + 1
        result.covers_up_to = cut.seq
        result.messages_summarized = len(messages)
        if not dry_run:
            result.hook_errors += self.hooks.emit("before_compaction", session, messages)
        trail = _trail(session, previous, floor, messages)
        first, latest = requests_to_pin(
            session,
            previous,
            messages,
            cut.kept,
            max_words=self.policy.summary_max_words,
            found=(trail.first_request, trail.latest_request),
        )
        task = earlier_task(previous, max_words=self.policy.summary_max_words)
        pinned = pinned_bullets(first, latest, task)
        budget_words = max(SKELETON_WORDS, self.policy.summary_max_words - pinned_words(pinned))
        began = time.perf_counter()
        extra: dict[str, Any] = {"focus": focus} if focus else {}
        messages = _in_directory(messages, trail.tracker.root)
        summary = self.summarizer.summarize(
            messages,
            previous=previous.summary if previous else None,
            max_words=budget_words,
            **extra,
        )
        previous_text = previous.summary if previous else None
        later = trail.copy().extend(reversed(cut.kept))

        def made_true(s: SummaryResult) -> SummaryResult:
            return reconcile(
                s,
                trail,
                later=later,
                max_words=budget_words,
                max_values=self.policy.summary_max_values,
                previous_text=previous_text,
                previous_seq=previous.covers_up_to if previous else None,
            )

        fallback: dict[str, Any] | None = None
        if summary.summarizer in GATED:  # a model wrote it: kept unless unusable
            offline_summarizer = getattr(self.summarizer, "extractive", None)
            offline = made_true(
                (offline_summarizer or ExtractiveSummarizer()).summarize(
                    messages, previous=previous_text, max_words=budget_words, focus=focus
                )
            )
            verdict = check_snapshot(  # the kept tail is evidence too
                summary, later, evidence_text([*messages, *cut.kept], previous_text)
            )
            if verdict.passed:
                summary = overlay(
                    made_true(summary), summary.snapshot, offline, max_words=budget_words
                )
            else:
                fallback = fallback_note(summary, verdict)
                logger.info(
                    "compaction of %s keeps the offline snapshot: %s",
                    session.id,
                    "; ".join(verdict.reasons()),
                )
                summary = offline
        else:
            summary = made_true(summary)
        result.fallback = fallback
        summary = pin_requests(summary, pinned, max_words=self.policy.summary_max_words)
        summarize_ms = (time.perf_counter() - began) * 1000
        result.summary = summary
        if dry_run:
            result.status = "dry_run"
            return
        metadata: dict[str, Any] = {
            "summarizer": summary.summarizer,
            "input_tokens": summary.input_tokens,
            "output_tokens": summary.output_tokens,
            "words": words(summary.text),
            "retention": _jsonable(summary.retention),
            "messages_summarized": len(messages),
            "covers_from": floor + 1,
            "previous_checkpoint": result.previous_checkpoint_id,
            "duration_ms": round(summarize_ms, 3),
            TOKENS_THROUGH_KEY: max(0, total_tokens - cut.kept_tokens),
            WRITTEN_AT_KEY: written_at,
            "kept_messages": len(cut.kept),
            "kept_tokens": cut.kept_tokens,
            "cut_rule": cut.rule,
            "trigger": "forced" if plan.forced else plan.decision.reason,
            **request_metadata(first, latest, task),
            TRAIL_KEY: trail.to_metadata(),
            **orientation_metadata(
                session, later, cut.kept[0] if cut.kept else (messages[-1] if messages else None)
            ),
        }
        if fallback is not None:
            metadata[FALLBACK_KEY] = fallback
        if focus:
            metadata["focus"] = focus
        model_name = getattr(self.summarizer, "model_name", None)
        if isinstance(model_name, str):
            metadata["summarizer_model"] = model_name
        # written only on the checkpoint it built on: CheckpointConflict if another
        # compaction got there first (the caller reports it as in_progress)
        result.checkpoint = session.add_checkpoint(
            covers_up_to=cut.seq,
            summary=summary.text,
            metadata=metadata,
            expect_previous=result.previous_checkpoint_id,
        )
        result.status = "compacted"


def prepare_context(
    session: Session,
    compactor: Compactor,
    *,
    model: str | None = None,
    system_prompt: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    policy: ContextPolicy | None = None,
) -> ContextWindow:
    """The window for the next model call, compacting first when it would drop history.

    ``build_context`` is a pure view and reports what it dropped; this is the call
    for a loop of your own that must never send a window leaving stored messages
    neither in it nor under a checkpoint (invariant 8). ``policy`` defaults to the
    compactor's.
    """
    policy = policy or compactor.policy
    window, _ = compactor.compact_to_fit(
        session,
        lambda: build_context(
            session, model=model, system_prompt=system_prompt, tools=tools, policy=policy
        ),
        model=model,
    )
    return window


def _read_range(session: Session, floor: int, cut: int) -> list[Message]:
    """Messages with ``floor < seq <= cut``, oldest first, in pages."""
    return list(_iter_range(session, floor, cut))


def _iter_range(session: Session, floor: int, cut: int) -> Iterator[Message]:
    after = floor
    while after < cut:
        page = session.read_messages(after_seq=after, limit=min(READ_BATCH, cut - after))
        if not page:
            break
        for m in page:
            if m.seq is not None and m.seq <= cut:
                yield m
        after = page[-1].seq or cut


def _in_directory(messages: list[Message], root: str | None) -> list[Message]:
    """``messages`` with the first saying where the session works when it does not say
    it (an importer stamps the directory only where it changes): a summary of a later
    range then shows paths as the earlier one did, relative to it."""
    if not messages or not root or "cwd" in messages[0].metadata:
        return messages
    first = messages[0]
    return [first.model_copy(update={"metadata": {**first.metadata, "cwd": root}}), *messages[1:]]


def _trail(
    session: Session, previous: Checkpoint | None, floor: int, messages: Sequence[Message]
) -> Trail:
    """The trail of everything up to the new cut: the previous checkpoint's, extended by
    ``messages``; read from the store, once, up to ``floor`` when that checkpoint carries
    none (another tool wrote it, or an older threadline)."""
    trail = Trail.from_metadata(previous.metadata.get(TRAIL_KEY)) if previous else None
    if trail is None or trail.through > floor:
        trail = Trail()
    if trail.through < floor:
        trail.extend(_iter_range(session, trail.through, floor))
    return trail.extend(messages)
