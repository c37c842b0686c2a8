"""The JSON threadline accepts: finite numbers, and nesting no deeper than ``MAX_JSON_DEPTH``.

Two checks, one rule. ``nesting_too_deep`` reads raw text *before* a parse, because
Python's parser recurses and a file of 200,000 ``[`` ends in ``RecursionError``; TOML
nests with the same brackets and ``tomllib`` recurses too, so it reads TOML as well
(``toml=True``: its literal strings and comments are passed over); ``parse_json`` is
that check and the parse in one call.
``value_problem`` reads a parsed value *before* it is stored: ``NaN`` and infinities
are not JSON (pydantic writes them as ``null``, PostgreSQL refuses them), and a value
nested deeper than the reader's recursion limit is written fine but can never be read
back. Both limits are far above what real transcripts and tool arguments use (a dozen
levels).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

MAX_JSON_DEPTH = 100
"""Levels of ``[``/``{`` nesting accepted in a file to import and in a stored value."""

MAX_SHOWN_PATH = 120
"""A path in an error message is cut here (keys are caller data and may be huge)."""

# A string is matched as runs of plain characters between escapes (not one alternation per
# character): the same matches, 40x faster on a 30 MB string.
_STRING_OR_BRACKET = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|[\[\]{}]')
_TOML_STRING_COMMENT_OR_BRACKET = re.compile(
    rb'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\''  # multi-line strings
    rb'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]'
)


def nesting_too_deep(
    data: bytes | str, limit: int = MAX_JSON_DEPTH, *, toml: bool = False
) -> int | None:
    """The line on which JSON (or JSON Lines, or TOML) text first nests deeper than
    ``limit``; ``None`` when it never does. Brackets inside strings (and TOML comments)
    do not count; the text need not be valid (the parser reports that, with its own line
    number)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return None
    depth = 0
    tokens = _TOML_STRING_COMMENT_OR_BRACKET if toml else _STRING_OR_BRACKET
    for match in tokens.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return raw.count(b"\n", 0, match.start()) + 1
        elif token in (b"]", b"}"):
            depth = max(0, depth - 1)
    return None


class TooDeep(ValueError):
    """JSON text nested deeper than the limit, refused before the parser recursed into it."""

    def __init__(self, line: int, limit: int = MAX_JSON_DEPTH) -> None:
        super().__init__(f"nests more than {limit} levels deep")
        self.line = line
        """Where the text first goes too deep (1-based)."""


def parse_json(data: bytes | str, **options: Any) -> Any:
    """``json.loads(data, **options)``, after refusing (``TooDeep``) text nested deeper than
    ``MAX_JSON_DEPTH``, which would end the parser in ``RecursionError``."""
    deep = nesting_too_deep(data)
    if deep is not None:
        raise TooDeep(deep)
    return json.loads(data, **options)


def value_problem(value: object, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``value`` cannot be stored as JSON as it is, naming where; ``None`` if it can.

    Walks without recursion, so a value nested a million deep is reported, not crashed on.
    """
    if _fine(value, limit):  # the usual case, checked without naming every place
        return None
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{_shown(where)} is {item!r}, which JSON cannot hold"
        if isinstance(item, dict | list | tuple):
            if depth >= limit:
                return f"{_shown(where)} nests more than {limit} levels deep"
            if isinstance(item, dict):
                stack.extend(
                    (v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in item.items()
                )
            else:
                stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item))
    return None


def _fine(value: object, limit: int) -> bool:
    """``value_problem`` would find nothing (the same walk, without the paths). A step of
    every append with tool arguments or metadata: a container of plain text, whole numbers
    and flags, the usual case, is passed over in one loop."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        values: Iterable[object]
        if isinstance(item, dict):
            values = item.values()
        elif isinstance(item, _SEQUENCES):
            values = item
        else:
            if isinstance(item, float) and not math.isfinite(item):
                return False
            continue
        if depth >= limit:
            return False
        for v in values:
            t = type(v)
            if t is not str and t is not int and t is not bool and v is not None:
                stack.append((v, depth + 1))
    return True


_SEQUENCES = (list, tuple)


def _shown(where: str) -> str:
    return (where[:MAX_SHOWN_PATH] + "…" if len(where) > MAX_SHOWN_PATH else where) or "it"
