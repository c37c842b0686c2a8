"""Rich building blocks the commands share: consoles, tables, messages, JSON.

Stored text is shown by ``threadline.report.text``'s rule (``printable``, re-exported
here with the numbers and bars, which the web pages share). Every console comes from
``make_console``, whose ``SafeConsole`` applies the rule to everything it renders
(Markdown and tables included) and never reads Rich markup, so ``[bold]`` in a title
prints as typed. Text printed without a console goes through ``echo``. JSON goes
through ``print_json`` untouched by Rich (JSON escapes control characters itself), so
scripts get the raw values in exactly the documented shapes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from threadline.report.text import (
    SafeConsole,
    fmt_int,
    fmt_time,
    plural,
    printable,
    session_preview,
    shorten,
)
from threadline.requests import is_harness_text
from threadline.store import SearchHit, SessionInfo, SessionPage, Store

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import FilePart, ImagePart, Message, ToolCall

__all__ = [
    "SafeConsole",
    "fmt_int",
    "fmt_time",
    "plural",
    "printable",
    "session_preview",
    "shorten",
]

PIPE_WIDTH = 120
"""Console width when stdout is not a terminal and ``COLUMNS`` is unset."""
HISTORY_HEAD_CHARS = 1200
"""``sessions history`` shows this much of a long message's start..."""
HISTORY_TAIL_CHARS = 300
"""...and this much of its end."""
ARGUMENTS_CHARS = 160
"""Tool-call arguments longer than this are shortened in compact views."""
RESULT_LINE_CHARS = 160
"""The first line of a tool result shown in compact views."""
SNIPPET_CHARS = 160
MIN_PREVIEW_WIDTH = 12
COLUMN_GAP = 2
"""Spaces Rich puts between two table columns (padding 1 on each side)."""


def echo(text: str, *, err: bool = False, one_line: bool = False) -> None:
    """``typer.echo`` for text that holds stored or caller data."""
    typer.echo(printable(text, one_line=one_line), err=err)


