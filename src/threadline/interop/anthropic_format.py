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

Lossy by design (and therefore documented): merged turns come back as one
Message, a single text part comes back as a plain string, and a tool-call
argument string that is not a JSON object travels as ``{"_raw": "..."}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from threadline.errors import InvalidMessage
from threadline.interop.openai_format import (
    MediaResolver,
    media_placeholder,
    parse_data_url,
)
from threadline.messages import FilePart, ImagePart, Message, Part, TextPart, ToolCall

CONTINUED_PLACEHOLDER = "(continued)"
"""The user turn prepended when a conversation would start with the assistant."""

RAW_ARGUMENTS_KEY = "_raw"
"""``tool_use.input`` key that carries an argument string that is not a JSON object."""

Block = dict[str, Any]
SystemParam = str | list[Block] | None


# -- to Anthropic ----------------------------------------------------------------


def _image_block(part: ImagePart, resolve_media: MediaResolver | None) -> Block:
    if part.media_ref is not None:
        if resolve_media is None:
            return {"type": "text", "text": media_placeholder(part)}
        part = resolve_media(part)
    if part.data is not None and part.media_type:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
        }
    if part.url is not None:
        parsed = parse_data_url(part.url)
        if parsed is not None:
            source = {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
            return {"type": "image", "source": source}
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {"type": "text", "text": media_placeholder(part)}


def _part_block(part: Part, resolve_media: MediaResolver | None) -> Block:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return _image_block(part, resolve_media)
    if part.data is None:
        return {"type": "text", "text": media_placeholder(part)}
    media_type = part.media_type or "application/octet-stream"
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": media_type, "data": part.data},
        "title": part.name or part.uri,
    }


def _content_blocks(content: str | list[Part], resolve_media: MediaResolver | None) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_part_block(p, resolve_media) for p in content]


def _tool_input(call: ToolCall) -> dict[str, Any]:
    if call.raw_arguments is not None:
        return {RAW_ARGUMENTS_KEY: call.raw_arguments}
    return dict(call.arguments)


def _turn(
    m: Message, resolve_media: MediaResolver | None, include_thinking: bool
) -> tuple[str, str | list[Block]]:
    if m.role == "tool":
        result: Block = {"type": "tool_result", "tool_use_id": m.tool_call_id}
        if isinstance(m.content, str):
            result["content"] = m.content
        else:
            result["content"] = _content_blocks(m.content, resolve_media)
        if m.metadata.get("is_error"):
            result["is_error"] = True
        return "user", [result]
    if m.role == "user":
        if isinstance(m.content, str):
            return "user", m.content
        return "user", _content_blocks(m.content, resolve_media)
    thinking = m.metadata.get("thinking") if include_thinking else None
    blocks: list[Block] = []
    if isinstance(thinking, list):
        blocks.extend(dict(b) for b in thinking if isinstance(b, Mapping))
    if isinstance(m.content, str) and not m.tool_calls and not blocks:
        return "assistant", m.content
    blocks.extend(_content_blocks(m.content, resolve_media))
    for call in m.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return "assistant", blocks


def _as_blocks(content: str | list[Block]) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def _system_param(systems: Sequence[Message], resolve_media: MediaResolver | None) -> SystemParam:
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


def to_anthropic(
    messages: Iterable[Message],
    *,
    resolve_media: MediaResolver | None = None,
    ensure_user_first: bool = True,
    include_thinking: bool = True,
) -> tuple[SystemParam, list[Block]]:
    """``(system, messages)`` for the Messages API.

    ``system`` is None when there is no system message, a string when every
    system message is plain text (joined by blank lines), else text blocks.
    """
    systems: list[Message] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            systems.append(m)
            continue
        role, content = _turn(m, resolve_media, include_thinking)
        if turns and turns[-1]["role"] == role:
            merged = _as_blocks(turns[-1]["content"]) + _as_blocks(content)
            # tool_result blocks must open the user turn that answers a tool_use
            merged.sort(key=lambda b: b.get("type") != "tool_result")
            turns[-1]["content"] = merged
        else:
            turns.append({"role": role, "content": content})
    if ensure_user_first and turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": CONTINUED_PLACEHOLDER})
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


def _normalise(parts: list[Part]) -> str | list[Part]:
    if not parts:
        return ""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return parts


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
        if part is None:
            raise InvalidMessage("tool_result content blocks must be text, image or document")
        parts.append(part)
    return parts


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
        out.append(Message.user(_normalise(parts), metadata=meta))
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
    return Message.assistant(_normalise(parts), tool_calls=calls, metadata=metadata)


def from_anthropic(messages: Any, system: SystemParam = None) -> list[Message]:
    """Messages from a Messages API conversation; malformed input raises InvalidMessage."""
    if not isinstance(messages, list):
        raise InvalidMessage(f"expected a list of messages, got {type(messages).__name__}")
    out: list[Message] = []
    if isinstance(system, str):
        if system:
            out.append(Message.system(system))
    elif isinstance(system, list):
        texts = [TextPart(text=str(b.get("text", ""))) for b in system if isinstance(b, Mapping)]
        if texts:
            out.append(Message.system(_normalise(list(texts))))
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
