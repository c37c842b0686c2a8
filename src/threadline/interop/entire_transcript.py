"""The Entire Transcript Format (Entire CLI's "compact transcript", ``transcript.jsonl``).

Schema read (entireio/cli ``transcript/README.md`` and ``transcript/model.go``,
format v1): JSON Lines, one line a message, written by Entire's converters from any
agent's native transcript.

- Line fields: ``v`` (always 1), ``type`` (``user`` / ``assistant``; another type is
  left out, counted), ``agent`` (the agent that wrote the native transcript:
  ``claude-code``, ``codex``, ``opencode``, ``pi``, ...), ``cli_version``, ``ts``
  (RFC 3339, may be empty), ``id`` (an assistant message id), ``input_tokens`` /
  ``output_tokens`` (assistant usage), ``content`` (a list of blocks, a string, or
  ``null``: no blocks).
- Blocks: user text ``{id?, text}`` (no ``type``); assistant text ``{type: "text",
  text}``; ``{type: "tool_use", id?, name, input, result?: {output, status, file?,
  matchCount?}}``: a call whose result is inlined, imported as the call and then a
  tool message (``status: "error"`` flagged ``is_error``; no ``result``: the call is
  left unanswered and flagged by the importer); ``image`` (Anthropic's ``source``:
  base64 data, a URL, or an ``entire-asset:`` placeholder, kept as text).
  Any other block type is passed through by Entire and left out here, counted as
  ``block:<type>`` (the converters already drop thinking).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadline.errors import InvalidMessage
from threadline.interop.records import Parsed, Where, jsonl, mapping, stamp
from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall, Usage

VERSION = 1


def looks_like(first: Mapping[str, Any]) -> bool:
    """Whether a JSONL file's first record is a line of this format."""
    return (
        first.get("v") == VERSION
        and isinstance(first.get("type"), str)
        and "content" in first
        and not isinstance(first.get("message"), Mapping)
    )


def parse(text: str, path: Path) -> Parsed:
    result = Parsed([[]])
    out = result.runs[0]
    with Where(path) as where:
        for where.line, rec in jsonl(text, path, result.repairs):
            if rec.get("v") != VERSION:
                raise InvalidMessage(f"an Entire transcript line of version {rec.get('v')!r}")
            for key, name in (("agent", "source_agent"), ("cli_version", "cli_version")):
                if isinstance(rec.get(key), str) and rec[key]:
                    result.info[name] = rec[key]
            kind = rec.get("type")
            made = (
                _user(rec, result.skipped, where.line)
                if kind == "user"
                else _assistant(rec, result.skipped, where.line)
                if kind == "assistant"
                else None
            )
            if made is None:
                result.skipped[f"line:{kind}"] += 1
                continue
            out.extend(stamp(m, rec.get("ts") or None) for m in made)
    return result


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _image(block: Mapping[str, Any]) -> Part:
    source = mapping(block.get("source"))
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type") if isinstance(source.get("media_type"), str) else None
        return ImagePart(data=source["data"], media_type=media)
    url = source.get("url") or source.get("path") or source.get("data")
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return ImagePart(url=url)
    return TextPart(text=f"[image: {url}]" if isinstance(url, str) else "[image]")


def _user(rec: Mapping[str, Any], skipped: Counter[str], line: int | None) -> list[Message]:
    parts: list[Part] = []
    for block in _blocks(rec.get("content")):
        kind = block.get("type", "text")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif kind == "image":
            parts.append(_image(block))
        else:
            skipped[f"block:{kind}"] += 1
    if not parts:
        return []
    if all(isinstance(p, TextPart) for p in parts):
        return [Message.user("\n".join(p.text for p in parts if isinstance(p, TextPart)))]
    return [Message.user(parts)]


def _assistant(rec: Mapping[str, Any], skipped: Counter[str], line: int | None) -> list[Message]:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for n, block in enumerate(_blocks(rec.get("content"))):
        kind = block.get("type", "text")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif kind == "image":
            parts.append(_image(block))
        elif kind == "tool_use":
            given = block.get("id")
            call_id = given if isinstance(given, str) and given else f"entire-{line}-{n}"
            name = block.get("name")
            if not isinstance(name, str):
                raise InvalidMessage("a tool_use block needs 'name'")
            raw = block.get("input")
            arguments = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {})
            calls.append(ToolCall.from_json_arguments(id=call_id, name=name, arguments=arguments))
            result = block.get("result")
            if isinstance(result, Mapping):
                meta: dict[str, Any] = {"is_error": True} if result.get("status") == "error" else {}
                if isinstance(mapping(result.get("file")).get("filePath"), str):
                    meta["file_path"] = result["file"]["filePath"]
                output = result.get("output")
                body = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
                results.append(Message.tool(body, tool_call_id=call_id, name=name, metadata=meta))
        else:
            skipped[f"block:{kind}"] += 1
    if not parts and not calls:
        return []
    values = {"input_tokens": rec.get("input_tokens"), "output_tokens": rec.get("output_tokens")}
    kept = {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
    content: str | list[Part] = (
        "".join(p.text for p in parts if isinstance(p, TextPart))
        if all(isinstance(p, TextPart) for p in parts)
        else parts
    )
    made = Message.assistant(content, tool_calls=calls, usage=Usage(**kept) if kept else None)
    if isinstance(rec.get("id"), str):
        made.metadata["source_uuid"] = rec["id"]
    return [made, *results]
