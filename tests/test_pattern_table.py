"""A pattern table keeps its rows' order and labels: the slot and time readers take the
first row that matches, so a reordering would change what they read."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.memory.patterns import pattern_table
from threadline.memory.rules import derive_slot

words = st.from_regex(r"[a-z]{1,6}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(words, st.text(max_size=8)), max_size=6))
def test_rows_compiled_in_order(rows: list[tuple[str, str]]) -> None:
    table = pattern_table(rows)
    assert [(p.pattern, label) for p, label in table] == rows
    assert all(isinstance(p, re.Pattern) for p, _ in table)


def test_first_matching_row_wins() -> None:
    # "moved to" and "works at" both match; the earlier row's slot is the one read
    assert derive_slot("ana moved to porto and works at acme") == "lives in"
    assert derive_slot("ana works at acme") == "works at"
    assert derive_slot("my favorite food is ramen") == "favorite food"
