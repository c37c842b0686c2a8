"""``threadline context ID``: build the window a model would get, and explain it.

The report follows the reference CLI's ``/context``: the limit, what each
section costs with a bar against the limit, the summary in use, and what was
dropped, truncated or repaired. When the session's agent (or ``--agent``) has
memory on, the window holds the memories its next call would get, so the report's
Memories row shows them and the budget leaves out their reserve. Checkpoints are
numbered within the session, as ``sessions show`` numbers them.
``render_context_report`` returns a list of
blocks; callers that know more (the chat REPL's compaction triggers) append
their own blocks, e.g. built with ``render.usage_line``, to the same list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from threadline.cli.compact_cmd import (
    AgentOpt,
    checkpoint_number,
    print_blocks,
    render_trigger_progress,
    session_agent,
)
from threadline.cli.render import (
    bar,
    fmt_int,
    fmt_pct,
    fmt_time,
    plural,
    print_json,
)
from threadline.cli.state import store_of
from threadline.compaction.triggers import plan_compaction
from threadline.context import ContextPolicy, ContextWindow, build_context
from threadline.errors import UsageError, validation_problems
from threadline.json_limits import MAX_JSON_DEPTH, nesting_too_deep
from threadline.store import Checkpoint, Session
from threadline.store.base import MAX_INT

SECTION_LABELS = {
    "system": "System prompt",
    "tools": "Tool definitions",
    "summary": "Summary",
    "history": "Recent messages",
    "reply_priming": "Reply priming",
    "memory": "Memories",
}
LABEL_WIDTH = 18
PRUNED_SHOWN = 4
"""Pruned tool results listed one by one before the rest are counted."""


class Strategy(StrEnum):
    stable = "stable"
    greedy = "greedy"


def read_text_file(path: Path, *, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not valid UTF-8 (byte {exc.start})") from exc


def read_tools_file(path: Path) -> list[dict[str, Any]]:
    """A JSON array of tool definitions (OpenAI ``{"type": "function", ...}`` or Anthropic)."""
    text = read_text_file(path, what="tools file")
    deep = nesting_too_deep(text)  # the parser would recurse into it
    if deep is not None:
        raise UsageError(
            f"tools file {path} nests more than {MAX_JSON_DEPTH} levels deep (line {deep})"
        )
    try:
        tools = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"tools file {path} is not JSON: line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise UsageError(f"tools file {path} must hold a JSON array of tool definitions")
    return tools


def make_policy(
    *, limit: int | None, reserve: int | None, strategy: Strategy | None
) -> ContextPolicy:
    """A default policy with only the options the user gave overridden."""
    fields: dict[str, object] = {}
    if limit is not None:
        fields["context_limit"] = limit
    if reserve is not None:
        fields["response_reserve"] = reserve
    if strategy is not None:
        fields["trim_strategy"] = strategy.value
    try:
        return ContextPolicy.model_validate(fields)
    except ValidationError as exc:
        raise UsageError(f"invalid context options: {validation_problems(exc)}") from exc


def _kv(label: str, value: str | Text) -> Text:
    line = Text(f"  {label + ':':<{LABEL_WIDTH}}")
    line.append_text(value if isinstance(value, Text) else Text(value))
    return line


def _seq_range(first: int | None, last: int | None) -> str:
    if first is None or last is None:
        return ""
    return f" (seq {first}-{last})" if first != last else f" (seq {first})"


def render_context_report(
    window: ContextWindow, session: Session, checkpoint: Checkpoint | None = None
) -> list[RenderableType]:
    """The ``/context`` report as printable blocks, in order."""
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

    lines = [
        _kv("Stored", plural(r.history_messages, "message")),
        _kv(
            "In window",
            plural(r.included_messages, "message") + _seq_range(r.first_seq, r.last_seq),
        ),
        _kv("Summary", _summary_text(window, checkpoint, session.checkpoints())),
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
    if r.notes:
        blocks.append(Text("\n").join(_kv("Note", n) for n in r.notes))
    return blocks


def _budget_terms(memory_reserve: int) -> str:
    """What the budget leaves out; the memory reserve's size is on the Memories row."""
    terms = "limit - reserve - system - tools"
    return f"{terms} - memory reserve" if memory_reserve else terms


