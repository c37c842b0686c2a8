"""What the Anthropic Messages and OpenAI Chat Completions APIs refuse, as code.

A window can hold anything an importer read: whitespace-only text, thinking
blocks whose signature was redacted, ids and names from another provider. The
APIs answer such a request with a 400 that no retry fixes, so the converters
conform every value with the helpers here, and the two checkers re-verify a
finished payload against the same rules. Each rule is one the API is known to
enforce (its error text is quoted where it helps); the checkers report problems
as strings naming the offending path, ``messages.3.content.1`` style, as the
APIs do. An empty list means valid.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

TOOL_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
"""Anthropic ``tool_use.id`` (``String should match pattern '^[a-zA-Z0-9_-]+$'``). The
patterns keep the providers' spelling for error messages; they are only ever used with
``fullmatch``, because ``$`` alone also accepts a trailing newline."""

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Tool names on both APIs, and OpenAI participant names."""

OPENAI_TOOL_ID_MAX = 40
"""OpenAI: ``tool_calls[0].id: string too long. Expected ... maximum length 40``."""

IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image formats both APIs take inline."""

RAW_ARGUMENTS_KEY = "_raw"
"""The object key that carries tool arguments that are not a JSON object.

Both APIs require arguments to be an object (Anthropic ``tool_use.input``, OpenAI
``function.arguments`` as JSON text of one), but free-form tools (Codex
``apply_patch``) and redacted logs have plain strings; wrapping keeps them
verbatim and lets ``from_anthropic`` unwrap them.
"""

_BASE64 = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")
_MIN_SIGNATURE = 32
_BLANK_TEXT = "text content blocks must contain non-whitespace text"
_DATA_IMAGE = re.compile(r"^data:(?P<media_type>[^;,]+);base64,.+$", re.DOTALL)


# -- predicates and conformers the converters share ------------------------------


def is_blank(text: str) -> bool:
    """Anthropic refuses text blocks that are empty or whitespace only."""
    return not text.strip()


def is_real_signature(signature: Any) -> bool:
    """Whether a thinking ``signature`` can be one the API issued.

    Signatures are opaque base64 blobs of hundreds of characters; a missing or
    empty one, a short token or a redaction placeholder (``[REDACTED_SIGNATURE]``)
    cannot verify, and one bad signature fails the whole request.
    """
    return (
        isinstance(signature, str)
        and len(signature) >= _MIN_SIGNATURE
        and _BASE64.fullmatch(signature) is not None
        and "redacted" not in signature.lower()
    )


def is_replayable_thinking(block: Mapping[str, Any]) -> bool:
    """A thinking block Anthropic will take back: signed, or redacted with its data."""
    kind = block.get("type")
    if kind == "thinking":
        return isinstance(block.get("thinking"), str) and is_real_signature(block.get("signature"))
    if kind == "redacted_thinking":
        data = block.get("data")
        return isinstance(data, str) and bool(data)
    return False


def is_http_url(url: str) -> bool:
    return url.startswith(("https://", "http://"))


def conform_name(name: str, *, fallback: str = "tool") -> str:
    """``name`` made to match NAME_PATTERN; unchanged when it already does."""
    if NAME_PATTERN.fullmatch(name):
        return name
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or fallback


def anthropic_tool_id(call_id: str) -> str:
    """``call_id`` made to match TOOL_ID_PATTERN; unchanged when it already does."""
    if TOOL_ID_PATTERN.fullmatch(call_id):
        return call_id
    return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id) or "call"


def openai_tool_id(call_id: str) -> str:
    """``call_id`` cut to OpenAI's 40 characters, a hash keeping cut ids distinct."""
    if call_id and len(call_id) <= OPENAI_TOOL_ID_MAX:
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:8]
    return f"{call_id[: OPENAI_TOOL_ID_MAX - 9]}_{digest}"


class CallIds:
    """Provider-safe tool-call ids, the same for a call and the results answering it.

    Ids are fixed (``conform``) and made unique, per request (Anthropic: ``tool_use
    ids must be unique``) or per message (OpenAI). A result answers the first
    still-open call of the latest assistant message with its original id, since
    real logs reuse ids (tau-bench, SWE-agent) and only the position tells them
    apart.
    """

    def __init__(self, conform: Callable[[str], str], *, per_message: bool) -> None:
        self._conform = conform
        self._per_message = per_message
        self._used: set[str] = set()
        self._open: list[tuple[str, str]] = []

    def calls(self, ids: Sequence[str]) -> list[str]:
        """New ids for one assistant message's calls, in order."""
        if self._per_message:
            self._used.clear()
        self._open = []
        out: list[str] = []
        for original in ids:
            new = candidate = self._conform(original)
            n = 1
            while new in self._used:
                n += 1
                new = self._conform(f"{candidate}_{n}")
            self._used.add(new)
            self._open.append((original, new))
            out.append(new)
        return out

    def answer(self, original: str) -> str | None:
        """The new id of the open call a result with ``original`` answers, if any."""
        for i, (old, new) in enumerate(self._open):
            if old == original:
                del self._open[i]
                return new
        return None


