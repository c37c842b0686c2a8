"""Sessions into threadline: our JSON export, OpenAI chat logs, and other agents' transcripts.

Every reader is all-or-nothing: it parses the whole file into memory and
returns only when every record made sense, so a half-read file never reaches a
store. Input must be strict UTF-8; a bad byte or a malformed record raises
:class:`ImportFormatError` naming the line (and the byte offset for bad UTF-8).
Records a reader understands but that are not conversation (UI progress,
reasoning blobs, snapshots) are skipped and counted, never dropped silently:
the counts are in ``ImportedSession.metadata["skipped"]``.

Real logs reuse tool-call ids (tau-bench, SWE-agent), so readers keep calls and
results in file order and leave pairing to :func:`threadline.messages.group_units`,
which pairs positionally among equal ids.

Our own JSON export is read by :func:`threadline.interop.export.from_json_export`,
next to the writer that defines it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop.anthropic_format import from_anthropic
from threadline.interop.export import EXPORT_FORMAT, ImportedSession, from_json_export
from threadline.interop.openai_format import (
    arguments_text,
    message_from_openai,
    messages_from_openai,
)
from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall, Usage

FORMATS = (
    "threadline",
    "openai",
    "openai-jsonl",
    "openai-runs",
    "claude-code",
    "codex",
    "swe-agent",
    "openhands",
    "gemini",
    "aider",
)
"""What :func:`detect_format` can answer."""

_CLAUDE_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
}
_CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
_OPENHANDS_SKIP = {"recall"}


@dataclass(slots=True)
class _Parsed:
    runs: list[list[Message]]
    info: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)


# -- reading files ----------------------------------------------------------------


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportFormatError(
            f"invalid UTF-8 at byte offset {exc.start}", line=line, path=str(path)
        ) from exc
    return text.removeprefix("\ufeff")


def _load_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno, path=str(path)
        ) from exc


def _jsonl(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", line=n, path=str(path)
            ) from exc
        if not isinstance(record, dict):
            raise ImportFormatError(
                f"expected a JSON object, got {type(record).__name__}", line=n, path=str(path)
            )
        yield n, record


def _timestamp(value: Any) -> datetime | None:
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def _stamp(m: Message, when: Any, **metadata: Any) -> Message:
    created = _timestamp(when)
    if created is not None:
        m.created_at = created
    m.metadata.update({k: v for k, v in metadata.items() if v is not None})
    return m


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _usage(raw: Any, **keys: str) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    values = {ours: raw.get(theirs) for ours, theirs in keys.items()}
    values = {k: v for k, v in values.items() if isinstance(v, int)}
    return Usage(**values) if values else None


def _normalise(parts: list[Part]) -> str | list[Part]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return parts if parts else ""


class _Where:
    """Turns a failure inside one record into an ImportFormatError naming its line."""

    line: int | None

    def __init__(self, path: Path) -> None:
        self.path, self.line = path, None

    def __enter__(self) -> _Where:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, ValidationError):
            detail = f"invalid message: {exc.errors()[0]['msg']}"
        elif isinstance(exc, KeyError):
            detail = f"missing field {exc}"
        elif isinstance(exc, TypeError | AttributeError):
            detail = f"unexpected record shape ({exc})"
        elif isinstance(exc, InvalidMessage):
            detail = str(exc)
        else:
            return
        raise ImportFormatError(detail, line=self.line, path=str(self.path)) from exc


class _Cwd:
    """Stamps the session's working directory on a message when it is new or has changed.

    Summarizers read ``metadata["cwd"]`` to show the agent's paths relative to
    the project; recording it only on change keeps the messages small.
    """

    def __init__(self) -> None:
        self.last: str | None = None

    def stamp(self, m: Message, cwd: Any) -> None:
        if isinstance(cwd, str) and cwd and cwd != self.last:
            m.metadata["cwd"] = cwd
            self.last = cwd


# -- claude code -------------------------------------------------------------------


def _parse_claude_code(text: str, path: Path) -> _Parsed:
    result = _Parsed([[]])
    out = result.runs[0]
    names: dict[str, str] = {}
    pending: dict[str, Any] = {}
    open_id: str | None = None  # message.id of the assistant message still being streamed
    open_at = -1
    cwd = _Cwd()
    with _Where(path) as where:
        for where.line, rec in _jsonl(text, path):
            kind = rec.get("type")
            result.info.setdefault("session_id", rec.get("sessionId"))
            if kind == "summary":
                result.info.setdefault("summaries", []).append(rec.get("summary"))
                continue
            if kind == "system" and rec.get("subtype") == "compact_boundary":
                meta = rec.get("compactMetadata") or {}
                pending["compact_boundary"] = {
                    "trigger": meta.get("trigger"),
                    "pre_tokens": meta.get("preTokens"),
                    "at": rec.get("timestamp"),
                    "logical_parent_uuid": rec.get("logicalParentUuid"),
                }
                continue
            if kind not in ("user", "assistant"):
                result.skipped[f"{kind}:{rec['subtype']}" if rec.get("subtype") else str(kind)] += 1
                continue
            msg = rec["message"]
            if kind == "assistant":
                new = from_anthropic([{"role": "assistant", "content": msg["content"]}])[0]
                names.update({c.id: c.name for c in new.tool_calls})
                msg_id = msg.get("id")
                usage = _usage(
                    msg.get("usage"),
                    input_tokens="input_tokens",
                    output_tokens="output_tokens",
                    cached_tokens="cache_read_input_tokens",
                    cache_write_tokens="cache_creation_input_tokens",
                )
                if (
                    msg_id is not None
                    and msg_id == open_id
                    and all(m.role == "tool" for m in out[open_at + 1 :])
                ):
                    old = out[open_at]
                    thinking = old.metadata.get("thinking", []) + new.metadata.get("thinking", [])
                    old.content = _normalise(old.parts + new.parts)
                    old.tool_calls = old.tool_calls + new.tool_calls
                    if thinking:
                        old.metadata["thinking"] = thinking
                    old.usage = usage or old.usage
                    continue
                new.model, new.usage = msg.get("model"), usage
                open_id, open_at = msg_id, len(out)
                made = [new]
            else:
                content = msg["content"]
                made = from_anthropic([{"role": "user", "content": content}])
                for m in made:
                    if m.role == "tool" and m.tool_call_id in names:
                        m.name = names[m.tool_call_id]
                    elif m.role == "user":
                        if rec.get("isCompactSummary"):
                            m.metadata["compact_summary"] = True
                        if rec.get("isMeta"):
                            m.metadata["is_meta"] = True
            for m in made:
                _stamp(m, rec.get("timestamp"), source_uuid=rec.get("uuid"))
                if rec.get("isSidechain"):
                    m.metadata["sidechain"] = True
            if pending:
                made[0].metadata.update(pending)
                pending = {}
            cwd.stamp(made[0], rec.get("cwd"))
            out.extend(made)
    if pending:
        result.skipped["compact_boundary_at_end"] += 1
    return result


# -- codex -------------------------------------------------------------------------


def _codex_content(items: Any) -> str | list[Part]:
    parts: list[Part] = []
    for item in items or []:
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(text=item["text"]))
        elif kind == "input_image":
            parts.append(ImagePart(url=item["image_url"]))
        else:
            raise InvalidMessage(f"unsupported codex content item {kind!r}")
    return _normalise(parts)


def _parse_codex(text: str, path: Path) -> _Parsed:
    result = _Parsed([[]])
    out = result.runs[0]
    names: dict[str, str] = {}
    pending: dict[str, Any] = {}
    model: str | None = None
    open_calls: list[str] = []  # calls of the current assistant message still unanswered
    deferred: list[Message] = []
    cwd = _Cwd()
    cwd_now: Any = None
    with _Where(path) as where:
        for where.line, rec in _jsonl(text, path):
            kind, payload = rec.get("type"), rec.get("payload") or {}
            item = payload.get("type")
            made: Message | None = None
            if kind == "session_meta":
                result.info.update(
                    {k: payload.get(k) for k in ("id", "cwd", "cli_version", "model_provider")}
                )
                cwd_now = payload.get("cwd") or cwd_now
            elif kind == "turn_context":
                model = payload.get("model") or model
                cwd_now = payload.get("cwd") or cwd_now
            elif kind == "compacted":
                history = payload.get("replacement_history") or []
                pending["codex_compacted"] = {
                    "at": rec.get("timestamp"),
                    "replacement_items": len(history),
                }
            elif kind == "event_msg" and item == "token_count":
                last = (payload.get("info") or {}).get("last_token_usage")
                usage = _usage(
                    last,
                    input_tokens="input_tokens",
                    output_tokens="output_tokens",
                    cached_tokens="cached_input_tokens",
                )
                assistant = next((m for m in reversed(out) if m.role == "assistant"), None)
                if assistant is not None and usage is not None:
                    assistant.usage = usage
            elif kind == "response_item" and item == "message":
                role = payload["role"]
                content = _codex_content(payload.get("content"))
                if role in ("developer", "system"):
                    made = Message.system(content, metadata={"codex_role": role})
                elif role in ("user", "assistant"):
                    made = Message(role=role, content=content)
                    made.model = model if role == "assistant" else None
                else:
                    raise InvalidMessage(f"unknown codex message role {role!r}")
            elif kind == "response_item" and item in ("function_call", "custom_tool_call"):
                args = payload.get("arguments") if item == "function_call" else payload.get("input")
                call = ToolCall.from_json_arguments(
                    id=payload["call_id"],
                    name=payload["name"],
                    arguments=arguments_text(args or ""),
                )
                names[call.id] = call.name
                if out and out[-1].role == "assistant" and not pending:
                    out[-1].tool_calls = [*out[-1].tool_calls, call]
                    open_calls.append(call.id)
                else:
                    made = Message.assistant("", tool_calls=[call], model=model)
            elif kind == "response_item" and item in (
                "function_call_output",
                "custom_tool_call_output",
            ):
                call_id = payload["call_id"]
                made = Message.tool(
                    _text_of(payload.get("output")), tool_call_id=call_id, name=names.get(call_id)
                )
            else:
                result.skipped[f"{kind}:{item}" if item else str(kind)] += 1
            if made is None:
                continue
            _stamp(made, rec.get("timestamp"), **pending)
            cwd.stamp(made, cwd_now)
            pending = {}
            if made.role == "tool":
                out.append(made)
                if made.tool_call_id in open_calls:
                    open_calls.remove(made.tool_call_id)
                if not open_calls:
                    out.extend(deferred)
                    deferred.clear()
            elif open_calls and made.role != "assistant":
                # a developer or user message logged between a call and its output
                # would split the unit; it moves to just after the chain
                made.metadata["moved_after_tool_results"] = True
                deferred.append(made)
            else:
                out.extend(deferred)
                deferred.clear()
                out.append(made)
                open_calls[:] = [c.id for c in made.tool_calls]
    out.extend(deferred)
    result.info["model"] = model
    return result


# -- openai chat, swe-agent ----------------------------------------------------------


def _openai_list(items: Any, what: str) -> list[Message]:
    try:
        return messages_from_openai(items)
    except InvalidMessage as exc:
        raise InvalidMessage(f"{what}: {exc}") from exc


def _parse_openai_runs(text: str, path: Path) -> _Parsed:
    data = _load_json(text, path)
    with _Where(path):
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            return _Parsed([_openai_list(data["messages"], "messages")])
        if not isinstance(data, list):
            raise InvalidMessage("expected a JSON array of messages or of runs with 'traj'")
        if data and all(isinstance(r, dict) and "traj" in r for r in data):
            runs = [_openai_list(r["traj"], f"run {i}") for i, r in enumerate(data)]
            keys = ("task_id", "trial", "reward")
            info = {"runs": [{k: r.get(k) for k in keys if k in r} for r in data]}
            return _Parsed(runs, info)
        return _Parsed([_openai_list(data, "array")])


def _parse_openai_jsonl(text: str, path: Path) -> _Parsed:
    out: list[Message] = []
    with _Where(path) as where:
        for where.line, rec in _jsonl(text, path):
            out.append(message_from_openai(rec))
    return _Parsed([out])


def _parse_swe_agent(text: str, path: Path) -> _Parsed:
    data = _load_json(text, path)
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise ImportFormatError("a SWE-agent .traj needs a 'history' list", path=str(path))
    out: list[Message] = []
    with _Where(path):
        for i, entry in enumerate(data["history"]):
            d = dict(entry)
            ids = d.pop("tool_call_ids", None)
            if d.get("role") == "tool" and ids and not d.get("tool_call_id"):
                d["tool_call_id"] = ids[0]
            try:
                m = message_from_openai(d)
            except InvalidMessage as exc:
                raise InvalidMessage(f"history[{i}]: {exc}") from exc
            keep = ("agent", "message_type", "action", "is_demo")
            m.metadata.update({k: d[k] for k in keep if d.get(k) is not None})
            if ids and len(ids) > 1:
                m.metadata["tool_call_ids"] = ids
            out.append(m)
    if out:
        _Cwd().stamp(out[0], _swe_agent_cwd(data.get("trajectory")))
    info = data.get("info") or {}
    return _Parsed([out], {k: info.get(k) for k in ("exit_status", "model_stats") if k in info})


def _swe_agent_cwd(trajectory: Any) -> str | None:
    """The repository root: ``working_dir`` in the first step's state (a dict or JSON text)."""
    for step in trajectory if isinstance(trajectory, list) else []:
        state = step.get("state") if isinstance(step, dict) else None
        if isinstance(state, str):
            try:
                state = json.loads(state)
            except json.JSONDecodeError:
                state = None
        if isinstance(state, dict) and isinstance(state.get("working_dir"), str):
            return str(state["working_dir"])
    return None


