"""Messages to and from OpenAI Chat Completions dicts.

Chat Completions is the lingua franca of agent logs (tau-bench, SWE-agent,
OpenHands all speak it), so this is the one format that must round-trip
losslessly: role, content (string or parts), tool calls (including argument
strings that are not JSON objects), ``tool_call_id`` and ``name`` survive
Message -> dict -> Message unchanged.

What the format cannot carry is documented where it is dropped: image
``width``/``height``, a file part's ``uri`` when it differs from its name, and
threadline's own fields (id, seq, timestamps, usage, metadata). A base64 image
travels as a ``data:`` URL and comes back as ``data`` + ``media_type``; an
image kept by the store (``media_ref``) must be resolved by the caller, so
without a resolver it is sent as a text placeholder instead of silently lost.

Requests go through ``to_openai`` instead: it gives up that losslessness to
send only what the API accepts (see ``provider_rules``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from threadline.errors import InvalidMessage
from threadline.interop.provider_rules import (
    IMAGE_MEDIA_TYPES,
    RAW_ARGUMENTS_KEY,
    CallIds,
    conform_name,
    is_blank,
    is_http_url,
    openai_tool_id,
)
from threadline.interop.shapes import json_kind
from threadline.messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ToolCall,
    flatten,
    group_units,
)

MediaResolver = Callable[[ImagePart], ImagePart]
"""Turns a ``media_ref`` image into one with ``url`` or ``data`` (the store knows how)."""

_DATA_URL = re.compile(r"^data:(?P<media_type>[^;,]+);base64,(?P<data>.*)$", re.DOTALL)
_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


def data_url(media_type: str, data: str) -> str:
    """A ``data:`` URL for base64 ``data``."""
    return f"data:{media_type};base64,{data}"


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a base64 ``data:`` URL, else None."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return match["media_type"], match["data"]


def media_placeholder(part: ImagePart | FilePart) -> str:
    """The text sent in place of media that cannot travel in a format.

    A ``data:`` URL is named by its media type: its bytes are no use as a label.
    """
    if isinstance(part, ImagePart):
        url = part.url
        parsed = parse_data_url(url) if url is not None else None
        if parsed is not None:
            url = parsed[0]
        return f"[image: {part.media_ref or url or part.media_type or 'inline'}]"
    return f"[file: {part.uri}]"


# -- to OpenAI -------------------------------------------------------------------


def _image_to_openai(part: ImagePart, resolve_media: MediaResolver | None) -> dict[str, Any]:
    if part.media_ref is not None:
        if resolve_media is None:
            return {"type": "text", "text": media_placeholder(part)}
        part = resolve_media(part)
    if part.data is not None and part.media_type:
        url = data_url(part.media_type, part.data)
    elif part.url is not None:
        url = part.url
    else:
        return {"type": "text", "text": media_placeholder(part)}
    image_url: dict[str, Any] = {"url": url}
    if part.detail is not None:
        image_url["detail"] = part.detail
    return {"type": "image_url", "image_url": image_url}


def _part_to_openai(part: Part, resolve_media: MediaResolver | None) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return _image_to_openai(part, resolve_media)
    if part.data is None:
        return {"type": "text", "text": media_placeholder(part)}
    media_type = part.media_type or "application/octet-stream"
    return {
        "type": "file",
        "file": {"file_data": data_url(media_type, part.data), "filename": part.name or part.uri},
    }


def _content_to_openai(
    content: str | list[Part], resolve_media: MediaResolver | None
) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_part_to_openai(p, resolve_media) for p in content]


def message_to_openai(m: Message, *, resolve_media: MediaResolver | None = None) -> dict[str, Any]:
    """One Chat Completions message dict.

    A system message imported from a ``developer`` message goes back out as
    ``developer`` (``metadata["openai_role"]``). An assistant message with tool
    calls and no content gets ``content: null``, as the API expects.
    """
    role: str = m.role
    if m.role == "system" and m.metadata.get("openai_role") == "developer":
        role = "developer"
    out: dict[str, Any] = {"role": role}
    content = _content_to_openai(m.content, resolve_media)
    if m.role == "assistant" and m.tool_calls and content == "":
        out["content"] = None
    else:
        out["content"] = content
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call in m.tool_calls
        ]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


def messages_to_openai(
    messages: Iterable[Message], *, resolve_media: MediaResolver | None = None
) -> list[dict[str, Any]]:
    """Lossless, for interchange; a request to the API wants ``to_openai``."""
    return [message_to_openai(m, resolve_media=resolve_media) for m in messages]


# -- requests --------------------------------------------------------------------


def _sendable_image(part: ImagePart) -> bool:
    """Whether an image is one Chat Completions will fetch or decode."""
    if part.data is not None:
        return part.media_type in IMAGE_MEDIA_TYPES
    if part.url is None:
        return False
    parsed = parse_data_url(part.url)
    return parsed[0] in IMAGE_MEDIA_TYPES if parsed is not None else is_http_url(part.url)


def _request_part(part: Part, role: str, resolve_media: MediaResolver | None) -> dict[str, Any]:
    """Only user messages may carry media: system, assistant and tool content is
    text parts only, so media there (and media the API cannot read) becomes a
    text placeholder."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart) and part.media_ref is not None and resolve_media is not None:
        part = resolve_media(part)
    if role != "user" or (isinstance(part, ImagePart) and not _sendable_image(part)):
        return {"type": "text", "text": media_placeholder(part)}
    return _part_to_openai(part, None)