# -- Anthropic Messages ------------------------------------------------------------


def _anthropic_payload(payload: Any) -> tuple[Any, Any]:
    if isinstance(payload, Mapping):
        return payload.get("system"), payload.get("messages")
    if isinstance(payload, tuple) and len(payload) == 2:
        return payload[0], payload[1]
    raise TypeError("expected (system, messages) or {'system': ..., 'messages': [...]}")


def _system_problems(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system: must be a string or a list of text blocks"]
    problems: list[str] = []
    for j, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            problems.append(f"system.{j}: the system parameter takes text blocks only")
        elif not isinstance(block.get("text"), str) or is_blank(block["text"]):
            problems.append(f"system.{j}: text blocks must contain non-whitespace text")
    return problems


def _source_problems(block: Mapping[str, Any], where: str) -> list[str]:
    source = block.get("source")
    kind = block.get("type")
    if not isinstance(source, Mapping):
        return [f"{where}: a {kind} block needs a source object"]
    stype = source.get("type")
    if stype == "url":
        url = source.get("url")
        return [] if isinstance(url, str) and is_http_url(url) else [f"{where}: url not http(s)"]
    if stype == "base64":
        media_type, data = source.get("media_type"), source.get("data")
        problems = [] if isinstance(data, str) and data else [f"{where}: base64 source has no data"]
        allowed = IMAGE_MEDIA_TYPES if kind == "image" else {"application/pdf"}
        if media_type not in allowed:
            problems.append(f"{where}: media_type {media_type!r} not accepted for a {kind}")
        return problems
    if stype == "text" and kind == "document":
        ok = source.get("media_type") == "text/plain" and isinstance(source.get("data"), str)
        return [] if ok else [f"{where}: a text source needs media_type text/plain and data"]
    return [f"{where}: unsupported {kind} source type {stype!r}"]


def _result_content_problems(block: Mapping[str, Any], where: str) -> list[str]:
    content = block.get("content")
    empty = content is None or content == "" or content == []
    if block.get("is_error") and (empty or (isinstance(content, str) and is_blank(content))):
        return [f"{where}: tool_result content cannot be empty if is_error is true"]
    if content is None or isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{where}: tool_result content must be a string or a list of blocks"]
    problems: list[str] = []
    for k, inner in enumerate(content):
        at = f"{where}.content.{k}"
        kind = inner.get("type") if isinstance(inner, Mapping) else None
        if kind == "text":
            if not isinstance(inner.get("text"), str) or is_blank(inner["text"]):
                problems.append(f"{at}: {_BLANK_TEXT}")
        elif kind in ("image", "document"):
            assert isinstance(inner, Mapping)
            problems += _source_problems(inner, at)
        else:
            problems.append(f"{at}: tool_result content takes text, image or document blocks")
    return problems


class _AnthropicCheck:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.tool_use_ids: set[str] = set()

    def blocks(self, content: Any, where: str) -> list[Mapping[str, Any]]:
        if isinstance(content, str):
            if content == "":
                self.problems.append(f"{where}: all messages must have non-empty content")
            elif is_blank(content):
                self.problems.append(f"{where}: {_BLANK_TEXT}")
            return [{"type": "text", "text": content}]
        if not isinstance(content, list):
            self.problems.append(f"{where}: content must be a string or a list of blocks")
            return []
        if not content:
            self.problems.append(f"{where}: all messages must have non-empty content")
        out: list[Mapping[str, Any]] = []
        for j, block in enumerate(content):
            if isinstance(block, Mapping):
                out.append(block)
            else:
                self.problems.append(f"{where}.content.{j}: a block must be an object")
        return out

    def block(self, block: Mapping[str, Any], role: Any, where: str) -> None:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str) or is_blank(text):
                self.problems.append(f"{where}: {_BLANK_TEXT}")
        elif kind in ("image", "document"):
            self.problems.extend(_source_problems(block, where))
        elif kind == "tool_use":
            self.tool_use(block, role, where)
        elif kind == "tool_result":
            if role != "user":
                self.problems.append(f"{where}: tool_result blocks belong in a user message")
            self.problems.extend(_result_content_problems(block, where))
        elif kind in ("thinking", "redacted_thinking"):
            if role != "assistant":
                self.problems.append(f"{where}: {kind} blocks belong in an assistant message")
            elif not is_replayable_thinking(block):
                self.problems.append(
                    f"{where}: {kind} block without a real signature (or data) cannot be replayed"
                )
        else:
            self.problems.append(f"{where}: unexpected block type {kind!r}")

    def tool_use(self, block: Mapping[str, Any], role: Any, where: str) -> None:
        if role != "assistant":
            self.problems.append(f"{where}: tool_use blocks belong in an assistant message")
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not TOOL_ID_PATTERN.fullmatch(call_id):
            self.problems.append(
                f"{where}: tool_use.id {call_id!r} does not match {TOOL_ID_PATTERN.pattern}"
            )
        elif call_id in self.tool_use_ids:
            self.problems.append(f"{where}: tool_use ids must be unique ({call_id})")
        else:
            self.tool_use_ids.add(call_id)
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            self.problems.append(
                f"{where}: tool_use.name {name!r} does not match {NAME_PATTERN.pattern}"
            )
        if not isinstance(block.get("input"), dict):
            self.problems.append(f"{where}: tool_use.input must be an object")

    def results(self, blocks: list[Mapping[str, Any]], calls: list[str], where: str) -> None:
        """The tool_result blocks of a user message against the previous message's calls."""
        answered: list[str] = []
        seen_other = False
        for j, block in enumerate(blocks):
            if block.get("type") != "tool_result":
                seen_other = True
                continue
            if seen_other:
                self.problems.append(
                    f"{where}.content.{j}: tool_result blocks must come first in the user message"
                )
            call_id = block.get("tool_use_id")
            if call_id not in calls:
                self.problems.append(
                    f"{where}.content.{j}: unexpected tool_use_id {call_id!r}: a tool_result "
                    "must answer a tool_use of the previous message"
                )
            elif call_id in answered:
                self.problems.append(f"{where}.content.{j}: tool_use {call_id} answered twice")
            else:
                answered.append(call_id)
        self.unanswered([c for c in calls if c not in answered], where)

    def unanswered(self, calls: list[str], where: str) -> None:
        if calls:
            self.problems.append(
                f"{where}: tool_use ids were found without tool_result blocks immediately "
                f"after: {', '.join(calls)}"
            )


