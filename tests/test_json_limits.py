"""The JSON a message may hold: the quick walk every append runs agrees with the walk
that names the problem, for any value."""

from __future__ import annotations

import math
from collections import OrderedDict
from enum import IntEnum

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.json_limits import _fine, value_problem


class Level(IntEnum):
    LOW = 1


_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities among them
    | st.text(max_size=5)
    | st.just(Level.LOW)
    | st.binary(max_size=3)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=4)
        | st.dictionaries(st.text(max_size=3), inner, max_size=2).map(OrderedDict)
    ),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(value=_VALUES, limit=st.integers(min_value=0, max_value=6))
def test_the_quick_walk_agrees_with_the_named_walk(value: object, limit: int) -> None:
    assert _fine(value, limit) == (value_problem(value, limit) is None)


def test_what_is_refused_is_named() -> None:
    assert value_problem({"a": [1, {"b": math.nan}]}) == "a[1].b is nan, which JSON cannot hold"
    deep: list[object] = []
    for _ in range(5):
        deep = [deep]
    assert value_problem(deep, 3) == "[0][0][0] nests more than 3 levels deep"
    assert value_problem({"text": "x", "n": 1, "ok": True, "none": None}) is None
