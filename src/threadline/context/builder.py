"""build_context(): the message list that fits the model, and a report of why.

The window is ``[system prompt] [checkpoint summary] [recent units]``, with an
optional memory block (facts from long-term memory, ``memories=``) placed right
before the unit that holds the latest request: late in the window, inside a
fixed share of the budget, so memories can change every turn while the prefix
before them (system prompt, summary, older history) stays byte-identical. Its
cost follows the window, not the history (invariant 4): the builder reads the
latest checkpoint and then the tail, newest first, a page at a time, only until
the budget is met, using token counts stored at append time.

Trimming keeps whole units (invariant 2). Under the default ``stable``
strategy the window's first message (the *anchor*) is remembered on the
``Session`` handle; while everything from the anchor still fits, the anchor
holds and the prefix sent to the provider stays byte-identical, so its prompt
cache keeps hitting (invariant 7). When the window overflows, whole units are
dropped down to ``low_water`` of the budget in one step, buying headroom for
many turns. ``greedy`` refills newest-to-oldest every turn instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from threadline.catalog import lookup
from threadline.context.policy import ContextPolicy
from threadline.context.pruning import Pruned, prune_units
from threadline.context.truncation import emergency_truncate
from threadline.errors import ContextOverflow, UsageError
from threadline.messages import Message, RepairReport, Unit, flatten, group_units
from threadline.requests import is_request
from threadline.store.checkpoints import Checkpoint
from threadline.store.protocol import Session
from threadline.tokens import TokenCounter, counter_for

FIRST_PAGE = 64
MAX_READ_ROUNDS = 2
MIN_FREED_SHARE = 0.05
"""Read on after pruning only when it freed at least this share of the budget."""
VIEW_COUNT_CACHE_SIZE = 100_000
_VIEW_COUNTS: dict[tuple[str, str, str, int, int], int] = {}
MAX_PAGE = 4096
SUMMARY_HEADER = (
    "Summary of the earlier conversation (messages up to #{seq}), written by threadline's "
    "compaction. It replaces those messages in this context; they remain stored."
)
NATIVE_HEADER = (
    "Summary of the earlier conversation (messages up to #{seq}), written by {tool} when it "
    "compacted the session (imported by threadline, not threadline's own snapshot). It "
    "replaces those messages in this context; they remain stored."
)
NATIVE_TOOLS = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "pi": "Pi",
    "opencode": "OpenCode",
    "openhands": "OpenHands",
    "supyagent": "Supyagent",
}
"""How a source tool is called in a header (``NATIVE_KEY`` values)."""
MEMORY_HEADER = (
    "[threadline memory: facts recalled from earlier sessions that may bear on the next "
    "message, with where each was said. Inserted by threadline, not written by the user; "
    "they may be out of date.]"
)
DEFAULT_MEMORY_SHARE = 0.10
"""The share of the budget a memory block may use (``memory.share`` of an agent file)."""
MEMORY_METADATA_KEY = "memory_block"
ORIENTATION_KEY = "orientation"
"""Checkpoint metadata: the orientation block a compaction wrote (``compaction.orientation``:
working directory, environment, todo list, scratchpad index, skills), shown after the
summary in the same message."""
BOUNDARY_TEXT = (
    "[threadline checkpoint: earlier messages were compacted. This boundary is inserted by "
    "threadline, not written by the user; the summary follows.]"
)


class Section(BaseModel):
    name: str
    tokens: int
    messages: int = 0
    detail: str = ""


class ContextReport(BaseModel):
    """What the window holds, what it costs, and what was left out."""

    model: str
    tokenizer: str
    limit: int
    response_reserve: int
    budget: int
    """limit - response_reserve - system prompt - tool definitions (- memory_reserve)."""
    total_tokens: int
    strategy: str
    sections: list[Section]
    first_seq: int | None = None
    last_seq: int | None = None
    history_messages: int = 0
    """Stored messages in the session."""
    included_messages: int = 0
    covered_by_summary: int = 0
    """Messages up to the checkpoint's seq, represented by its summary."""
    dropped_messages: int = 0
    """Messages neither in the window nor covered by a summary."""
    checkpoint_id: int | None = None
    """The checkpoint whose summary the window shows (the store's id, an internal key)."""
    checkpoint_number: int | None = None
    """That checkpoint's number within the session (#1 its first), as people see it.
    ``build_context`` reads no list of checkpoints and leaves it None;
    ``threadline.report.context`` fills it in every report it shows."""
    newest_checkpoint_id: int | None = None
    """The session's newest checkpoint. A ``stable`` window adopts it only when it must
    re-trim anyway, or when it would otherwise drop uncovered messages (invariant 7)."""
    newest_checkpoint_covers: int | None = None
    newest_checkpoint_number: int | None = None
    """The newest checkpoint's number within the session (filled like ``checkpoint_number``)."""
    summary_cut: bool = False
    summary_omitted: bool = False
    truncations: list[dict[str, Any]] = Field(default_factory=list)
    pruned: list[dict[str, Any]] = Field(default_factory=list)
    """Tool results shrunk in this view (soft trim or hard clear)."""
    synthesized_results: list[str] = Field(default_factory=list)
    orphan_results: list[int | None] = Field(default_factory=list)
    """Seqs of tool results left out because no call in view is open for them."""
    repaired: list[int | None] = Field(default_factory=list)
    """Seqs of tool results stored after a later message (parallel calls logged one block
    a line) that this view places right after their call; storage keeps the logged order."""
    prefix_changed: bool | None = None
    """Whether the prefix differs from the previous build on this handle (None: first build)."""
    retrimmed: bool = False
    memories: list[str] = Field(default_factory=list)
    """The memory lines placed in the window (the ``memory`` section), best first."""
    memory_reasons: list[str] = Field(default_factory=list)
    """Why each of ``memories`` was injected (relevance, score, scope), in the same order;
    filled by the agent that recalled them."""
    memory_reserve: int = 0
    """Tokens kept for memories whatever they hold (0: memory is off); not in ``budget``."""
    prompt_sections: list[Section] = Field(default_factory=list)
    """The system prompt's parts in order (instructions, skills, subagents, working
    directory, media, runtime), each with its tokens; filled by the agent that assembled
    the prompt (``threadline.agent.prompt``), empty for a prompt given whole."""
    notes: list[str] = Field(default_factory=list)


