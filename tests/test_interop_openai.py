"""OpenAI Chat Completions conversion: lossless round trips and clear errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.errors import InvalidMessage
from threadline.interop.openai_format import (
    message_from_openai,
    message_to_openai,
    messages_from_openai,
    messages_to_openai,
)
from threadline.messages import FilePart, ImagePart, Message, TextPart, ToolCall

# -- strategies ------------------------------------------------------------------

ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _not_json_object(text: str) -> bool:
    try:
        return not isinstance(json.loads(text), dict)
    except ValueError:
        return True


raw_arguments = st.text(min_size=1, max_size=30).filter(
    lambda s: bool(s.strip()) and _not_json_object(s)
)
tool_calls = st.builds(
    ToolCall,
    id=ids,
    name=ids,
    arguments=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
) | st.builds(lambda i, n, r: ToolCall(id=i, name=n, raw_arguments=r), ids, ids, raw_arguments)

b64 = st.binary(min_size=1, max_size=12).map(lambda b: __import__("base64").b64encode(b).decode())
details = st.sampled_from([None, "auto", "low", "high"])
images = st.builds(
    lambda path, d: ImagePart(url=f"https://example.com/{path}.png", detail=d), ids, details
) | st.builds(
    lambda data, mt, d: ImagePart(data=data, media_type=mt, detail=d),
    b64,
    st.sampled_from(["image/png", "image/jpeg", "image/webp"]),
    details,
)
files = st.builds(
    lambda name, data, mt: FilePart(uri=name, name=name, data=data, media_type=mt),
    ids.map(lambda s: s + ".pdf"),
    b64,
    st.sampled_from(["application/pdf", "text/plain"]),
)
parts = st.lists(st.builds(TextPart, text=st.text(max_size=40)) | images | files, max_size=4)
contents = st.text(max_size=60) | parts
names = st.none() | ids


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    content = draw(contents)
    if role == "developer":
        return Message.system(content, name=draw(names), metadata={"openai_role": "developer"})
    if role == "tool":
        return Message.tool(content, tool_call_id=draw(ids), name=draw(names))
    if role == "assistant":
        calls = draw(st.lists(tool_calls, max_size=3))
        return Message.assistant(content, tool_calls=calls, name=draw(names))
    return Message(role=role, content=content, name=draw(names))


def carried(m: Message) -> dict[str, Any]:
    """The fields Chat Completions carries."""
    return m.model_dump(
        include={"role", "content", "tool_calls", "tool_call_id", "name", "metadata"}
    )


# -- round trips -----------------------------------------------------------------


@settings(max_examples=300)
@given(messages())
def test_round_trip_is_lossless(m: Message) -> None:
    d = message_to_openai(m)
    json.dumps(d)  # plain JSON all the way down
    back = message_from_openai(json.loads(json.dumps(d)))
    assert carried(back) == carried(m)


@given(st.lists(messages(), max_size=6))
def test_list_round_trip(ms: list[Message]) -> None:
    back = messages_from_openai(messages_to_openai(ms))
    assert [carried(m) for m in back] == [carried(m) for m in ms]


def test_assistant_tool_call_shape() -> None:
    call = ToolCall(id="call_1", name="search", arguments={"q": "x"})
    d = message_to_openai(Message.assistant("", tool_calls=[call]))
    assert d == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q":"x"}'},
            }
        ],
    }


def test_raw_arguments_travel_verbatim() -> None:
    call = ToolCall(id="c", name="apply_patch", raw_arguments="*** Begin Patch")
    d = message_to_openai(Message.assistant("", tool_calls=[call]))
    assert d["tool_calls"][0]["function"]["arguments"] == "*** Begin Patch"
    assert message_from_openai(d).tool_calls[0].raw_arguments == "*** Begin Patch"


def test_tool_message_shape() -> None:
    d = message_to_openai(Message.tool("42", tool_call_id="c1", name="calc"))
    assert d == {"role": "tool", "content": "42", "tool_call_id": "c1", "name": "calc"}


def test_base64_image_is_a_data_url_and_back() -> None:
    m = Message.user([ImagePart(data="aGVsbG8=", media_type="image/png", detail="low")])
    d = message_to_openai(m)
    assert d["content"] == [
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,aGVsbG8=", "detail": "low"},
        }
    ]
    part = message_from_openai(d).content[0]
    assert isinstance(part, ImagePart)
    assert (part.data, part.media_type, part.url) == ("aGVsbG8=", "image/png", None)


def test_media_ref_needs_a_resolver() -> None:
    m = Message.user([ImagePart(media_ref="s1_media/cat.png")])
    assert message_to_openai(m)["content"] == [
        {"type": "text", "text": "[image: s1_media/cat.png]"}
    ]

    def resolve(part: ImagePart) -> ImagePart:
        return ImagePart(data="Y2F0", media_type="image/png")

    d = message_to_openai(m, resolve_media=resolve)
    assert d["content"][0]["image_url"]["url"] == "data:image/png;base64,Y2F0"


def test_file_without_data_is_a_text_reference() -> None:
    d = message_to_openai(Message.user([FilePart(uri="/tmp/report.pdf")]))
    assert d["content"] == [{"type": "text", "text": "[file: /tmp/report.pdf]"}]


def test_developer_and_legacy_function_roles() -> None:
    m = message_from_openai({"role": "developer", "content": "be brief"})
    assert m.role == "system" and message_to_openai(m)["role"] == "developer"
    a = message_from_openai(
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    )
    r = message_from_openai({"role": "function", "name": "f", "content": "ok"})
    assert a.tool_calls[0].id == r.tool_call_id == "f"


def test_arguments_given_as_object_are_accepted() -> None:
    d = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
    }
    assert message_from_openai(d).tool_calls[0].arguments == {"a": 1}


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"content": "x"}, "unknown role None"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": 5}, "content must be"),
        ({"role": "user", "content": [{"type": "audio"}]}, "unsupported content part"),
        ({"role": "user", "content": [{"type": "text"}]}, "text part needs"),
        ({"role": "user", "content": "x", "tool_calls": []}, "only assistant"),
        ({"role": "assistant", "tool_calls": {"id": "c"}}, "must be a list"),
        ({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}, "needs an 'id'"),
        ({"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}, "function.name"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "image_url.url"),
        ({"role": "user", "content": "x", "name": 3}, "'name' must be a string"),
        ("not a dict", "JSON object"),
    ],
)
def test_malformed_input_raises_invalid_message(bad: Any, needle: str) -> None:
    with pytest.raises(InvalidMessage, match=needle.replace("(", r"\(").replace(")", r"\)")):
        message_from_openai(bad)


def test_list_errors_name_the_index() -> None:
    with pytest.raises(InvalidMessage, match="message 1: a tool message needs"):
        messages_from_openai([{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}])
