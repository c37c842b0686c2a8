"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One ``RolloutItem`` a line (the schema is in ``codex_echoes``). ``session_meta`` gives
the session id, working directory, CLI version and git facts (a second one means the
session was resumed: kept as an event); ``turn_context`` gives the model and working
directory of the turns after it. ``response_item`` payloads are the model-visible
history: messages, function and custom (free-form) tool calls and their outputs, web
searches (``codex_search``); a user message Codex wrote beside the person's turn is
marked ``codex_context`` (``codex_echoes.context_items``).
``event_msg`` echoes are skipped, except the user messages only they carry
(``codex_echoes``) and ``token_count`` (the last assistant message's usage);
``compacted`` becomes a checkpoint where the model went on from its replacement
history.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadline.errors import InvalidMessage
from threadline.interop import codex_echoes, codex_search
from threadline.interop.openai_format import arguments_text
from threadline.interop.record_fields import Cwd, environment_event, normalise, text_of, usage_of
from threadline.interop.records import Parsed, Where, jsonl, stamp
from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall


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
    return normalise(parts)


_CODEX_GIT = {"git_branch": "branch", "git_commit": "commit_hash"}


COMPACTED_HEADER = "[Codex compacted the conversation here; the model continued from this.]"
INSTRUCTION_ROLES = frozenset({"developer", "system"})
"""Roles of the replacement history's instructions to the model (developer and permission
instructions, memory guidance): not the conversation, so not the checkpoint's text."""


def _item_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    return "\n".join(
        str(c.get("text", "")) if c.get("type") != "input_image" else "[image]"
        for c in (content if isinstance(content, list) else [])
        if isinstance(c, Mapping)
    )


def _codex_compaction_text(payload: Mapping[str, Any]) -> tuple[str, list[list[int]]]:
    """What the model went on from after a Codex compaction, as checkpoint text, and the
    spans of it a window too small for it may drop first (the assistant's items).

    The summary message (older versions), then the replacement history in its own
    order, user and assistant items interleaved as the model saw them, the user's
    whole; an encrypted summary item is named, since only the provider can read it.
    Developer and permission instructions and Codex's own context blocks (AGENTS.md,
    environment) are left out and counted: they are what Codex told the model, not
    the conversation."""
    blocks = [COMPACTED_HEADER]
    message = payload.get("message")
    if isinstance(message, str) and message.strip():
        blocks.append(message.strip())
    assistant: set[int] = set()
    left_out = 0
    for item in payload.get("replacement_history") or []:
        if not isinstance(item, Mapping):
            continue
        kind, role = item.get("type"), item.get("role")
        text = _item_text(item) if kind == "message" else ""
        if kind == "message" and (
            role in INSTRUCTION_ROLES or text.lstrip().startswith(codex_echoes.CONTEXT_PREFIXES)
        ):
            left_out += 1
        elif kind == "message":
            if role == "assistant":
                assistant.add(len(blocks))
            blocks.append(f"{role or 'message'}: {text}")
        elif isinstance(item.get("encrypted_content"), str):
            blocks.append(f"[{kind}: {encrypted_note(item['encrypted_content'])}]")
        else:
            blocks.append(f"[{kind}]")
    if left_out:
        blocks.append(
            f"[{left_out} instruction message(s) Codex gave the model (developer, permission "
            "and context blocks) are left out: they are not the conversation]"
        )
    spans: list[list[int]] = []
    at = 0
    for i, block in enumerate(blocks):
        if i in assistant:
            spans.append([at, at + len(block)])
        at += len(block) + 2
    return "\n\n".join(blocks), spans


_REDACTED_SIZE = re.compile(r"^\[REDACTED\w*\s+len=(?P<n>\d+)\b")
"""A sanitiser's placeholder for the encrypted text (``[REDACTED_ENCRYPTED_CONTENT len=13412
sha=...]``): its ``len=`` is the size of the text the record held."""


def encrypted_note(content: str) -> str:
    """What an encrypted item is, with the size of the record's text: the placeholder's own
    length would be a false figure when a sanitiser replaced it."""
    m = _REDACTED_SIZE.match(content.strip())
    size = int(m.group("n")) if m else len(content)
    where = "in the original record, redacted here" if m else "in the record"
    return f"encrypted by the provider, {size:,} characters {where}"


def _place(
    made: Message, out: list[Message], deferred: list[Message], open_calls: list[str]
) -> None:
    """Append ``made``, keeping each assistant message's calls and results one unit."""
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


def parse(text: str, path: Path) -> Parsed:
    result = Parsed([[]])
    out = result.runs[0]
    extra = result.extra(0)
    names: dict[str, str] = {}
    pending: dict[str, Any] = {}
    model: str | None = None
    open_calls: list[str] = []  # calls of the current assistant message still unanswered
    deferred: list[Message] = []
    cwd = Cwd()
    cwd_now: Any = None
    with Where(path) as where:
        records = list(jsonl(text, path, result.repairs))
        echoes = codex_echoes.user_turns([r for _, r in records])
        context = codex_echoes.context_items([r for _, r in records])
        for index, (where.line, rec) in enumerate(records):
            kind, payload = rec.get("type"), rec.get("payload") or {}
            item = payload.get("type")
            made: Message | None = None
            then: Message | None = None  # a second message the record makes (a search's result)
            if kind == "session_meta" and result.info.get("id"):  # resumed: a later start
                extra.setdefault("events", []).append(
                    environment_event(
                        "session_resumed", rec.get("timestamp"), len(out) + len(deferred)
                    )
                )
            elif kind == "event_msg" and item == "user_message" and index in echoes:
                made = codex_echoes.user_message(payload)
            elif kind == "session_meta":
                keys = ("id", "cwd", "cli_version", "model_provider", "originator")
                result.info.update({k: payload.get(k) for k in keys if payload.get(k)})
                result.info["started"] = payload.get("timestamp") or rec.get("timestamp")
                git = payload.get("git")
                if isinstance(git, Mapping):
                    for ours, theirs in _CODEX_GIT.items():
                        if isinstance(git.get(theirs), str):
                            result.info[ours] = git[theirs]
                cwd_now = payload.get("cwd") or cwd_now
            elif kind == "turn_context":
                model = payload.get("model") or model
                cwd_now = payload.get("cwd") or cwd_now
                if isinstance(cwd_now, str) and cwd_now:
                    result.info["cwd"] = cwd_now
            elif kind == "compacted":
                history = payload.get("replacement_history") or []
                pending["codex_compacted"] = {
                    "at": rec.get("timestamp"),
                    "replacement_items": len(history),
                }
                summary, droppable = _codex_compaction_text(payload)
                extra.setdefault("compactions", []).append(
                    {
                        "before": len(out) + len(deferred),
                        "summary": summary,
                        "metadata": {
                            "native": "codex",
                            "native_droppable": droppable,
                            "replacement_items": len(history),
                            "source_created_at": rec.get("timestamp"),
                        },
                    }
                )
            elif kind == "event_msg" and item == "token_count":
                last = (payload.get("info") or {}).get("last_token_usage")
                usage = usage_of(
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
                    if index in context:
                        made.metadata["codex_context"] = True
                else:
                    raise InvalidMessage(f"unknown codex message role {role!r}")
            elif kind == "response_item" and item == "web_search_call":
                call, then = codex_search.call_and_result(payload, index)
                names[call.id] = call.name
                if out and out[-1].role == "assistant" and not pending:
                    out[-1].tool_calls = [*out[-1].tool_calls, call]
                    open_calls.append(call.id)
                    made, then = then, None
                else:
                    made = Message.assistant("", tool_calls=[call], model=model)
            elif kind == "response_item" and item in ("function_call", "custom_tool_call"):
                args = payload.get("arguments") if item == "function_call" else payload.get("input")
                call = ToolCall.from_json_arguments(
                    id=payload["call_id"],
                    name=payload["name"],
                    arguments=arguments_text(args or ""),
                )
                names[call.id] = call.name
                if item == "custom_tool_call":  # free-form input (a patch), not JSON
                    extra.setdefault("free_form_calls", set()).add(call.id)
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
                    text_of(payload.get("output")), tool_call_id=call_id, name=names.get(call_id)
                )
            else:
                result.skipped[f"{kind}:{item}" if item else str(kind)] += 1
            for m in (made, then):
                if m is None:
                    continue
                stamp(m, rec.get("timestamp"), **pending)
                cwd.stamp(m, cwd_now)
                pending = {}
                _place(m, out, deferred, open_calls)
    out.extend(deferred)
    result.info["model"] = model
    return result