@dataclass
class ContextWindow:
    """The messages to send, with their cost and the report."""

    messages: list[Message]
    tokens: int
    """Total input tokens: system, tools, summary, history and reply priming."""
    budget: int
    limit: int
    report: ContextReport
    model: str
    tools: list[Mapping[str, Any]] = field(default_factory=list)

    def to_openai(self) -> list[dict[str, Any]]:
        """Chat Completions messages, with what the API refuses dropped or converted."""
        from threadline.interop.openai_format import to_openai

        return to_openai(self.messages)

    def to_anthropic(self) -> dict[str, Any]:
        """``{"system": ..., "messages": [...]}`` for the Messages API."""
        from threadline.interop.anthropic_format import to_anthropic

        system, messages = to_anthropic(self.messages)
        out: dict[str, Any] = {"messages": messages}
        if system:
            out["system"] = system
        return out


def build_context(
    session: Session,
    *,
    model: str | None = None,
    system_prompt: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    policy: ContextPolicy | None = None,
    counter: TokenCounter | None = None,
    aggressive: bool = False,
    memories: Sequence[str] | None = None,
    memory_share: float = DEFAULT_MEMORY_SHARE,
) -> ContextWindow:
    """Build the window for the next model call. Reads the store; never writes it.

    ``aggressive`` prunes tool results with the policy's lower thresholds: the
    retry after a provider said the prompt was too long. ``memories`` (one line
    each, best first; ``[]`` when memory is on but nothing matched) reserves
    ``memory_share`` of the budget whatever they hold (a fixed overhead, like
    the system prompt: the summary and the kept tail take their shares of what
    is left), so the history chosen, and with it the prefix, does not depend on
    them; as many lines as fit go in one synthetic user message before the
    latest request. The report's
    ``dropped_messages`` counts stored messages neither in the window nor under
    its summary; an agent loop compacts before sending such a window
    (``Compactor.compact_to_fit`` / ``prepare_context``).
    """
    policy = policy or ContextPolicy()
    model = model or session.model or lookup(None).name
    info = lookup(model)
    counter = counter or counter_for(model)
    family = counter.family
    tools = list(tools or [])
    limit = policy.context_limit or info.context_window
    if not 0.0 <= memory_share < 1.0:
        raise UsageError(f"memory_share must be at least 0 and below 1, got {memory_share}")
    cost = window_cost(counter)

    system_msgs = [Message.system(system_prompt, synthetic=True)] if system_prompt else []
    system_tokens = sum(cost(m) for m in system_msgs)
    tool_tokens = counter.count_tools(tools) if tools else 0
    priming = counter.count_messages([])
    budget = limit - policy.response_reserve - system_tokens - tool_tokens
    if budget - priming <= 0:
        raise ContextOverflow(
            f"the system prompt ({system_tokens:,} tokens) and tool definitions "
            f"({tool_tokens:,}) leave no room in a {limit:,}-token window with "
            f"{policy.response_reserve:,} reserved for the reply",
            needed=system_tokens + tool_tokens + policy.response_reserve + priming,
            budget=limit,
        )
    # memories are a fixed overhead, like the prompt: every share below is of what is left
    memory_room = int((budget - priming) * memory_share) if memories is not None else 0
    budget -= memory_room
    frame = _Frame(
        session=session,
        policy=policy,
        cost=cost,
        limit=limit,
        room=budget - priming,
        fixed=system_tokens + tool_tokens + priming,
        aggressive=aggressive,
        memory_room=memory_room,
    )

    newest = session.latest_checkpoint()
    state = session.view_state
    stable = policy.trim_strategy == "stable"
    held = state.get("checkpoint") if stable else None
    anchor = state.get("anchor") if stable else None
    if not isinstance(held, Checkpoint) or newest is None or held.id == newest.id:
        held = None
    elif not session.shows_checkpoint(held):
        held = None  # a retraction took back messages its summary covers
    elif held.covers_up_to > newest.covers_up_to:
        held = None  # the store's checkpoints changed under this handle: start afresh
    composed: _Composed | None = None
    if held is not None and not aggressive:  # a retry after a refusal takes the newest
        # A stable window keeps the older checkpoint it shows while everything since its
        # anchor still fits and nothing falls out: the prefix stays byte-identical.
        composed = _compose(frame, held, anchor=anchor, sticky=dict(state.get("pruned", {})))
        if composed.retrimmed or composed.dropped or composed.overflow:
            composed = None
    if composed is None:
        same = state.get("checkpoint_id") == _cp_id(newest)
        composed = _compose(
            frame,
            newest,
            anchor=anchor if same else None,
            sticky=dict(state.get("pruned", {})),
        )
    notes: list[str] = []
    if composed.overflow and frame.memory_room:
        # memories are optional: protected messages that do not fit take their share first
        budget += frame.memory_room
        frame = dataclasses.replace(frame, room=budget - priming, memory_room=0)
        composed = _compose(
            frame, composed.checkpoint, anchor=anchor, sticky=dict(state.get("pruned", {}))
        )
        notes.append("memories left out: the protected messages need their share of the budget")
    checkpoint = composed.checkpoint
    floor = checkpoint.covers_up_to if checkpoint else 0
    state["pruned"] = {q: a for q, a in composed.sticky.items() if q > floor}

    history = composed.history
    truncations: list[dict[str, Any]] = []
    used = composed.used
    msg_budget = composed.msg_budget
    if used > msg_budget:
        if policy.emergency_truncation:
            history, cuts = emergency_truncate(
                history, budget=msg_budget, policy=policy, count=cost
            )
            truncations = [asdict(c) for c in cuts]
            used = sum(cost(m) for m in history)
        if used > msg_budget:
            raise ContextOverflow(
                f"the last {len(history)} protected messages need {used:,} tokens but only "
                f"{msg_budget:,} are left for history: over by {used - msg_budget:,} tokens "
                f"(limit {limit:,}, reserve {policy.response_reserve:,}, system "
                f"{system_tokens:,}, tools {tool_tokens:,}, summary {composed.summary_tokens:,})",
                needed=used,
                budget=msg_budget,
            )
        notes.append("emergency truncation applied to protected messages")

    first_seq = composed.first_seq
    if stable and first_seq is not None:
        state["anchor"] = first_seq
        state["checkpoint_id"] = _cp_id(checkpoint)
        state["checkpoint"] = checkpoint
    summary_msgs = composed.summary
    signature = _prefix_signature(system_prompt, tools, summary_msgs, first_seq)
    previous = state.get("prefix")
    state["prefix"] = signature

    memory_msg, memory_lines = _memory_message(memories or [], frame.memory_room, counter)
    memory_tokens = counter.count_message(memory_msg) if memory_msg is not None else 0
    messages = system_msgs + summary_msgs + _with_memory(history, composed.units, memory_msg)
    summary_tokens = composed.summary_tokens
    total = system_tokens + tool_tokens + summary_tokens + used + memory_tokens + priming
    shown = {m.seq for m in history if m.seq is not None}
    stored_in_view = len(shown)
    history_count = session.last_seq
    if checkpoint is not None and newest is not None and checkpoint.id != newest.id:
        notes.append(
            f"shows the checkpoint that covers 1-{floor}; a newer one (covers "
            f"1-{newest.covers_up_to}) is adopted at the next re-trim, so the prompt-cache "
            "prefix holds until then"
        )
    report = ContextReport(
        model=model,
        tokenizer=family,
        limit=limit,
        response_reserve=policy.response_reserve,
        budget=budget,
        total_tokens=total,
        strategy=policy.trim_strategy,
        sections=[
            Section(name="system", tokens=system_tokens, messages=len(system_msgs)),
            Section(name="tools", tokens=tool_tokens, messages=0, detail=f"{len(tools)} tools"),
            Section(
                name="summary",
                tokens=summary_tokens,
                messages=len(summary_msgs),
                detail=f"covers seq 1-{floor}" if checkpoint else "",
            ),
            Section(
                name="history",
                tokens=used,
                messages=len(history),
                detail=f"{len(composed.units)} units",
            ),
            Section(name="reply_priming", tokens=priming),
            Section(
                name="memory",
                tokens=memory_tokens,
                messages=1 if memory_msg is not None else 0,
                detail=_memory_detail(memories, memory_lines, frame.memory_room),
            ),
        ],
        first_seq=first_seq,
        last_seq=history[-1].seq if history else None,
        history_messages=history_count,
        included_messages=stored_in_view,
        covered_by_summary=floor,
        dropped_messages=composed.dropped,
        checkpoint_id=checkpoint.id if checkpoint else None,
        newest_checkpoint_id=newest.id if newest else None,
        newest_checkpoint_covers=newest.covers_up_to if newest else None,
        summary_cut=composed.summary_cut,
        summary_omitted=composed.summary_omitted,
        truncations=truncations,
        pruned=[
            {
                "seq": p.seq,
                "tool": p.tool,
                "action": p.action,
                "chars_before": p.chars_before,
                "chars_after": p.chars_after,
            }
            for p in composed.pruned
        ],
        synthesized_results=_in_view(composed.repair, history),
        orphan_results=composed.repair.orphans,
        repaired=[q for q in composed.repair.late if q in shown],
        prefix_changed=None if previous is None else previous != signature,
        retrimmed=composed.retrimmed,
        memories=memory_lines,
        memory_reserve=frame.memory_room,
        notes=notes,
    )
    return ContextWindow(
        messages=messages,
        tokens=total,
        budget=budget,
        limit=limit,
        report=report,
        model=model,
        tools=tools,
    )


