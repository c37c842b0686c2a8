"""Sessions out of threadline: a Markdown transcript for people, JSON for machines.

(Also OpenAI JSONL and an Anthropic request body here; supyagent's layout is in
``supyagent``, the shareable HTML page in ``html_export``.) Exported and imported
again, every format in :data:`REIMPORTABLE` gives back the same roles, text, tool
calls (ids, names, arguments) and results in order; what each cannot carry (times,
models, metadata; the Messages API's turn rules for ``anthropic-json``) is listed,
and tested, in ``tests/test_roundtrip_properties.py``.

The Markdown is meant to be read on a forge or in an editor, so it must keep
its shape whatever a user, a model or a tool said. Prose is HTML-escaped
(``<``, ``>``, ``&``) so it cannot open or close ``<details>`` or inject
markup; a line that would become a heading (``#``, or a setext ``===`` /
``---`` underline) is backslash-escaped; a code fence the text opens is closed
at the end of its message. Tool calls and results sit in
``<details><summary>`` blocks whose code fence is longer than any backtick run
in the content, so nothing inside can end it early.

The JSON export is the stable interchange format, read back by
:func:`threadline.interop.importers.import_file`::

    {"format": "threadline.session", "version": 1,
     "session": {...},                      # title, agent, model, metadata, ...
     "messages": [Message.model_dump(mode="json"), ...],
     "checkpoints": [{"number", "id", "covers_up_to", "summary", ...}, ...]}

A checkpoint's ``number`` is its place in its session (#1 its first, as every page and
report shows it); ``id`` is the store's own key.

Readers must ignore keys they do not know; a change that old readers would
misread bumps ``version``. Reading an export back (:func:`from_json_export`)
gives every message a fresh id and keeps the old one in
``metadata["imported_id"]``, so importing one file twice into one store never
collides; ``seq`` is cleared for the importing store to assign.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from threadline.errors import ImportFormatError
from threadline.interop.anthropic_format import to_anthropic
from threadline.interop.lineage import with_exported_parent
from threadline.interop.openai_format import message_to_openai
from threadline.messages import Message
from threadline.stamps import new_id
from threadline.store.fork import materialized_metadata

EXPORT_FORMAT = "threadline.session"
EXPORT_VERSION = 1

_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_HEADING = re.compile(r"^( {0,3})(#)")
_SETEXT = re.compile(r"^( {0,3})([=-])(?=[=\- \t]*$)")
_BACKTICKS = re.compile(r"`+")
_ROLE_TITLES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def _inline(text: str) -> str:
    """One line of escaped text, for titles, summaries and metadata."""
    return html.escape(" ".join(text.split()), quote=False)


def _prose(text: str) -> str:
    """Message text as Markdown that cannot break the document around it."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            out.append(line)
            closing = _FENCE_CLOSE.match(line)
            if closing and closing[1][0] == fence[0] and len(closing[1]) >= len(fence):
                fence = None
            continue
        opened = _FENCE_OPEN.match(line)
        if opened and not (opened["fence"][0] == "`" and "`" in opened["info"]):
            fence = opened["fence"]
            out.append(line)
            continue
        line = html.escape(line, quote=False)
        line = _HEADING.sub(r"\1\\\2", line)
        line = _SETEXT.sub(r"\1\\\2", line)
        out.append(line)
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


