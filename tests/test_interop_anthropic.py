"""Anthropic Messages conversion: turn shapes, merging rules, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.errors import InvalidMessage
from threadline.interop.anthropic_format import CONTINUED_PLACEHOLDER, from_anthropic, to_anthropic
from threadline.messages import ImagePart, Message, TextPart, ToolCall, group_units

from .test_interop_openai import b64, ids, json_values, raw_arguments


def test_system_is_gathered_and_tool_results_merge() -> None:
    calls = [ToolCall(id="a", name="ls", arguments={"p": "."}), ToolCall(id="b", name="cat")]
    system, turns = to_anthropic(
        [
            Message.system("rules"),
            Message.user("go"),
            Message.assistant("looking", tool_calls=calls),
            Message.tool("x.py", tool_call_id="a", name="ls"),
            Message.tool("boom", tool_call_id="b", name="cat", metadata={"is_error": True}),
            Message.assistant("done"),
        ]
    )
    assert system == "rules"
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "looking"},
        {"type": "tool_use", "id": "a", "name": "ls", "input": {"p": "."}},
        {"type": "tool_use", "id": "b", "name": "cat", "input": {}},
    ]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "x.py"},
        {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
    ]


def test_user_text_after_tool_results_shares_the_turn_results_first() -> None:
    call = ToolCall(id="a", name="ls")
    _, turns = to_anthropic(
        [
            Message.user("go"),
            Message.assistant("", tool_calls=[call]),
            Message.tool("ok", tool_call_id="a"),
            Message.user("and now?"),
        ]
    )
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "text"]
    back = from_anthropic(turns)
    assert [m.role for m in back] == ["user", "assistant", "tool", "user"]


def test_consecutive_same_role_messages_merge() -> None:
    _, turns = to_anthropic([Message.user("a"), Message.user("b"), Message.assistant("c")])
    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
    ]


def test_assistant_first_gets_a_continued_user_turn() -> None:
    _, turns = to_anthropic([Message.assistant("hi")])
    assert turns[0] == {"role": "user", "content": CONTINUED_PLACEHOLDER}
    _, turns = to_anthropic([Message.assistant("hi")], ensure_user_first=False)
    assert turns[0]["role"] == "assistant"


def test_raw_arguments_travel_as_raw_key() -> None:
    call = ToolCall(id="c", name="apply_patch", raw_arguments="*** Begin Patch")
    _, turns = to_anthropic([Message.user("x"), Message.assistant("", tool_calls=[call])])
    assert turns[1]["content"][0]["input"] == {"_raw": "*** Begin Patch"}
    assert from_anthropic(turns)[1].tool_calls[0] == call


def test_images() -> None:
    m = Message.user(
        [
            ImagePart(data="aGk=", media_type="image/png"),
            ImagePart(url="https://x/y.png"),
            ImagePart(url="data:image/gif;base64,R0lG"),
            ImagePart(media_ref="s_media/z.png"),
        ]
    )
    _, turns = to_anthropic([m])
    assert turns[0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}},
        {"type": "text", "text": "[image: s_media/z.png]"},
    ]


def test_from_anthropic_splits_results_and_keeps_thinking() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    ms = from_anthropic(
        [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [thinking, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "r"}],
                    },
                    {"type": "text", "text": "more"},
                ],
            },
        ],
        system="sys",
    )
    assert [m.role for m in ms] == ["system", "user", "assistant", "tool", "user"]
    assert ms[2].metadata["thinking"] == [thinking] and ms[2].content == ""
    assert ms[3].name == "f" and ms[3].content == [TextPart(text="r")]
    _, report = group_units(ms)
    assert not report.changed
    _, again = to_anthropic(ms)
    assert again[1]["content"][0] == thinking  # replayed first
    _, without = to_anthropic(ms, include_thinking=False)
    assert without[1]["content"][0]["type"] == "tool_use"


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ([{"role": "system", "content": "x"}], "unknown role 'system'"),
        ([{"role": "user", "content": [{"type": "tool_result"}]}], "tool_use_id"),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": 1}]}],
            "tool_use block needs",
        ),
        ([{"role": "user", "content": 3}], "content must be"),
        ("nope", "expected a list"),
    ],
)
def test_malformed_input(bad: Any, needle: str) -> None:
    with pytest.raises(InvalidMessage, match=needle):
        from_anthropic(bad)


# -- round trip --------------------------------------------------------------------

texts = st.text(min_size=1, max_size=40).filter(str.strip)
call_lists = st.lists(
    st.builds(
        lambda i, n, a: ToolCall(id=i, name=n, arguments=a),
        ids,
        ids,
        st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    )
    | st.builds(lambda i, n, r: ToolCall(id=i, name=n, raw_arguments=r), ids, ids, raw_arguments),
    min_size=1,
    max_size=3,
)
images = st.builds(lambda p: ImagePart(url=f"https://example.com/{p}.png"), ids) | st.builds(
    lambda data: ImagePart(data=data, media_type="image/png"), b64
)  # Anthropic has no detail level
user_contents = texts | st.lists(st.builds(TextPart, text=texts) | images, min_size=2, max_size=3)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.system(draw(texts)))
    for _ in range(draw(st.integers(1, 4))):
        content: Any = draw(user_contents)
        out.append(Message.user(content))
        for _ in range(draw(st.integers(0, 2))):
            calls = draw(call_lists)
            out.append(Message.assistant(draw(st.just("") | texts), tool_calls=calls))
            for call in calls:
                error = {"is_error": True} if draw(st.booleans()) else {}
                out.append(
                    Message.tool(draw(texts), tool_call_id=call.id, name=call.name, metadata=error)
                )
        out.append(Message.assistant(draw(texts)))
    return out


def carried(m: Message) -> dict[str, Any]:
    return m.model_dump(
        include={"role", "content", "tool_calls", "tool_call_id", "name", "metadata"}
    )


@given(conversations())
def test_round_trip_preserves_content_calls_and_results(ms: list[Message]) -> None:
    system, turns = to_anthropic(ms)
    back = from_anthropic(turns, system=system)
    assert [carried(m) for m in back] == [carried(m) for m in ms]
