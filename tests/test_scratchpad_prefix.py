"""``prefix_bounds``: the range the SQL backends scan for ``scratchpad_list(prefix=...)``
holds exactly the names that start with the prefix (property), in code point order,
which is UTF-8 byte order (SQLite's BINARY and PostgreSQL's "C" collation)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.store.checks import prefix_bounds

TEXT = st.text(
    st.characters(exclude_categories=("Cs",), max_codepoint=0x10FFFF)
    | st.sampled_from("\U0010ffff\ud7ff\ue000a"),
    max_size=6,
)


@given(prefix=TEXT, name=TEXT)
def test_bounds_hold_exactly_the_names_with_the_prefix(prefix: str, name: str) -> None:
    low, high = prefix_bounds(prefix)
    inside = low <= name and (high is None or name < high)
    assert inside == name.startswith(prefix)
    assert (low.encode() <= name.encode()) == (low <= name)  # byte order is code point order


@given(prefix=TEXT)
def test_a_prefix_extended_stays_inside(prefix: str) -> None:
    low, high = prefix_bounds(prefix)
    for tail in ("", "\x00", "z", "\U0010ffff", "\U0010ffff" * 3):
        name = prefix + tail
        assert low <= name and (high is None or name < high)
