"""What a file that is no conversation looks like, said in one line.

An import that meets a JSON document of no format it reads says what the document
appears to be, when its shape is well known (a LoCoMo benchmark file, an OpenAI or
Anthropic batch file, a ShareGPT dataset, a Jupyter notebook, an npm manifest, a
JSON Schema), else which keys it has: never a Python error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

KEYS_SHOWN = 6


def _locomo(d: Mapping[str, Any]) -> bool:
    talk = d.get("conversation")
    return isinstance(talk, Mapping) and "speaker_a" in talk and ("qa" in d or "sample_id" in d)


def _openai_batch_input(d: Mapping[str, Any]) -> bool:
    return {"custom_id", "method", "url", "body"} <= set(d)


def _batch_output(d: Mapping[str, Any]) -> bool:
    return "custom_id" in d and ("response" in d or "result" in d) and "body" not in d


def _anthropic_batch_input(d: Mapping[str, Any]) -> bool:
    return "custom_id" in d and isinstance(d.get("params"), Mapping)


def _sharegpt(d: Mapping[str, Any]) -> bool:
    turns = d.get("conversations")
    head = turns[0] if isinstance(turns, list) and turns else None
    return isinstance(head, Mapping) and "from" in head and "value" in head


KNOWN: tuple[tuple[Callable[[Mapping[str, Any]], bool], str], ...] = (
    (
        _locomo,
        "a LoCoMo conversation benchmark file (dialogue sessions and QA, not an agent transcript)",
    ),
    (_openai_batch_input, "an OpenAI Batch API input file (requests to send, not a conversation)"),
    (
        _anthropic_batch_input,
        "an Anthropic Message Batches request file (requests to send, not a conversation)",
    ),
    (_batch_output, "a batch API results file (responses by custom_id, not a conversation)"),
    (_sharegpt, "a ShareGPT-style dataset (conversations of from/value turns)"),
    (lambda d: "cells" in d and "nbformat" in d, "a Jupyter notebook"),
    (
        lambda d: "$schema" in d or ("properties" in d and d.get("type") == "object"),
        "a JSON Schema",
    ),
    (lambda d: "name" in d and ("dependencies" in d or "scripts" in d), "an npm package.json"),
)


def describe(data: Any) -> str:
    """What ``data`` (a parsed JSON document, or a JSONL file's first record) looks like."""
    head = data[0] if isinstance(data, list) and data else data
    if isinstance(head, Mapping):
        for matches, what in KNOWN:
            if matches(head):
                return f"it looks like {what}"
        keys = sorted(str(k) for k in head)
        shown = ", ".join(keys[:KEYS_SHOWN]) + (", ..." if len(keys) > KEYS_SHOWN else "")
        what = "array of objects" if isinstance(data, list) else "object"
        return f"a JSON {what} with keys {shown}" if keys else f"an empty JSON {what}"
    if isinstance(data, list):
        return "an empty JSON array" if not data else f"a JSON array of {json_kind(data[0])}s"
    return f"a JSON {json_kind(data)}"


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type (``object``, ``array``, ``string``, ``number``,
    ``boolean``, ``null``), for messages that must not speak Python."""
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "value"
