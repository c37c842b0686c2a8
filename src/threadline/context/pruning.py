"""Tool-result pruning: shrink old, very large tool results in the view only.

Two passes, as in the agent-server reference document. Only an individual
tool result of at least ``prune_min_chars`` characters (50,000) is eligible;
smaller results are never touched, so a short "File created successfully at:
<path>" keeps its path. When the context passes ``prune_soft_at`` of the
limit, eligible results keep their first and last ``prune_keep_chars``
characters with a notice of what was cut; when it passes ``prune_hard_at``,
the oldest eligible results are replaced by a placeholder that keeps the
tool's name, the result's first line and its exact stored size, until the
context is back under ``prune_hard_to`` (one chunk of clears instead of one a
turn, so the prefix breaks rarely, invariant 7). Results in the last
``prune_protect_turns`` assistant turns, of ``protected_tools``, and results
marked protected (a loaded skill's instructions, ``is_protected``) are never
touched. ``aggressive`` (a retry after a provider's context-length error)
uses lower thresholds.

Decisions are sticky: a result pruned once stays pruned the same way in later
builds on the same handle, so the prefix never flips back and forth between
turns. Every copy is made from the stored message, never from an earlier
copy. Stored history is never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from threadline.context.policy import ContextPolicy
from threadline.context.truncation import cut_middle
from threadline.messages import PROTECTED_RESULT_KEY, Message, Unit

Action = Literal["soft", "hard"]


@dataclass(slots=True)
class Pruned:
    seq: int
    tool: str | None
    action: Action
    chars_before: int
    chars_after: int


@dataclass(frozen=True, slots=True)
class Thresholds:
    soft_at: float
    hard_at: float
    hard_to: float
    min_chars: int
    """A result shorter than this is not eligible."""

    @classmethod
    def of(cls, policy: ContextPolicy, *, aggressive: bool) -> Thresholds:
        if aggressive:
            return cls(
                policy.prune_aggressive_soft_at,
                policy.prune_aggressive_hard_at,
                policy.prune_aggressive_hard_to,
                policy.prune_aggressive_min_chars,
            )
        return cls(
            policy.prune_soft_at,
            policy.prune_hard_at,
            policy.prune_hard_to,
            policy.prune_min_chars,
        )


FIRST_LINE_MAX_CHARS = 200
PRUNED_CACHE_SIZE = 50_000
_PRUNED: dict[tuple[str, str, int], Message] = {}
"""Pruned copies by (message id, action, keep): stored messages never change, so a
decision re-applied on every build costs a lookup, not a rebuild."""


def pruned_copy(m: Message, action: Action, keep: int) -> Message:
    key = (m.id, action, keep if action == "soft" else 0)
    cached = _PRUNED.get(key)
    if cached is not None and cached.seq == m.seq:
        return cached
    new = soft_trim(m, keep) if action == "soft" else hard_clear(m)
    if len(_PRUNED) >= PRUNED_CACHE_SIZE:
        _PRUNED.pop(next(iter(_PRUNED)))
    _PRUNED[key] = new
    return new


def soft_trim(m: Message, keep: int) -> Message:
    text = cut_middle(m.text, keep, keep, what="characters of this tool result")
    return m.model_copy(update={"content": text, "token_counts": {}})


def first_line(text: str) -> str:
    """The first line with something in it, clipped: what a cleared result was about."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= FIRST_LINE_MAX_CHARS else line[:FIRST_LINE_MAX_CHARS] + "..."


def hard_clear(m: Message) -> Message:
    tool = f" of {m.name}" if m.name else ""
    head = first_line(m.text)
    notice = (
        f"[tool result{tool} cleared by threadline to save context: {len(m.text):,} characters"
        f"{'; it began: ' + head if head else ''}; the full result stays stored as message "
        f"#{m.seq}]"
    )
    return m.model_copy(update={"content": notice, "token_counts": {}})


def is_protected(m: Message, policy: ContextPolicy) -> bool:
    """A tool result pruning never touches: one of ``policy.protected_tools``, or marked
    ``{"protected": true}`` by the tool that wrote it (the ``skill`` tool: the seed's
    "skill tool results are excluded from pruning"). The one place for that rule."""
    return m.name in policy.protected_tools or m.metadata.get(PROTECTED_RESULT_KEY) is True


def _eligible(units: list[Unit], policy: ContextPolicy, min_chars: int) -> list[tuple[int, int]]:
    """(unit index, message index) of prunable results, oldest first."""
    protected_units = 0
    protect_from = len(units)
    for i in range(len(units) - 1, -1, -1):
        if protected_units >= policy.prune_protect_turns:
            break
        if units[i].messages[0].role == "assistant":
            protected_units += 1
            protect_from = i
    out = []
    for ui, unit in enumerate(units[:protect_from]):
        if not unit.is_tool_chain:
            continue
        for mi, m in enumerate(unit.messages[1:], start=1):
            if m.seq is None or m.synthetic or is_protected(m, policy):
                continue
            if isinstance(m.content, str) and len(m.content) < min_chars:
                continue  # the common case, decided without joining parts
            if len(m.text) >= min_chars:
                out.append((ui, mi))
    return out


def prune_units(
    units: list[Unit],
    *,
    fixed_tokens: int,
    limit: int,
    policy: ContextPolicy,
    cost: Callable[[Message], int],
    sticky: dict[int, Action],
    aggressive: bool = False,
) -> tuple[list[Unit], list[Pruned]]:
    """Prune copies of the units' tool results; ``sticky`` (seq -> action) carries
    earlier decisions in and this build's decisions out."""
    if not policy.pruning or not units:
        return units, []
    th = Thresholds.of(policy, aggressive=aggressive)
    eligible = _eligible(units, policy, th.min_chars)
    if not eligible:
        return units, []
    msgs = [list(u.messages) for u in units]
    sizes = [[cost(m) for m in u] for u in msgs]
    total = fixed_tokens + sum(map(sum, sizes))
    done: list[Pruned] = []

    def apply(ui: int, mi: int, action: Action) -> None:
        nonlocal total
        stored = units[ui].messages[mi]  # copies are always made from the stored message
        new = pruned_copy(stored, action, policy.prune_keep_chars)
        if len(new.text) >= len(msgs[ui][mi].text):
            return
        assert stored.seq is not None
        size = cost(new)
        total += size - sizes[ui][mi]
        msgs[ui][mi], sizes[ui][mi] = new, size
        sticky[stored.seq] = action
        done.append(Pruned(stored.seq, stored.name, action, len(stored.text), len(new.text)))

    # earlier decisions first, so the view does not flip back
    for ui, mi in eligible:
        seq = msgs[ui][mi].seq
        if seq is not None and seq in sticky:
            apply(ui, mi, sticky[seq])

    if total > th.soft_at * limit:
        for ui, mi in eligible:
            if msgs[ui][mi].seq not in sticky:
                apply(ui, mi, "soft")
    if total > th.hard_at * limit:
        for ui, mi in eligible:
            if total <= th.hard_to * limit:
                break
            if sticky.get(msgs[ui][mi].seq or -1) != "hard":
                apply(ui, mi, "hard")
    if not done:
        return units, []
    return [Unit(tuple(u)) for u in msgs], done
