"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON record a line. ``user`` and ``assistant`` lines carry a Messages API
``message`` (read with ``anthropic_format``); an assistant reply streamed as several
lines sharing one ``message.id`` is joined back into one message while only its tool
results came between. ``system`` lines (hooks, turn durations, local commands) are the
UI's, not the model's, so they are kept as environment events; a ``compact_boundary``
line and the ``isCompactSummary`` user message after it mark a native compaction,
which ``importers`` folds into a checkpoint. ``queue-operation`` lines (prompts typed
mid-turn) are placed by ``claude_queue``; ``summary`` lines go in the session facts
and ``ai-title`` is Claude Code's own title; ``progress`` and
``file-history-snapshot`` lines are skipped and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadline.interop import claude_queue
from threadline.interop.anthropic_format import from_anthropic
from threadline.interop.record_fields import Cwd, environment_event, normalise, usage_of
from threadline.interop.records import Parsed, Where, jsonl, stamp
from threadline.messages import Message

_CLAUDE_FACTS = {
    "session_id": "sessionId",
    "agent_id": "agentId",
    "cwd": "cwd",
    "git_branch": "gitBranch",
    "version": "version",
}
"""Session facts read from Claude Code records: ids and the working directory from the
first record that has them (a file opens with a snapshot that has none; a record's ``cwd``
follows the Bash tool's ``cd``, so only the first is where the session ran), the rest as
last seen."""
_FIRST_SEEN = frozenset({"session_id", "agent_id", "cwd"})


def _claude_facts(info: dict[str, Any], rec: Mapping[str, Any]) -> None:
    for ours, theirs in _CLAUDE_FACTS.items():
        value = rec.get(theirs)
        if isinstance(value, str) and value and not (ours in _FIRST_SEEN and ours in info):
            info[ours] = value


def parse(text: str, path: Path) -> Parsed:
    result = Parsed([[]])
    out = result.runs[0]
    extra = result.extra(0)
    cwd = Cwd()
    names: dict[str, str] = {}
    pending: dict[str, Any] = {}
    open_id: str | None = None  # message.id of the assistant message still being streamed
    open_at = -1
    with Where(path) as where:
        records = list(jsonl(text, path, result.repairs))
        queue = claude_queue.Queue(result.skipped)
        queued: list[Message] = []  # prompts taken mid-turn, placed before the next response
        for where.line, rec in records:
            kind = rec.get("type")
            _claude_facts(result.info, rec)
            if kind == "queue-operation":
                anchor = f"queue-operation:{where.line}"  # stable as the file grows
                queued += [
                    stamp(m, rec.get("timestamp"), source_uuid=anchor) for m in queue.take(rec)
                ]
                continue
            if kind == "ai-title" and isinstance(rec.get("aiTitle"), str) and rec["aiTitle"]:
                extra["title"] = rec["aiTitle"]  # Claude Code's own title for the session
                continue
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
            if kind == "system":
                # hook summaries, turn durations, local commands: the UI's, not the model's
                extra.setdefault("events", []).append(
                    environment_event(
                        str(rec.get("subtype") or "system"),
                        rec.get("timestamp"),
                        len(out),
                        content=rec.get("content"),
                        level=rec.get("level"),
                        duration_ms=rec.get("durationMs"),
                        hook_count=rec.get("hookCount"),
                        stop_reason=rec.get("stopReason"),
                        source_uuid=rec.get("uuid"),
                    )
                )
                continue
            if kind not in ("user", "assistant"):
                raw = rec.get("data")
                data = raw if isinstance(raw, dict) else {}
                sub = rec.get("subtype") or data.get("type")  # a progress line: its data.type
                result.skipped[f"{kind}:{sub}" if isinstance(sub, str) else str(kind)] += 1
                continue
            msg = rec["message"]
            if kind == "assistant":
                new = from_anthropic([{"role": "assistant", "content": msg["content"]}])[0]
                names.update({c.id: c.name for c in new.tool_calls})
                msg_id = msg.get("id")
                usage = usage_of(
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
                    old.content = normalise(old.parts + new.parts)
                    old.tool_calls = old.tool_calls + new.tool_calls
                    if thinking:
                        old.metadata["thinking"] = thinking
                    old.usage = usage or old.usage
                    continue
                new.model, new.usage = msg.get("model"), usage
                out.extend(queued)
                queued.clear()
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
                stamp(m, rec.get("timestamp"), source_uuid=rec.get("uuid"))
                if rec.get("isSidechain"):
                    m.metadata["sidechain"] = True
            if pending:
                made[0].metadata.update(pending)
                pending = {}
            cwd.stamp(made[0], rec.get("cwd"))
            if any(m.role != "tool" for m in made):
                out.extend(claude_queue.not_repeated(queued, made))
                queued.clear()
                queue.delivered(made)
            out.extend(made)
        queue.finish(queued)
    if pending:
        result.skipped["compact_boundary_at_end"] += 1
    return result
