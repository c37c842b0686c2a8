"""OpenHands event logs: a conversation's events, or a benchmark's ``output.jsonl``.

A file is a JSON array of events (one conversation) or JSON Lines with one run a line,
its events in ``history`` (``instance_id`` and ``metadata.llm_config.model`` are kept
as the run's facts). V1 events are read by ``openhands_v1``; legacy resolver events
are brought to the V0 shape by ``openhands_legacy``; V0 events are read here. An
action with ``tool_call_metadata`` is the model's tool call (its arguments as the
model wrote them in ``model_response``; the calls of one response share one assistant
message); an observation answers the call its ``cause`` names (a legacy log has no
causes: in order). The runtime's own bookkeeping (agent-state changes, environment
actions and their observations) is no model's request, so it is kept as environment
events, never as tool calls; ``recall`` actions are skipped and counted.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from threadline.errors import InvalidMessage
from threadline.interop import openhands_legacy, openhands_v1
from threadline.interop.openai_format import arguments_text
from threadline.interop.record_fields import Cwd, environment_event, text_of
from threadline.interop.records import Parsed, Where, jsonl, load_json, stamp
from threadline.messages import Message, ToolCall

_OPENHANDS_SKIP = {"recall"}
_OPENHANDS_ENVIRONMENT = {"change_agent_state"}
"""Actions the OpenHands runtime logs about itself; kept as events, not tool calls."""
_OPENHANDS_ENVIRONMENT_OBSERVATIONS = {"agent_state_changed", "null"}


def _openhands_run(
    events: list[Any], skipped: Counter[str], extra: dict[str, Any]
) -> list[Message]:
    out: list[Message] = []
    call_of: dict[Any, str] = {}  # action event id -> tool call id
    from_environment: set[Any] = set()  # ids of environment actions (agent-state changes)
    positional: list[tuple[str, str]] = []  # open calls of a legacy log: (id, name)
    responses: dict[str, int] = {}  # model response id -> index of its assistant message
    cwd = Cwd()
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
            if action in _OPENHANDS_ENVIRONMENT or (ev.get("source") == "environment" and not meta):
                # the runtime's own bookkeeping: no model asked for it, so no tool call
                from_environment.add(ev.get("id", n))
                extra.setdefault("events", []).append(
                    environment_event(
                        str(action),
                        when,
                        len(out),
                        agent_state=args.get("agent_state"),
                        content=ev.get("message"),
                    )
                )
                continue
            if action == "system":
                text = args.get("content") or ev.get("message", "")
                out.append(stamp(Message.system(text, metadata={"event": "system"}), when))
                continue
            if action == "message" and not meta:
                text = args.get("content") or ev.get("message", "")
                role = "user" if ev.get("source") == "user" else "assistant"
                out.append(stamp(Message(role=role, content=text), when))
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
            model = response.get("model") if isinstance(response.get("model"), str) else None
            out.append(stamp(Message.assistant(thought, tool_calls=[call], model=model), when))
        elif "observation" in ev:
            kind = ev["observation"]
            content = text_of(ev.get("content", ev.get("message", "")))
            cause = ev.get("cause")
            if (
                not meta
                and cause not in call_of
                and (
                    kind in _OPENHANDS_ENVIRONMENT_OBSERVATIONS
                    or cause in from_environment
                    or ev.get("source") == "environment"
                )
            ):
                extras = ev.get("extras") if isinstance(ev.get("extras"), dict) else {}
                extra.setdefault("events", []).append(
                    environment_event(
                        f"observation:{kind}",
                        when,
                        len(out),
                        agent_state=extras.get("agent_state"),
                        content=content,
                    )
                )
                continue
            call_id = meta.get("tool_call_id") or call_of.get(cause)
            if call_id is None and positional and ev.get("cause") is None and kind != "error":
                call_id = positional.pop(0)[0]
            if call_id is not None:
                name = meta.get("function_name") or kind
                out.append(stamp(Message.tool(content, tool_call_id=call_id, name=name), when))
                cwd.stamp(out[-1], _openhands_cwd(ev))
            elif kind == "error":
                out.append(
                    stamp(Message.user(content, metadata={"openhands_observation": "error"}), when)
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


def parse(text: str, path: Path) -> Parsed:
    result = Parsed([])
    stripped = text.lstrip()
    records: list[tuple[int | None, Any]]
    if stripped.startswith("["):
        records = [(None, {"history": load_json(text, path)})]
    else:
        records = list(jsonl(text, path, result.repairs))
    with Where(path) as where:
        for where.line, rec in records:
            history = rec.get("history")
            if not isinstance(history, list):
                raise InvalidMessage("an OpenHands record needs a 'history' list of events")
            extra = result.extra(len(result.runs))
            if history and openhands_v1.is_event(history[0]):
                result.runs.append(openhands_v1.read_run(history, result.skipped, extra))
            else:
                events = openhands_legacy.normalise(history)  # resolver output: flattened
                result.runs.append(_openhands_run(events, result.skipped, extra))
            if where.line is None and (files := openhands_v1.conversation_files(path)):
                extra["source_id"] = openhands_v1.conversation_id(files)
            if rec.get("instance_id"):
                result.info.setdefault("instances", []).append(rec["instance_id"])
                extra["facts"] = {"instance_id": rec["instance_id"]}
            llm = (rec.get("metadata") or {}).get("llm_config")
            if isinstance(llm, dict) and isinstance(llm.get("model"), str):
                extra["model"] = llm["model"]
    return result
