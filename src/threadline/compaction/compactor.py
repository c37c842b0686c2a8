"""Run a compaction: pick the cut, summarize incrementally, append a checkpoint.

A compaction never changes stored messages (invariant 1). It appends a
*checkpoint*: a structured snapshot of everything up to a cut point, which the
context builder shows in place of those messages. Each compaction summarizes
only what lies between the previous checkpoint and the new cut, handing the
summarizer the previous snapshot to update, so its cost follows the new
messages, not the history.

The cut sits on a unit boundary (a tool call and its results stay together,
invariant 2) and keeps at least ``min_recent_messages`` messages and the last
``preserve_user_turns`` user turns verbatim. Finding it reads the tail
backwards only as far as those rules need.

Two processes must not compact one session at once. The Store protocol has no
atomic compare-and-set that every backend shares, so the mark is a record in
the session memo (holder, token, start time), written and then read back; it
goes stale when its holder's pid is dead on this host or its lease expires,
and another compactor then takes it over. Within one process the mark is also
guarded by a real lock, so threads never race. Between processes a narrow
window remains (two compactors read "no mark" before either writes); a second
check just before the checkpoint is written (the mark is still ours and no
other checkpoint appeared meanwhile) turns that race into wasted work, not a
second checkpoint on a stale base. An additive ``Store.try_mark`` would close
it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Protocol

from threadline.compaction.events import CompactionHooks, EventName, Hook, HookError
from threadline.compaction.snapshot import SummaryResult, words
from threadline.compaction.triggers import TOKENS_THROUGH_KEY, TriggerDecision, check_triggers
from threadline.context.policy import ContextPolicy
from threadline.errors import CompactionInProgress, ThreadlineError
from threadline.messages import Message
from threadline.store.base import Checkpoint, LockHolder, Session, format_ts, primary_tokens

logger = logging.getLogger(__name__)

MARK_KEY = "threadline.compaction"
"""Memo key of the in-progress mark. Keys starting ``threadline.`` are reserved."""
RESERVED_MEMO_PREFIX = "threadline."
COMPACTION_LEASE = timedelta(minutes=15)
"""A mark older than this is stale even when its holder is alive on another host:
long enough for a chunked LLM summary of a large backlog, short enough that a
crashed machine does not block compaction for long."""
TAIL_FIRST_PAGE = 32
TAIL_MAX_PAGE = 1024
READ_BATCH = 1000

Status = Literal["compacted", "dry_run", "noop", "not_needed", "in_progress", "failed"]


class Summarizer(Protocol):
    """Anything that turns messages (and the previous snapshot) into a snapshot."""

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

    @property
    def compacted(self) -> bool:
        return self.status == "compacted"


@dataclass(frozen=True, slots=True)
class Cut:
    """Where to cut, and what stays after it."""

    seq: int | None
    """Last seq to summarize; None when nothing lies between the floor and the kept tail."""
    kept: list[Message]
    """Newest first: the messages after the cut."""


# -- choosing the cut --------------------------------------------------------------


def iter_tail(session: Session, *, floor: int, last_seq: int) -> Iterator[Message]:
    """Messages with ``floor < seq <= last_seq``, newest first, read in growing pages."""
    before = last_seq + 1
    page = TAIL_FIRST_PAGE
    while before - 1 > floor:
        batch = session.tail(page, before_seq=before)
        for m in batch:
            if m.seq is None or m.seq <= floor:
                return
            yield m
        if len(batch) < page:
            return
        before = batch[-1].seq or floor
        page = min(page * 2, TAIL_MAX_PAGE)


def in_tool_loop(session: Session) -> bool:
    """Whether the newest message is a tool call or result: the model has not answered yet.

    Triggers are checked after a turn completes; this one-message read keeps a
    caller that checks mid-loop from summarizing results the model is about to read.
    """
    newest = session.tail(1)
    return bool(newest) and (newest[0].role == "tool" or bool(newest[0].tool_calls))


def is_user_turn(m: Message) -> bool:
    """A message the user said: starts a user turn (synthetic notices do not)."""
    return m.role == "user" and not m.synthetic and not m.summary


def choose_cut(newest_first: Iterator[Message], *, min_recent: int, user_turns: int) -> Cut:
    """The latest cut that keeps ``min_recent`` messages and ``user_turns`` user turns.

    The kept part must begin a unit: its oldest message is never a tool result,
    so a call and its results are summarized together or kept together.
    Consumes the iterator only as far as needed.
    """
    kept: list[Message] = []
    users = 0
    for m in newest_first:
        oldest = kept[-1] if kept else None
        if (
            len(kept) >= min_recent
            and users >= user_turns
            and (oldest is None or oldest.role != "tool")
        ):
            return Cut(seq=m.seq, kept=kept)
        kept.append(m)
        users += is_user_turn(m)
    return Cut(seq=None, kept=kept)


# -- the mark -------------------------------------------------------------------------

_local_guard = threading.Lock()
_local_active: set[tuple[int, str]] = set()


def _mark_holder(mark: Any) -> LockHolder | None:
    if not isinstance(mark, Mapping):
        return None
    try:
        return LockHolder.model_validate(mark.get("holder"))
    except ValueError:
        return None


def current_mark(session: Session) -> dict[str, Any] | None:
    """The in-progress mark in the session memo, if any (stale or not)."""
    mark = session.get_memo().get(MARK_KEY)
    return dict(mark) if isinstance(mark, Mapping) else None


class _Mark:
    """The in-progress mark of one compaction: taken, checked, released."""

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
            memo = self.session.get_memo()
            existing = memo.get(MARK_KEY)
            holder = _mark_holder(existing)
            if holder is not None and not holder.is_stale():
                raise CompactionInProgress(
                    f"session {self.session.id} is being compacted by {holder}; "
                    "try again when it finishes"
                )
            if holder is not None:
                logger.info("taking over a stale compaction mark of %s", holder)
            memo[MARK_KEY] = {
                "holder": self.holder.model_dump(mode="json"),
                "token": self.token,
                "started_at": format_ts(self.holder.started_at),
            }
            self.session.set_memo(memo)
            self.check()
        except BaseException:
            self._release_local()
            raise

    def check(self) -> None:
        """Raise if the mark in the store is no longer ours (another process took it)."""
        mark = current_mark(self.session)
        if mark is None or mark.get("token") != self.token:
            holder = _mark_holder(mark)
            who = str(holder) if holder else "another process"
            raise CompactionInProgress(
                f"session {self.session.id}: {who} took over the compaction mark"
            )

    def release(self) -> None:
        try:
            memo = self.session.get_memo()
            mark = memo.get(MARK_KEY)
            if isinstance(mark, Mapping) and mark.get("token") == self.token:
                del memo[MARK_KEY]
                self.session.set_memo(memo)
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


class Compactor:
    """Compacts sessions with one summarizer under one policy.

    ``hooks`` maps event names to callables (or lists of them); more can be
    added with ``on``. See ``threadline.compaction.events`` for the signatures.
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

    def plan(self, session: Session) -> tuple[Checkpoint | None, Cut]:
        """The latest checkpoint and the cut a compaction would make now. Reads only the tail."""
        checkpoint = session.latest_checkpoint()
        floor = checkpoint.covers_up_to if checkpoint else 0
        cut = choose_cut(
            iter_tail(session, floor=floor, last_seq=session.last_seq),
            min_recent=self.policy.min_recent_messages,
            user_turns=self.policy.preserve_user_turns,
        )
        return checkpoint, cut

    # -- running

    def compact(
        self,
        session: Session,
        *,
        force: bool = False,
        dry_run: bool = False,
        model: str | None = None,
        context_tokens: int | None = None,
    ) -> CompactionResult:
        """Compact now if a trigger fires and no tool loop is open (always with ``force``).

        ``dry_run`` summarizes and reports but writes nothing: no mark, no
        checkpoint, no hooks. ``CompactionInProgress`` means another live
        process holds the mark; any other failure is logged, fires
        ``compaction_failed`` and is raised after the mark is cleared.
        """
        result, error = self._attempt(
            session, force=force, dry_run=dry_run, model=model, context_tokens=context_tokens
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
    ) -> CompactionResult:
        """Check the triggers and compact; never raises (call it after a turn completes).

        ``context_tokens`` is the size of the context last sent to ``model``
        (``ContextWindow.tokens``), for the fraction-of-window trigger. A failure
        comes back as ``status="failed"`` with ``error`` set (already logged,
        ``compaction_failed`` already fired); a session another process is
        compacting comes back as ``in_progress``.
        """
        result, _ = self._attempt(session, model=model, context_tokens=context_tokens)
        return result

    def _attempt(
        self,
        session: Session,
        *,
        force: bool = False,
        dry_run: bool = False,
        model: str | None = None,
        context_tokens: int | None = None,
    ) -> tuple[CompactionResult, Exception | None]:
        started = time.perf_counter()
        result = CompactionResult(session_id=session.id, status="noop")
        mark: _Mark | None = None
        try:
            session.refresh()
            if not force:
                decision = check_triggers(
                    session, self.policy, model=model, context_tokens=context_tokens
                )
                result.trigger = decision
                if not decision.fire:
                    result.status = "not_needed"
                    result.reason = decision.note or "no trigger fired"
                    return result, None
                if in_tool_loop(session):
                    result.status = "not_needed"
                    result.reason = (
                        f"{decision.note}, but a tool loop is in progress (the newest message "
                        "is a tool call or result); compaction waits for the turn to complete"
                    )
                    return result, None
            if not dry_run:
                mark = _Mark(session, lease=self.lease)
                mark.acquire()
            self._run(session, result, mark=mark, dry_run=dry_run)
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
        self, session: Session, result: CompactionResult, *, mark: _Mark | None, dry_run: bool
    ) -> None:
        total_tokens = session.total_tokens
        previous, cut = self.plan(session)
        floor = previous.covers_up_to if previous else 0
        result.previous_checkpoint_id = previous.id if previous else None
        result.messages_kept = len(cut.kept)
        if cut.seq is None or cut.seq <= floor:
            result.status = "noop"
            result.reason = (
                f"nothing to summarize: the {len(cut.kept)} message(s) since "
                f"{'checkpoint ' + str(previous.id) if previous else 'the start'} are all kept "
                f"(min_recent_messages={self.policy.min_recent_messages}, "
                f"preserve_user_turns={self.policy.preserve_user_turns})"
            )
            return
        if result.trigger is not None and result.trigger.reason:
            result.reason = f"trigger: {result.trigger.note}"
        messages = _read_range(session, floor, cut.seq)
        result.covers_from = floor + 1
        result.covers_up_to = cut.seq
        result.messages_summarized = len(messages)
        if not dry_run:
            result.hook_errors += self.hooks.emit("before_compaction", session, messages)
        began = time.perf_counter()
        summary = self.summarizer.summarize(
            messages,
            previous=previous.summary if previous else None,
            max_words=self.policy.summary_max_words,
        )
        summarize_ms = (time.perf_counter() - began) * 1000
        result.summary = summary
        if dry_run:
            result.status = "dry_run"
            return
        assert mark is not None
        mark.check()
        latest = session.latest_checkpoint()
        if (latest.id if latest else None) != result.previous_checkpoint_id:
            raise CompactionInProgress(
                f"session {session.id}: checkpoint {latest.id if latest else None} appeared "
                "while this compaction ran; its summary is discarded"
            )
        kept_tokens = sum(primary_tokens(m) for m in cut.kept)
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
            TOKENS_THROUGH_KEY: max(0, total_tokens - kept_tokens),
            "trigger": result.trigger.reason if result.trigger else "forced",
        }
        model_name = getattr(self.summarizer, "model_name", None)
        if isinstance(model_name, str):
            metadata["summarizer_model"] = model_name
        result.checkpoint = session.add_checkpoint(
            covers_up_to=cut.seq, summary=summary.text, metadata=metadata
        )
        result.status = "compacted"


def _read_range(session: Session, floor: int, cut: int) -> list[Message]:
    """Messages with ``floor < seq <= cut``, oldest first, in pages."""
    out: list[Message] = []
    after = floor
    while after < cut:
        page = session.store.read_messages(
            session.id, after_seq=after, limit=min(READ_BATCH, cut - after)
        )
        if not page:
            break
        for m in page:
            if m.seq is not None and m.seq <= cut:
                out.append(m)
        after = page[-1].seq or cut
    return out
