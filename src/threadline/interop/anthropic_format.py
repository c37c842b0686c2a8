"""Messages to and from the Anthropic Messages API shape.

Anthropic differs from Chat Completions in three ways that shape this module:
the system prompt is a request parameter, not a message; roles must alternate
user / assistant (tool results are ``tool_result`` blocks inside a *user*
message); and the conversation must start with a user turn. So on the way out
system messages are gathered into the system parameter, consecutive messages of
one role (including a run of tool results) are merged into one turn with
``tool_result`` blocks first, and a conversation that starts with an assistant
gets a minimal user turn, ``"(continued)"`` (``ensure_user_first=False`` turns
that off). On the way back a user turn with ``tool_result`` blocks becomes one
tool Message per block, in order, followed by a user Message for any remaining
blocks; ``thinking`` blocks are kept in the assistant's ``metadata["thinking"]``
(never as content) and replayed when ``include_thinking`` is set.

``to_anthropic`` sends only what the API takes, whatever the history came from
(the rules are in ``provider_rules``): broken tool chains are repaired as views
repair them (``group_units``); whitespace-only text is dropped, and a message
left empty is dropped (its neighbours then merge); thinking is replayed only
when it is Anthropic's own, signed (a redacted or missing signature fails the
whole request, and another provider's reasoning is not a thinking block), and
never as a turn of its own;
tool ids and names are made to match the API's patterns and ids made unique,
the same for a call and its result; an error result with no output gets a short
text; images and documents in formats the API refuses become text placeholders;
and trailing whitespace is cut from a final assistant turn.

Lossy by design (and therefore documented): merged turns come back as one
Message, a single text part comes back as a plain string, a tool result's
``tool_reference`` (a tool search's answer) and ``search_result`` blocks come back
as text (``tool_reference: <name>``; title, source and text), and a tool-call
argument string that is not a JSON object travels as ``{"_raw": "..."}``
(missing arguments travel as ``{}``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from threadline.errors import InvalidMessage
from threadline.interop.openai_format import (
    MediaResolver,
    media_placeholder,
    parse_data_url,
)
from threadline.interop.provider_rules import (
    IMAGE_MEDIA_TYPES,
    CallIds,
    anthropic_tool_id,
    conform_name,
    is_blank,
    is_http_url,
    is_replayable_thinking,
)
from threadline.interop.provider_rules import RAW_ARGUMENTS_KEY as RAW_ARGUMENTS_KEY
from threadline.interop.record_fields import normalise
from threadline.interop.shapes import json_kind
from threadline.messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolCall,
    flatten,
    group_units,
)

CONTINUED_PLACEHOLDER = "(continued)"
"""The user turn prepended when a conversation would start with the assistant."""

EMPTY_ERROR_RESULT = "[error: the tool failed without output]"
"""Sent for an error result with no output: the API refuses it empty."""

Block = dict[str, Any]
SystemParam = str | list[Block] | None


# -- to Anthropic ----------------------------------------------------------------


def _placeholder(part: ImagePart | FilePart) -> Block:
    return {"type": "text", "text": media_placeholder(part)}


def _image_block(part: ImagePart, resolve_media: MediaResolver | None) -> Block:
    if part.media_ref is not None:
        if resolve_media is None:
            return _placeholder(part)
        part = resolve_media(part)
    if part.data is not None and part.media_type in IMAGE_MEDIA_TYPES:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
        }
    parsed = parse_data_url(part.url) if part.url is not None else None
    if parsed is not None and parsed[0] in IMAGE_MEDIA_TYPES:
        source = {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
        return {"type": "image", "source": source}
    if parsed is None and part.url is not None and is_http_url(part.url):
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return _placeholder(part)  # redacted URLs, unsupported formats


def _document_block(part: FilePart) -> Block:
    """PDFs travel as base64 and text as a text source; the API takes no other files."""
    title = part.name or part.uri
    if part.data is None:
        return _placeholder(part)
    if part.media_type == "application/pdf":
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        return {"type": "document", "source": source, "title": title}
    if part.media_type is not None and part.media_type.startswith("text/"):
        try:
            text = base64.b64decode(part.data, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return _placeholder(part)
        if not is_blank(text):
            source = {"type": "text", "media_type": "text/plain", "data": text}
            return {"type": "document", "source": source, "title": title}
    return _placeholder(part)


def _part_block(part: Part, resolve_media: MediaResolver | None) -> Block | None:
    if isinstance(part, TextPart):
        return None if is_blank(part.text) else {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return _image_block(part, resolve_media)
    return _document_block(part)


def _content_blocks(content: str | list[Part], resolve_media: MediaResolver | None) -> list[Block]:
    if isinstance(content, str):
        return [] if is_blank(content) else [{"type": "text", "text": content}]
    blocks = (_part_block(p, resolve_media) for p in content)
    return [b for b in blocks if b is not None]


def _tool_input(call: ToolCall) -> dict[str, Any]:
    if call.raw_arguments is not None:
        return {RAW_ARGUMENTS_KEY: call.raw_arguments}
    return dict(call.arguments)


def _thinking_blocks(m: Message) -> list[Block]:
    """The thinking blocks of ``m`` the API will verify.

    Only Anthropic's own blocks qualify: a message from another model carries
    that provider's reasoning (Gemini "thoughts"), which no signature covers.
    """
    model = (m.model or "claude").lower()
    if "claude" not in model and "anthropic" not in model:
        return []
    thinking = m.metadata.get("thinking")
    if not isinstance(thinking, list):
        return []
    return [dict(b) for b in thinking if isinstance(b, Mapping) and is_replayable_thinking(b)]


def _tool_result(m: Message, call_id: str, resolve_media: MediaResolver | None) -> Block:
    result: Block = {"type": "tool_result", "tool_use_id": call_id}
    content: str | list[Block]
    if isinstance(m.content, str):
        content = "" if is_blank(m.content) else m.content
    else:
        content = _content_blocks(m.content, resolve_media) or ""
    if m.metadata.get("is_error"):
        result["is_error"] = True
        content = content or EMPTY_ERROR_RESULT
    result["content"] = content
    return result


def _assistant_turn(
    m: Message, ids: Sequence[str], resolve_media: MediaResolver | None, include_thinking: bool
) -> str | list[Block]:
    """The assistant turn; empty when only thinking is left (an interrupted response).

    Thinking alone is not sent: the API sets earlier turns' thinking aside, which
    would leave such a turn with no content.
    """
    blocks = _content_blocks(m.content, resolve_media)
    for call, call_id in zip(m.tool_calls, ids, strict=True):
        name = conform_name(call.name)
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": _tool_input(call)})
    thinking = _thinking_blocks(m) if include_thinking and blocks else []
    if isinstance(m.content, str) and not m.tool_calls and not thinking:
        return "" if is_blank(m.content) else m.content
    return thinking + blocks


def _as_blocks(content: str | list[Block]) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def _system_param(systems: Sequence[Message], resolve_media: MediaResolver | None) -> SystemParam:
    systems = [m for m in systems if _content_blocks(m.content, resolve_media)]
    if not systems:
        return None
    if all(isinstance(m.content, str) for m in systems):
        return "\n\n".join(m.text for m in systems)
    blocks: list[Block] = []
    for m in systems:
        for block in _content_blocks(m.content, resolve_media):
            if block["type"] != "text":  # the system parameter takes text only
                block = {"type": "text", "text": f"[{block['type']}]"}
            blocks.append(block)
    return blocks


def _trim_final_assistant(turns: list[dict[str, Any]]) -> None:
    """A final assistant turn is a prefill, and the API refuses one ending in whitespace."""
    if not turns or turns[-1]["role"] != "assistant":
        return
    content = turns[-1]["content"]
    if isinstance(content, str):
        turns[-1]["content"] = content.rstrip()
    elif content[-1].get("type") == "text":
        content[-1] = {**content[-1], "text": content[-1]["text"].rstrip()}


def to_anthropic(
    messages: Iterable[Message],
    *,
    resolve_media: MediaResolver | None = None,
    ensure_user_first: bool = True,
    include_thinking: bool = True,
) -> tuple[SystemParam, list[Block]]:
    """``(system, messages)`` for the Messages API, valid whatever the history held.

    ``system`` is None when there is no system message, a string when every
    system message is plain text (joined by blank lines), else text blocks.
    """
    units, _ = group_units(messages)
    call_ids = CallIds(anthropic_tool_id, per_message=False)
    systems: list[Message] = []
    turns: list[dict[str, Any]] = []
    for m in flatten(units):
        if m.role == "system":
            systems.append(m)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        content: str | list[Block]
        if m.role == "tool":
            call_id = call_ids.answer(m.tool_call_id or "")
            if call_id is None:
                continue
            content = [_tool_result(m, call_id, resolve_media)]
        elif m.role == "user":
            if isinstance(m.content, str):
                content = "" if is_blank(m.content) else m.content
            else:
                content = _content_blocks(m.content, resolve_media)
        else:
            ids = call_ids.calls([c.id for c in m.tool_calls])
            content = _assistant_turn(m, ids, resolve_media, include_thinking)
        if not content:
            continue  # nothing the API takes; the neighbours merge instead
        if turns and turns[-1]["role"] == role:
            later = _as_blocks(content)
            if role == "assistant":  # a signature covers its own response, not a merged one
                later = [b for b in later if b["type"] not in ("thinking", "redacted_thinking")]
            merged = _as_blocks(turns[-1]["content"]) + later
            # tool_result blocks must open the user turn that answers a tool_use
            merged.sort(key=lambda b: b.get("type") != "tool_result")
            turns[-1]["content"] = merged
        else:
            turns.append({"role": role, "content": content})
    if ensure_user_first and turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": CONTINUED_PLACEHOLDER})
    _trim_final_assistant(turns)
    return _system_param(systems, resolve_media), turns


# -- from Anthropic --------------------------------------------------------------


def _source_part(block: Mapping[str, Any]) -> Part:
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise InvalidMessage(f"a {block.get('type')} block needs a 'source' object")
    kind = source.get("type")
    if block.get("type") == "image":
        if kind == "base64":
            return ImagePart(data=source.get("data"), media_type=source.get("media_type"))
        if kind == "url":
            return ImagePart(url=source.get("url"))
        raise InvalidMessage(f"unsupported image source type {kind!r}")
    title = block.get("title") if isinstance(block.get("title"), str) else None
    if kind == "base64":
        return FilePart(
            uri=title or "document",
            name=title,
            media_type=source.get("media_type"),
            data=source.get("data"),
        )
    if kind == "url" and isinstance(source.get("url"), str):
        return FilePart(uri=source["url"], name=title)
    if kind == "text" and isinstance(source.get("data"), str):
        return TextPart(text=source["data"])
    raise InvalidMessage(f"unsupported document source type {kind!r}")


TOOL_REFERENCE = "tool_reference"
"""How a ``tool_reference`` block reads as text: ``tool_reference: <tool name>``."""


def _content_part(block: Mapping[str, Any]) -> Part | None:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise InvalidMessage("a text block needs 'text' (a string)")
        return TextPart(text=text)
    if kind in ("image", "document"):
        return _source_part(block)
    return None


def _result_content(raw: Any) -> str | list[Part]:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise InvalidMessage("tool_result content must be a string or a list of blocks")
    parts: list[Part] = []
    for block in raw:
        part = _content_part(block) if isinstance(block, Mapping) else None
        if part is None and isinstance(block, Mapping):
            part = _result_block_text(block)
        if part is None:
            raise InvalidMessage(
                "tool_result content blocks must be text, image, document, search_result "
                "or tool_reference"
            )
        parts.append(part)
    return parts


def _result_block_text(block: Mapping[str, Any]) -> TextPart | None:
    """A tool search's ``tool_reference`` (the tool it loaded) and a ``search_result``
    (source, title and text blocks) as text: they come back as text blocks."""
    kind = block.get("type")
    if kind == "tool_reference" and isinstance(block.get("tool_name"), str):
        return TextPart(text=f"{TOOL_REFERENCE}: {block['tool_name']}")
    if kind == "search_result":
        head = [str(block[k]) for k in ("title", "source") if isinstance(block.get(k), str)]
        body = [
            str(b.get("text", ""))
            for b in block.get("content") or []
            if isinstance(b, Mapping) and b.get("type") == "text"
        ]
        return TextPart(text="\n".join([" · ".join(head), *body]).strip())
    return None


def _tool_call(block: Mapping[str, Any]) -> ToolCall:
    call_id, name, data = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise InvalidMessage("a tool_use block needs 'id' and 'name' (strings)")
    if isinstance(data, Mapping) and set(data) == {RAW_ARGUMENTS_KEY}:
        raw = data[RAW_ARGUMENTS_KEY]
        if isinstance(raw, str):
            return ToolCall(id=call_id, name=name, raw_arguments=raw)
    if data is None:
        return ToolCall(id=call_id, name=name)
    if not isinstance(data, Mapping):
        raise InvalidMessage(f"tool_use {call_id!r}: 'input' must be an object")
    return ToolCall(id=call_id, name=name, arguments=dict(data))


def _blocks(raw: Any) -> list[Mapping[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(b, Mapping) for b in raw):
        raise InvalidMessage("content must be a string or a list of blocks")
    return raw


def _from_user(raw: Any, names: dict[str, list[str]]) -> list[Message]:
    if isinstance(raw, str):
        return [Message.user(raw)]
    out: list[Message] = []
    parts: list[Part] = []
    extra: list[Mapping[str, Any]] = []
    for block in _blocks(raw):
        if block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidMessage("a tool_result block needs 'tool_use_id'")
            meta: dict[str, Any] = {"is_error": True} if block.get("is_error") else {}
            out.append(
                Message.tool(
                    _result_content(block.get("content")),
                    tool_call_id=call_id,
                    name=names[call_id].pop(0) if names.get(call_id) else None,
                    metadata=meta,
                )
            )
            continue
        part = _content_part(block)
        if part is None:
            extra.append(dict(block))
        else:
            parts.append(part)
    if parts or extra or not out:
        meta = {"unsupported_blocks": extra} if extra else {}
        out.append(Message.user(normalise(parts), metadata=meta))
    return out


def _from_assistant(raw: Any, names: dict[str, list[str]]) -> Message:
    if isinstance(raw, str):
        return Message.assistant(raw)
    parts: list[Part] = []
    calls: list[ToolCall] = []
    metadata: dict[str, Any] = {}
    for block in _blocks(raw):
        kind = block.get("type")
        if kind == "tool_use":
            call = _tool_call(block)
            names.setdefault(call.id, []).append(call.name)  # ids may repeat: FIFO
            calls.append(call)
        elif kind in ("thinking", "redacted_thinking"):
            metadata.setdefault("thinking", []).append(dict(block))
        else:
            part = _content_part(block)
            if part is None:
                metadata.setdefault("unsupported_blocks", []).append(dict(block))
            else:
                parts.append(part)
    return Message.assistant(normalise(parts), tool_calls=calls, metadata=metadata)


def from_anthropic(messages: Any, system: SystemParam = None) -> list[Message]:
    """Messages from a Messages API conversation; malformed input raises InvalidMessage."""
    if not isinstance(messages, list):
        raise InvalidMessage(f"expected a list of messages, got {json_kind(messages)}")
    out: list[Message] = []
    if isinstance(system, str):
        if system:
            out.append(Message.system(system))
    elif isinstance(system, list):
        texts = [TextPart(text=str(b.get("text", ""))) for b in system if isinstance(b, Mapping)]
        if texts:
            out.append(Message.system(normalise(list(texts))))
    elif system is not None:
        raise InvalidMessage("system must be a string or a list of text blocks")
    names: dict[str, list[str]] = {}
    for i, d in enumerate(messages):
        if not isinstance(d, Mapping):
            raise InvalidMessage(f"message {i}: must be an object")
        role = d.get("role")
        try:
            if role == "user":
                out.extend(_from_user(d.get("content"), names))
            elif role == "assistant":
                out.append(_from_assistant(d.get("content"), names))
            else:
                raise InvalidMessage(f"unknown role {role!r} (expected user or assistant)")
        except ValidationError as exc:
            raise InvalidMessage(f"message {i}: {exc.errors()[0]['msg']}") from exc
        except InvalidMessage as exc:
            raise InvalidMessage(f"message {i}: {exc}") from exc
    return out
