"""When to compact and what a compaction would cover: one decision, shared.

The reference CLI compacts when N messages have arrived since the last
summary or the conversation passes K tokens; the agent server compacts when
the context uses 80% of the model's window. threadline checks all three, plus
a fourth that the agent loop raises itself: the next window would leave
stored messages neither in the window nor under a checkpoint (``window``,
invariant 8).

A threshold alone is not a decision. ``plan_compaction`` is the one function
the trigger check, the compactor and ``threadline context`` share: it measures
the triggers, and when one is over its threshold it also finds the cut (the
last seq a compaction would summarize). A trigger "fires" only when that cut
lies past the latest checkpoint, so the report never says "fires now" while
the compactor would say "nothing to do".

The cut sits on a unit boundary (a tool call and its results stay together,
also when a result was logged after a later message) and keeps the newest
whole units that fit ``preserve_share`` of the budget (at most
``preserve_max_tokens``): the last ``preserve_user_turns`` turns when they fit,
and as much more recent verbatim work as the share holds. When the current turn
alone is larger (one request followed by hundreds of tool steps, the commonest
shape of a coding-agent run) the cut moves inside the turn and still fills the
share; only when even ``min_recent_messages`` exceed it are those kept anyway.
A caller that passes ``keep_recent`` / ``keep_turns`` asks for that tail
instead: the last turns while they fit, else ``keep_recent`` messages.

Measuring is cheap: the session's info, the latest checkpoint and, only when
a threshold is reached, the tail back to the cut (bounded by the share of the
budget, never the whole history). "Messages since the last checkpoint" counts
messages appended since that checkpoint was written (``written_at_seq`` in its
metadata), so the tail a compaction keeps does not make the trigger fire again
at once. The token trigger counts the tokens not covered by the checkpoint:
once a long session passes ``max_tokens_before_summary`` its total never falls
again (history is append-only), so a total-based trigger would fire forever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from threadline.catalog import lookup
from threadline.context.builder import ContextReport, window_cost
from threadline.context.policy import ContextPolicy
from threadline.messages import Message, group_units
from threadline.store.checkpoints import Checkpoint
from threadline.store.encoding import primary_tokens
from threadline.store.protocol import Session
from threadline.tokens import counter_for

TriggerName = Literal["messages", "tokens", "context", "window"]

TOKENS_THROUGH_KEY = "tokens_through"
"""Checkpoint metadata: the session's cumulative tokens through ``covers_up_to``."""
WRITTEN_AT_KEY = "written_at_seq"
"""Checkpoint metadata: the session's last seq when the checkpoint was written."""
MIN_MESSAGES_MARGIN = 4
"""No threshold trigger fires before ``min_recent_messages + MIN_MESSAGES_MARGIN`` new
messages (the reference CLI's rule): below that, a compaction would summarize next to nothing."""
TRIGGER_ORDER: tuple[TriggerName, ...] = ("window", "context", "tokens", "messages")
"""Tie-break when several triggers are over their thresholds by the same share: the
most urgent first (a nearly full window beats a long but roomy session)."""
TAIL_FIRST_PAGE = 32
TAIL_MAX_PAGE = 1024

CutRule = Literal["turns", "units", "recent", "none"]


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
    """Whether to compact now, which trigger said so, every trigger's progress, and the range
    a compaction would cover."""

    fire: bool
    reason: TriggerName | None
    """The trigger that fired: the one furthest past its threshold."""
    progress: list[TriggerProgress] = field(default_factory=list)
    messages_since_checkpoint: int = 0
    minimum_messages: int = 0
    """Messages since the checkpoint needed before a threshold trigger may fire."""
    auto_summarize: bool = True
    note: str = ""
    """What fired, or why nothing fired although a threshold was reached, in words."""
    covers_from: int | None = None
    """First seq a compaction now would summarize (None: the cut was not computed, or
    there is nothing to summarize)."""
    covers_up_to: int | None = None
    kept_messages: int | None = None
    """Messages after the cut, left verbatim."""
    kept_tokens: int | None = None

    def get(self, name: TriggerName) -> TriggerProgress | None:
        return next((p for p in self.progress if p.name == name), None)


