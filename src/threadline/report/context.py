"""The context report: what a session's next model call would get, built and shown once.

``session_context`` builds it for a session and its agent (``session_agent``: the
agent's system prompt, tool definitions, policy and memories, the budget calibrated
from the session's own record) and renders it as blocks: the reference CLI's
``/context`` (the limit, what each section costs with a bar against the limit, the
summary in use, what was dropped, truncated or repaired), then the compaction
triggers and the range a compaction would cover (``plan_compaction``, the decision the
compactor makes). ``threadline context``, the chat's ``/context`` and the web page's
context panel all show this one report, so they agree for the same session and agent.

Checkpoints are numbered within their session (#1 its first, a fork's inherited ones
included), as ``sessions show`` numbers them; the report carries both numbers
(``checkpoint_number``, ``newest_checkpoint_number``) beside the store's ids.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from threadline.compaction.triggers import TriggerDecision, plan_compaction
from threadline.context import ContextPolicy, ContextWindow
from threadline.report.lineage import subagent_tally
from threadline.report.text import (
    SafeConsole,
    bar,
    fmt_int,
    fmt_pct,
    fmt_time,
    plural,
    usage_line,
)
from threadline.store import Checkpoint, Session

if TYPE_CHECKING:
    from threadline.agent import Agent

SECTION_LABELS = {
    "system": "System prompt",
    "tools": "Tool definitions",
    "summary": "Summary",
    "history": "Recent messages",
    "reply_priming": "Reply priming",
    "memory": "Memories",
}
PROMPT_DETAIL_CHARS = 60
PROMPT_LABEL_WIDTH = len("  Agent instructions")
LABEL_WIDTH = 18
PRUNED_SHOWN = 4
MEMORY_LINE_SHOWN = 90
"""Characters of an injected memory shown in the report."""
"""Pruned tool results listed one by one before the rest are counted."""
TRIGGER_LABELS = {
    "messages": "Messages",
    "tokens": "Tokens",
    "context": "Context",
    "window": "Unsummarized",
}
REPORT_WIDTH = 100
"""Columns of the report as text (``SessionContext.text``)."""


@dataclass
class SessionContext:
    """A session's context report: the window, and its blocks as the CLI prints them."""

    window: ContextWindow
    blocks: list[RenderableType]

    def as_json(self) -> dict[str, Any]:
        """``threadline context --json``: the messages to send and the report."""
        return {
            "messages": self.window.to_openai(),
            "report": self.window.report.model_dump(mode="json"),
        }

    def text(self, width: int = REPORT_WIDTH) -> str:
        """The blocks as plain text (no colour), a blank line between them."""
        out = io.StringIO()
        console = SafeConsole(
            file=out, width=width, color_system=None, markup=False, highlight=False, emoji=False
        )
        for i, block in enumerate(self.blocks):
            if i:
                console.print()
            console.print(block)
        return out.getvalue()


