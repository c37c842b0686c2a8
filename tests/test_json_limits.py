"""The JSON a message may hold: the quick walk every append runs agrees with the walk
that names the problem, for any value."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.json_limits import (
    MAX_JSON_DEPTH,
    TooDeep,
    _fine,
    nesting_too_deep,
    parse_json,
    value_problem,
)


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


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n', max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, extra=st.integers(min_value=0, max_value=3), indent=st.none() | st.just(1))
def test_parse_json_parses_what_fits_and_refuses_the_rest_where_it_goes_deep(
    value: object, extra: int, indent: int | None
) -> None:
    for _ in range(MAX_JSON_DEPTH - 2 + extra):  # around the limit, brackets in strings too
        value = [value]
    text = json.dumps(value, indent=indent)
    deep = nesting_too_deep(text)
    if deep is None:
        assert parse_json(text) == json.loads(text)
        assert parse_json(text.encode()) == json.loads(text)
    else:
        with pytest.raises(TooDeep) as refused:
            parse_json(text)
        assert refused.value.line == deep
        assert str(refused.value) == f"nests more than {MAX_JSON_DEPTH} levels deep"


def test_parse_json_passes_options_and_parser_errors_through() -> None:
    def refuse(constant: str) -> None:
        raise ValueError(constant)

    assert parse_json("[1.5]", parse_float=str) == ["1.5"]
    for text in ("[NaN]", "{", "[1,]"):
        with pytest.raises(ValueError) as refused:
            parse_json(text, parse_constant=refuse)
        assert not isinstance(refused.value, TooDeep)
