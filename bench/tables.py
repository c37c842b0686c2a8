"""The result table the benchmark scripts share: a name column, then numbers."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table


def result_table(title: str, columns: Iterable[str]) -> Table:
    """A table whose first column (the row's name) reads left and the figures right."""
    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    return table