def _summary_text(
    window: ContextWindow, checkpoint: Checkpoint | None, checkpoints: Sequence[Checkpoint]
) -> str:
    r = window.report
    if r.checkpoint_id is None:
        return "none (no checkpoint yet)"
    tokens = next((s.tokens for s in r.sections if s.name == "summary"), 0)
    covered = plural(r.covered_by_summary, "message")
    in_use = checkpoint is not None and checkpoint.id == r.checkpoint_id
    number = checkpoint_number(
        checkpoints, r.checkpoint_id, checkpoint.session_id if checkpoint and in_use else None
    )
    text = f"checkpoint #{number or r.checkpoint_id}: {covered} -> {tokens:,} tokens"
    if checkpoint is not None and in_use:
        text += f", created {fmt_time(checkpoint.created_at)}"
    if r.summary_omitted:
        text += " (omitted: it does not fit its share of the budget)"
    elif r.summary_cut:
        text += " (lowest-ranked bullets left out to fit its share)"
    if r.newest_checkpoint_id is not None and r.newest_checkpoint_id != r.checkpoint_id:
        newest = checkpoint_number(checkpoints, r.newest_checkpoint_id) or r.newest_checkpoint_id
        text += (
            f"; newest is #{newest} (covers 1-{r.newest_checkpoint_covers}), "
            "adopted at the next re-trim"
        )
    elif r.newest_checkpoint_id is not None:
        text += " (the newest)"
    return text


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


def context(
    ctx: typer.Context,
    session_id: Annotated[
        str, typer.Argument(metavar="ID", help="Session id or a unique prefix (4+).")
    ],
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model to fit (default: the session's).")
    ] = None,
    system: Annotated[
        Path | None,
        typer.Option(
            "--system", metavar="FILE", exists=True, dir_okay=False, help="System prompt file."
        ),
    ] = None,
    tools: Annotated[
        Path | None,
        typer.Option(
            "--tools",
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="JSON array of tool definitions to count.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=MAX_INT, help="Context limit override (tokens)."),
    ] = None,
    reserve: Annotated[
        int | None,
        typer.Option("--reserve", min=0, max=MAX_INT, help="Tokens reserved for the reply."),
    ] = None,
    strategy: Annotated[
        Strategy | None, typer.Option("--strategy", help="Trim strategy (default: stable).")
    ] = None,
    agent: AgentOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print messages and report.")] = False,
) -> None:
    """Build the context window for a session and report what it holds.

    When the session's agent (or ``--agent``) has memory on, the window holds the
    memories its next call would get for the latest request."""
    system_prompt = read_text_file(system, what="system prompt file") if system else None
    tool_defs = read_tools_file(tools) if tools else None
    policy = make_policy(limit=limit, reserve=reserve, strategy=strategy)
    session = store_of(ctx, create=False).get_session(session_id)
    with session_agent(session, agent) as runner:
        memory = runner.memory.window_args(session) if runner.memory is not None else {}
        window = build_context(
            session,
            model=model,
            system_prompt=system_prompt,
            tools=tool_defs,
            policy=policy,
            **memory,
        )
    if as_json:
        print_json(
            {"messages": window.to_openai(), "report": window.report.model_dump(mode="json")}
        )
        return
    print_blocks(context_blocks(window, session, policy))


def context_blocks(
    window: ContextWindow, session: Session, policy: ContextPolicy
) -> list[RenderableType]:
    """The report, then the triggers and the range a compaction would cover: one
    decision, the same the compactor makes (``plan_compaction``)."""
    blocks = render_context_report(window, session, session.latest_checkpoint())
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


def register(root: typer.Typer) -> None:
    root.command("context")(context)