def tokens_since_checkpoint(session: Session, checkpoint: Checkpoint | None) -> int:
    """Tokens stored after the checkpoint's cut, from the session total and its record.

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
    """Messages appended since the checkpoint was written (since its cut, for checkpoints
    that do not say when they were written)."""
    if checkpoint is None:
        return session.last_seq
    written = checkpoint.metadata.get(WRITTEN_AT_KEY)
    if not isinstance(written, int) or isinstance(written, bool) or written < 0:
        written = checkpoint.covers_up_to
    return max(0, session.last_seq - max(written, checkpoint.covers_up_to))


def window_size(model: str | None, policy: ContextPolicy) -> int:
    """The context window the fraction trigger measures against."""
    return policy.context_limit or lookup(model or None).context_window


def default_budget(model: str | None, policy: ContextPolicy) -> int:
    """The budget when no built window says it: the window less the reply reserve (the
    system prompt and tools are unknown here; a caller that built a window passes its own)."""
    return max(1, window_size(model, policy) - policy.response_reserve)


# -- the cut ----------------------------------------------------------------------------


def iter_tail(session: Session, *, floor: int, last_seq: int) -> Iterator[Message]:
    """Messages with ``floor < seq <= last_seq``, newest first, read in growing pages."""
    before = last_seq + 1
    page = TAIL_FIRST_PAGE
    while before - 1 > floor:
        size = min(page, before - 1 - floor)  # seqs run without gaps: none below the floor
        batch = session.tail(size, before_seq=before)
        for m in batch:
            if m.seq is None or m.seq <= floor:
                return
            yield m
        if len(batch) < size:
            return
        before = batch[-1].seq or floor
        page = min(page * 2, TAIL_MAX_PAGE)


def is_user_turn(m: Message) -> bool:
    """A message the user said: starts a user turn (synthetic notices do not)."""
    return m.role == "user" and not m.synthetic and not m.summary


@dataclass(frozen=True, slots=True)
class Cut:
    """Where to cut, and what stays after it."""

    seq: int | None
    """Last seq to summarize; None when nothing lies between the floor and the kept tail."""
    kept: list[Message]
    """Newest first: the messages after the cut."""
    kept_tokens: int = 0
    rule: CutRule = "none"
    """``turns``: the kept part begins a user turn; ``units``: it fills the share from
    inside a turn; ``recent``: even ``min_recent_messages`` exceed the share, and are
    kept; ``none``: nothing to summarize."""


def _read_tail(
    newest_first: Iterator[Message],
    *,
    min_recent: int,
    user_turns: int,
    max_kept_tokens: int | None,
    fill: bool,
    cost: Callable[[Message], int],
) -> tuple[list[Message], list[int], bool]:
    """The messages a cut is chosen among, newest first, their costs, and whether the floor
    was reached.

    Reading stops, one message past the kept part (the message a cut there would
    summarize last), at the first boundary that settles the choice: past the share,
    or (keeping turns) with enough turns, and only where every result read has met its
    call, so a result logged after a later message is never kept without it.
    """
    msgs: list[Message] = []
    costs: list[int] = []
    tokens = users = 0
    unmet: set[str] = set()
    """Ids of results read whose call is not read yet (duplicates included: one call
    meets them all)."""
    for m in newest_first:
        oldest = msgs[-1] if msgs else None
        if (
            oldest is not None
            and oldest.role != "tool"
            and not unmet
            and len(msgs) >= min_recent
            and (
                (max_kept_tokens is not None and tokens > max_kept_tokens)
                or (not fill and users >= user_turns)
            )
        ):
            msgs.append(m)
            costs.append(cost(m))
            return msgs, costs, False
        msgs.append(m)
        costs.append(cost(m))
        tokens += costs[-1]
        users += is_user_turn(m)
        if m.role == "tool" and m.tool_call_id:
            unmet.add(m.tool_call_id)
        unmet.difference_update(call.id for call in m.tool_calls)
    return msgs, costs, True


def _legal_cuts(msgs: list[Message], exhausted: bool) -> list[bool]:
    """``legal[k]``: keeping ``msgs[:k]`` (newest first) splits no unit as the view groups
    them (late results included) and keeps no tool result as its oldest message."""
    n = len(msgs)
    units, _ = group_units(reversed(msgs))
    index = {id(m): i for i, m in enumerate(msgs)}
    legal = [True] * (n + 1)
    for k in range(1, n + 1):
        legal[k] = msgs[k - 1].role != "tool"
    if not exhausted:
        legal[n] = False  # msgs[-1] is the message the cut would summarize last
    for unit in units:
        at = [index[id(m)] for m in unit.messages if id(m) in index]
        if len(at) > 1:
            for k in range(min(at) + 1, max(at) + 1):
                legal[k] = False  # the unit would straddle the cut
    return legal


def choose_cut(
    newest_first: Iterator[Message],
    *,
    min_recent: int,
    user_turns: int,
    max_kept_tokens: int | None = None,
    fill: bool = True,
    cost: Callable[[Message], int] = primary_tokens,
) -> Cut:
    """The cut, on a unit boundary, keeping at least ``min_recent`` messages.

    With ``fill`` (and a ``max_kept_tokens`` share) the kept part is the newest whole
    units that fit the share, which always holds the last ``user_turns`` turns when they
    fit. Without it (a caller that asked for an exact tail), the last ``user_turns``
    turns are kept while they fit, else the newest whole turns that fit. Either way,
    when even ``min_recent`` messages do not fit, they are kept anyway (``recent``). A
    tool result is never the oldest message kept, and no call is summarized while its
    result (stored after a later message, say) is kept. Consumes the iterator only as
    far as needed.

    ``cost`` measures the tail against the share: the builder's count, so that what a
    compaction keeps is what a window shows whole. ``Cut.kept_tokens`` is always the
    stored count (``primary_tokens``), which the session's totals add up.
    """
    if min_recent <= 0 and user_turns <= 0 and not (fill and max_kept_tokens is not None):
        first = next(newest_first, None)
        if first is None:
            return Cut(seq=None, kept=[], rule="none")
        return Cut(seq=first.seq, kept=[], rule="recent")
    msgs, costs, exhausted = _read_tail(
        newest_first,
        min_recent=min_recent,
        user_turns=user_turns,
        max_kept_tokens=max_kept_tokens,
        fill=fill and max_kept_tokens is not None,
        cost=cost,
    )
    n = len(msgs)
    sums, sizes = [0], [0]
    for m, size in zip(msgs, costs, strict=True):
        sums.append(sums[-1] + primary_tokens(m))
        sizes.append(sizes[-1] + size)
    if exhausted and (max_kept_tokens is None or sizes[n] <= max_kept_tokens):
        return Cut(seq=None, kept=msgs, kept_tokens=sums[n], rule="none")
    legal = _legal_cuts(msgs, exhausted)

    def cut(k: int, rule: CutRule) -> Cut:
        if k == n:
            return Cut(seq=None, kept=msgs, kept_tokens=sums[n], rule="none")
        return Cut(seq=msgs[k].seq, kept=msgs[:k], kept_tokens=sums[k], rule=rule)

    def fits(k: int) -> bool:
        return max_kept_tokens is None or sizes[k] <= max_kept_tokens

    floor = max(1, min_recent)
    candidates = [k for k in range(floor, n + 1) if legal[k]]
    if min_recent <= 0 and user_turns <= 0 and fill:
        candidates.insert(0, 0)  # asked to keep nothing: a cut too, when nothing else fits
    if fill and max_kept_tokens is not None:
        fitting = [k for k in candidates if fits(k)]
        if fitting:
            k = fitting[-1]
            return cut(k, "turns" if k and is_user_turn(msgs[k - 1]) else "units")
    else:
        users = 0
        turns: int | None = None
        counted = 0
        for k in candidates:
            users += sum(is_user_turn(m) for m in msgs[counted:k])
            counted = k
            if not fits(k):
                break
            if users >= user_turns:
                return cut(k, "turns")
            if k and is_user_turn(msgs[k - 1]):
                turns = k
        if turns is not None:
            return cut(turns, "turns")
    recent = next((k for k in candidates if k), None)
    if recent is not None:
        return cut(recent, "recent")
    return Cut(seq=None, kept=msgs, kept_tokens=sums[n], rule="none")


# -- the one decision ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would do now, and whether the triggers say to do it."""

    decision: TriggerDecision
    checkpoint: Checkpoint | None
    """The latest checkpoint: the floor the compaction builds on."""
    cut: Cut | None
    """None when no threshold was reached and the cut was not needed."""
    budget: int
    max_kept_tokens: int
    forced: bool = False
    filled: bool = False
    """The kept tail fills the share (``preserve_fill``, no keep override)."""

    @property
    def floor(self) -> int:
        return self.checkpoint.covers_up_to if self.checkpoint else 0

    @property
    def has_work(self) -> bool:
        return self.cut is not None and self.cut.seq is not None and self.cut.seq > self.floor

    def nothing_reason(self, policy: ContextPolicy) -> str:
        where = f"the last checkpoint (seq {self.floor})" if self.checkpoint else "the start"
        kept = len(self.cut.kept) if self.cut is not None else 0
        if self.filled:
            return (
                f"nothing to summarize: the {kept} message(s) since {where} are all kept "
                f"(they fit the {self.max_kept_tokens:,} tokens a compaction keeps verbatim: "
                "preserve_share, preserve_max_tokens)"
            )
        return (
            f"nothing to summarize: the {kept} message(s) since {where} are all kept "
            f"(min_recent_messages={policy.min_recent_messages}, "
            f"preserve_user_turns={policy.preserve_user_turns}, and they fit the "
            f"{self.max_kept_tokens:,} tokens a compaction may keep)"
        )


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


