"""OpenCode session exports (``opencode export <id>``) as threadline messages.

Schema read (OpenCode ``packages/opencode/src/session/message-v2.ts``, version 1.x):
one JSON object ``{info, messages}``.

- ``info`` (the session): ``id`` (the source id), ``title``, ``directory`` (the
  working directory), ``version``, ``parentID`` (the session it was spawned or forked
  from: the parent), ``time {created, updated}`` (epoch milliseconds), ``tokens``,
  ``cost``.
- ``messages[]``: ``{info, parts}``. ``info.role`` is ``user`` or ``assistant``;
  ``info.time.created``, ``agent``, and for assistants ``modelID``, ``providerID``,
  ``path.cwd``, ``summary`` (true on a compaction's summary), ``error``, ``finish``.
- User parts: ``text`` (``synthetic`` text, e.g. editor context, is kept and marked;
  ``ignored`` text is left out, as OpenCode leaves it out of the model's input),
  ``file`` (an image or document: a part; ``text/plain`` and directories are left
  out, OpenCode sends them as the text part beside them), ``subtask``
  (``description``, ``prompt``, ``agent``: kept as text), ``agent`` (an ``@agent``
  mention: left out, counted), ``compaction`` (``auto``, ``tail_start_id``: see below).
- Assistant parts: one OpenCode message holds several model calls, each opened by a
  ``step-start``; each step becomes one assistant message: ``text`` as its content,
  ``reasoning`` in ``metadata["thinking"]``, each ``tool`` part
  ``{tool, callID, state}`` a tool call (``state.input``) answered by a tool message
  (``state.output``; ``state.error`` flagged ``is_error``; a ``pending`` or
  ``running`` call has no result and is flagged as unanswered by the importer),
  ``step-finish`` (``tokens``, ``reason``) its usage and finish reason, ``patch``
  (``files`` the step changed) in ``metadata["patch_files"]``, ``file`` a part.
  ``snapshot`` and ``retry`` parts (the workspace's git snapshot; a failed attempt's
  error) are left out, counted.
- A compaction is a user message with a ``compaction`` part followed by an assistant
  message with ``summary: true``: both become one checkpoint (the summary's text)
  covering the messages before ``tail_start_id`` (the messages OpenCode keeps after
  the summary), or all before it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop.records import Parsed, Where, load_json, mapping, stamp, utc_iso
from threadline.messages import FilePart, ImagePart, Message, Part, TextPart, ToolCall, Usage

TEXT_FILES = frozenset({"text/plain", "application/x-directory"})


def looks_like(data: Any) -> bool:
    """Whether a whole JSON document is an OpenCode export."""
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        return False
    info = data.get("info")
    head = data["messages"][0] if data["messages"] else None
    return (
        isinstance(info, Mapping)
        and isinstance(info.get("id"), str)
        and (head is None or (isinstance(head, Mapping) and "parts" in head and "info" in head))
    )


def parse(text: str, path: Path) -> Parsed:
    data = load_json(text, path)
    if not looks_like(data):
        raise ImportFormatError("an OpenCode export needs 'info' and 'messages'", path=str(path))
    info = data["info"]
    result = Parsed([[]])
    extra = result.extra(0)
    _session_facts(info, result.info, extra)
    reader = _Reader(result.runs[0], result.skipped, extra)
    with Where(path):
        messages = data["messages"]
        for i, msg in enumerate(messages):
            if not isinstance(msg, Mapping) or not isinstance(msg.get("info"), Mapping):
                raise InvalidMessage(f"messages[{i}]: expected {{info, parts}}")
            reader.message(msg["info"], msg.get("parts") or [], i)
    return result


def _session_facts(info: Mapping[str, Any], facts: dict[str, Any], extra: dict[str, Any]) -> None:
    extra["source_id"] = info["id"]
    if isinstance(info.get("title"), str) and info["title"]:
        extra["title"] = info["title"]
    if isinstance(info.get("parentID"), str) and info["parentID"]:
        extra["facts"] = {"parent_source_id": info["parentID"]}
    if isinstance(info.get("directory"), str) and info["directory"]:
        facts["cwd"] = info["directory"]
    if isinstance(info.get("version"), str):
        facts["version"] = info["version"]
    times = mapping(info.get("time"))
    for ours, theirs in (("started", "created"), ("updated", "updated")):
        if isinstance(times.get(theirs), int | float):
            extra[ours] = _ms(times[theirs])


def _ms(value: Any) -> Any:
    """OpenCode's epoch milliseconds as seconds (what ``stamp`` reads)."""
    return value / 1000 if isinstance(value, int | float) else value


