"""JSON text read with the decoder's scanner itself: ``json.loads`` around it (two
more calls, two regular expression matches, and for bytes an encoding guess) costs
as much again as the scan, and some reads decode a record a row (a LangGraph
thread's checkpoints and pending writes, PostgreSQL's ``json`` columns)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(data: str | bytes) -> Any:
    """``json.loads(data)``, the same value or error: UTF-8 bytes, or text, that is one
    JSON value from first to last character (as ``json.dumps`` writes it) is scanned
    at once; anything else goes to ``json.loads``."""
    try:  # bytes in another encoding (UTF-16 with a BOM): ``json.loads`` detects it
        text = data if isinstance(data, str) else data.decode("utf-8", "surrogatepass")
        value, end = _scan(text, 0)
    except (ValueError, StopIteration):
        return json.loads(data)
    return value if end == len(text) else json.loads(data)


def loads_object(data: str | bytes) -> dict[str, Any] | None:
    """The JSON object ``data`` holds, or None when it holds anything else or no JSON."""
    try:
        value = loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_make: Any = getattr(json.encoder, "c_make_encoder", None)
_encode: Callable[[Any, int], tuple[str, ...]] | None = (
    None
    if _make is None  # a Python without the C accelerator: json.dumps itself
    else _make(
        None,
        json.JSONEncoder().default,
        json.encoder.encode_basestring_ascii,
        None,
        ": ",
        ", ",
        False,
        False,
        True,
    )
)


def dumps(value: dict[str, Any]) -> str:
    """``json.dumps(value)``, the same text, written by one encoder made once (``json.dumps``
    makes one a call, a third of the cost of a small record). For the records a caller
    builds itself of JSON's types: no check for a value holding itself, and another type
    is refused (``TypeError``), as ``json.dumps`` refuses it."""
    if _encode is None:  # pragma: no cover - a Python without the C accelerator
        return json.dumps(value)
    return "".join(_encode(value, 0))