def session_context(
    session: Session,
    agent: Agent,
    *,
    system_prompt: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> SessionContext:
    """The window ``agent``'s next call on ``session`` would get, and its report.

    ``system_prompt`` and ``tools`` replace the agent's own (``threadline context
    --system/--tools``). Raises ``ContextOverflow`` when it cannot fit."""
    window = agent.build(session, system_prompt=system_prompt, tools=tools)
    return SessionContext(window, context_blocks(window, session, agent.policy))


def number_checkpoints(window: ContextWindow, checkpoints: Sequence[Checkpoint]) -> None:
    """Fill the report's per-session checkpoint numbers from the session's checkpoints."""
    r = window.report
    r.checkpoint_number = checkpoint_number(checkpoints, r.checkpoint_id)
    r.newest_checkpoint_number = checkpoint_number(checkpoints, r.newest_checkpoint_id)


def checkpoint_number(
    checkpoints: Sequence[Checkpoint], checkpoint_id: int | None, session_id: str | None = None
) -> int | None:
    """A checkpoint's number within its session: its place in ``session.checkpoints()``
    (#1 the first, a fork's inherited ones included), as ``sessions show`` numbers them."""
    for n, c in reversed(list(enumerate(checkpoints, start=1))):
        if c.id == checkpoint_id and session_id in (None, c.session_id):
            return n
    return None


def _kv(label: str, value: str | Text) -> Text:
    line = Text(f"  {label + ':':<{LABEL_WIDTH}}")
    line.append_text(value if isinstance(value, Text) else Text(value))
    return line


def _seq_range(first: int | None, last: int | None) -> str:
    if first is None or last is None:
        return ""
    return f" (seq {first}-{last})" if first != last else f" (seq {first})"


def render_context_report(window: ContextWindow, session: Session) -> list[RenderableType]:
    """The ``/context`` report as printable blocks, in order (the checkpoints numbered)."""
    checkpoints = session.checkpoints()
    number_checkpoints(window, checkpoints)
    r = window.report
    blocks: list[RenderableType] = []
    tokenizer = r.tokenizer.replace(":estimated", " (estimated)")
    title = Text("Context Status", style="bold")
    title.append(f"  session {session.id} · {r.model} · {tokenizer} · {r.strategy}", style="dim")
    blocks.append(title)
    used = Text(f"{r.total_tokens:,} / {r.limit:,} tokens ({fmt_pct(r.total_tokens, r.limit)}) ")
    used.append(bar(r.total_tokens, r.limit))
    blocks.append(
        Text("\n").join(
            [
                _kv("Context limit", f"{r.limit:,} tokens"),
                _kv("Reply reserve", f"{r.response_reserve:,} tokens"),
                _kv("Budget", f"{r.budget:,} tokens ({_budget_terms(r.memory_reserve)})"),
                _kv("In window", used),
            ]
        )
    )

    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
    table.add_column("  Section", no_wrap=True)
    table.add_column("Tokens", justify="right", no_wrap=True)
    table.add_column("Msgs", justify="right", no_wrap=True)
    table.add_column("of limit", no_wrap=True)
    table.add_column("", justify="right", no_wrap=True)
    table.add_column("Detail", no_wrap=True)
    for s in r.sections:
        table.add_row(
            "  " + SECTION_LABELS.get(s.name, s.name),
            fmt_int(s.tokens),
            fmt_int(s.messages),
            bar(s.tokens, r.limit),
            fmt_pct(s.tokens, r.limit),
            Text(s.detail, style="dim"),
        )
    blocks.append(table)
    if r.prompt_sections:
        blocks.append(render_prompt_sections(window))

    lines = [
        _kv("Stored", plural(r.history_messages, "message")),
        *_subagent_lines(session),
        _kv(
            "In window",
            plural(r.included_messages, "message") + _seq_range(r.first_seq, r.last_seq),
        ),
        _kv("Summary", _summary_text(window, checkpoints)),
        _kv(
            "Dropped",
            plural(r.dropped_messages, "message")
            + " (stored, neither in the window nor summarised)",
        ),
    ]
    if r.truncations:
        cuts = ", ".join(
            f"seq {t.get('seq')} {t.get('how')} "
            f"{fmt_int(t.get('tokens_before'))}->{fmt_int(t.get('tokens_after'))}"
            for t in r.truncations
        )
        lines.append(_kv("Truncated", cuts))
    else:
        lines.append(_kv("Truncated", "nothing"))
    if r.pruned:
        shown = ", ".join(
            f"seq {p.get('seq')} {p.get('tool') or 'tool'} {p.get('action', '')} "
            f"{fmt_int(p.get('chars_before'))}->{fmt_int(p.get('chars_after'))} chars"
            for p in r.pruned[:PRUNED_SHOWN]
        )
        more = f" and {len(r.pruned) - PRUNED_SHOWN} more" if len(r.pruned) > PRUNED_SHOWN else ""
        lines.append(_kv("Pruned", f"{len(r.pruned)} tool result(s): {shown}{more}"))
    else:
        lines.append(_kv("Pruned", "nothing"))
    repaired = []
    if r.synthesized_results:
        ids = ", ".join(r.synthesized_results[:3])
        more = " ..." if len(r.synthesized_results) > 3 else ""
        repaired.append(
            f"{len(r.synthesized_results)} interrupted tool call(s) given a synthetic result "
            f"({ids}{more})"
        )
    if r.repaired:
        repaired.append(
            f"{len(r.repaired)} result(s) logged after a later message placed right after "
            "their call"
        )
    if r.orphan_results:
        repaired.append(f"{len(r.orphan_results)} result(s) without their call left out")
    lines.append(_kv("Repaired", "; ".join(repaired) if repaired else "nothing"))
    lines.append(_kv("Prefix", _prefix_text(window)))
    blocks.append(Text("\n").join(lines))
    if r.memory_reasons:
        blocks.append(_injected_block(r.memories, r.memory_reasons))
    if r.notes:
        blocks.append(Text("\n").join(_kv("Note", n) for n in r.notes))
    return blocks


def _injected_block(memories: Sequence[str], reasons: Sequence[str]) -> RenderableType:
    """``Injected memories``: each memory line placed in the window, and why."""
    rows = [Text("Injected memories", style="bold")]
    for line, why in zip(memories, reasons, strict=False):
        row = Text(f"  - {line[:MEMORY_LINE_SHOWN]}{'…' if len(line) > MEMORY_LINE_SHOWN else ''}")
        row.append(f"  ({why})", style="dim")
        rows.append(row)
    return Text("\n").join(rows)


def _subagent_lines(session: Session) -> list[Text]:
    """``Subagents  2 child sessions, 14 messages`` when subagents ran under the session."""
    tally = subagent_tally(session.store, session.id)
    if not tally.direct:
        return []
    text = plural(tally.direct, "child session")
    if tally.nested:
        text += f" (and {plural(tally.nested, 'nested one')} below them)"
    text += f", {plural(tally.messages, 'message')} (in their own sessions, not this window)"
    return [_kv("Subagents", text)]


def render_prompt_sections(window: ContextWindow) -> RenderableType:
    """``System prompt``: each part the agent assembled, in the order sent, with its
    tokens and how it begins (a skill or subagent hint list: how many it names)."""
    from threadline.agent.prompt import SECTION_TITLES  # the titles the prompt gives them

    r = window.report
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
    table.add_column("  System prompt", no_wrap=True, min_width=PROMPT_LABEL_WIDTH)
    table.add_column("Tokens", justify="right", no_wrap=True, min_width=len("Tokens"))
    table.add_column("Detail", ratio=1)  # wraps on a narrow screen, the rest never
    for s in r.prompt_sections:
        detail = s.detail
        if len(detail) > PROMPT_DETAIL_CHARS:
            detail = detail[: PROMPT_DETAIL_CHARS - 3] + "..."
        if s.messages:
            detail = plural(s.messages, "entry", "entries") + (f": {detail}" if detail else "")
        table.add_row(
            "  " + SECTION_TITLES.get(s.name, s.name),  # type: ignore[call-overload]
            fmt_int(s.tokens),
            Text(detail, style="dim"),
        )
    return table


def _budget_terms(memory_reserve: int) -> str:
    """What the budget leaves out; the memory reserve's size is on the Memories row."""
    terms = "limit - reserve - system - tools"
    return f"{terms} - memory reserve" if memory_reserve else terms


def _summary_text(window: ContextWindow, checkpoints: Sequence[Checkpoint]) -> str:
    r = window.report
    if r.checkpoint_id is None:
        return "none (no checkpoint yet)"
    tokens = next((s.tokens for s in r.sections if s.name == "summary"), 0)
    covered = plural(r.covered_by_summary, "message")
    shown = next((c for c in checkpoints if c.id == r.checkpoint_id), None)
    text = f"checkpoint {_numbered(r.checkpoint_number)}: {covered} -> {tokens:,} tokens"
    if shown is not None:
        text += f", created {fmt_time(shown.created_at)}"
    if r.summary_omitted:
        text += " (omitted: it does not fit its share of the budget)"
    elif r.summary_cut:
        text += " (lowest-ranked bullets left out to fit its share)"
    if r.newest_checkpoint_id is not None and r.newest_checkpoint_id != r.checkpoint_id:
        text += (
            f"; newest is {_numbered(r.newest_checkpoint_number)} (covers "
            f"1-{r.newest_checkpoint_covers}), adopted at the next re-trim"
        )
    elif r.newest_checkpoint_id is not None:
        text += " (the newest)"
    return text


def _numbered(number: int | None) -> str:
    return f"#{number}" if number is not None else "(not among the session's checkpoints)"


def _prefix_text(window: ContextWindow) -> str:
    r = window.report
    start = f"starts at seq {r.first_seq}" if r.first_seq is not None else "no history"
    if r.prefix_changed is None:
        state = "first build (nothing earlier to compare)"
    elif r.prefix_changed:
        state = "changed since the previous build"
    else:
        state = "unchanged since the previous build (prompt cache keeps hitting)"
    if r.retrimmed:
        state += f"; re-trimmed to the low-water mark ({r.strategy})"
    return f"{start}; {state}"


def context_blocks(
    window: ContextWindow, session: Session, policy: ContextPolicy
) -> list[RenderableType]:
    """The report, then the triggers and the range a compaction would cover: one
    decision, the same the compactor makes (``plan_compaction``)."""
    blocks = render_context_report(window, session)
    plan = plan_compaction(
        session,
        policy,
        model=window.model,
        budget=window.budget,
        window=window.report,
        always_cut=True,
    )
    blocks.append(render_trigger_progress(plan.decision))
    return blocks


def render_trigger_progress(decision: TriggerDecision) -> RenderableType:
    """``Summarization Triggers`` with a bar per trigger, as in the reference ``/context``."""
    head = Text("Compaction Triggers", style="bold")
    if not decision.auto_summarize:
        head.append("  (auto_summarize is off)", style="dim")
    else:
        head.append(
            f"  (any one fires after {decision.minimum_messages} new messages)", style="dim"
        )
    rows: list[RenderableType] = [head]
    for p in decision.progress:
        label = TRIGGER_LABELS.get(p.name, p.name)
        if p.name == "window":  # a count, not a threshold to approach
            style = "yellow" if p.value else "dim"
            rows.append(
                Text(
                    f"  {label + ':':<14}{plural(p.value, 'stored message')} outside the "
                    "window and every checkpoint",
                    style=style,
                )
            )
            continue
        if not p.available:
            rows.append(Text(f"  {label + ':':<10}- (no context built yet)", style="dim"))
            continue
        line = usage_line(label, p.value, p.threshold)
        line.pad_left(2)
        rows.append(line)
    if decision.fire:
        rows.append(Text(f"  fires now: {decision.note}", style="yellow"))
    elif decision.note:
        rows.append(Text(f"  {decision.note}", style="dim"))
    if decision.covers_up_to is not None:
        rows.append(
            Text(
                f"  a compaction now would summarize seq {decision.covers_from}-"
                f"{decision.covers_up_to} and keep {plural(decision.kept_messages or 0, 'message')}"
                f" ({decision.kept_tokens or 0:,} tokens) verbatim",
                style="dim",
            )
        )
    elif decision.kept_messages is not None:
        rows.append(
            Text(
                f"  a compaction now would summarize nothing: the "
                f"{plural(decision.kept_messages, 'message')} since the last checkpoint are kept",
                style="dim",
            )
        )
    return Group(*rows)
