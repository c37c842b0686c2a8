"""``threadline compact ID``: compact a session now and show the snapshot and its report.

The command parses options, builds a summarizer (extractive without a model,
hybrid with one), runs ``Compactor.compact(force=True)`` and renders: the
snapshot, then what was summarized, what it cost and how many exact values
survived verbatim. ``--dry-run`` shows the same without writing a checkpoint.

The session's agent (``threadline.session_agent``, or ``--agent``) supplies the
memory whose pending extraction is flushed first.

``compact ID --json``::

    {"status", "reason", "session_id", "dry_run", "checkpoint": Checkpoint | null,
     "covers_from", "covers_up_to", "messages_summarized", "messages_kept",
     "summarizer", "summarizer_model", "input_tokens", "output_tokens", "words",
     "retention": {"total", "kept", "missing", "ratio"}, "duration_ms", "summary",
     "fallback": {"from", "reasons", "input_tokens", "output_tokens"} | null,
     "checkpoint_number"}

``fallback`` is set when the model's snapshot was unusable (an empty reply, no
section, files no message shows) and the offline snapshot was stored instead; the
report then says so in a ``Fallback`` line.

``checkpoint_number`` is the new checkpoint's number within the session (``sessions
show`` numbers them the same way); ``checkpoint.id`` is its store id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.text import Text

from threadline.cli.errors import exit_interrupted
from threadline.cli.params import IdArg
from threadline.cli.render import make_console, print_json
from threadline.cli.state import store_of
from threadline.compaction.compactor import CompactionResult, Compactor
from threadline.compaction.llm import SummarizerKind, make_summarizer
from threadline.compaction.snapshot import words
from threadline.context import ContextPolicy
from threadline.errors import UsageError, validation_problems
from threadline.llm import ChatModel, resolve_model
from threadline.report.context import checkpoint_number
from threadline.session_agent import session_agent
from threadline.store import Session
from threadline.store.checks import MAX_INT

MISSING_SHOWN = 10
"""Values missing from the snapshot listed by name in the report."""
LABEL_WIDTH = 18


class SummarizerChoice(StrEnum):
    extractive = "extractive"
    llm = "llm"
    hybrid = "hybrid"


KINDS: dict[SummarizerChoice, SummarizerKind] = {
    SummarizerChoice.extractive: "extractive",
    SummarizerChoice.llm: "llm",
    SummarizerChoice.hybrid: "hybrid",
}


def make_compaction_policy(*, max_words: int | None, limit: int | None = None) -> ContextPolicy:
    """The policy of ``threadline compact``: the defaults, with ``--max-words`` and the
    ``--limit`` of the window the kept tail must fit."""
    fields: dict[str, object] = {}
    if max_words is not None:
        fields["summary_max_words"] = max_words
    if limit is not None:
        fields["context_limit"] = limit
    try:
        return ContextPolicy.model_validate(fields)
    except ValidationError as exc:
        raise UsageError(f"invalid compaction options: {validation_problems(exc)}") from exc


def _chat_model(
    choice: SummarizerChoice | None, model: str | None, session_model: str | None
) -> ChatModel | None:
    """The summarizer's model: ``--model``, else the session's when a model is required."""
    if model is not None:
        return resolve_model(model)
    if choice in (SummarizerChoice.llm, SummarizerChoice.hybrid):
        if not session_model:
            raise UsageError(
                f"--summarizer {choice.value} needs a model: pass --model provider/name"
            )
        return resolve_model(session_model)
    return None


def _kv(label: str, value: str) -> Text:
    return Text(f"  {label + ':':<{LABEL_WIDTH}}{value}")


AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        "-a",
        metavar="NAME",
        help="Agent whose memory to use (default: the session's agent).",
        show_default=False,
    ),
]


def print_blocks(blocks: Sequence[RenderableType], console: Console | None = None) -> None:
    """Printable blocks (on stdout by default), a blank line between them."""
    console = console or make_console()
    for i, block in enumerate(blocks):
        if i:
            console.print()
        console.print(block)


def result_json(result: CompactionResult) -> dict[str, Any]:
    """The documented ``--json`` document."""
    summary = result.summary
    checkpoint = result.checkpoint
    metadata = checkpoint.metadata if checkpoint else {}
    return {
        "status": result.status,
        "reason": result.reason,
        "session_id": result.session_id,
        "dry_run": result.status == "dry_run",
        "checkpoint": checkpoint.to_dict() if checkpoint else None,
        "covers_from": result.covers_from,
        "covers_up_to": result.covers_up_to,
        "messages_summarized": result.messages_summarized,
        "messages_kept": result.messages_kept,
        "summarizer": summary.summarizer if summary else None,
        "summarizer_model": metadata.get("summarizer_model"),
        "input_tokens": summary.input_tokens if summary else None,
        "output_tokens": summary.output_tokens if summary else None,
        "words": words(summary.text) if summary else None,
        "retention": dataclasses.asdict(summary.retention) if summary else None,
        "duration_ms": round(result.duration_ms, 3),
        "summary": summary.text if summary else None,
        "fallback": result.fallback,
    }


def _fallback_lines(result: CompactionResult) -> list[Text]:
    note = result.fallback
    if not note:
        return []
    why = "; ".join(str(r) for r in note.get("reasons") or []) or "unusable"
    return [
        _kv(
            "Fallback",
            f"the {note.get('from')} snapshot was not used ({why}); the offline one was stored",
        )
    ]


def render_result(result: CompactionResult, number: int | None = None) -> list[RenderableType]:
    """The snapshot, then the report, as printable blocks (``number``: the checkpoint's
    number within the session)."""
    summary = result.summary
    if summary is None:
        return [Text(f"Nothing compacted: {result.reason}", style="yellow")]
    blocks: list[RenderableType] = [Text(summary.text.rstrip())]
    if result.status == "dry_run":
        title = Text("Dry run", style="bold")
        title.append("  (no checkpoint written)", style="dim")
    else:
        title = Text("Compacted", style="bold green")
        if number is not None:
            title.append(f"  checkpoint #{number}", style="dim")
    r = summary.retention
    lines = [
        _kv(
            "Summarized",
            f"{result.messages_summarized:,} messages (seq {result.covers_from}-"
            f"{result.covers_up_to}); {result.messages_kept:,} recent kept verbatim",
        ),
        _kv("Summarizer", summary.summarizer),
        *_fallback_lines(result),
        _kv("Snapshot", f"{words(summary.text):,} words"),
        _kv(
            "Tokens",
            "none (offline)"
            if summary.input_tokens is None
            else f"{summary.input_tokens:,} in, {summary.output_tokens or 0:,} out",
        ),
        _kv(
            "Exact values",
            f"{r.kept:,} of {r.total:,} kept verbatim ({r.ratio * 100:.0f}%)",
        ),
    ]
    if r.missing:
        shown = ", ".join(r.missing[:MISSING_SHOWN])
        more = (
            f" and {len(r.missing) - MISSING_SHOWN} more" if len(r.missing) > MISSING_SHOWN else ""
        )
        lines.append(_kv("Not kept", f"{shown}{more}"))
    lines.append(_kv("Time", f"{result.duration_ms:,.0f} ms"))
    for err in result.hook_errors:
        lines.append(_kv("Hook failed", f"{err.event}: {err.hook}: {err.error}"))
    blocks.append(Group(title, Text("\n").join(lines)))
    return blocks


def compact(
    ctx: typer.Context,
    session_id: IdArg,
    summarizer: Annotated[
        SummarizerChoice | None,
        typer.Option(
            "--summarizer",
            "-s",
            help="extractive (offline), llm, or hybrid (llm + exact values). "
            "Default: hybrid with --model, else extractive.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Summarizer model, e.g. openai/gpt-4o-mini."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Summarize and report; write no checkpoint.")
    ] = False,
    max_words: Annotated[
        int | None,
        typer.Option("--max-words", max=MAX_INT, help="Snapshot word limit (default 600)."),
    ] = None,
    keep_recent: Annotated[
        int | None,
        typer.Option(
            "--keep-recent",
            min=0,
            max=MAX_INT,
            help="Keep only this many recent messages (and --keep-turns turns, while "
            "they fit) instead of the newest units that fill the preserve share.",
        ),
    ] = None,
    keep_turns: Annotated[
        int | None,
        typer.Option(
            "--keep-turns",
            min=0,
            max=MAX_INT,
            help="Keep only the last N user turns (while they fit) instead of the newest "
            "units that fill the preserve share.",
        ),
    ] = None,
    focus: Annotated[
        str | None,
        typer.Option("--focus", help="What the summary should give most room to."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            max=MAX_INT,
            help="The context window (tokens) the kept tail must fit, as in `context "
            "--limit`. Default: the model's.",
        ),
    ] = None,
    agent: AgentOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Compact a session now: summarize older messages into a checkpoint (history is kept).

    When the session's agent (or ``--agent``) has memory on, pending memory extraction
    is flushed first, as in chat, so no fact is summarized away unsaved."""
    policy = make_compaction_policy(max_words=max_words, limit=limit)
    session = store_of(ctx).get_session(session_id)
    chat_model = _chat_model(summarizer, model, session.model)
    kind = KINDS[summarizer] if summarizer is not None else None
    summ = make_summarizer(kind, chat_model, max_words=policy.summary_max_words)
    compactor = Compactor(summ, policy=policy)
    before = session.store.latest_checkpoint(session.id)
    try:
        with session_agent(session.store, session.info, agent=agent, compactor=compactor) as runner:
            result = runner.compactor.compact(
                session,
                force=True,
                dry_run=dry_run,
                keep_recent=keep_recent,
                keep_turns=keep_turns,
                focus=focus.strip() if focus and focus.strip() else None,
            )
        checkpoint = result.checkpoint
        number = (
            checkpoint_number(session.checkpoints(), checkpoint.id, checkpoint.session_id)
            if checkpoint is not None
            else None
        )
        if as_json:
            print_json({**result_json(result), "checkpoint_number": number})
            return
        print_blocks(render_result(result, number))
    except KeyboardInterrupt:
        _interrupted(session, before.id if before is not None else None)
    finally:
        _close(chat_model)


def _close(model: ChatModel | None) -> None:
    """Close the summarizer's HTTP connections now: an SDK client left to the garbage
    collector keeps its socket open until then (and warns of it)."""
    close = getattr(model, "close", None)
    if callable(close):
        close()


def _interrupted(session: Session, before: int | None) -> NoReturn:
    """Ctrl-C during ``compact``: whether the checkpoint was written (the store says),
    with its number and id, so a user does not run it again for nothing."""
    latest = session.store.latest_checkpoint(session.id)
    if latest is None or latest.id == before:
        exit_interrupted("no checkpoint was written; the session is as it was")
    number = checkpoint_number(session.checkpoints(), latest.id, latest.session_id)
    exit_interrupted(
        f"checkpoint #{number} (id {latest.id}) was written first: it summarizes messages "
        f"up to seq {latest.covers_up_to} of session {session.id}, and the session keeps it"
    )


def register(root: typer.Typer) -> None:
    root.command("compact")(compact)
