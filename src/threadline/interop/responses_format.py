"""OpenAI Responses-API items <-> threadline messages, exactly.

The Agents SDK (``SQLiteSession`` and any ``Session``) stores a conversation as
a flat list of Responses items: ``message`` (user / system / developer /
assistant), ``function_call``, ``function_call_output``, ``reasoning``, and
hosted-tool items. threadline keeps an assistant turn as one message holding
its tool calls, so consecutive output items (reasoning, assistant text,
function calls, hosted-tool items) become one assistant message, and each
``function_call_output`` a tool message.

The mapping is exact: ``messages_to_items(items_to_messages(items)) == items``
for every list of item dicts. What a message cannot hold as text or a tool call
(item ids, statuses, annotations, the string-or-parts shape of content,
argument strings that are not canonical JSON, reasoning and unknown items
verbatim) is kept in ``metadata["responses_items"]``, one entry per item in
order, and only when the canonical rendering of the message would differ from
the original items. A message threadline made itself has no such entry and
renders canonically (``{"role": ..., "content": ...}``, ``function_call``,
``function_call_output``).

What items cannot carry, so a message made by threadline loses it on the way
through: the model, usage, participant names, the synthetic/summary flags and
other metadata; and a boundary between an assistant message without tool calls
and a following assistant message that only calls tools (items have none: they
come back as one message, the way a response that speaks and calls is stored).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from threadline.errors import InvalidMessage
from threadline.interop.record_fields import normalise
from threadline.interop.shapes import json_kind
from threadline.messages import FilePart, ImagePart, Message, Part, TextPart, ToolCall

ITEMS_KEY = "responses_items"
"""Message metadata key holding what the items carried beyond the message itself."""

_TEXT_FIELDS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
"""Content part types whose text becomes a text part, and the field holding it."""
_INPUT_ROLES = {"user", "system", "developer"}


def _item_kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    if not isinstance(kind, str):
        raise InvalidMessage(f"a Responses item needs a string 'type', got {kind!r}")
    return kind


def _require_str(item: Mapping[str, Any], key: str, kind: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise InvalidMessage(f"a {kind} item needs a string {key!r}, got {value!r}")
    return value


# -- content parts ---------------------------------------------------------------


def _part_from_item(raw: Any) -> tuple[Part | None, dict[str, Any]]:
    """A content part as a threadline part plus its skeleton (the fields the part does
    not carry); a part threadline cannot hold is kept whole in the skeleton."""
    if not isinstance(raw, Mapping):
        raise InvalidMessage(f"a content part must be an object, got {json_kind(raw)}")
    kind = raw.get("type")
    field = _TEXT_FIELDS.get(kind) if isinstance(kind, str) else None
    if field is not None and isinstance(raw.get(field), str):
        return TextPart(text=raw[field]), {k: v for k, v in raw.items() if k != field}
    if kind == "input_image" and isinstance(raw.get("image_url"), str):
        detail = raw.get("detail")
        if detail in (None, "auto", "low", "high"):
            part = ImagePart(url=raw["image_url"], detail=detail)
            rest = {k: v for k, v in raw.items() if k not in ("image_url", "detail")}
            if "detail" in raw:
                rest["detail"] = None  # marks that the key was present
            return part, rest
    return None, {"verbatim": dict(raw)}


def _part_to_item(part: Part, skeleton: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(skeleton)
    if isinstance(part, TextPart):
        out[_TEXT_FIELDS.get(str(out.get("type")), "text")] = part.text
    elif isinstance(part, ImagePart):
        had_detail = "detail" in out
        out.pop("detail", None)
        out["image_url"] = part.url
        if had_detail:
            out["detail"] = part.detail
    return out


def _content_from_item(raw: Any) -> tuple[list[Part], list[dict[str, Any]] | None]:
    """Content (a string or a list of parts) as threadline parts, with the skeleton of a
    list (None for a plain string)."""
    if isinstance(raw, str):
        return [TextPart(text=raw)], None
    if not isinstance(raw, list):
        raise InvalidMessage(f"item content must be a string or a list, got {raw!r}")
    parts: list[Part] = []
    skeleton: list[dict[str, Any]] = []
    for entry in raw:
        part, rest = _part_from_item(entry)
        if part is not None:
            parts.append(part)
        skeleton.append(rest)
    return parts, skeleton


def _content_to_item(parts: list[Part], skeleton: list[dict[str, Any]] | None) -> Any:
    if skeleton is None:
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    out: list[dict[str, Any]] = []
    taken = iter(parts)
    for rest in skeleton:
        if "verbatim" in rest:
            out.append(copy.deepcopy(rest["verbatim"]))
        else:
            out.append(_part_to_item(next(taken), rest))
    return out


def _canonical_parts(parts: Sequence[Part], role: str) -> list[dict[str, Any]]:
    text_type = "output_text" if role == "assistant" else "input_text"
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            entry: dict[str, Any] = {"type": text_type, "text": part.text}
            if role == "assistant":
                entry["annotations"] = []
            out.append(entry)
        elif isinstance(part, ImagePart) and part.media_ref is None:
            url = part.url or f"data:{part.media_type};base64,{part.data}"
            image: dict[str, Any] = {"type": "input_image", "image_url": url}
            if part.detail is not None:
                image["detail"] = part.detail
            out.append(image)
        elif isinstance(part, ImagePart):
            raise InvalidMessage("an image stored as media needs resolving before export")
        else:
            out.append(_file_part(part))
    return out


def _file_part(part: FilePart) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "input_file"}
    if part.data is not None:
        entry["file_data"] = part.data
    else:
        entry["file_url"] = part.uri
    if part.name is not None:
        entry["filename"] = part.name
    return entry


def _all_parts(message: Message) -> list[Part]:
    """The message's parts, a plain string (even empty) counting as one text part, the
    way a plain-string item counts."""
    if isinstance(message.content, str):
        return [TextPart(text=message.content)]
    return list(message.content)


# -- items -> messages ------------------------------------------------------------


class _Builder:
    """Builds messages in order; an assistant group stays open while output items come."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.originals: list[list[dict[str, Any]]] = []
        self.names: dict[str, str] = {}
        self.group: Message | None = None
        self.group_parts: list[Part] = []

    def close(self) -> None:
        self.group = None

    def add(self, message: Message, original: dict[str, Any], entry: dict[str, Any]) -> None:
        message.metadata[ITEMS_KEY] = [entry]
        self.messages.append(message)
        self.originals.append([original])

    def grouped(self, kinds: set[str]) -> bool:
        """Whether the open assistant group already holds an item of one of ``kinds``:
        a new response's reasoning or text then starts a new message."""
        entries = self.group.metadata[ITEMS_KEY] if self.group is not None else []
        return any(e.get("kind") in kinds for e in entries)

    def join(self, original: dict[str, Any], entry: dict[str, Any]) -> Message:
        if self.group is None:
            self.group = Message.assistant("")
            self.group_parts = []
            self.group.metadata[ITEMS_KEY] = []
            self.messages.append(self.group)
            self.originals.append([])
        self.group.metadata[ITEMS_KEY].append(entry)
        self.originals[-1].append(original)
        return self.group


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Responses items as threadline messages, oldest first (see the module docstring).

    Raises ``InvalidMessage`` naming the item for a malformed one.
    """
    b = _Builder()
    for index, raw in enumerate(items):
        if not isinstance(raw, Mapping):
            raise InvalidMessage(f"item {index}: expected an object, got {json_kind(raw)}")
        item = copy.deepcopy(dict(raw))
        try:
            _add_item(b, item)
        except InvalidMessage as exc:
            raise InvalidMessage(f"item {index}: {exc}") from exc
    for message, original in zip(b.messages, b.originals, strict=True):
        if _canonical_items(message) == original:  # it reads no metadata
            message.metadata.pop(ITEMS_KEY, None)
    return b.messages


def _add_item(b: _Builder, item: dict[str, Any]) -> None:
    kind = _item_kind(item)
    if kind == "message":
        role = item.get("role")
        parts, skeleton = _content_from_item(item.get("content", ""))
        rest = {k: v for k, v in item.items() if k not in ("role", "content")}
        if "content" not in item:
            rest["no_content"] = True
        entry: dict[str, Any] = {"kind": "message", "rest": rest, "parts": skeleton}
        if role == "assistant":
            if b.grouped({"message", "function_call"}):
                b.close()
            target = b.join(item, entry)
            b.group_parts.extend(parts)
            target.content = normalise(b.group_parts)
            return
        if role not in _INPUT_ROLES:
            raise InvalidMessage(f"unknown message role {role!r}")
        b.close()
        if role == "developer":
            rest["role"] = "developer"
        made = Message(role="system" if role == "developer" else role, content="")
        made.content = normalise(parts)
        b.add(made, item, entry)
        return
    if kind == "function_call":
        call_id = _require_str(item, "call_id", kind)
        name = _require_str(item, "name", kind)
        arguments = _require_str(item, "arguments", kind)
        call = ToolCall.from_json_arguments(id=call_id, name=name, arguments=arguments)
        rest = {k: v for k, v in item.items() if k not in ("call_id", "name", "arguments")}
        if call.arguments_json() != arguments:
            rest["arguments"] = arguments
        b.names[call_id] = name
        group = b.join(item, {"kind": "function_call", "rest": rest})
        group.tool_calls = [*group.tool_calls, call]
        return
    if kind == "function_call_output":
        call_id = _require_str(item, "call_id", kind)
        parts, skeleton = _content_from_item(item.get("output", ""))
        rest = {k: v for k, v in item.items() if k not in ("call_id", "output")}
        b.close()
        made = Message.tool("", tool_call_id=call_id, name=b.names.get(call_id))
        made.content = normalise(parts)
        b.add(made, item, {"kind": "function_call_output", "rest": rest, "parts": skeleton})
        return
    if kind == "reasoning" and b.grouped({"message", "function_call"}):
        b.close()
    b.join(item, {"kind": "item", "item": copy.deepcopy(item)})


# -- messages -> items ------------------------------------------------------------


def messages_to_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """threadline messages as Responses items: exactly the items they were made from,
    or the canonical items for a message threadline made itself."""
    out: list[dict[str, Any]] = []
    for message in messages:
        entries = message.metadata.get(ITEMS_KEY)
        out.extend(_kept_items(message, entries) if entries else _canonical_items(message))
    return out


def _kept_items(message: Message, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    parts = _all_parts(message)
    calls = iter(message.tool_calls)
    for entry in entries:
        kind = entry.get("kind")
        if kind == "item":
            out.append(copy.deepcopy(entry["item"]))
        elif kind == "function_call":
            call = next(calls)
            item = {"call_id": call.id, "name": call.name, "arguments": call.arguments_json()}
            out.append({**item, **entry["rest"]})
        elif kind in ("message", "function_call_output"):
            skeleton = entry.get("parts")
            taken = _count_parts(skeleton) if skeleton is not None else 1
            mine, parts = parts[:taken], parts[taken:]
            rest = dict(entry["rest"])
            no_content = rest.pop("no_content", False)
            content = _content_to_item(mine, copy.deepcopy(skeleton))
            if kind == "message":
                role = rest.pop("role", message.role)
                item = {"role": role, **rest}
                if not no_content:
                    item["content"] = content
                out.append(item)
            else:
                out.append({"call_id": message.tool_call_id, "output": content, **rest})
        else:
            raise InvalidMessage(f"unknown {ITEMS_KEY} entry {kind!r}")
    return out


def _count_parts(skeleton: list[dict[str, Any]]) -> int:
    return sum(1 for rest in skeleton if "verbatim" not in rest)


def _canonical_items(message: Message) -> list[dict[str, Any]]:
    role = message.role
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": _canonical_content(message, "tool"),
            }
        ]
    out: list[dict[str, Any]] = []
    if role != "assistant" or message.content or not message.tool_calls:
        out.append({"role": role, "content": _canonical_content(message, role)})
    for call in message.tool_calls:
        out.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments_json(),
            }
        )
    return out


def _canonical_content(message: Message, role: str) -> Any:
    if isinstance(message.content, str):
        return message.content
    return _canonical_parts(message.content, role)


def dumps_items(items: Sequence[Mapping[str, Any]]) -> str:
    """Items as JSON Lines, one item a line (what an Agents SDK session file holds)."""
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