def _arguments_size(m: Message) -> int:
    """A size of a message's tool-call arguments: a copy whose arguments were cut
    (``truncation.truncate_arguments``) is not counted as the whole call."""
    if not m.tool_calls:
        return 0
    return sum(
        len(c.raw_arguments or "")
        + sum(len(v) if isinstance(v, str) else 1 for v in c.arguments.values())
        for c in m.tool_calls
    )


def window_cost(counter: TokenCounter) -> Callable[[Message], int]:
    """What a message costs in a window counted by ``counter``: the count stored at append
    for that tokenizer, else counted here (an estimate stored for an exact tokenizer is
    recounted), once per process for each message. The compaction cut measures its tail
    with the same function, so a tail it keeps is a tail a window shows whole."""
    family = counter.family

    def cost(m: Message) -> int:
        stored = m.token_counts.get(family)
        if stored is not None:
            return stored
        # view copies (pruned, truncated, synthetic) are counted once per process
        key = (family, m.id, m.role, len(m.text), _arguments_size(m))
        n = _VIEW_COUNTS.get(key)
        if n is None:
            n = counter.count_message(m)
            if len(_VIEW_COUNTS) >= VIEW_COUNT_CACHE_SIZE:
                _VIEW_COUNTS.pop(next(iter(_VIEW_COUNTS)))
            _VIEW_COUNTS[key] = n
        return n

    return cost


