"""Doom-loop detection: an agent repeating the same tool calls without progress.

Two patterns over the tool calls of the current turn, oldest first:

* the same call (same tool, same arguments) ``identical_threshold`` times in a
  row (3, the agent server's rule);
* a cycle of 2 to 4 distinct-looking calls repeated ``cycle_repeats`` times
  (A, B, A, B, A, B or A, B, C, A, B, C, ...), which the identical rule misses.

Calls are compared by a signature: the tool name plus the arguments as
canonical JSON (``sort_keys``), so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}``
are the same call.

The scan starts after the last message the *user* wrote (synthetic notices do
not count): a user who says "run the tests again" three times has not put the
agent in a loop.

A warning is a stored message, so it stays in the history the builder shows
the model, and so it is visible in exports. It is ``role="user"`` with
``synthetic=True`` and text starting ``[threadline: possible loop detected]``,
not a system message: providers either reject a system message in the middle
of a conversation or (Anthropic) hoist it into the system prompt, which would
change the cached prefix; a user-role notice stays where it was said, and the
prefix and the flag say plainly that threadline wrote it, not the user.

One warning per streak: a streak is identified by its period, its pattern and
the position of its first call, which do not change while it grows. The
warning records that key in its metadata, so a streak already warned about
(even by an earlier process) is not warned about again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from threadline.messages import Message, ToolCall
from threadline.store.protocol import Session

IDENTICAL_THRESHOLD = 3
"""Identical consecutive calls that count as a loop."""
CYCLE_REPEATS = 3
"""Times a cycle must repeat to count as a loop."""
MIN_CYCLE = 2
MAX_CYCLE = 4
SCAN_MESSAGES = 128
"""How far back ``check_session`` reads when looking for the start of the turn."""
ARGUMENT_SHOWN_CHARS = 40
"""Argument values longer than this are shortened in warnings."""
WARNING_PREFIX = "[threadline: possible loop detected]"
METADATA_KEY = "doom_loop"
"""Key in a warning message's metadata: ``{"key", "kind", "pattern", "repeats", "calls"}``."""

LoopKind = Literal["identical", "cycle"]


def call_signature(call: ToolCall) -> str:
    """Name plus canonical JSON arguments: equal for calls that do the same thing."""
    if call.raw_arguments is not None:
        args = call.raw_arguments.strip()
    else:
        args = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{call.name}\x00{args}"


def _short(value: Any) -> str:
    if isinstance(value, str) and value and value.isprintable() and "," not in value:
        text = value
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > ARGUMENT_SHOWN_CHARS:
        text = text[: ARGUMENT_SHOWN_CHARS - 3] + "..."
    return text


def describe_call(call: ToolCall) -> str:
    """``read_file(path=a.py)``: readable in a warning, shortened for long values."""
    if call.raw_arguments is not None:
        return f"{call.name}({_short(call.raw_arguments)})"
    args = ", ".join(f"{k}={_short(v)}" for k, v in sorted(call.arguments.items()))
    return f"{call.name}({args})"


@dataclass(frozen=True, slots=True)
class Repetition:
    """A streak at the end of a call sequence: ``calls[start:]`` has period ``period``."""

    period: int
    start: int
    """Index of the streak's first call."""
    length: int
    """Calls in the streak (a cycle may end part-way through a repetition)."""

    @property
    def repeats(self) -> int:
        return self.length // self.period


def _primitive(pattern: Sequence[str]) -> bool:
    """False when the pattern is itself a repetition (A, A or A, B, A, B)."""
    size = len(pattern)
    return not any(
        size % d == 0 and list(pattern) == list(pattern[d:]) + list(pattern[:d])
        for d in range(1, size)
    )


def find_repetition(
    signatures: Sequence[str],
    *,
    identical_threshold: int = IDENTICAL_THRESHOLD,
    cycle_repeats: int = CYCLE_REPEATS,
    min_cycle: int = MIN_CYCLE,
    max_cycle: int = MAX_CYCLE,
) -> Repetition | None:
    """The shortest-period streak at the end of ``signatures`` that counts as a loop."""
    n = len(signatures)
    periods = [1, *range(max(2, min_cycle), max_cycle + 1)]
    for period in periods:
        need = identical_threshold if period == 1 else cycle_repeats
        if n < period * need:
            continue
        if period > 1 and not _primitive(signatures[n - period :]):
            continue
        start = n - period
        while start > 0 and signatures[start - 1] == signatures[start - 1 + period]:
            start -= 1
        rep = Repetition(period=period, start=start, length=n - start)
        if rep.repeats >= need:
            return rep
    return None


