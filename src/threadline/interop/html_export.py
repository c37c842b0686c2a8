"""A session as one self-contained HTML page, for sharing.

The page must be safe to open from anywhere and to mail to anyone: every piece of
stored text (message text, tool names and arguments, titles, metadata, summaries)
goes through ``html.escape``; the style sheet is inline; there is no script and
nothing that fetches: an image given by URL is shown as its URL in text, never as
``<img src>`` (only images stored inline, as ``data:`` URLs of an image type, are
drawn). Each tool call is a collapsible ``<details>`` block under the assistant
message that made them, its summary a one-line preview of its arguments, followed by
its result (as the web page pairs them); a result whose call is not in that message
follows on its own. Each checkpoint is marked after the last message it covers,
numbered within the session, its summary collapsible.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from threadline.messages import FilePart, ImagePart, Message, TextPart, ToolCall

PREVIEW_CHARS = 120
"""Characters of a tool call's arguments shown in its one-line summary."""

_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;
color:#1f2328;background:#fff}
h1{font-size:1.5rem;margin-bottom:.25rem}.meta{color:#59636e;font-size:.85rem}
.msg{border:1px solid #d1d9e0;border-radius:8px;margin:1rem 0;padding:.5rem .9rem}
.msg header{font-size:.8rem;color:#59636e;margin-bottom:.3rem}
.user{background:#f6f8fa}.system{background:#fff8c5}.synthetic{border-style:dashed}
pre{white-space:pre-wrap;word-wrap:break-word;margin:.3rem 0;font:13px/1.45 ui-monospace,monospace}
details{margin:.4rem 0;border-left:3px solid #d1d9e0;padding-left:.6rem}
summary{cursor:pointer;font-size:.85rem;color:#0969da}.error summary{color:#cf222e}
.checkpoint{border:2px solid #8250df;border-radius:8px;margin:1.2rem 0;padding:.4rem .9rem;
background:#fbefff}
img{max-width:100%}
"""
_DATA_IMAGE = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _pre(text: str) -> str:
    return f"<pre>{_e(text)}</pre>" if text else ""


def _part(part: TextPart | ImagePart | FilePart) -> str:
    if isinstance(part, TextPart):
        return _pre(part.text)
    if isinstance(part, ImagePart):
        if part.data is not None and f"data:{part.media_type};" in _DATA_IMAGE:
            src = f"data:{part.media_type};base64,{part.data}"
            return f'<p><img alt="image" src="{_e(src)}"></p>'
        if part.url is not None and part.url.startswith(_DATA_IMAGE):
            return f'<p><img alt="image" src="{_e(part.url)}"></p>'
        where = part.url or part.media_ref or part.media_type or "image"
        return f"<p>[image: {_e(where)}]</p>"
    return f"<p>[file: {_e(part.uri)}]</p>"


def _arguments(call_arguments: str | None, parsed: dict[str, Any]) -> str:
    if call_arguments is not None:
        return call_arguments
    return json.dumps(parsed, ensure_ascii=False, indent=2)


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def _call(call: ToolCall) -> str:
    args = _arguments(call.raw_arguments, call.arguments)
    short = call.raw_arguments or json.dumps(call.arguments, ensure_ascii=False)
    label = f"Tool call: {call.name} ({call.id}): {_preview(short)}"
    return f"<details><summary>{_e(label)}</summary>{_pre(args)}</details>"


def _result(m: Message) -> str:
    error = bool(m.metadata.get("is_error"))
    text = m.text
    label = f"Result: {m.name or 'tool'} ({m.tool_call_id}) · {len(text):,} chars" + (
        " (error)" if error else ""
    )
    body = "".join(_part(p) for p in m.parts)
    cls = ' class="error"' if error else ""
    return f"<details{cls}><summary>{_e(label)}</summary>{body}</details>"


class _Turn:
    """An assistant message being written: its calls, each followed by its result once
    that arrives; results of calls it did not make are kept after them."""

    def __init__(self, m: Message) -> None:
        classes = f"msg {m.role}" + (" synthetic" if m.synthetic else "")
        self.head = [f'<article class="{classes}">{_header(m)}']
        self.head.extend(_part(p) for p in m.parts)
        self.calls = list(m.tool_calls)
        self.results: dict[str, str] = {}
        self.others: list[str] = []

    def add(self, result: Message) -> None:
        known = {c.id for c in self.calls}
        if result.tool_call_id in known and result.tool_call_id not in self.results:
            self.results[result.tool_call_id] = _result(result)
        else:
            self.others.append(_result(result))

    def html(self) -> list[str]:
        out = list(self.head)
        for call in self.calls:
            out.append(_call(call))
            out.append(self.results.get(call.id, ""))
        return [*out, *self.others, "</article>"]


def _header(m: Message) -> str:
    bits = [m.role, m.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")]
    if m.seq is not None:
        bits.insert(0, f"#{m.seq}")
    if m.model:
        bits.append(m.model)
    if m.synthetic:
        bits.append("synthetic")
    return f"<header>{_e(' · '.join(bits))}</header>"


def _checkpoint(cp: Mapping[str, Any]) -> str:
    covers = cp.get("covers_up_to")
    number = cp.get("number")
    name = f"Checkpoint #{number}" if isinstance(number, int) else "Checkpoint"
    label = f"{name}: messages up to #{covers} are summarised here"
    return (
        f'<section class="checkpoint"><strong>{_e(label)}</strong>'
        f"<details><summary>summary</summary>{_pre(str(cp.get('summary', '')))}</details>"
        "</section>"
    )


def to_html(
    session: Mapping[str, Any],
    messages: Iterable[Message],
    checkpoints: Iterable[Mapping[str, Any]] = (),
) -> str:
    """The page for a session (``session`` has its title, id, agent, model, times)."""
    items = list(messages)
    marks: dict[int, list[Mapping[str, Any]]] = {}
    for cp in checkpoints:
        covers = cp.get("covers_up_to")
        if isinstance(covers, int):
            marks.setdefault(covers, []).append(cp)
    title = str(session.get("title") or session.get("id") or "Session")
    meta = [
        f"{key.replace('_', ' ')}: {session[key]}"
        for key in ("id", "agent", "model", "created_at", "updated_at")
        if session.get(key)
    ]
    meta.append(f"messages: {len(items)}")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # no script, no fetch: the page cannot load anything, even if text slipped through
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f'<h1>{_e(title)}</h1><p class="meta">{_e(" · ".join(meta))}</p>',
    ]
    turn: _Turn | None = None
    for cp in marks.pop(0, []):
        out.append(_checkpoint(cp))
    for m in items:
        if m.role == "tool" and turn is not None:
            turn.add(m)
        elif m.role == "tool":  # a result before any message: shown on its own
            out.append(_result(m))
        else:
            out.extend(turn.html() if turn is not None else [])
            turn = _Turn(m)
        cuts = marks.pop(m.seq, []) if m.seq is not None else []
        if cuts:
            out.extend(turn.html() if turn is not None else [])
            turn = None
            out.extend(_checkpoint(cp) for cp in cuts)
    out.extend(turn.html() if turn is not None else [])
    for rest in sorted(marks):
        out.extend(_checkpoint(cp) for cp in marks[rest])
    out.append("</body></html>")
    return "\n".join(out) + "\n"
