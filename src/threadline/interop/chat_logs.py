"""Chat logs in the providers' own message shapes.

OpenAI Chat Completions messages as a JSON array, as ``{"messages": [...]}``, as
tau-bench style runs (an array of ``{"traj": [...], "task_id", "trial", "reward"}``,
one conversation each) or as JSON Lines, one message a line; and Anthropic Messages
API request bodies (or a bare list of their messages). The message shapes are read by
``openai_format`` and ``anthropic_format``; this module finds the conversations in
the file and says which one failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadline.errors import InvalidMessage
from threadline.interop.anthropic_format import from_anthropic
from threadline.interop.openai_format import message_from_openai, messages_from_openai
from threadline.interop.records import Parsed, Where, jsonl, load_json
from threadline.messages import Message


def _openai_list(items: Any, what: str) -> list[Message]:
    try:
        return messages_from_openai(items)
    except InvalidMessage as exc:
        raise InvalidMessage(f"{what}: {exc}") from exc


def parse_openai_runs(text: str, path: Path) -> Parsed:
    data = load_json(text, path)
    with Where(path):
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            return Parsed([_openai_list(data["messages"], "messages")])
        if not isinstance(data, list):
            raise InvalidMessage("expected a JSON array of messages or of runs with 'traj'")
        if data and all(isinstance(r, dict) and "traj" in r for r in data):
            runs = [_openai_list(r["traj"], f"run {i}") for i, r in enumerate(data)]
            keys = ("task_id", "trial", "reward")
            facts = [{k: r.get(k) for k in keys if k in r} for r in data]
            return Parsed(runs, {"runs": facts}, extras=[{"facts": f} for f in facts])
        return Parsed([_openai_list(data, "array")])


def parse_anthropic(text: str, path: Path) -> Parsed:
    """A Messages API request body ``{"system", "messages", "model"}`` or a bare list
    of its messages."""
    data = load_json(text, path)
    with Where(path):
        if isinstance(data, dict):
            messages = from_anthropic(data.get("messages"), data.get("system"))
            model = data.get("model")
            return Parsed([messages], {"model": model} if isinstance(model, str) else {})
        return Parsed([from_anthropic(data)])


def parse_openai_jsonl(text: str, path: Path) -> Parsed:
    result = Parsed([[]])
    with Where(path) as where:
        for where.line, rec in jsonl(text, path, result.repairs):
            result.runs[0].append(message_from_openai(rec))
    return result