def _usage(tokens: Any) -> Usage | None:
    if not isinstance(tokens, Mapping):
        return None
    cache = mapping(tokens.get("cache"))
    values = {
        "input_tokens": tokens.get("input"),
        "output_tokens": tokens.get("output"),
        "cached_tokens": cache.get("read"),
        "cache_write_tokens": cache.get("write"),
    }
    kept = {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
    return Usage(**kept) if kept else None


def _file_part(part: Mapping[str, Any]) -> Part | None:
    mime, url = part.get("mime"), part.get("url")
    if not isinstance(url, str) or mime in TEXT_FILES:
        return None
    if isinstance(mime, str) and mime.startswith("image/"):
        return ImagePart(url=url)
    name = part.get("filename") if isinstance(part.get("filename"), str) else None
    return FilePart(uri=url, name=name, media_type=mime if isinstance(mime, str) else None)


class _Reader:
    def __init__(self, out: list[Message], skipped: Counter[str], extra: dict[str, Any]) -> None:
        self.out, self.skipped, self.extra = out, skipped, extra
        self.first_of: dict[str, int] = {}  # OpenCode message id -> its first message here
        self.compaction: Mapping[str, Any] | None = None  # waiting for its summary

    def message(self, info: Mapping[str, Any], parts: list[Any], i: int) -> None:
        role = info.get("role")
        if isinstance(info.get("id"), str):
            self.first_of[info["id"]] = len(self.out)
        when = _ms(mapping(info.get("time")).get("created"))
        if role == "user":
            self._user(info, [p for p in parts if isinstance(p, Mapping)], when)
        elif role == "assistant":
            self._assistant(info, [p for p in parts if isinstance(p, Mapping)], when)
        else:
            raise InvalidMessage(
                f"messages[{i}]: unknown role {role!r} (expected user or assistant)"
            )

    def _user(self, info: Mapping[str, Any], parts: list[Mapping[str, Any]], when: Any) -> None:
        content: list[Part] = []
        synthetic = False
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                if part.get("ignored"):
                    self.skipped["part:text(ignored)"] += 1
                    continue
                synthetic = synthetic or bool(part.get("synthetic"))
                content.append(TextPart(text=part["text"]))
            elif kind == "file":
                found = _file_part(part)
                if found is None:
                    self.skipped["part:file(sent as text)"] += 1
                else:
                    content.append(found)
            elif kind == "subtask":
                head = f"subtask for {part.get('agent')}: {part.get('description') or ''}"
                content.append(TextPart(text=f"{head}\n{part.get('prompt') or ''}".strip()))
            elif kind == "compaction":
                self.compaction = part
            else:
                self.skipped[f"part:{kind}"] += 1
        if not content:
            return
        meta: dict[str, Any] = {"source_uuid": info.get("id"), "agent": info.get("agent")}
        if synthetic:
            meta["synthetic_parts"] = sum(1 for p in parts if p.get("synthetic"))
        m = Message.user(
            content[0].text if len(content) == 1 and isinstance(content[0], TextPart) else content
        )
        self.out.append(stamp(m, when, **meta))

    def _assistant(
        self, info: Mapping[str, Any], parts: list[Mapping[str, Any]], when: Any
    ) -> None:
        if info.get("summary") is True:
            self._summary(info, parts, when)
            return
        steps: list[list[Mapping[str, Any]]] = [[]]
        for part in parts:
            if part.get("type") == "step-start" and steps[-1]:
                steps.append([])
            steps[-1].append(part)
        model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
        for n, step in enumerate(steps):
            self._step(info, step, when, model, first=n == 0)

    def _step(
        self,
        info: Mapping[str, Any],
        parts: list[Mapping[str, Any]],
        when: Any,
        model: str | None,
        *,
        first: bool,
    ) -> None:
        content: list[Part] = []
        thinking: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        meta: dict[str, Any] = {}
        usage: Usage | None = None
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                content.append(TextPart(text=part["text"]))
            elif kind == "reasoning" and isinstance(part.get("text"), str):
                thinking.append({"type": "reasoning", "text": part["text"]})
            elif kind == "tool":
                call, result = self._tool(part)
                calls.append(call)
                if result is not None:
                    results.append(result)
            elif kind == "step-finish":
                usage = _usage(part.get("tokens")) or usage
                if isinstance(part.get("reason"), str):
                    meta["finish_reason"] = part["reason"]
            elif kind == "patch":
                meta.setdefault("patch_files", []).extend(
                    f for f in part.get("files") or [] if isinstance(f, str)
                )
            elif kind == "file" and (found := _file_part(part)) is not None:
                content.append(found)
            elif kind != "step-start":
                self.skipped[f"part:{kind}"] += 1
        if not (content or calls or thinking):
            return
        if thinking:
            meta["thinking"] = thinking
        if first and isinstance(info.get("error"), Mapping):
            meta["error"] = info["error"].get("name") or "error"
        text = "".join(p.text for p in content if isinstance(p, TextPart))
        body: str | list[Part] = text if all(isinstance(p, TextPart) for p in content) else content
        m = Message.assistant(body, tool_calls=calls, model=model, usage=usage, metadata=meta)
        cwd = mapping(info.get("path")).get("cwd")
        self.out.append(stamp(m, when, source_uuid=info.get("id"), cwd=cwd if first else None))
        self.out.extend(stamp(r, when) for r in results)

    def _tool(self, part: Mapping[str, Any]) -> tuple[ToolCall, Message | None]:
        state = mapping(part.get("state"))
        call_id, name = part.get("callID"), part.get("tool")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise InvalidMessage("a tool part needs 'callID' and 'tool'")
        raw = state.get("input")
        call = ToolCall.from_json_arguments(
            id=call_id, name=name, arguments=json.dumps(raw) if raw is not None else None
        )
        status = state.get("status")
        if status == "completed":
            output = state.get("output")
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            return call, Message.tool(text, tool_call_id=call_id, name=name)
        if status == "error":
            error = str(state.get("error") or "error")
            return call, Message.tool(
                error, tool_call_id=call_id, name=name, metadata={"is_error": True}
            )
        self.skipped[f"tool:{status}"] += 1  # never ran to an end: the call stays unanswered
        return call, None

    def _summary(self, info: Mapping[str, Any], parts: list[Mapping[str, Any]], when: Any) -> None:
        """A compaction's summary: a checkpoint, not a message (see the module docstring)."""
        text = "\n".join(
            str(p["text"])
            for p in parts
            if p.get("type") == "text" and isinstance(p.get("text"), str)
        ).strip()
        marker = self.compaction or {}
        self.compaction = None
        self.skipped["part:reasoning(summary)"] += sum(p.get("type") == "reasoning" for p in parts)
        if not text:
            self.skipped["summary_without_text"] += 1
            return
        tail = marker.get("tail_start_id")
        before = self.first_of.get(tail, len(self.out)) if isinstance(tail, str) else len(self.out)
        self.extra.setdefault("compactions", []).append(
            {
                "before": before,
                "summary": text,
                "metadata": {
                    "native": "opencode",
                    "trigger": "auto" if marker.get("auto") else "manual",
                    "source_uuid": info.get("id"),
                    "source_created_at": utc_iso(when),
                },
            }
        )