def _request_content(
    m: Message, resolve_media: MediaResolver | None
) -> str | list[dict[str, Any]] | None:
    """Content without blank text; None when nothing is left."""
    if isinstance(m.content, str):
        return None if is_blank(m.content) else m.content
    parts = [
        _request_part(p, m.role, resolve_media)
        for p in m.content
        if not isinstance(p, TextPart) or not is_blank(p.text)
    ]
    return parts or None


def _request_message(
    m: Message, call_ids: CallIds, resolve_media: MediaResolver | None
) -> dict[str, Any] | None:
    developer = m.role == "system" and m.metadata.get("openai_role") == "developer"
    out: dict[str, Any] = {"role": "developer" if developer else m.role}
    content = _request_content(m, resolve_media)
    if m.role == "tool":
        call_id = call_ids.answer(m.tool_call_id or "")
        if call_id is None:
            return None
        out["content"] = content or ""  # a result must answer its call, even empty
        out["tool_call_id"] = call_id
    elif m.tool_calls:
        ids = call_ids.calls([c.id for c in m.tool_calls])
        out["content"] = content
        out["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": conform_name(call.name), "arguments": _object_json(call)},
            }
            for call, call_id in zip(m.tool_calls, ids, strict=True)
        ]
    elif content is None:
        return None  # blank system, user or assistant message: nothing to send
    else:
        out["content"] = content
    name = conform_name(m.name, fallback="") if m.name is not None else ""
    if name:
        out["name"] = name
    return out


def _object_json(call: ToolCall) -> str:
    if call.raw_arguments is not None:
        return arguments_text({RAW_ARGUMENTS_KEY: call.raw_arguments})
    return call.arguments_json()


def to_openai(
    messages: Iterable[Message], *, resolve_media: MediaResolver | None = None
) -> list[dict[str, Any]]:
    """A Chat Completions ``messages`` list the API accepts, whatever the history held.

    Unlike ``messages_to_openai`` (lossless, for interchange) this conforms to
    the API's rules (``provider_rules``): broken tool chains are repaired as
    views repair them; blank messages are dropped (a tool result stays, empty);
    arguments that are not a JSON object travel as ``{"_raw": "..."}``; tool
    and participant names are made to match the API's pattern, and call ids are
    cut to 40 characters and made unique within their message, the same for the
    call and its result; media the API cannot take becomes a text placeholder.
    Thinking kept in metadata never travels: Chat Completions has no such input.
    """
    units, _ = group_units(messages)
    call_ids = CallIds(openai_tool_id, per_message=True)
    out: list[dict[str, Any]] = []
    for m in flatten(units):
        d = _request_message(m, call_ids, resolve_media)
        if d is not None:
            out.append(d)
    return out


# -- from OpenAI -----------------------------------------------------------------


def _image_from_openai(raw: Any) -> ImagePart:
    if isinstance(raw, str):  # some clients send image_url as a bare string
        raw = {"url": raw}
    if not isinstance(raw, Mapping) or not isinstance(raw.get("url"), str):
        raise InvalidMessage("an image_url part needs image_url.url (a string)")
    url: str = raw["url"]
    detail = raw.get("detail")
    if detail not in (None, "auto", "low", "high"):
        raise InvalidMessage(f"unknown image detail {detail!r} (expected auto, low or high)")
    parsed = parse_data_url(url)
    if parsed is not None:
        return ImagePart(media_type=parsed[0], data=parsed[1], detail=detail)
    return ImagePart(url=url, detail=detail)


def _file_from_openai(raw: Any) -> FilePart:
    if not isinstance(raw, Mapping):
        raise InvalidMessage("a file part needs a 'file' object")
    filename = raw.get("filename")
    file_id = raw.get("file_id")
    file_data = raw.get("file_data")
    media_type: str | None = None
    data: str | None = None
    if isinstance(file_data, str):
        parsed = parse_data_url(file_data)
        media_type, data = parsed if parsed is not None else (None, file_data)
    uri = filename if isinstance(filename, str) else file_id if isinstance(file_id, str) else None
    if uri is None:
        raise InvalidMessage("a file part needs file.filename or file.file_id")
    name = filename if isinstance(filename, str) else None
    return FilePart(uri=uri, name=name, media_type=media_type, data=data)


