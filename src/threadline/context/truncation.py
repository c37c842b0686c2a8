"""Emergency truncation: the last resort when protected messages alone overflow.

In order, as the reference documents describe: strip images (each becomes a
short text note), then cut oversized text blocks to their head and tail with
a notice of what was cut, oldest message first, until the window fits. Last,
the oversized string arguments of tool calls (a ``Write`` of a whole file) are
cut the same way: the call keeps its id and name, so it still pairs with its
result. Only copies are changed; stored history is untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall

if TYPE_CHECKING:  # the CLI imports cut_middle without the policy model
    from threadline.context.policy import ContextPolicy


@dataclass(slots=True)
class Truncation:
    seq: int | None
    how: str
    tokens_before: int
    tokens_after: int


def cut_middle(text: str, keep_head: int, keep_tail: int, *, what: str = "characters") -> str:
    """Keep the head and tail of ``text`` with a notice naming how much was cut."""
    if len(text) <= keep_head + keep_tail:
        return text
    cut = len(text) - keep_head - keep_tail
    tail = text[-keep_tail:] if keep_tail else ""
    return f"{text[:keep_head]}\n[... {cut:,} {what} truncated ...]\n{tail}"


def strip_images(m: Message) -> Message | None:
    """A copy with image parts replaced by a note, or None when there are none."""
    if isinstance(m.content, str) or not any(isinstance(p, ImagePart) for p in m.content):
        return None
    parts: list[Part] = []
    for p in m.content:
        if isinstance(p, ImagePart):
            source = p.url or p.media_ref or (p.media_type or "inline image")
            if p.url and p.url.startswith("data:"):
                source = "inline image"
            parts.append(TextPart(text=f"[image omitted to fit the context window: {source}]"))
        else:
            parts.append(p)
    return m.model_copy(update={"content": parts, "token_counts": {}})


def truncate_text(m: Message, policy: ContextPolicy) -> Message | None:
    """A copy with oversized text blocks cut, or None when nothing is oversized."""
    limit, head, tail = (
        policy.truncate_over_chars,
        policy.truncate_keep_head,
        policy.truncate_keep_tail,
    )
    if isinstance(m.content, str):
        if len(m.content) <= limit:
            return None
        return m.model_copy(
            update={"content": cut_middle(m.content, head, tail), "token_counts": {}}
        )
    changed = False
    parts: list[Part] = []
    for p in m.content:
        if isinstance(p, TextPart) and len(p.text) > limit:
            parts.append(TextPart(text=cut_middle(p.text, head, tail)))
            changed = True
        else:
            parts.append(p)
    if not changed:
        return None
    return m.model_copy(update={"content": parts, "token_counts": {}})


def _clip_value(value: object, policy: ContextPolicy) -> object:
    if isinstance(value, str) and len(value) > policy.truncate_over_chars:
        return cut_middle(value, policy.truncate_keep_head, policy.truncate_keep_tail)
    return value


def truncate_arguments(m: Message, policy: ContextPolicy) -> Message | None:
    """A copy whose tool calls' oversized string arguments (and unparsed argument strings)
    are cut to their head and tail, or None when none is oversized. Ids and names stay."""
    calls: list[ToolCall] = []
    changed = False
    for call in m.tool_calls:
        arguments = {k: _clip_value(v, policy) for k, v in call.arguments.items()}
        raw = call.raw_arguments
        clipped_raw = _clip_value(raw, policy) if raw is not None else None
        if arguments != call.arguments or clipped_raw != raw:
            changed = True
            call = call.model_copy(update={"arguments": arguments, "raw_arguments": clipped_raw})
        calls.append(call)
    if not changed:
        return None
    return m.model_copy(update={"tool_calls": calls, "token_counts": {}})


def emergency_truncate(
    messages: list[Message],
    *,
    budget: int,
    policy: ContextPolicy,
    count: Callable[[Message], int],
) -> tuple[list[Message], list[Truncation]]:
    """Shrink copies of ``messages``, order kept, until they fit ``budget`` or nothing is left."""
    out = list(messages)
    sizes = [count(m) for m in out]
    done: list[Truncation] = []
    passes: list[Callable[[Message], Message | None]] = []
    if policy.strip_images:
        passes.append(strip_images)
    passes.append(lambda m: truncate_text(m, policy))
    passes.append(lambda m: truncate_arguments(m, policy))
    names = (["strip_images"] if policy.strip_images else []) + ["truncate", "truncate_arguments"]
    for name, step in zip(names, passes, strict=True):
        for i, m in enumerate(out):
            if sum(sizes) <= budget:
                return out, done
            smaller = step(m)
            if smaller is None:
                continue
            after = count(smaller)
            done.append(Truncation(seq=m.seq, how=name, tokens_before=sizes[i], tokens_after=after))
            out[i], sizes[i] = smaller, after
    return out, done