def needed_context_tokens(
    session: Session,
    checkpoint: Checkpoint | None,
    context_tokens: int | None,
    window: ContextReport | None,
    model: str | None,
) -> int | None:
    """The context the session needs with its newest checkpoint.

    A ``stable`` window may still show an older checkpoint (it adopts the newest only
    when it must re-trim), so its size can stay high although a fresh summary is ready;
    the fraction trigger measures what the window would be with that summary.
    """
    if context_tokens is None or window is None or checkpoint is None:
        return context_tokens
    if window.checkpoint_id == checkpoint.id:
        return context_tokens
    shown = sum(s.tokens for s in window.sections if s.name in ("summary", "history"))
    summary = counter_for(model or session.model).count_text(checkpoint.summary)
    needed = context_tokens - shown + summary + tokens_since_checkpoint(session, checkpoint)
    return max(0, min(context_tokens, needed))


def plan_compaction(
    session: Session,
    policy: ContextPolicy,
    *,
    model: str | None = None,
    budget: int | None = None,
    context_tokens: int | None = None,
    window: ContextReport | None = None,
    force: bool = False,
    keep_recent: int | None = None,
    keep_turns: int | None = None,
    always_cut: bool = False,
    checkpoint: Checkpoint | None = None,
) -> CompactionPlan:
    """Measure the triggers and, when one is reached (or ``force`` / ``always_cut``), find
    the cut. ``window`` is the report of the window about to be sent: its
    ``dropped_messages`` raise the ``window`` trigger, and its size (with ``context_tokens``,
    the provider-reported size when known) feeds the fraction trigger.

    ``session.info`` is used as it is on the handle: call ``session.refresh()`` first if
    another process may have appended. ``checkpoint`` saves the one store read when the
    caller holds the latest checkpoint.
    """
    if checkpoint is None:
        checkpoint = session.latest_checkpoint()
    model = model or session.model
    budget = budget if budget is not None else default_budget(model, policy)
    max_kept = max(1, int(budget * policy.preserve_share))
    if policy.preserve_max_tokens:
        max_kept = min(max_kept, policy.preserve_max_tokens)
    since = messages_since_checkpoint(session, checkpoint)
    minimum = policy.min_recent_messages + MIN_MESSAGES_MARGIN
    if context_tokens is None and window is not None:
        context_tokens = window.total_tokens
    context_value = needed_context_tokens(session, checkpoint, context_tokens, window, model)
    context_threshold = max(1, int(window_size(model, policy) * policy.compact_at_fraction))
    dropped = window.dropped_messages if window is not None else 0

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
            context_value or 0,
            context_threshold,
            allowed=allowed,
            available=context_value is not None,
        ),
    ]
    if window is not None:
        progress.append(_progress("window", dropped, 1, allowed=policy.auto_summarize))
    reached = [p for p in progress if p.fired]
    fill = policy.preserve_fill and keep_recent is None and keep_turns is None
    cut: Cut | None = None
    if force or always_cut or reached:
        floor = checkpoint.covers_up_to if checkpoint else 0
        cut = choose_cut(
            iter_tail(session, floor=floor, last_seq=session.last_seq),
            min_recent=policy.min_recent_messages if keep_recent is None else keep_recent,
            user_turns=policy.preserve_user_turns if keep_turns is None else keep_turns,
            max_kept_tokens=max_kept,
            fill=fill,
            cost=window_cost(counter_for(model)),
        )
    plan = CompactionPlan(
        decision=TriggerDecision(fire=False, reason=None),
        checkpoint=checkpoint,
        cut=cut,
        budget=budget,
        max_kept_tokens=max_kept,
        forced=force,
        filled=fill,
    )
    has_work = plan.has_work
    fire, reason, note = False, None, ""
    if reached and has_work:
        urgent = [p for p in reached if p.name == "window"]  # history about to fall out
        best = (
            urgent[0]
            if urgent
            else max(reached, key=lambda p: (p.percent, -TRIGGER_ORDER.index(p.name)))
        )
        fire, reason = True, best.name
        note = f"{best.name}: {best.value:,} >= {best.threshold:,} ({best.percent:.0f}%)"
        if best.name == "window":
            note = f"window: {best.value:,} stored message(s) would fall out unsummarized"
    elif reached:
        note = f"{reached[0].name} is over its threshold, but {plan.nothing_reason(policy)}"
    elif any(p.reached for p in progress):
        if not policy.auto_summarize:
            note = "a threshold is reached but auto_summarize is off"
        else:
            note = (
                f"a threshold is reached but only {since} messages arrived since the last "
                f"checkpoint; compaction waits for {minimum}"
            )
    decision = TriggerDecision(
        fire=fire,
        reason=reason,
        progress=progress,
        messages_since_checkpoint=since,
        minimum_messages=minimum,
        auto_summarize=policy.auto_summarize,
        note=note,
        covers_from=plan.floor + 1 if has_work else None,
        covers_up_to=cut.seq if has_work and cut is not None else None,
        kept_messages=len(cut.kept) if cut is not None else None,
        kept_tokens=cut.kept_tokens if cut is not None else None,
    )
    return dataclasses.replace(plan, decision=decision)


def check_triggers(
    session: Session,
    policy: ContextPolicy,
    *,
    model: str | None = None,
    context_tokens: int | None = None,
    checkpoint: Checkpoint | None = None,
    budget: int | None = None,
    window: ContextReport | None = None,
) -> TriggerDecision:
    """Decide whether the session should be compacted now (see ``plan_compaction``)."""
    return plan_compaction(
        session,
        policy,
        model=model,
        budget=budget,
        context_tokens=context_tokens,
        window=window,
        checkpoint=checkpoint,
    ).decision