def _part_from_openai(raw: Any) -> Part:
    if not isinstance(raw, Mapping):
        raise InvalidMessage(f"a content part must be an object, got {json_kind(raw)}")
    kind = raw.get("type")
    if kind in ("text", "input_text", "output_text"):
        text = raw.get("text")
        if not isinstance(text, str):
            raise InvalidMessage("a text part needs 'text' (a string)")
        return TextPart(text=text)
    if kind == "image_url":
        return _image_from_openai(raw.get("image_url"))
    if kind == "file":
        return _file_from_openai(raw.get("file"))
    if kind == "refusal" and isinstance(raw.get("refusal"), str):
        return TextPart(text=raw["refusal"])
    raise InvalidMessage(f"unsupported content part type {kind!r}")


def content_from_openai(raw: Any) -> str | list[Part]:
    """Chat Completions content (string, null or parts) as Message content."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return [_part_from_openai(p) for p in raw]
    raise InvalidMessage(f"content must be a string, null or a list, got {json_kind(raw)}")


def tool_call_from_openai(raw: Any) -> ToolCall:
    """One ``tool_calls`` entry; arguments may be a JSON string or (lenient) an object."""
    if not isinstance(raw, Mapping):
        raise InvalidMessage("each tool call must be an object")
    call_id = raw.get("id")
    function = raw.get("function")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage("a tool call needs an 'id' (a non-empty string)")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidMessage(f"tool call {call_id!r} needs function.name (a string)")
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):
        return ToolCall(id=call_id, name=function["name"], arguments=dict(arguments))
    if arguments is not None and not isinstance(arguments, str):
        raise InvalidMessage(f"tool call {call_id!r}: function.arguments must be a JSON string")
    return ToolCall.from_json_arguments(id=call_id, name=function["name"], arguments=arguments)


def message_from_openai(d: Any) -> Message:
    """A Message from one Chat Completions dict; malformed input raises InvalidMessage.

    ``developer`` is read as ``system`` (remembered in ``metadata["openai_role"]``);
    the legacy ``function`` role and ``function_call`` field are read as a tool
    result and a tool call whose id is the function name. ``refusal`` is kept
    in ``metadata["refusal"]``.
    """
    if not isinstance(d, Mapping):
        raise InvalidMessage(f"a message must be a JSON object, got {json_kind(d)}")
    role = d.get("role")
    name = d.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidMessage("'name' must be a string")
    metadata: dict[str, Any] = {}
    if isinstance(d.get("refusal"), str):
        metadata["refusal"] = d["refusal"]
    try:
        content = content_from_openai(d.get("content"))
        if role == "tool":
            call_id = d.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidMessage("a tool message needs 'tool_call_id' (a non-empty string)")
            return Message.tool(content, tool_call_id=call_id, name=name, metadata=metadata)
        if role == "function":
            if not isinstance(name, str) or not name:
                raise InvalidMessage("a legacy function message needs 'name'")
            return Message.tool(content, tool_call_id=name, name=name, metadata=metadata)
        if not isinstance(role, str) or role not in _ROLES:
            raise InvalidMessage(
                f"unknown role {role!r} (expected system, developer, user, assistant or tool)"
            )
        if role == "developer":
            metadata["openai_role"] = "developer"
        calls = d.get("tool_calls")
        if calls is not None and role != "assistant":
            raise InvalidMessage(f"only assistant messages carry tool_calls, not {role}")
        if calls is not None and not isinstance(calls, list):
            raise InvalidMessage("'tool_calls' must be a list")
        tool_calls = [tool_call_from_openai(c) for c in calls or []]
        legacy = d.get("function_call")
        if role == "assistant" and isinstance(legacy, Mapping):
            fn = legacy.get("name")
            tool_calls.append(tool_call_from_openai({"id": fn, "function": legacy}))
        return Message(
            role=_ROLES[role],
            content=content,
            tool_calls=tool_calls,
            name=name,
            metadata=metadata,
        )
    except ValidationError as exc:
        raise InvalidMessage(f"invalid {role} message: {exc.errors()[0]['msg']}") from exc


def messages_from_openai(items: Any) -> list[Message]:
    """Messages from a Chat Completions list; errors name the offending index."""
    if not isinstance(items, list):
        raise InvalidMessage(f"expected a list of messages, got {json_kind(items)}")
    out: list[Message] = []
    for i, item in enumerate(items):
        try:
            out.append(message_from_openai(item))
        except InvalidMessage as exc:
            raise InvalidMessage(f"message {i}: {exc}") from exc
    return out


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the JSON string OpenAI expects."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