@dataclass(frozen=True, slots=True)
class _Frame:
    """What every candidate window of one build shares."""

    session: Session
    policy: ContextPolicy
    cost: Callable[[Message], int]
    limit: int
    room: int
    """The budget less reply priming: what summary and history may use."""
    fixed: int
    """System prompt, tools and priming."""
    aggressive: bool
    memory_room: int = 0
    """Tokens kept for the memory block, whatever it holds (0: memory is off); outside
    ``room``, like the system prompt."""


@dataclass(slots=True)
class _Composed:
    """One candidate window: a checkpoint's summary and the history chosen after it."""

    checkpoint: Checkpoint | None
    summary: list[Message]
    summary_tokens: int
    summary_cut: bool
    summary_omitted: bool
    msg_budget: int
    units: list[Unit]
    history: list[Message]
    used: int
    first_seq: int | None
    retrimmed: bool
    dropped: int
    """Stored messages after the checkpoint that the window leaves out, less the results
    no view can show (see ``_unplaceable``)."""
    overflow: bool
    """Even the protected messages exceed the budget (emergency truncation follows)."""
    pruned: list[Pruned]
    sticky: dict[int, Any]
    repair: RepairReport


def _compose(
    frame: _Frame, checkpoint: Checkpoint | None, *, anchor: int | None, sticky: dict[int, Any]
) -> _Composed:
    """Read the tail after ``checkpoint`` until the window is full, prune, and choose the
    oldest unit to keep (holding ``anchor`` under ``stable`` while it fits)."""
    policy, cost, session = frame.policy, frame.cost, frame.session
    floor = checkpoint.covers_up_to if checkpoint else 0
    summary_msgs, summary_cut, summary_omitted = _summary_messages(
        checkpoint, policy, int(frame.room * policy.summary_share), cost
    )
    summary_tokens = sum(cost(m) for m in summary_msgs)
    msg_budget = frame.room - summary_tokens
    stable = policy.trim_strategy == "stable"
    for seq in [q for q in sticky if q <= floor]:
        del sticky[seq]
    # Read the tail until the window is full; pruning can free room, so read on
    # past what it freed (a few rounds at most) before choosing the window.
    reader = _TailReader(session, floor)
    need = msg_budget
    for _ in range(MAX_READ_ROUNDS):
        reader.read_until(need, policy, cost, back_to=anchor if stable else None)
        units, repair = group_units(reversed(reader.collected))
        units, pruned = prune_units(
            units,
            fixed_tokens=frame.fixed + summary_tokens,
            limit=frame.limit,
            policy=policy,
            cost=cost,
            sticky=sticky,
            aggressive=frame.aggressive,
        )
        sizes = [sum(cost(m) for m in u.messages) for u in units]
        freed = msg_budget - sum(sizes)
        capped = policy.max_messages is not None and len(reader.collected) > policy.max_messages
        if reader.reached_floor or freed < MIN_FREED_SHARE * msg_budget or capped:
            break
        need = reader.tokens + freed
    protected = _protected_start(units, policy.min_recent_messages)
    start, retrimmed = _choose_start(
        units,
        sizes,
        protected,
        msg_budget,
        policy,
        anchor=anchor,
        reached_floor=reader.reached_floor,
    )
    chosen = units[start:]
    history = flatten(chosen)
    stored_in_view = sum(1 for m in history if m.seq is not None)
    missing = session.last_seq - floor - stored_in_view - session.hidden_after(floor)
    return _Composed(
        checkpoint=checkpoint,
        summary=summary_msgs,
        summary_tokens=summary_tokens,
        summary_cut=summary_cut,
        summary_omitted=summary_omitted,
        msg_budget=msg_budget,
        units=chosen,
        history=history,
        used=sum(sizes[start:]),
        first_seq=chosen[0].first_seq if chosen else None,
        retrimmed=retrimmed,
        dropped=max(0, missing - _unplaceable(repair, reader.reached_floor)),
        overflow=sum(sizes[start:]) > msg_budget,
        pruned=pruned,
        sticky=sticky,
        repair=repair,
    )