def anthropic_problems(payload: Any) -> list[str]:
    """What the Messages API would refuse in ``payload``: ``(system, messages)`` as
    ``to_anthropic`` returns it, or ``{"system": ..., "messages": [...]}``.
    """
    system, messages = _anthropic_payload(payload)
    check = _AnthropicCheck()
    check.problems.extend(_system_problems(system))
    if not isinstance(messages, list) or not messages:
        check.problems.append("messages: at least one message is required")
        return check.problems
    calls: list[str] = []  # tool_use ids of the previous (assistant) message
    prev_role: Any = None
    last_blocks: list[Mapping[str, Any]] = []
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, Mapping):
            check.problems.append(f"{where}: a message must be an object")
            check.unanswered(calls, f"messages.{i - 1}")
            calls, prev_role = [], None
            continue
        role = msg.get("role")
        if role not in ("user", "assistant"):
            check.problems.append(f"{where}: role {role!r} (only user and assistant)")
        if i == 0 and role != "user":
            check.problems.append(f"{where}: the first message must use the user role")
        if i > 0 and role == prev_role:
            check.problems.append(f"{where}: roles must alternate between user and assistant")
        blocks = check.blocks(msg.get("content"), where)
        for j, block in enumerate(blocks):
            check.block(block, role, f"{where}.content.{j}")
        if role == "user":
            check.results(blocks, calls, where)
        else:
            check.unanswered(calls, f"messages.{i - 1}")
        calls = [
            b["id"] for b in blocks if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        ]
        calls = calls if role == "assistant" else []
        prev_role, last_blocks = role, blocks
    check.unanswered(calls, f"messages.{len(messages) - 1}")
    if prev_role == "assistant" and last_blocks and last_blocks[-1].get("type") == "text":
        text = last_blocks[-1].get("text")
        if isinstance(text, str) and text != text.rstrip():
            check.problems.append(
                f"messages.{len(messages) - 1}: final assistant content cannot end with "
                "trailing whitespace"
            )
    return check.problems