# -- openhands ----------------------------------------------------------------------


def _openhands_run(events: list[Any], skipped: Counter[str]) -> list[Message]:
    out: list[Message] = []
    call_of: dict[Any, str] = {}  # action event id -> tool call id
    positional: list[tuple[str, str]] = []  # open calls of a legacy log: (id, name)
    responses: dict[str, int] = {}  # model response id -> index of its assistant message
    cwd = _Cwd()
    first_cwd = next((d for ev in events if (d := _openhands_cwd(ev))), None)
    for n, ev in enumerate(events):
        if out and first_cwd:
            cwd.stamp(out[0], first_cwd)
            first_cwd = None
        args = ev.get("args") or {}
        meta = ev.get("tool_call_metadata") or {}
        when = ev.get("timestamp")
        if "action" in ev:
            action = ev["action"]
            if action in _OPENHANDS_SKIP:
                skipped[f"action:{action}"] += 1
                continue
            if action == "system":
                out.append(
                    _stamp(Message.system(args.get("content") or ev.get("message", "")), when)
                )
                continue
            if action == "message" and not meta:
                text = args.get("content") or ev.get("message", "")
                role = "user" if ev.get("source") == "user" else "assistant"
                out.append(_stamp(Message(role=role, content=text), when))
                continue
            response = meta.get("model_response") or {}
            message = ((response.get("choices") or [{}])[0]).get("message") or {}
            call_id = meta.get("tool_call_id") or f"openhands-{ev.get('id', n)}"
            name = meta.get("function_name") or action
            raw = next(
                (
                    c["function"].get("arguments")
                    for c in message.get("tool_calls") or []
                    if c.get("id") == call_id
                ),
                None,
            )
            plain = {k: v for k, v in args.items() if k != "thought"}
            call = ToolCall.from_json_arguments(
                id=call_id, name=name, arguments=raw or arguments_text(plain)
            )
            call_of[ev.get("id", n)] = call_id
            if not meta:
                positional.append((call_id, name))
            rid = response.get("id")
            if rid and rid in responses:
                target = out[responses[rid]]
                target.tool_calls = [*target.tool_calls, call]
                continue
            thought = message.get("content") or args.get("thought") or ""
            if rid:
                responses[rid] = len(out)
            out.append(_stamp(Message.assistant(thought, tool_calls=[call]), when))
        elif "observation" in ev:
            kind = ev["observation"]
            content = _text_of(ev.get("content", ev.get("message", "")))
            call_id = meta.get("tool_call_id") or call_of.get(ev.get("cause"))
            if call_id is None and positional and ev.get("cause") is None and kind != "error":
                call_id = positional.pop(0)[0]
            if call_id is not None:
                name = meta.get("function_name") or kind
                out.append(_stamp(Message.tool(content, tool_call_id=call_id, name=name), when))
                cwd.stamp(out[-1], _openhands_cwd(ev))
            elif kind == "error":
                out.append(
                    _stamp(Message.user(content, metadata={"openhands_observation": "error"}), when)
                )
            else:
                skipped[f"observation:{kind}"] += 1
        else:
            skipped["unknown_event"] += 1
    if out and first_cwd:
        cwd.stamp(out[0], first_cwd)
    return out