# -- steps -------------------------------------------------------------------------


class _TailReader:
    """Reads a session's tail newest-first, a page at a time, resumably."""

    def __init__(self, session: Session, floor: int) -> None:
        self.session = session
        self.floor = floor
        self.collected: list[Message] = []
        """Taken so far, newest first."""
        self.tokens = 0
        self.reached_floor = False
        """The checkpoint's seq or the start of history was reached: nothing older to read."""
        self._buffer: list[Message] = []
        self._before: int | None = None
        self._page = FIRST_PAGE
        self._exhausted = False

    def _next(self) -> Message | None:
        if not self._buffer and not self._exhausted:
            size = self._page_size()
            batch = self.session.tail(size, before_seq=self._before) if size else []
            self._exhausted = not batch or len(batch) < size
            if batch:
                self._before = batch[-1].seq
            self._page = min(self._page * 2, MAX_PAGE)
            self._buffer = batch[::-1]
        return self._buffer.pop() if self._buffer else None

    def _page_size(self) -> int:
        """The next page, no longer than the seqs left above the floor (they run without
        gaps): a window just past a checkpoint reads those few, not a whole page of
        messages it would drop. The first page trusts the handle's last seq only as far as
        reading at least one (a stale one is only lower; later pages go by the seqs read)."""
        if self._before is None:
            return max(1, min(self._page, self.session.last_seq - self.floor))
        return max(0, min(self._page, self._before - 1 - self.floor))

    def read_until(
        self,
        need: int,
        policy: ContextPolicy,
        cost: Callable[[Message], int],
        *,
        back_to: int | None = None,
    ) -> None:
        """Take messages until their tokens exceed ``need`` at a unit boundary, and at
        least back to seq ``back_to`` (the stable anchor, which fitted last time)."""
        cap = policy.max_messages
        while not self.reached_floor:
            m = self._next()
            if m is None or (m.seq is not None and m.seq <= self.floor):
                self.reached_floor = True
                return
            self.collected.append(m)
            self.tokens += cost(m)
            if back_to is not None and m.seq is not None and m.seq > back_to:
                continue
            enough = self.tokens > need or (cap is not None and len(self.collected) > cap)
            if enough and len(self.collected) >= policy.min_recent_messages and m.role != "tool":
                return