# -- OpenAI Chat Completions -------------------------------------------------------

OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""Roles accepted here; the deprecated ``function`` role is never produced."""

_PART_TYPES: dict[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
}


def _is_object_json(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _openai_image_problems(part: Mapping[str, Any], where: str) -> list[str]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else None
    if not isinstance(url, str):
        return [f"{where}: image_url.url must be a string"]
    data = _DATA_IMAGE.match(url)
    if data is not None:
        if data["media_type"] not in IMAGE_MEDIA_TYPES:
            return [f"{where}: image media type {data['media_type']!r} not accepted"]
        return []
    return [] if is_http_url(url) else [f"{where}: image_url.url must be http(s) or a data: URL"]


def _openai_content_problems(msg: Mapping[str, Any], role: str, where: str) -> list[str]:
    content = msg.get("content")
    if content is None:
        if role == "assistant":
            return []
        return [f"{where}: content is required for a {role} message"]
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{where}: content must be a string or a list of parts"]
    if not content:
        return [f"{where}: content: empty array (expected at least one part)"]
    problems: list[str] = []
    allowed = _PART_TYPES[role]
    for j, part in enumerate(content):
        at = f"{where}.content.{j}"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in allowed:
            problems.append(f"{at}: a {role} message cannot carry a {kind!r} part")
        elif kind == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{at}: a text part needs 'text' (a string)")
        elif kind == "image_url":
            assert isinstance(part, Mapping)
            problems += _openai_image_problems(part, at)
    return problems


def _tool_call_problems(calls: Any, where: str) -> tuple[list[str], list[str]]:
    """Problems of an assistant's ``tool_calls``, and the ids they open."""
    if not isinstance(calls, list) or not calls:
        return [f"{where}: tool_calls must be a non-empty list"], []
    problems: list[str] = []
    ids: list[str] = []
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls.{j}"
        if not isinstance(call, Mapping):
            problems.append(f"{at}: a tool call must be an object")
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{at}: id must be a non-empty string")
        else:
            if len(call_id) > OPENAI_TOOL_ID_MAX:
                problems.append(f"{at}: id longer than {OPENAI_TOOL_ID_MAX} characters")
            if call_id in ids:
                problems.append(f"{at}: duplicate tool call id {call_id} in one message")
            ids.append(call_id)
        if call.get("type") != "function":
            problems.append(f"{at}: type must be 'function'")
        function = call.get("function")
        if not isinstance(function, Mapping):
            problems.append(f"{at}: function must be an object")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            problems.append(f"{at}: function.name {name!r} does not match {NAME_PATTERN.pattern}")
        if not _is_object_json(function.get("arguments")):
            problems.append(f"{at}: function.arguments must be the JSON text of an object")
    return problems, ids


def openai_problems(messages: Any) -> list[str]:
    """What Chat Completions would refuse in ``messages`` (as ``to_openai`` returns them)."""
    if not isinstance(messages, list) or not messages:
        return ["messages: expected a non-empty list"]
    problems: list[str] = []
    open_calls: list[str] | None = None  # unanswered calls of the assistant being answered

    def close(before: str) -> None:
        if open_calls:
            problems.append(
                f"tool_calls {', '.join(open_calls)} not answered by tool messages before {before}"
            )

    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        role = msg.get("role") if isinstance(msg, Mapping) else None
        if not isinstance(msg, Mapping) or not isinstance(role, str) or role not in OPENAI_ROLES:
            problems.append(f"{where}: unknown role {role!r}")
            close(where)
            open_calls = None
            continue
        name = msg.get("name")
        if name is not None and (not isinstance(name, str) or not NAME_PATTERN.fullmatch(name)):
            problems.append(f"{where}: name {name!r} does not match {NAME_PATTERN.pattern}")
        problems += _openai_content_problems(msg, role, where)
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if open_calls is None or call_id not in open_calls:
                problems.append(
                    f"{where}: tool message {call_id!r} answers no open tool call of the "
                    "preceding assistant message"
                )
            else:
                open_calls.remove(call_id)
            continue
        close(where)
        open_calls = None
        if "tool_calls" in msg and role != "assistant":
            problems.append(f"{where}: only assistant messages carry tool_calls")
        if role != "assistant":
            continue
        if "tool_calls" in msg:
            found, ids = _tool_call_problems(msg["tool_calls"], where)
            problems += found
            open_calls = ids
        content = msg.get("content")
        if not open_calls and (content is None or content == "" or content == []):
            problems.append(f"{where}: an assistant message needs content or tool_calls")
    close("the end")
    return problems
