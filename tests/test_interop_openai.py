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
    to_openai,
)
from threadline.interop.provider_rules import openai_problems
from threadline.messages import INTERRUPTED_RESULT, FilePart, ImagePart, Message, TextPart, ToolCall

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


# -- to_openai: valid for the API, whatever the history held -------------------------


def _valid(ms: list[Message]) -> list[dict[str, Any]]:
    out = to_openai(ms)
    assert openai_problems(out) == []
    return out


def test_blank_messages_are_dropped_but_results_stay() -> None:
    call = ToolCall(id="c1", name="sh")
    out = _valid(
        [
            Message.system(" "),
            Message.user("go"),
            Message.user([TextPart(text="\n\n")]),
            Message.assistant("\n\n", tool_calls=[call]),
            Message.tool("  ", tool_call_id="c1"),
            Message.assistant("", metadata={"thinking": [{"type": "thinking", "thinking": "x"}]}),
            Message.user([TextPart(text=""), TextPart(text="next")]),
        ]
    )
    assert out == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "", "tool_call_id": "c1"},
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
    ]


def test_arguments_are_always_a_json_object() -> None:
    calls = [
        ToolCall(id="a", name="apply_patch", raw_arguments="*** Begin Patch"),
        ToolCall.from_json_arguments(id="b", name="f", arguments="[1]"),
        ToolCall(id="c", name="g", arguments={"q": "x"}),
    ]
    out = _valid(
        [
            Message.assistant("", tool_calls=calls),
            *(Message.tool("ok", tool_call_id=c.id) for c in calls),
        ]
    )
    args = [json.loads(c["function"]["arguments"]) for c in out[0]["tool_calls"]]
    assert args == [{"_raw": "*** Begin Patch"}, {"_raw": "[1]"}, {"q": "x"}]


def test_ids_are_cut_and_made_unique_in_their_message_the_same_for_results() -> None:
    long_id = "list_directory-1764625554423-6b5d2c6179cc4"  # Gemini CLI, 41 characters
    calls = [
        ToolCall(id=long_id, name="ls"),
        ToolCall(id="x", name="a"),
        ToolCall(id="x", name="b"),
    ]
    out = _valid(
        [
            Message.assistant("", tool_calls=calls),
            Message.tool("listing", tool_call_id=long_id),
            Message.tool("from a", tool_call_id="x"),
            Message.tool("from b", tool_call_id="x"),
        ]
    )
    ids = [c["id"] for c in out[0]["tool_calls"]]
    assert len(ids[0]) == 40 and ids[0].startswith("list_directory-") and ids[1:] == ["x", "x_2"]
    assert [(m["tool_call_id"], m["content"]) for m in out[1:]] == [
        (ids[0], "listing"),
        ("x", "from a"),
        ("x_2", "from b"),
    ]


def test_names_are_made_to_match_the_pattern() -> None:
    call = ToolCall(id="c", name="[REDACTED_NAME len=4]")
    out = _valid(
        [
            Message.user("hi", name="Ana B."),
            Message.assistant("", tool_calls=[call]),
            Message.tool("ok", tool_call_id="c", name=call.name),
        ]
    )
    assert out[0]["name"] == "Ana_B_"
    assert out[1]["tool_calls"][0]["function"]["name"] == "_REDACTED_NAME_len_4_"
    assert out[2]["name"] == "_REDACTED_NAME_len_4_"


def test_media_goes_only_where_the_api_takes_it() -> None:
    image = ImagePart(url="https://example.com/a.png")
    call = ToolCall(id="c", name="shot")
    out = _valid(
        [
            Message.user([image, ImagePart(url="[REDACTED_IMAGE_URL len=9]")]),
            Message.assistant("", tool_calls=[call]),
            Message.tool([TextPart(text="took it"), image], tool_call_id="c"),
            Message.assistant([TextPart(text="see"), image]),
        ]
    )
    assert out[0]["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "text", "text": "[image: [REDACTED_IMAGE_URL len=9]]"},
    ]
    placeholder = {"type": "text", "text": "[image: https://example.com/a.png]"}
    assert out[2]["content"] == [{"type": "text", "text": "took it"}, placeholder]
    assert out[3]["content"] == [{"type": "text", "text": "see"}, placeholder]


def test_broken_chains_are_repaired_for_openai() -> None:
    call = ToolCall(id="a", name="ls")
    out = _valid(
        [
            Message.tool("orphan", tool_call_id="nobody"),
            Message.user("go"),
            Message.assistant("", tool_calls=[call]),
            Message.user("never mind"),
        ]
    )
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert out[2]["content"] == INTERRUPTED_RESULT


def test_developer_role_survives_to_openai() -> None:
    m = Message.system("be brief", metadata={"openai_role": "developer"})
    assert _valid([m, Message.user("hi")])[0] == {"role": "developer", "content": "be brief"}