def _protected_start(units: list[Unit], min_recent: int) -> int:
    """Index of the oldest protected unit: enough units for ``min_recent`` stored
    messages (synthetic repair results do not count toward it), and always the newest
    unit: a window without the message the model must answer is no window."""
    start, count = len(units), 0
    while start > 0 and (count < min_recent or start == len(units)):
        start -= 1
        count += sum(1 for m in units[start].messages if not m.synthetic)
    return start


def _fill(
    units: list[Unit], sizes: list[int], protected: int, limit: float, cap: int | None
) -> int:
    """Index of the oldest unit kept when filling newest-to-oldest up to ``limit``."""
    start = protected
    total = sum(sizes[protected:])
    count = sum(len(u) for u in units[protected:])
    while start > 0:
        size, n = sizes[start - 1], len(units[start - 1])
        if total + size > limit or (cap is not None and count + n > cap):
            break
        start -= 1
        total += size
        count += n
    return start


def _choose_start(
    units: list[Unit],
    sizes: list[int],
    protected: int,
    budget: int,
    policy: ContextPolicy,
    *,
    anchor: int | None,
    reached_floor: bool,
) -> tuple[int, bool]:
    cap = policy.max_messages
    greedy = _fill(units, sizes, protected, budget, cap)
    if policy.trim_strategy == "greedy" or not units:
        return greedy, False
    if anchor is not None:
        have_anchor = (units[0].first_seq or 0) <= anchor or reached_floor
        idx = next((i for i, u in enumerate(units) if (u.first_seq or 0) >= anchor), len(units))
        if have_anchor and idx <= protected:
            count = sum(len(u) for u in units[idx:])
            if sum(sizes[idx:]) <= budget and (cap is None or count <= cap):
                return idx, False
    elif greedy == 0 and reached_floor:
        return 0, False  # everything since the checkpoint fits: nothing to trim
    return _fill(units, sizes, protected, budget * policy.low_water, cap), True


def _summary_messages(
    checkpoint: Checkpoint | None, policy: ContextPolicy, cap: int, cost: Any
) -> tuple[list[Message], bool, bool]:
    """The checkpoint as messages, shrunk bullet by bullet to fit ``cap``.

    Bullets leave in ``SUMMARY_DROP_ORDER`` (lowest-ranked, i.e. last, first within a
    section), so Current State, where the session's request is pinned, goes last.
    """
    if checkpoint is None or not checkpoint.summary.strip():
        return [], False, False
    msgs = _wrap_summary(checkpoint, checkpoint.summary.strip(), policy)
    if sum(cost(m) for m in msgs) <= cap:
        return msgs, False, False
    if checkpoint.metadata.get(NATIVE_KEY):
        return _native_clipped(checkpoint, policy, cap, cost)
    sections = _split_sections(checkpoint.summary)
    order = _drop_order(sections)

    def shrunk(k: int) -> list[Message]:
        gone = set(order[:k])
        text = "\n".join(_render_kept(sections, gone)).strip()
        return _wrap_summary(checkpoint, text, policy)

    lo, hi = 1, len(order)  # find the fewest drops that fit
    if sum(cost(m) for m in shrunk(hi)) > cap:
        return [], False, True
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(cost(m) for m in shrunk(mid)) <= cap:
            hi = mid
        else:
            lo = mid + 1
    return shrunk(lo), True, False


NATIVE_KEY = "native"
"""Checkpoint metadata naming the tool whose own compaction an import turned into the
checkpoint (``claude-code``, ``codex``, ...): its summary is that tool's text, not a
threadline snapshot."""
NATIVE_CLIPPED = (
    "[... the rest of this {tool} summary ({chars:,} characters) is left out to fit this "
    "window; the messages it stands for remain stored]"
)


