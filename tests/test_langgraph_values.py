"""Channel values come back from the LangGraph saver as LangGraph's serialisation
keeps them (what its own savers give back), whether the
checkpoint record holds them itself (plain JSON values, as ``PostgresSaver`` keeps
primitive values in its checkpoint row) or a value entry does (the rest): types kept
exactly (a bool stays a bool, an enum an enum), floats that JSON has no word for, text
JSON cannot keep (lone surrogates, NUL), integers up to 64 bits."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from threadline.integrations.langgraph import ThreadlineSaver


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


VALUES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what msgpack keeps
    | st.floats(allow_nan=False)
    | st.sampled_from([float("inf"), float("-inf")])
    | st.text()
    | st.sampled_from(["\ud800 alone", "nul \x00 inside", Colour.RED, Level.HIGH])
    | st.lists(st.integers(-5, 5), max_size=3)
    | st.dictionaries(st.text(max_size=3), st.integers(-5, 5), max_size=3)
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.dictionaries(st.sampled_from(["a", "b", "c"]), VALUES, min_size=1))
def test_values_come_back_as_put(tmp_path: Path, values: dict[str, Any]) -> None:
    with ThreadlineSaver(f"sqlite://{tmp_path / 'v.db'}") as saver:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6())
        versions = {c: saver.get_next_version(None, None) for c in values}
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        thread = checkpoint["id"]
        cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        saver.put(cfg, checkpoint, {"step": 0}, versions)
        got = saver.get_tuple(cfg)
        assert got is not None
        back = got.checkpoint["channel_values"]
        assert back.keys() == values.keys()
        for channel, value in values.items():  # as LangGraph's own serialisation keeps it
            expected = saver.serde.loads_typed(saver.serde.dumps_typed(value))
            assert type(back[channel]) is type(expected)
            assert back[channel] == expected