def make_console(*, stderr: bool = False) -> Console:
    """A console on the current stdout/stderr (looked up now, so test runners capture it);
    markup off, because no command prints markup and stored text must not be read as it."""
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not _isatty(stream) and not os.environ.get("COLUMNS"):
        width = PIPE_WIDTH
    return SafeConsole(
        file=stream, width=width, highlight=False, soft_wrap=False, emoji=False, markup=False
    )


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (a closed or replaced stream is not)."""
    return _isatty(stream)


def print_json(data: Any) -> None:
    """The documented ``--json`` output: indented, UTF-8, one document."""
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2))


# -- sessions ----------------------------------------------------------------------


def sessions_table(
    store: Store,
    page: SessionPage,
    *,
    width: int,
    children: Mapping[str, int] | None = None,
    depths: Mapping[str, int] | None = None,
) -> Table:
    """One row per session; only the preview column gives way to fit ``width``. With
    ``children``, a column counts the sessions listed under each; ``depths`` indents a
    session listed under the row above it (``sessions list --all``)."""
    headers = ["ID", "Agent", "Updated", "Msgs", "Tokens"]
    if children is not None:
        headers.append("Children")
    cells = []
    for info in page.items:
        depth = depths.get(info.id, 0) if depths else 0
        indent = "  " * (depth - 1) + "└ " if depth else ""
        row = [
            indent + printable(info.id, one_line=True),
            printable(info.agent, one_line=True),
            fmt_time(info.updated_at),
            fmt_int(info.message_count),
            fmt_int(info.total_tokens),
        ]
        if children is not None:
            count = children.get(info.id, 0)
            row.append(fmt_int(count) if count else "")
        cells.append(row)
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    room = max(MIN_PREVIEW_WIDTH, width - sum(widths) - COLUMN_GAP * len(widths))
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", no_wrap=True, min_width=widths[0])
    table.add_column("Agent", no_wrap=True, min_width=widths[1])
    table.add_column("Title / preview", overflow="ellipsis", no_wrap=True, max_width=room)
    table.add_column("Updated", no_wrap=True, min_width=widths[2])
    for header, w in zip(headers[3:], widths[3:], strict=True):
        table.add_column(header, no_wrap=True, min_width=w, justify="right")
    for info, (sid, agent, updated, *numbers) in zip(page.items, cells, strict=True):
        text = shorten(session_preview(store, info), room)
        preview = Text(text, style="" if info.title else "dim")
        table.add_row(Text(sid), Text(agent), preview, updated, *numbers)
    return table


def page_footer(page: SessionPage) -> Text:
    if page.total == 0:
        return Text("no sessions", style="dim")
    if not page.items:
        return Text(f"no sessions at offset {page.offset} ({page.total} in all)", style="dim")
    first, last = page.offset + 1, page.offset + len(page.items)
    return Text(f"{first}-{last} of {plural(page.total, 'session')}", style="dim")


def session_details(info: SessionInfo) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    rows: list[tuple[str, str]] = [
        ("ID", info.id),
        ("Agent", info.agent),
        ("Title", info.title or "-"),
        ("Model", info.model or "-"),
        ("Created", fmt_time(info.created_at)),
        ("Updated", fmt_time(info.updated_at)),
        *([("Under", info.parent_id)] if info.parent_id else []),
        ("Messages", fmt_int(info.message_count)),
        ("Tokens", fmt_int(info.total_tokens)),
        ("Last seq", fmt_int(info.last_seq)),
    ]
    if info.metadata:
        rows.append(("Metadata", json.dumps(info.metadata, ensure_ascii=False, sort_keys=True)))
    for key, value in rows:
        grid.add_row(key, Text(printable(value, one_line=True)))
    return grid


def search_table(hits: Sequence[SearchHit], *, width: int) -> Table:
    """One line per hit; the snippet is shortened to what the terminal has left. A hit in
    a session listed under another (a subagent's) names that parent session."""
    headers = ["Session", "Seq", "Role", "Agent"]
    under = any(h.parent_id for h in hits)
    if under:
        headers.append("Under")
    cells = [
        [
            printable(c, one_line=True)
            for c in (h.session_id, str(h.seq), h.role, h.agent or "-", h.parent_id or "-")
        ][: len(headers)]
        for h in hits
    ]
    widths = [max([len(t), *(len(row[i]) for row in cells)]) for i, t in enumerate(headers)]
    room = max(MIN_PREVIEW_WIDTH, width - sum(widths) - COLUMN_GAP * len(widths))
    table = Table(box=None, pad_edge=False, header_style="bold")
    for title, w in zip(headers, widths, strict=True):
        table.add_column(
            title, no_wrap=True, min_width=w, justify="right" if title == "Seq" else "left"
        )
    table.add_column("Snippet", no_wrap=True, overflow="ellipsis", max_width=room)
    for (sid, seq, role, agent, *parent), hit in zip(cells, hits, strict=True):
        snippet = shorten(hit.snippet, min(room, SNIPPET_CHARS))
        table.add_row(Text(sid), seq, role, Text(agent), *map(Text, parent), Text(snippet))
    return table


# -- messages ----------------------------------------------------------------------


def compact_call(call: ToolCall) -> Text:
    """``→ grep {"q": "x"}  [call_1]``: one line per tool call."""
    args = shorten(call.arguments_json(), ARGUMENTS_CHARS)
    text = Text("→ ", style="cyan")
    text.append(printable(call.name, one_line=True), style="bold cyan")
    text.append(f" {args}")
    text.append(f"  [{printable(call.id, one_line=True)}]", style="dim")
    return text


def part_label(part: ImagePart | FilePart) -> str:
    from threadline.messages import ImagePart

    if isinstance(part, ImagePart):
        size = f" {part.width}x{part.height}" if part.width and part.height else ""
        if part.url is not None:
            source = "url"
        elif part.media_ref is not None:
            source = f"ref {part.media_ref}"
        else:
            source = f"inline {len(part.data or ''):,} base64 chars"
        label = f"[image {part.media_type or ''}{size}, {source}]".replace("image ,", "image,")
    else:
        label = f"[file {part.name or part.uri}{' ' + part.media_type if part.media_type else ''}]"
    return printable(label, one_line=True)


def message_body(m: Message, *, full: bool = False) -> Text:
    """The content of a message: text (cut in the middle when long) and part labels."""
    from threadline.context.truncation import cut_middle
    from threadline.messages import TextPart

    body = Text()
    for part in m.parts:
        if body:
            body.append("\n")
        if isinstance(part, TextPart):
            text = part.text
            if not full:
                text = cut_middle(text, HISTORY_HEAD_CHARS, HISTORY_TAIL_CHARS)
            body.append(printable(text))
        else:
            body.append(part_label(part), style="magenta")
    return body


def message_header(m: Message) -> Text:
    head = Text()
    head.append(f"#{m.seq if m.seq is not None else '-'} ", style="dim")
    style = {"user": "bold green", "assistant": "bold blue", "tool": "bold yellow"}.get(
        m.role, "bold"
    )
    head.append(m.role, style=style)
    if m.role == "tool":
        name, call_id = m.name or "?", m.tool_call_id or ""
        head.append(printable(f" {name} ← [{call_id}]", one_line=True), style="yellow")
        if m.metadata.get("is_error"):
            head.append(" error", style="bold red")
    extras = [fmt_time(m.created_at)]
    if m.model:
        extras.append(printable(m.model, one_line=True))
    tokens = next(iter(m.token_counts.values()), None)
    if tokens is not None:
        extras.append(f"{tokens:,} tokens")
    if m.synthetic:
        extras.append("synthetic")
    if m.summary:
        extras.append("summary")
    if is_harness_text(m):
        extras.append("written by the agent's tool, not typed")
    head.append("  " + " · ".join(extras), style="dim")
    return head


def render_message(m: Message, *, full: bool = False) -> RenderableType:
    """A message as a few lines; tool results show their first line and their size."""
    from threadline.messages import TextPart

    lines: list[RenderableType] = [message_header(m)]
    if m.role == "tool" and not full:
        text = m.text
        first = shorten(text.splitlines()[0] if text.strip() else "", RESULT_LINE_CHARS)
        summary = Text("  " + first)
        more = len(text.splitlines())
        if more > 1 or len(text) > RESULT_LINE_CHARS:
            summary.append(f"  ({more:,} lines, {len(text):,} chars)", style="dim")
        lines.append(summary)
        for part in m.parts:
            if not isinstance(part, TextPart):
                lines.append(Text("  " + part_label(part), style="magenta"))
    else:
        body = message_body(m, full=full)
        if body:
            lines.append(Padding(body, (0, 0, 0, 2), expand=False))
    for call in m.tool_calls:
        line = Text("  ")
        line.append_text(compact_call(call))
        lines.append(line)
    return Group(*lines)


def render_messages(messages: Sequence[Message], *, full: bool = False) -> RenderableType:
    items: list[RenderableType] = []
    for i, m in enumerate(messages):
        if i:
            items.append(Text(""))
        items.append(render_message(m, full=full))
    return Group(*items)
