"""Ordered tables of patterns and what a match means, written as source text and
compiled in one place (slots in ``rules``, time expressions in ``timeexpr``)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def pattern_table(rows: Iterable[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """Each row's pattern compiled, beside its label, in the table's order: the readers
    try them in turn, so the first that matches wins."""
    return [(re.compile(source), label) for source, label in rows]


__all__ = ["pattern_table"]