@dataclass(frozen=True, slots=True)
class LoopWarning:
    """A detected loop and the notice to inject."""

    kind: LoopKind
    pattern: tuple[str, ...]
    """The repeating calls, described (``read_file(path=a.py)``)."""
    repeats: int
    calls: int
    """How many tool calls the streak spans."""
    key: str
    """Identifies the streak; the same while it grows."""
    text: str

    def message(self) -> Message:
        """The synthetic notice to append to the session."""
        return Message.user(
            self.text,
            synthetic=True,
            metadata={
                METADATA_KEY: {
                    "key": self.key,
                    "kind": self.kind,
                    "pattern": list(self.pattern),
                    "repeats": self.repeats,
                    "calls": self.calls,
                }
            },
        )


def warning_text(kind: LoopKind, pattern: Sequence[str], repeats: int, calls: int) -> str:
    if kind == "identical":
        what = f"The last {calls} tool calls were identical: {pattern[0]}, {calls} times in a row."
    else:
        cycle = " -> ".join(pattern)
        what = f"The last {calls} tool calls repeat the cycle {cycle} {repeats} times."
    return (
        f"{WARNING_PREFIX} {what} Repeating the same calls is unlikely to give a different "
        "result. Look at the results you already have, then change approach (other "
        "arguments, another tool), or stop and tell the user what is blocking you. "
        "(This notice was written by threadline, not by the user.)"
    )


@dataclass(frozen=True, slots=True)
class _CallRef:
    seq: int | None
    message_id: str
    index: int
    call: ToolCall


def turn_calls(messages: Sequence[Message]) -> tuple[list[_CallRef], set[str]]:
    """Tool calls after the last message a user wrote, and the loop keys already warned."""
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "user" and not m.synthetic:
            start = i + 1
            break
    calls: list[_CallRef] = []
    warned: set[str] = set()
    for m in messages[start:]:
        note = m.metadata.get(METADATA_KEY) if m.synthetic else None
        if isinstance(note, dict) and isinstance(note.get("key"), str):
            warned.add(note["key"])
        for index, call in enumerate(m.tool_calls):
            calls.append(_CallRef(seq=m.seq, message_id=m.id, index=index, call=call))
    return calls, warned


@dataclass(frozen=True, slots=True)
class DoomLoopDetector:
    """Finds loops in a turn's tool calls; thresholds are fields, defaults from the seeds."""

    identical_threshold: int = IDENTICAL_THRESHOLD
    cycle_repeats: int = CYCLE_REPEATS
    min_cycle: int = MIN_CYCLE
    max_cycle: int = MAX_CYCLE

    def __post_init__(self) -> None:
        if self.identical_threshold < 2 or self.cycle_repeats < 2:
            raise ValueError("loop thresholds must be at least 2")
        if not 2 <= self.min_cycle <= self.max_cycle:
            raise ValueError("cycle lengths must satisfy 2 <= min_cycle <= max_cycle")

    def check(self, messages: Sequence[Message]) -> LoopWarning | None:
        """A warning for a loop at the end of ``messages`` (oldest first) not yet warned about."""
        calls, warned = turn_calls(messages)
        if not calls:
            return None
        signatures = [call_signature(c.call) for c in calls]
        rep = find_repetition(
            signatures,
            identical_threshold=self.identical_threshold,
            cycle_repeats=self.cycle_repeats,
            min_cycle=self.min_cycle,
            max_cycle=self.max_cycle,
        )
        if rep is None:
            return None
        first = calls[rep.start]
        pattern_calls = [c.call for c in calls[rep.start : rep.start + rep.period]]
        digest = hashlib.sha256(
            "\x01".join(signatures[rep.start : rep.start + rep.period]).encode()
        )
        key = f"{rep.period}:{first.message_id}:{first.index}:{digest.hexdigest()[:16]}"
        if key in warned:
            return None
        kind: LoopKind = "identical" if rep.period == 1 else "cycle"
        pattern = tuple(describe_call(c) for c in pattern_calls)
        return LoopWarning(
            kind=kind,
            pattern=pattern,
            repeats=rep.repeats,
            calls=rep.length,
            key=key,
            text=warning_text(kind, pattern, rep.repeats, rep.length),
        )

    def check_session(self, session: Session, *, scan: int = SCAN_MESSAGES) -> LoopWarning | None:
        """``check`` over the session's last ``scan`` messages (e.g. after a resume)."""
        return self.check(list(reversed(session.tail(scan))))
