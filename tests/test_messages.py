"""The message model: shapes, constructors, units and view-time repair."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.strategies import history
from threadline import ImagePart, InvalidMessage, Message, TextPart, ToolCall, group_units
from threadline.messages import INTERRUPTED_RESULT, flatten


def test_constructors_and_text() -> None:
    m = Message.user(
        [TextPart(text="look"), ImagePart(url="https://x/y.png"), TextPart(text="here")]
    )
    assert m.text == "look\nhere"
    assert m.created_at.tzinfo is not None
    assert Message.assistant("hi").role == "assistant"
    assert Message.tool("ok", tool_call_id="c1", name="grep").tool_call_id == "c1"


def test_shape_errors() -> None:
    with pytest.raises(InvalidMessage):
        Message(role="tool", content="x")  # no tool_call_id
    with pytest.raises(InvalidMessage):
        Message(role="user", content="x", tool_calls=[ToolCall(id="1", name="f")])
    with pytest.raises(InvalidMessage):
        ImagePart(url="a", data="b", media_type="image/png")
    with pytest.raises(InvalidMessage):
        ImagePart(data="aGk=")  # base64 without a media type


def test_json_round_trip_keeps_every_field() -> None:
    m = Message.assistant(
        [TextPart(text="t"), ImagePart(data="aGk=", media_type="image/png", width=10, height=5)],
        tool_calls=[ToolCall(id="c", name="f", arguments={"a": [1, 2]})],
        model="gpt-4o",
        metadata={"k": {"nested": True}},
        synthetic=True,
    )
    assert Message.model_validate_json(m.model_dump_json()) == m


def test_unparseable_arguments_are_kept_verbatim() -> None:
    call = ToolCall.from_json_arguments(id="c", name="f", arguments='{"a": 1')
    assert call.raw_arguments == '{"a": 1' and call.arguments_json() == '{"a": 1'
    assert ToolCall.from_json_arguments(id="c", name="f", arguments='{"a":1}').arguments == {"a": 1}
    assert ToolCall.from_json_arguments(id="c", name="f", arguments="[1]").raw_arguments == "[1]"


def test_arguments_that_are_not_strict_json_are_kept_verbatim() -> None:
    """Python's parser takes NaN and Infinity, which no JSON store can hold (pydantic
    would write null); and nesting deep enough to exhaust the parser's recursion."""
    for text in ('{"x": NaN}', '{"x": -Infinity}', '{"a": ' * 5000 + "1" + "}" * 5000):
        call = ToolCall.from_json_arguments(id="c", name="f", arguments=text)
        assert call.raw_arguments == text and call.arguments == {}


def test_construction_errors_name_the_field_and_value() -> None:
    with pytest.raises(InvalidMessage, match=r"content.*\(got 123\)"):
        Message.user(123)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match=r"role: Input should be .*\(got 'bot'\)"):
        Message(role="bot", content="x")  # type: ignore[arg-type]


def _chain(*ids: str) -> Message:
    return Message.assistant("", tool_calls=[ToolCall(id=i, name="t") for i in ids])


def test_units_group_calls_with_results_in_call_order() -> None:
    msgs = [
        Message.user("u"),
        _chain("a", "b"),
        Message.tool("rb", tool_call_id="b"),
        Message.tool("ra", tool_call_id="a"),
        Message.assistant("done"),
    ]
    units, report = group_units(msgs)
    assert [len(u) for u in units] == [1, 3, 1]
    assert [m.tool_call_id for m in units[1].messages[1:]] == ["a", "b"]
    assert not report.changed


def test_missing_result_is_synthesized_and_orphan_left_out() -> None:
    msgs = [
        Message.tool("orphan", tool_call_id="zzz", seq=1),
        _chain("a", "b"),
        Message.tool("ra", tool_call_id="a"),
        Message.user("next"),
    ]
    units, report = group_units(msgs)
    chain = units[0].messages
    assert chain[2].synthetic and chain[2].text == INTERRUPTED_RESULT
    assert report.synthesized == ["b"] and report.orphans == [1]
    assert all(m.text != "orphan" for m in flatten(units))


def test_repeated_ids_pair_positionally() -> None:
    # tau-bench and SWE-agent reuse call ids inside one conversation
    msgs = [
        _chain("x"),
        Message.tool("first", tool_call_id="x"),
        _chain("x"),
        Message.tool("second", tool_call_id="x"),
    ]
    units, report = group_units(msgs)
    assert [u.messages[1].text for u in units] == ["first", "second"]
    assert not report.changed


@given(history(broken=True))
@settings(max_examples=100, deadline=None)
def test_repair_always_yields_whole_units(msgs: list[Message]) -> None:
    units, _ = group_units(msgs)
    for u in units:
        head, rest = u.messages[0], u.messages[1:]
        assert head.role != "tool"
        assert [r.tool_call_id for r in rest] == [c.id for c in head.tool_calls]
    # nothing said is lost except orphans, and order is kept
    real = [m for m in flatten(units) if not m.synthetic]
    assert [m.id for m in real] == [m.id for m in msgs if m in real]