def _fenced(content: str, info: str = "") -> str:
    """A fenced code block that no backtick run in ``content`` can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(content)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{content}\n{fence}"


def _details(summary: str, body: str, info: str = "") -> str:
    return f"<details><summary>{_inline(summary)}</summary>\n\n{_fenced(body, info)}\n\n</details>"


def _content_text(m: Message) -> str:
    return "\n\n".join(m.part_texts())


def _heading(m: Message) -> str:
    bits = [_ROLE_TITLES[m.role]]
    bits.append(m.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"))
    if m.model:
        bits.append(_inline(m.model))
    if m.synthetic:
        bits.append("synthetic")
    if m.summary:
        bits.append("summary")
    return "## " + " · ".join(bits)


def _meta_line(info: Mapping[str, Any], count: int) -> str:
    bits = []
    for key in ("id", "agent", "model", "created_at", "updated_at"):
        value = info.get(key)
        if value:
            bits.append(f"{key.replace('_', ' ')}: {_inline(str(value))}")
    bits.append(f"messages: {count}")
    return "*" + " · ".join(bits) + "*"


def to_markdown(session: Mapping[str, Any] | str, messages: Iterable[Message]) -> str:
    """A readable Markdown transcript; ``session`` is a title or a dict with one.

    Each user, assistant or system message is a ``##`` section; tool calls and
    their results are collapsible ``<details>`` blocks under the assistant
    message that made them.
    """
    info: Mapping[str, Any] = {"title": session} if isinstance(session, str) else session
    items = list(messages)
    title = str(info.get("title") or info.get("id") or "Session")
    blocks = [f"# {_inline(title)}", _meta_line(info, len(items))]
    for m in items:
        if m.role == "tool":
            label = f"Result: {m.name or 'tool'} ({m.tool_call_id})"
            if m.metadata.get("is_error"):
                label += " (error)"
            blocks.append(_details(label, _content_text(m)))
            continue
        blocks.append(_heading(m))
        text = _content_text(m)
        if text:
            blocks.append(_prose(text))
        for call in m.tool_calls:
            if call.raw_arguments is not None:
                body, info_string = call.raw_arguments, ""
            else:
                body = json.dumps(call.arguments, ensure_ascii=False, indent=2)
                info_string = "json"
            blocks.append(_details(f"Tool call: {call.name} ({call.id})", body, info_string))
    return "\n\n".join(blocks) + "\n"


def to_json(
    session_info: Mapping[str, Any],
    messages: Iterable[Message],
    checkpoints: list[dict[str, Any]] | None = None,
) -> str:
    """The documented JSON export (see the module docstring); UTF-8, indented."""
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": to_jsonable_python(dict(session_info)),
        "messages": [m.model_dump(mode="json") for m in messages],
        "checkpoints": to_jsonable_python(checkpoints or []),
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


def to_openai_jsonl(messages: Iterable[Message]) -> str:
    """One Chat Completions message a line (what ``openai-jsonl`` import reads back):
    roles, content, tool calls and results as written; no times, models or metadata."""
    return "".join(json.dumps(message_to_openai(m), ensure_ascii=False) + "\n" for m in messages)


def to_anthropic_json(session_info: Mapping[str, Any], messages: Iterable[Message]) -> str:
    """A Messages API request body ``{"model", "system", "messages"}`` whose turns the API
    takes as they are (``to_anthropic``'s rules: turns merged, broken chains repaired)."""
    system, turns = to_anthropic(messages)
    body: dict[str, Any] = {}
    if session_info.get("model"):
        body["model"] = session_info["model"]
    if system is not None:
        body["system"] = system
    body["messages"] = turns
    return json.dumps(body, ensure_ascii=False, indent=2) + "\n"


EXPORT_SUFFIXES = {
    "md": ".md",
    "markdown": ".md",
    "json": ".json",
    "html": ".html",
    "openai-jsonl": ".openai.jsonl",
    "anthropic-json": ".anthropic.json",
    "supyagent": ".jsonl",
}
"""Every export format, with the file suffix it is written under by default."""
REIMPORTABLE = ("json", "openai-jsonl", "anthropic-json", "supyagent")
"""Formats ``threadline sessions import`` reads back (Markdown and HTML are for people)."""


def render_export(
    fmt: str,
    session_info: Mapping[str, Any],
    messages: Iterable[Message],
    checkpoints: list[dict[str, Any]],
) -> tuple[str, str | None]:
    """A session in export format ``fmt`` (one of :data:`EXPORT_SUFFIXES`): the file's
    text, and supyagent's ``_summary.json`` beside it (from the latest checkpoint)."""
    from threadline.interop import html_export, supyagent  # only when asked for

    if fmt in ("md", "markdown"):
        return to_markdown(session_info, messages), None
    if fmt == "json":
        return to_json(session_info, messages, checkpoints) + "\n", None
    if fmt == "html":
        return html_export.to_html(session_info, messages, checkpoints), None
    if fmt == "openai-jsonl":
        return to_openai_jsonl(messages), None
    if fmt == "anthropic-json":
        return to_anthropic_json(session_info, messages), None
    if fmt == "supyagent":
        return supyagent.to_supyagent(
            session_info, messages, checkpoints[-1] if checkpoints else None
        )
    raise ValueError(f"unknown export format {fmt!r}")


@dataclass(slots=True)
class ImportedSession:
    """One conversation read from a file, with what the file said about it."""

    messages: list[Message]
    title: str | None = None
    agent: str | None = None
    """The exported agent, or the tool that wrote a transcript (``claude-code``, ...)."""
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    """``{"covers_up_to", "summary", "metadata"}`` each: a threadline export's checkpoints
    as exported, or a transcript's native compactions. ``covers_up_to`` counts
    ``messages`` from 1, which are the seqs they get in a session of their own."""
    source_id: str | None = None
    """The id the source gave this conversation (a Claude Code or Codex session id, a
    subagent's ``<session>/agent-<id>``, an exported session's id); None when it has
    none, and a syncing caller then knows it by where it came from."""
    source_format: str | None = None
    """Which reader made it: one of ``threadline.interop.importers.FORMATS``."""
    run: int = 1
    """Which conversation of its file this is, from 1."""
    runs: int = 1
    """How many conversations the file holds."""
    repairs: dict[str, int] = field(default_factory=dict)
    """Broken tool chains kept as written and flagged in ``metadata["import_repair"]``,
    counted by kind (``orphan_result``, ``unanswered_call``, ``malformed_arguments``)."""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    """The conversation's own dates, where the file states them as a threadline export
    does (a transcript's are in ``metadata["source_created_at"]`` / ``["source_updated_at"]``);
    the importing store dates the session by them."""


def from_json_export(
    data: Any, *, path: str | None = None, fresh_ids: bool = True
) -> ImportedSession:
    """Read a parsed :func:`to_json` document back; ImportFormatError if it is not one."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(f"not a {EXPORT_FORMAT} document", path=path)
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise ImportFormatError(f"bad export version {version!r}", path=path)
    if version > EXPORT_VERSION:
        raise ImportFormatError(
            f"export version {version} was written by a newer threadline (this one reads "
            f"{EXPORT_VERSION}); upgrade to import it",
            path=path,
        )
    session = data.get("session") or {}
    raw_messages = data.get("messages")
    if not isinstance(session, dict) or not isinstance(raw_messages, list):
        raise ImportFormatError("'session' must be an object and 'messages' a list", path=path)
    messages: list[Message] = []
    seqs: list[int | None] = []
    for i, raw in enumerate(raw_messages):
        try:
            m = Message.model_validate(raw)
        except ValidationError as exc:
            raise ImportFormatError(f"messages[{i}]: {exc.errors()[0]['msg']}", path=path) from exc
        seqs.append(m.seq)
        m.seq = None
        if fresh_ids:
            m.metadata["imported_id"] = m.id
            m.id = new_id()
        messages.append(m)
    exported_id = session.get("id")
    carried = materialized_metadata(dict(session.get("metadata") or {}))
    metadata = with_exported_parent(carried, session.get("parent_id"))
    return ImportedSession(
        messages=messages,
        title=session.get("title"),
        agent=session.get("agent"),
        model=session.get("model"),
        metadata=metadata,
        checkpoints=_counted(list(data.get("checkpoints") or []), seqs),
        source_id=exported_id if isinstance(exported_id, str) and exported_id else None,
        source_format="threadline",
        created_at=exported_time(session.get("created_at")),
        updated_at=exported_time(session.get("updated_at")),
    )


def _counted(checkpoints: list[Any], seqs: list[int | None]) -> list[Any]:
    """An export's checkpoints cover seqs of the view, and its messages leave out what
    the view hides (retracted messages, their records): imported, a checkpoint covers
    the exported messages up to its seq, counted from 1. Messages without seqs (written
    by hand) are counted already."""
    known = [s for s in seqs if s is not None]
    if len(known) != len(seqs):
        return checkpoints
    out = []
    for c in checkpoints:
        covers = c.get("covers_up_to") if isinstance(c, dict) else None
        if type(covers) is int:
            c = {**c, "covers_up_to": sum(1 for s in known if s <= covers)}
        out.append(c)
    return out


def exported_time(value: object) -> datetime | None:
    """A time as an export or a transcript writes it (ISO 8601; a time without offset is
    the writer's local time, as aider writes it), in UTC; ``None`` when there is none or
    it cannot be read."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    try:
        return when.astimezone(UTC)  # a naive time is taken as local time
    except (OverflowError, OSError, ValueError):
        return None
