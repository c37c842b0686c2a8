"""Pi and Oh My Pi session files (``~/.pi/agent/sessions/``, ``~/.omp/agent/sessions/``).

Schema read (pi-mono ``packages/coding-agent/src/core/session-manager.ts``, session
version 1 to 3, and Oh My Pi's ``src/session/session-manager.ts``): JSON Lines.

- Header, the first line: ``{type: "session", id, version, timestamp, cwd,
  parentSession?, title?}`` (Pi; ``id`` is the source id, ``parentSession`` the session
  this one was forked from: a session id or its file's path), after Oh My Pi's title
  slot when there is one (``TITLE_SLOT_KEYS``).
- Every other entry has ``id``, ``parentId`` and ``timestamp``: a tree. The
  conversation is the path from the root to the last entry (Pi's current leaf when
  the file ends); each branch the user left (``/tree``) becomes a conversation of
  its own (a later run of the file) holding the entries from where it forked, linked
  to the main one (``parent_source_id``), so nothing is dropped and no window mixes
  two branches.
- ``message`` entries hold ``message {role, content, timestamp}``: ``user`` (content
  a string or ``text`` / ``image`` blocks), ``assistant`` (``text``, ``thinking`` kept
  in ``metadata["thinking"]``, ``toolCall {id, name, arguments}``; ``provider``,
  ``model``, ``usage {input, output, cacheRead, cacheWrite}``, ``stopReason``,
  ``errorMessage``), ``toolResult`` (``toolCallId``, ``toolName``, ``content``,
  ``isError``; ``details`` is the tool's UI data, left out but for the reports of the
  subagents a tool ran, ``details.result.results[]``: each task's index, status and
  ``summary`` (or ``error.message``), in ``metadata["subagent_reports"]``), ``bashExecution`` (a
  command the user ran: ``command``, ``output``, ``exitCode``; a user message),
  ``custom`` / ``hookMessage`` (an extension's message: a user message, as Pi sends
  it), ``branchSummary`` (``summary``: a user message).
- ``custom_message`` (an extension's message in context: a user message) and
  ``branch_summary`` (``summary`` of a branch left behind, ``fromId``: a user
  message, as Pi sends it).
- ``compaction`` (``summary``, ``firstKeptEntryId``, ``tokensBefore``): a checkpoint
  covering the messages before the first kept entry.
- ``model_change`` (``provider`` / ``modelId``, or Oh My Pi's ``model``) sets the
  model of later assistant messages; ``session_info`` (``name``) titles the session;
  ``session_init`` (Oh My Pi subagents: ``systemPrompt`` becomes a system message,
  ``task`` is kept as a fact). ``thinking_level_change``, ``custom`` (extension
  state, never in the model's context), ``label``, ``ttsr_injection`` and
  ``mode_change`` are left out, counted by type.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadline.errors import InvalidMessage
from threadline.interop.records import Parsed, Where, jsonl, stamp
from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall, Usage

SUBAGENT_REPORTS_KEY = "subagent_reports"
"""Tool result metadata: the final reports of the subagents the tool ran (``spawn_pi``)."""


def subagent_reports(details: Any) -> list[dict[str, Any]]:
    """The subagents' reports in a tool result's ``details`` (``{result: {results: [{
    requestIndex, status, summary, error: {message}}, ...]}}``, as ``spawn_pi`` gives
    them): per task, ``{task: its index in the call's tasks, status, report}``, the
    report being the summary or, for a task that did not finish, the error's message."""
    result = details.get("result") if isinstance(details, Mapping) else None
    runs = result.get("results") if isinstance(result, Mapping) else None
    out: list[dict[str, Any]] = []
    for n, run in enumerate(runs if isinstance(runs, list) else []):
        if not isinstance(run, Mapping):
            continue
        report = run.get("summary")
        error = run.get("error")
        if not (isinstance(report, str) and report.strip()) and isinstance(error, Mapping):
            report = error.get("message")
        if not (isinstance(report, str) and report.strip()):
            continue
        index, status = run.get("requestIndex"), run.get("status")
        out.append(
            {
                "task": index if isinstance(index, int) else n,
                "status": status if isinstance(status, str) else None,
                "report": report,
            }
        )
    return out


HEADERS = frozenset({"session", "title"})
TITLE_SLOT_KEYS = frozenset({"type", "v", "title", "updatedAt", "source", "pad", "id", "timestamp"})
"""Oh My Pi's title slot (``session-title-slot.ts``): a first line of exactly 256 bytes,
``{type: "title", v: 1, title, updatedAt, source?: "auto" | "user", pad}``, ``pad``
spaces filling it so the title can be rewritten in place; older files: ``id`` and
``timestamp``."""
ENTRY_TYPES = frozenset(
    {
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "session_init",
        "ttsr_injection",
        "mode_change",
    }
)
_SESSION_FILE_ID = re.compile(r"_([0-9a-fA-F-]{8,})\.jsonl$")


def looks_like(first: Mapping[str, Any]) -> bool:
    """Whether a file's first record is a Pi / Oh My Pi header (or a headerless v1 entry)."""
    kind = first.get("type")
    if kind == "session":
        return isinstance(first.get("id"), str) and "cwd" in first
    if kind == "title":
        return isinstance(first.get("title"), str) and set(first) <= TITLE_SLOT_KEYS
    return False


def parse(text: str, path: Path) -> Parsed:
    result = Parsed([])
    entries: list[tuple[int, Mapping[str, Any]]] = []
    with Where(path) as where:
        for where.line, rec in jsonl(text, path, result.repairs):
            kind = rec.get("type")
            if kind in HEADERS and not entries:
                _header(rec, result.info)
            elif kind in ENTRY_TYPES:
                entries.append((where.line, rec))
            else:
                result.skipped[str(kind)] += 1
        for n, (branch, fork) in enumerate(_branches([e for _, e in entries])):
            extra = result.extra(n)
            out = _Run(result.skipped, extra, result.info).read(branch)
            if not out and n > 0:
                result.skipped["branch_without_messages"] += 1
                result.extras.pop()
                continue
            own = result.info.get("session_id")
            facts = extra.setdefault("facts", {})
            if n == 0:
                extra["source_id"] = own
                if result.info.get("parent_session"):
                    facts["parent_source_id"] = result.info["parent_session"]
            else:  # a branch left behind: a conversation of its own, under the main one
                extra["source_id"] = f"{own}/branch-{branch[0].get('id')}" if own else None
                facts.update({"branch_from": fork, "parent_source_id": own} if own else {})
            result.runs.append(out)
    if not result.runs:
        result.runs.append([])
    return result


def _header(rec: Mapping[str, Any], info: dict[str, Any]) -> None:
    if rec.get("type") == "title":
        if isinstance(rec.get("title"), str) and rec["title"].strip():
            info["title"] = rec["title"].strip()
        return
    info["session_id"] = rec.get("id")
    info["started"] = rec.get("timestamp")
    if isinstance(rec.get("cwd"), str):
        info["cwd"] = rec["cwd"]
    if rec.get("version") is not None:
        info["version"] = str(rec["version"])
    if isinstance(rec.get("title"), str) and rec["title"].strip():
        info["title"] = rec["title"].strip()
    parent = rec.get("parentSession")
    if isinstance(parent, str) and parent:
        found = _SESSION_FILE_ID.search(parent)
        info["parent_session"] = found.group(1) if found else parent


def _branches(entries: list[Mapping[str, Any]]) -> list[tuple[list[Mapping[str, Any]], Any]]:
    """The main path (root to the last entry), then each branch left behind, in file
    order, as (entries from the fork, the entry it forked from)."""
    if not entries:
        return []
    if not any("parentId" in e for e in entries):  # a v1 file: linear
        return [(entries, None)]
    by_id = {e.get("id"): e for e in entries}
    parents = {e.get("parentId") for e in entries}
    placed: set[Any] = set()

    def path_up(leaf: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        chain: list[Mapping[str, Any]] = []
        at: Mapping[str, Any] | None = leaf
        while at is not None and at.get("id") not in placed:
            chain.append(at)
            placed.add(at.get("id"))
            at = by_id.get(at.get("parentId"))
        return chain[::-1]

    out = [(path_up(entries[-1]), None)]
    for e in entries:
        if e.get("id") not in parents and e.get("id") not in placed:
            branch = path_up(e)
            out.append((branch, branch[0].get("parentId")))
    return out


def _blocks(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif block.get("type") == "image" and isinstance(block.get("data"), str):
            media = block.get("mimeType") if isinstance(block.get("mimeType"), str) else None
            parts.append(ImagePart(data=block["data"], media_type=media))
    return parts


def _content(parts: list[Part]) -> str | list[Part]:
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return parts


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    keys = {"input_tokens": "input", "output_tokens": "output"}
    keys |= {"cached_tokens": "cacheRead", "cache_write_tokens": "cacheWrite"}
    values = {ours: raw.get(theirs) for ours, theirs in keys.items()}
    kept = {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
    return Usage(**kept) if kept else None


class _Run:
    """One path of the tree read into messages."""

    def __init__(self, skipped: Counter[str], extra: dict[str, Any], info: dict[str, Any]) -> None:
        self.out: list[Message] = []
        self.skipped, self.extra, self.info = skipped, extra, info
        self.model: str | None = None
        self.first_of: dict[Any, int] = {}  # entry id -> index of the message it made

    def read(self, entries: list[Mapping[str, Any]]) -> list[Message]:
        for e in entries:
            self.first_of[e.get("id")] = len(self.out)
            kind = e.get("type")
            made: Message | None = None
            if kind == "message":
                made = self._message(e.get("message"))
            elif kind == "custom_message":
                made = Message.user(_content(_blocks(e.get("content"))))
                made.metadata["custom_type"] = e.get("customType")
            elif kind == "branch_summary" and isinstance(e.get("summary"), str):
                made = Message.user(e["summary"], metadata={"branch_summary": True})
                made.metadata["branch_from"] = e.get("fromId")
            elif kind == "compaction" and isinstance(e.get("summary"), str):
                self._compaction(e)
            elif kind == "model_change":
                model = e.get("modelId") or e.get("model")
                self.model = model if isinstance(model, str) else self.model
                self.skipped["model_change"] += 1
            elif kind == "session_info" and isinstance(e.get("name"), str):
                self.extra["title"] = e["name"]
            elif kind == "session_init" and isinstance(e.get("systemPrompt"), str):
                made = Message.system(e["systemPrompt"])
                if isinstance(e.get("task"), str):
                    self.extra.setdefault("facts", {})["task"] = e["task"]
            else:
                self.skipped[str(kind)] += 1
            if made is not None:
                self.out.append(stamp(made, e.get("timestamp"), source_uuid=e.get("id")))
        if self.info.get("title") and "title" not in self.extra:
            self.extra["title"] = self.info["title"]
        return self.out

    def _message(self, msg: Any) -> Message | None:
        if not isinstance(msg, Mapping):
            raise InvalidMessage("a message entry needs 'message'")
        role = msg.get("role")
        if role == "user":
            return Message.user(_content(_blocks(msg.get("content"))))
        if role == "assistant":
            return self._assistant(msg)
        if role == "toolResult":
            call_id = msg.get("toolCallId")
            if not isinstance(call_id, str):
                raise InvalidMessage("a toolResult needs 'toolCallId'")
            meta: dict[str, Any] = {"is_error": True} if msg.get("isError") else {}
            reports = subagent_reports(msg.get("details"))
            if reports:
                meta[SUBAGENT_REPORTS_KEY] = reports
            name = msg.get("toolName") if isinstance(msg.get("toolName"), str) else None
            body = _content(_blocks(msg.get("content")))
            return Message.tool(body, tool_call_id=call_id, name=name, metadata=meta)
        if role == "bashExecution":
            text = f"$ {msg.get('command', '')}\n{msg.get('output', '')}".rstrip()
            shell: dict[str, Any] = {"bash_execution": {"exit_code": msg.get("exitCode")}}
            if msg.get("excludeFromContext"):
                shell["excluded_from_context"] = True
            return Message.user(text, metadata=shell)
        if role in ("custom", "hookMessage"):
            made = Message.user(_content(_blocks(msg.get("content"))))
            made.metadata["custom_type"] = msg.get("customType")
            return made
        if role in ("branchSummary", "compactionSummary") and isinstance(msg.get("summary"), str):
            return Message.user(msg["summary"], metadata={"summary_of": role})
        raise InvalidMessage(f"unknown Pi message role {role!r}")

    def _assistant(self, msg: Mapping[str, Any]) -> Message:
        parts: list[Part] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        anthropic = msg.get("provider") == "anthropic"
        for block in msg.get("content") or []:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(TextPart(text=block["text"]))
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                if anthropic and isinstance(block.get("thinkingSignature"), str):
                    sig = block["thinkingSignature"]
                    thinking.append(
                        {"type": "thinking", "thinking": block["thinking"], "signature": sig}
                    )
                else:  # another provider's reasoning: never replayed as a thinking block
                    thinking.append({"type": "reasoning", "text": block["thinking"]})
            elif kind == "toolCall":
                calls.append(self._call(block))
        meta: dict[str, Any] = {}
        if thinking:
            meta["thinking"] = thinking
        for ours, theirs in (("stop_reason", "stopReason"), ("error", "errorMessage")):
            if isinstance(msg.get(theirs), str) and msg[theirs]:
                meta[ours] = msg[theirs]
        model = msg.get("model") if isinstance(msg.get("model"), str) else self.model
        return Message.assistant(
            _content(parts),
            tool_calls=calls,
            model=model,
            usage=_usage(msg.get("usage")),
            metadata=meta,
        )

    @staticmethod
    def _call(block: Mapping[str, Any]) -> ToolCall:
        call_id, name, args = block.get("id"), block.get("name"), block.get("arguments")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise InvalidMessage("a toolCall needs 'id' and 'name'")
        raw = args if isinstance(args, str) else json.dumps(args if args is not None else {})
        return ToolCall.from_json_arguments(id=call_id, name=name, arguments=raw)

    def _compaction(self, e: Mapping[str, Any]) -> None:
        kept = self.first_of.get(e.get("firstKeptEntryId"), len(self.out))
        self.extra.setdefault("compactions", []).append(
            {
                "before": kept,
                "summary": e["summary"],
                "metadata": {
                    "native": "pi",
                    "pre_tokens": e.get("tokensBefore"),
                    "source_uuid": e.get("id"),
                    "source_created_at": e.get("timestamp"),
                },
            }
        )