NATIVE_DROPPED = (
    "[{count} of the {tool} summary's assistant message(s) are left out to fit this window; "
    "the user's messages are kept]"
)
DROPPABLE_KEY = "native_droppable"
"""Checkpoint metadata: ``[start, end]`` spans of a native summary a window may drop before
cutting its end (Codex's assistant items; the user's are kept whole)."""


def _native_tool(checkpoint: Checkpoint) -> str:
    tool = str(checkpoint.metadata.get(NATIVE_KEY))
    return NATIVE_TOOLS.get(tool, tool)


def _without_spans(text: str, spans: list[tuple[int, int]], tool: str) -> str:
    """``text`` without ``spans`` (and the blank line after each), noting how many went."""
    out, at = [], 0
    for start, end in spans:
        out.append(text[at:start])
        at = end + 2 if text[end : end + 2] == "\n\n" else end
    out.append(text[at:])
    kept = "".join(out).rstrip()
    note = NATIVE_DROPPED.format(count=len(spans), tool=tool)
    return f"{kept}\n\n{note}" if spans else kept


def _droppable(checkpoint: Checkpoint, text: str) -> list[tuple[int, int]]:
    raw = checkpoint.metadata.get(DROPPABLE_KEY)
    spans: list[tuple[int, int]] = []
    for span in raw if isinstance(raw, list) else []:
        if isinstance(span, list) and len(span) == 2 and all(isinstance(n, int) for n in span):
            start, end = span
            if 0 <= start < end <= len(text) and (not spans or start >= spans[-1][1]):
                spans.append((start, end))
    return spans


def _native_clipped(
    checkpoint: Checkpoint, policy: ContextPolicy, cap: int, cost: Any
) -> tuple[list[Message], bool, bool]:
    """Another tool's summary, too long for ``cap``: first without its droppable spans
    (the oldest first: Codex's assistant items, so the user's stay whole and in order),
    then as its longest opening that fits. Its text is not a snapshot, so its headings
    (a plan's, a user's) are not sections to thin out."""
    text = checkpoint.summary.strip()
    tool = _native_tool(checkpoint)
    spans = _droppable(checkpoint, text)

    def fits(t: str) -> bool:
        return bool(sum(cost(m) for m in _wrap_summary(checkpoint, t, policy)) <= cap)

    if spans:
        lo, hi = 1, len(spans)  # the fewest dropped spans that fit
        if fits(_without_spans(text, spans, tool)):
            while lo < hi:
                mid = (lo + hi) // 2
                if fits(_without_spans(text, spans[:mid], tool)):
                    hi = mid
                else:
                    lo = mid + 1
            return (
                _wrap_summary(checkpoint, _without_spans(text, spans[:lo], tool), policy),
                True,
                False,
            )
        text = _without_spans(text, spans, tool)

    def opening(n: int) -> str:
        head = text[:n]
        cut = max(head.rfind("\n"), head.rfind(" "))
        head = head[:cut] if n < len(text) and cut > 0 else head
        note = NATIVE_CLIPPED.format(tool=tool, chars=len(text) - len(head))
        return f"{head.rstrip()}\n\n{note}"

    if not fits(opening(0)):
        return [], False, True
    lo, hi = 0, len(text)  # the longest opening that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(opening(mid)):
            lo = mid
        else:
            hi = mid - 1
    return _wrap_summary(checkpoint, opening(lo), policy), True, False


SUMMARY_DROP_ORDER = (
    "important values",
    "key decisions",
    "files modified",
    "pending tasks",
    "current state",
)
"""Which snapshot sections give up bullets first when a summary must shrink to fit;
sections with other titles (a model's own) go before all of these."""


def _split_sections(summary: str) -> list[tuple[str, list[str]]]:
    """(heading, items) pairs; an item is a bullet with its continuation lines."""
    sections: list[tuple[str, list[str]]] = []
    for line in summary.splitlines():
        if line.startswith("## ") or not sections:
            sections.append((line, []))
        elif not line.strip():
            continue
        elif line.lstrip().startswith(("- ", "* ")) or not sections[-1][1]:
            sections[-1][1].append(line)
        else:
            sections[-1][1][-1] += "\n" + line
    return sections


def _drop_order(sections: list[tuple[str, list[str]]]) -> list[tuple[int, int]]:
    def rank(i: int) -> int:
        title = sections[i][0].lstrip("# ").strip().lower()
        return SUMMARY_DROP_ORDER.index(title) + 1 if title in SUMMARY_DROP_ORDER else 0

    order: list[tuple[int, int]] = []
    for i in sorted(range(len(sections)), key=rank):
        order.extend((i, j) for j in reversed(range(len(sections[i][1]))))
    return order


