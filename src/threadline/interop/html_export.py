"""A session as one self-contained HTML page, for sharing.

The page must be safe to open from anywhere and to mail to anyone: every piece of
stored text (message text, tool names and arguments, titles, metadata, summaries)
goes through ``html.escape``; the style sheet is inline; there is no script and
nothing that fetches: an image given by URL is shown as its URL in text, never as
``<img src>`` (only images stored inline, as ``data:`` URLs of an image type, are
drawn). Tool calls and their results are collapsible ``<details>`` blocks under
the assistant message that made them, and each checkpoint is marked after the
last message it covers, its summary collapsible.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from threadline.messages import FilePart, ImagePart, Message, TextPart

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


def _result(m: Message) -> str:
    error = bool(m.metadata.get("is_error"))
    label = f"Result: {m.name or 'tool'} ({m.tool_call_id})" + (" (error)" if error else "")
    body = "".join(_part(p) for p in m.parts)
    cls = ' class="error"' if error else ""
    return f"<details{cls}><summary>{_e(label)}</summary>{body}</details>"


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
    label = f"Checkpoint: messages up to #{covers} are summarised here"
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
    open_block = False
    for cp in marks.pop(0, []):
        out.append(_checkpoint(cp))
    for m in items:
        if m.role == "tool":
            out.append(_result(m))
        else:
            if open_block:
                out.append("</article>")
            classes = f"msg {m.role}" + (" synthetic" if m.synthetic else "")
            out.append(f'<article class="{classes}">{_header(m)}')
            out.extend(_part(p) for p in m.parts)
            for call in m.tool_calls:
                args = _arguments(call.raw_arguments, call.arguments)
                out.append(
                    f"<details><summary>{_e(f'Tool call: {call.name} ({call.id})')}</summary>"
                    f"{_pre(args)}</details>"
                )
            open_block = True
        for cp in marks.pop(m.seq, []) if m.seq is not None else []:
            if open_block:
                out.append("</article>")
                open_block = False
            out.append(_checkpoint(cp))
    if open_block:
        out.append("</article>")
    for rest in sorted(marks):
        out.extend(_checkpoint(cp) for cp in marks[rest])
    out.append("</body></html>")
    return "\n".join(out) + "\n"
