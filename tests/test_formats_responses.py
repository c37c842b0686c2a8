"""Responses-API items <-> messages: exact both ways (threadline.interop.responses_format)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import history
from tests.test_formats_databases import TURN
from threadline.errors import InvalidMessage
from threadline.interop.responses_format import ITEMS_KEY, items_to_messages, messages_to_items
from threadline.messages import Message

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
IDS = st.sampled_from(["call_1", "call_2", "call_3", "c-x"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def arguments(draw: st.DrawFn) -> str:
    """Argument strings as models write them: canonical JSON, spaced JSON, or not JSON."""
    obj = draw(st.dictionaries(TEXT, JSON_VALUES, max_size=3))
    style = draw(st.sampled_from(["compact", "spaced", "broken", "empty"]))
    if style == "compact":
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    if style == "spaced":
        return json.dumps(obj, indent=draw(st.sampled_from([None, 2])))
    return "" if style == "empty" else draw(TEXT)


def optional(draw: st.DrawFn, item: dict[str, Any], **extra: st.SearchStrategy[Any]) -> None:
    for key, strategy in extra.items():
        if draw(st.booleans()):
            item[key] = draw(strategy)


@st.composite
def content(draw: st.DrawFn, text_type: str) -> Any:
    if draw(st.booleans()):
        return draw(TEXT)
    parts: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from([text_type, "input_image", "input_file", "refusal"]))
        if kind == "input_image":
            part: dict[str, Any] = {"type": kind, "image_url": "https://x.test/a.png"}
            optional(draw, part, detail=st.sampled_from(["auto", "low", "high"]))
        elif kind == "input_file":
            part = {"type": kind, "file_id": draw(TEXT)}
        elif kind == "refusal":
            part = {"type": kind, "refusal": draw(TEXT)}
        else:
            part = {"type": kind, "text": draw(TEXT)}
            if kind == "output_text":
                part["annotations"] = []
        parts.append(part)
    return parts


@st.composite
def item(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["user", "system", "developer", "assistant", "call", "output", "reasoning", "other"]
        )
    )
    if kind in ("user", "system", "developer"):
        out: dict[str, Any] = {"role": kind, "content": draw(content("input_text"))}
        optional(draw, out, type=st.just("message"))
    elif kind == "assistant":
        out = {"role": "assistant", "content": draw(content("output_text"))}
        optional(draw, out, type=st.just("message"), id=TEXT, status=st.just("completed"))
    elif kind == "call":
        out = {"type": "function_call", "call_id": draw(IDS), "name": draw(TEXT)}
        out["arguments"] = draw(arguments())
        optional(draw, out, id=TEXT, status=st.just("completed"))
    elif kind == "output":
        out = {"type": "function_call_output", "call_id": draw(IDS)}
        out["output"] = draw(content("input_text"))
    elif kind == "reasoning":
        out = {"type": "reasoning", "id": draw(TEXT), "summary": []}
        optional(draw, out, encrypted_content=TEXT)
    else:
        out = {"type": draw(st.sampled_from(["web_search_call", "item_reference"])), "id": "x"}
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(item(), max_size=12))
def test_items_round_trip_exactly(items: list[dict[str, Any]]) -> None:
    messages = items_to_messages(items)
    assert messages_to_items(messages) == items
    # and the messages survive storage's JSON form
    stored = [Message.model_validate_json(m.model_dump_json()) for m in messages]
    assert messages_to_items(stored) == items


def _shape(m: Message) -> tuple[Any, ...]:
    calls = [(c.id, c.name, c.arguments_json()) for c in m.tool_calls]
    return (m.role, m.content, calls, m.tool_call_id, m.name)


def _merged(messages: list[Message]) -> list[tuple[Any, ...]]:
    """What items can carry: an assistant message that only calls tools, right after an
    assistant message without calls, is the same response (items have no boundary)."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev[0] == "assistant"
            and not prev[2]
            and m.role == "assistant"
            and m.content == ""
            and m.tool_calls
        ):
            out[-1] = (*prev[:2], _shape(m)[2], *prev[3:])
        else:
            out.append(_shape(m))
    return out


@settings(max_examples=150, deadline=None)
@given(history(max_units=12))
def test_messages_round_trip(messages: list[Message]) -> None:
    back = items_to_messages(messages_to_items(messages))
    assert [_shape(m) for m in back] == _merged(messages)
    if len(back) == len(messages):  # (a merged pair keeps its two items' shapes)
        assert not any(ITEMS_KEY in m.metadata for m in back)  # canonical items: no residue


def test_agents_sdk_turn_maps_to_one_assistant_message() -> None:
    user, caller, result, answer = items_to_messages(TURN)
    assert (user.role, user.content) == ("user", "What's the weather in Paris?")
    assert caller.tool_calls[0].arguments == {"city": "Paris"}
    assert caller.metadata[ITEMS_KEY][0]["item"]["type"] == "reasoning"
    assert (result.role, result.name, result.content) == ("tool", "get_weather", "sunny, 21C")
    assert (answer.role, answer.content) == ("assistant", "Sunny and 21C.")


def test_developer_role_and_verbatim_arguments() -> None:
    items = [
        {"role": "developer", "content": "be brief"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{not json"},
    ]
    dev, call = items_to_messages(items)
    assert dev.role == "system" and call.tool_calls[0].raw_arguments == "{not json"
    assert messages_to_items([dev, call]) == items


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call_output", "output": "x"}, "call_id"),
        ({"role": "robot", "content": "x"}, "role"),
        ({"type": 3}, "type"),
        ("text", "object"),
    ],
)
def test_malformed_items_are_refused_by_position(bad: Any, needle: str) -> None:
    with pytest.raises(InvalidMessage, match=needle) as info:
        items_to_messages([{"role": "user", "content": "ok"}, bad])
    assert "item 1" in str(info.value)