def _render_kept(sections: list[tuple[str, list[str]]], gone: set[tuple[int, int]]) -> list[str]:
    out: list[str] = []
    for i, (heading, items) in enumerate(sections):
        kept = [item for j, item in enumerate(items) if (i, j) not in gone]
        if out:
            out.append("")
        out.append(heading)
        out.extend(kept)
        if items and not kept:
            out.append("- (left out to fit this window)")
    return out


def _wrap_summary(checkpoint: Checkpoint, text: str, policy: ContextPolicy) -> list[Message]:
    if checkpoint.metadata.get(NATIVE_KEY):
        header = NATIVE_HEADER.format(seq=checkpoint.covers_up_to, tool=_native_tool(checkpoint))
    else:
        header = SUMMARY_HEADER.format(seq=checkpoint.covers_up_to)
    meta = {"checkpoint_id": checkpoint.id, "covers_up_to": checkpoint.covers_up_to}
    orientation = checkpoint.metadata.get(ORIENTATION_KEY)
    if isinstance(orientation, str) and orientation.strip():
        text = f"{text}\n\n{orientation.strip()}"
    if policy.summary_placement == "system":
        return [Message.system(f"{header}\n\n{text}", synthetic=True, summary=True, metadata=meta)]
    return [
        Message.user(BOUNDARY_TEXT, synthetic=True, summary=True, metadata=meta),
        Message.assistant(f"{header}\n\n{text}", synthetic=True, summary=True, metadata=meta),
    ]


def _memory_message(
    memories: Sequence[str], room: int, counter: TokenCounter
) -> tuple[Message | None, list[str]]:
    """The memory block holding as many of ``memories`` (best first) as fit ``room``."""
    kept: list[str] = []
    message: Message | None = None
    for line in memories:
        line = " ".join(line.split())
        if not line:
            continue
        candidate = _memory_block([*kept, line])
        if counter.count_message(candidate) > room:
            break
        kept.append(line)
        message = candidate
    return message, kept


def _memory_block(lines: Sequence[str]) -> Message:
    text = MEMORY_HEADER + "\n" + "\n".join(f"- {line}" for line in lines)
    return Message.user(text, synthetic=True, metadata={MEMORY_METADATA_KEY: len(lines)})


def _with_memory(history: list[Message], units: list[Unit], block: Message | None) -> list[Message]:
    """``history`` with ``block`` before the unit holding the latest request (before the
    first unit when no request is in view): never inside a unit (invariant 2), and late,
    so what precedes it stays the same from turn to turn (invariant 7)."""
    if block is None:
        return history
    start = next(
        (u.messages[0] for u in reversed(units) if any(is_request(m) for m in u.messages)),
        units[0].messages[0] if units else None,
    )
    at = next((i for i, m in enumerate(history) if start is not None and m.id == start.id), 0)
    return [*history[:at], block, *history[at:]]


def _memory_detail(memories: Sequence[str] | None, shown: list[str], room: int) -> str:
    if memories is None:
        return "off"
    left = sum(1 for m in memories if m.strip()) - len(shown)
    more = f", {left} more did not fit" if left > 0 else ""
    noun = "memory" if len(shown) == 1 else "memories"
    return f"{len(shown)} {noun}{more}; {room:,} tokens reserved"


def _cp_id(checkpoint: Checkpoint | None) -> int | None:
    return checkpoint.id if checkpoint else None


def _prefix_signature(
    system_prompt: str | None,
    tools: Sequence[Mapping[str, Any]],
    summary: list[Message],
    first_seq: int | None,
) -> str:
    h = hashlib.sha256()
    h.update((system_prompt or "").encode())
    h.update(json.dumps(list(tools), sort_keys=True, default=str).encode())
    for m in summary:
        h.update(m.text.encode())
    h.update(str(first_seq).encode())
    return h.hexdigest()


def _unplaceable(repair: RepairReport, read_all: bool) -> int:
    """Results the repair left out that no window could show: duplicates of an answered
    call, and, once everything since the checkpoint was read, results whose call is not
    there at all. They are reported as ``orphan_results``, not as dropped: a compaction
    cannot bring them into view, so counting them would make every model call compact."""
    return len(repair.orphans) if read_all else len(repair.duplicates)


def _in_view(repair: RepairReport, history: list[Message]) -> list[str]:
    ids = {m.tool_call_id for m in history if m.synthetic and m.role == "tool"}
    return [i for i in repair.synthesized if i in ids]