def _openhands_cwd(event: Any) -> str | None:
    """Where a command ran: ``extras.metadata.working_dir`` of a ``run`` observation."""
    extras = event.get("extras") if isinstance(event, dict) else None
    meta = extras.get("metadata") if isinstance(extras, dict) else None
    found = meta.get("working_dir") if isinstance(meta, dict) else None
    return found if isinstance(found, str) and found else None


def _parse_openhands(text: str, path: Path) -> _Parsed:
    result = _Parsed([])
    stripped = text.lstrip()
    records: list[tuple[int | None, Any]]
    if stripped.startswith("["):
        records = [(None, {"history": _load_json(text, path)})]
    else:
        records = list(_jsonl(text, path))
    with _Where(path) as where:
        for where.line, rec in records:
            history = rec.get("history")
            if not isinstance(history, list):
                raise InvalidMessage("an OpenHands record needs a 'history' list of events")
            result.runs.append(_openhands_run(history, result.skipped))
            if rec.get("instance_id"):
                result.info.setdefault("instances", []).append(rec["instance_id"])
    return result


# -- gemini, aider -------------------------------------------------------------------


def _parse_gemini(text: str, path: Path) -> _Parsed:
    data = _load_json(text, path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ImportFormatError("a Gemini CLI session needs a 'messages' list", path=str(path))
    result = _Parsed([[]], {"session_id": data.get("sessionId"), "started": data.get("startTime")})
    out = result.runs[0]
    with _Where(path):
        for msg in data["messages"]:
            kind, when = msg.get("type"), msg.get("timestamp")
            raw = msg.get("content")
            content = (
                raw
                if isinstance(raw, str)
                else _normalise([TextPart(text=p["text"]) for p in raw or [] if "text" in p])
            )
            if kind == "user":
                out.append(_stamp(Message.user(content), when))
                continue
            if kind != "gemini":
                result.skipped[f"message:{kind}"] += 1
                continue
            calls = msg.get("toolCalls") or []
            tool_calls = [
                ToolCall(id=c["id"], name=c["name"], arguments=c.get("args") or {}) for c in calls
            ]
            usage = _usage(
                msg.get("tokens"),
                input_tokens="input",
                output_tokens="output",
                cached_tokens="cached",
            )
            meta = {"thinking": msg["thoughts"]} if msg.get("thoughts") else {}
            out.append(
                _stamp(
                    Message.assistant(
                        content,
                        tool_calls=tool_calls,
                        model=msg.get("model"),
                        usage=usage,
                        metadata=meta,
                    ),
                    when,
                    source_id=msg.get("id"),
                )
            )
            for c in calls:
                responses = [
                    r.get("functionResponse", {}).get("response") for r in c.get("result") or []
                ]
                if not responses:
                    continue
                body = [r.get("output", r) if isinstance(r, dict) else r for r in responses]
                result_text = "\n".join(_text_of(b) for b in body)
                error = {"is_error": True} if c.get("status") not in (None, "success") else {}
                out.append(
                    _stamp(
                        Message.tool(
                            result_text, tool_call_id=c["id"], name=c["name"], metadata=error
                        ),
                        c.get("timestamp", when),
                    )
                )
    return result


def _parse_aider(text: str, path: Path) -> _Parsed:
    result = _Parsed([[]])
    out = result.runs[0]
    user: list[str] = []
    reply: list[str] = []
    notes: list[str] = []  # "> " lines seen before any message
    started: str | None = None

    def emit(m: Message) -> None:
        nonlocal started, notes
        if started:
            m.metadata["aider_session_started"] = started
        if notes:
            m.metadata["aider_notes"] = notes
        out.append(m)
        started, notes = None, []

    def flush() -> None:
        nonlocal user, reply
        if user:
            emit(Message.user("\n".join(user).rstrip()))
        body = "\n".join(reply).strip()
        if body:
            emit(Message.assistant(body))
        user, reply = [], []

    for line in text.splitlines():
        if line.startswith("# aider chat started at"):
            flush()
            started = line.removeprefix("# aider chat started at").strip()
        elif line.startswith("####"):
            if reply:
                flush()
            user.append(line[5:].rstrip() if line.startswith("#### ") else "")
        elif line.startswith(">"):
            flush()  # a reply ends where aider's own output (tokens, edits) starts
            target = (
                out[-1].metadata.setdefault("aider_notes", []) if out and not started else notes
            )
            target.append(line[1:].strip())
        else:
            if user:
                flush()
            reply.append(line.rstrip())
    flush()
    if notes:
        result.skipped["aider_notes_without_message"] += len(notes)
    result.info["notes"] = sum(len(m.metadata.get("aider_notes", [])) for m in out)
    return result


# -- detection and dispatch ----------------------------------------------------------


def _classify(first: Any, whole: bool) -> str | None:
    if isinstance(first, list):
        head = first[0] if first else {}
        if isinstance(head, dict) and "traj" in head:
            return "openai-runs"
        if isinstance(head, dict) and ("action" in head or "observation" in head):
            return "openhands"
        return "openai" if isinstance(head, dict) and ("role" in head or not first) else None
    if not isinstance(first, dict):
        return None
    if first.get("format") == EXPORT_FORMAT:
        return "threadline"
    if whole and "history" in first and ("trajectory" in first or "info" in first):
        return "swe-agent"
    if whole and "sessionId" in first and isinstance(first.get("messages"), list):
        return "gemini"
    if whole and isinstance(first.get("messages"), list):
        return "openai-runs"
    if isinstance(first.get("history"), list):
        return "openhands"
    if first.get("type") in _CODEX_TYPES and "payload" in first:
        return "codex"
    if first.get("type") in _CLAUDE_TYPES and (
        "sessionId" in first or "uuid" in first or "type" in first
    ):
        return "claude-code"
    return "openai-jsonl" if "role" in first else None


def _detect(text: str, path: Path) -> str:
    head = text.lstrip()
    if head.startswith("# aider chat started at"):
        return "aider"
    if not head.startswith(("{", "[")):
        raise ImportFormatError(
            "not a format threadline can import (unrecognised start)", path=str(path)
        )
    try:
        found = _classify(json.loads(text), whole=True)
    except json.JSONDecodeError as exc:
        if not exc.msg.startswith("Extra data"):
            raise ImportFormatError(
                f"invalid JSON: {exc.msg}", line=exc.lineno, path=str(path)
            ) from exc
        _, first = next(_jsonl(text, path))
        found = _classify(first, whole=False)
    if found is None:
        raise ImportFormatError(
            "not a format threadline can import (unrecognised records)", path=str(path)
        )
    return found


def detect_format(path: str | Path) -> str:
    """Which of :data:`FORMATS` the file at ``path`` is; ImportFormatError if none."""
    p = Path(path)
    return _detect(_read_text(p), p)


_PARSERS: dict[str, Callable[[str, Path], _Parsed]] = {
    "openai": _parse_openai_runs,
    "openai-runs": _parse_openai_runs,
    "openai-jsonl": _parse_openai_jsonl,
    "claude-code": _parse_claude_code,
    "codex": _parse_codex,
    "swe-agent": _parse_swe_agent,
    "openhands": _parse_openhands,
    "gemini": _parse_gemini,
    "aider": _parse_aider,
}


def _parse(path: str | Path, fmt: str | None = None) -> tuple[str, _Parsed]:
    p = Path(path)
    text = _read_text(p)
    fmt = fmt or _detect(text, p)
    if fmt == "threadline":
        raise ImportFormatError("a threadline export: read it with import_file()", path=str(p))
    return fmt, _PARSERS[fmt](text, p)


def _one(parsed: _Parsed, path: str | Path, hint: str) -> list[Message]:
    if len(parsed.runs) != 1:
        raise ImportFormatError(
            f"the file holds {len(parsed.runs)} conversations; read them with {hint}",
            path=str(path),
        )
    return parsed.runs[0]


def read_transcript_runs(path: str | Path) -> list[list[Message]]:
    """Every conversation in a transcript file of any supported format."""
    return _parse(path)[1].runs


def read_transcript(path: str | Path) -> list[Message]:
    """The one conversation in a transcript file, format detected."""
    return _one(_parse(path)[1], path, "read_transcript_runs()")


def read_claude_code(path: str | Path) -> list[Message]:
    return _one(_parse(path, "claude-code")[1], path, "")


def read_codex(path: str | Path) -> list[Message]:
    return _one(_parse(path, "codex")[1], path, "")


def read_openai_runs(path: str | Path) -> list[list[Message]]:
    """A JSON array of messages (one run), of runs with ``traj``, or ``{"messages": [...]}``."""
    return _parse(path, "openai-runs")[1].runs


def read_openai_chat(path: str | Path) -> list[Message]:
    return _one(_parse(path, "openai-runs")[1], path, "read_openai_runs()")


def read_swe_agent(path: str | Path) -> list[Message]:
    return _one(_parse(path, "swe-agent")[1], path, "")


def read_openhands_runs(path: str | Path) -> list[list[Message]]:
    """One conversation per ``output.jsonl`` line (or one for a JSON array of events)."""
    return _parse(path, "openhands")[1].runs


def read_openhands(path: str | Path) -> list[Message]:
    return _one(_parse(path, "openhands")[1], path, "read_openhands_runs()")


def read_gemini(path: str | Path) -> list[Message]:
    return _one(_parse(path, "gemini")[1], path, "")


def read_aider(path: str | Path) -> list[Message]:
    return _one(_parse(path, "aider")[1], path, "")


def import_file(path: str | Path, *, fresh_ids: bool = True) -> ImportedSession:
    """One session from a file: our JSON export, OpenAI chat JSON / JSONL, or a transcript.

    ``fresh_ids`` applies to threadline exports (see the module docstring);
    other formats always get new ids. A file holding several conversations is
    refused with a pointer to the reader that returns them all.
    """
    p = Path(path)
    text = _read_text(p)
    fmt = _detect(text, p)
    if fmt == "threadline":
        return from_json_export(_load_json(text, p), path=str(p), fresh_ids=fresh_ids)
    parsed = _PARSERS[fmt](text, p)
    messages = _one(parsed, p, "read_transcript_runs()")
    model = parsed.info.get("model") or next((m.model for m in messages if m.model), None)
    summaries = parsed.info.get("summaries") or []
    metadata = {"format": fmt, "source": str(p), **parsed.info}
    if parsed.skipped:
        metadata["skipped"] = dict(parsed.skipped)
    return ImportedSession(
        messages=messages,
        title=summaries[-1] if summaries else None,
        agent=fmt,
        model=model,
        metadata=metadata,
    )
