"""``json_scan.loads`` gives what ``json.loads`` gives, value or error, on any input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline import json_scan

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON, st.sampled_from(["utf-8", "utf-16", "utf-32"]), st.booleans())
def test_the_same_value_in_any_encoding_and_spacing(
    value: object, encoding: str, pad: bool
) -> None:
    text = json.dumps(value, ensure_ascii=False)
    text = f" {text}\n" if pad else text
    data = text.encode(encoding, "surrogatepass")
    assert json_scan.loads(data) == json.loads(data)
    assert json_scan.loads(text) == json.loads(text)


@pytest.mark.parametrize("bad", ['{"a": 1} x', "", "{", b"\xff\xfe{", "[1,]"])
def test_the_same_error(bad: str | bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        json_scan.loads(bad)
    assert json_scan.loads_object(bad) is None


@given(st.dictionaries(st.text(), JSON, max_size=6))
def test_dumps_writes_what_json_dumps_writes(value: dict[str, object]) -> None:
    assert json_scan.dumps(value) == json.dumps(value)


def test_dumps_refuses_what_json_dumps_refuses() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_scan.dumps({"a": object()})
