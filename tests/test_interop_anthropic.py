"""Anthropic Messages conversion: turn shapes, merging rules, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.errors import InvalidMessage
from threadline.interop.anthropic_format import (
    CONTINUED_PLACEHOLDER,
    EMPTY_ERROR_RESULT,
    from_anthropic,
    to_anthropic,
)
from threadline.interop.provider_rules import anthropic_problems
from threadline.messages import (
    INTERRUPTED_RESULT,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    group_units,
)

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


SIG = "EqQBCkYIBxgCKkDkoj34" + "Ab9+/" * 20  # shaped like a real signature


def test_from_anthropic_splits_results_and_keeps_thinking() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": SIG}
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
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        content: Any = draw(user_contents)
        out.append(Message.user(content))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for call in draw(call_lists):  # the API wants tool_use ids unique per request
                n += 1
                calls.append(call.model_copy(update={"id": f"{n}_{call.id}"}))
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
    expected = [carried(m) for m in ms]
    expected[-1]["content"] = ms[-1].text.rstrip()  # a final assistant turn is a prefill
    assert [carried(m) for m in back] == expected


# -- valid for the API, whatever the history held -----------------------------------


def _valid(ms: list[Message]) -> tuple[Any, list[dict[str, Any]]]:
    payload = to_anthropic(ms)
    assert anthropic_problems(payload) == []
    return payload


def test_whitespace_only_text_is_dropped_and_empty_messages_merge_away() -> None:
    call = ToolCall(id="toolu_1", name="ls")
    _, turns = _valid(
        [
            Message.user("go"),
            Message.assistant([TextPart(text="\n\n"), TextPart(text="looking")]),
            Message.user(" \n"),  # dropped: the assistants around it merge
            Message.assistant("\n\n", tool_calls=[call]),
            Message.tool("   ", tool_call_id="toolu_1"),
            Message.user([TextPart(text=""), TextPart(text="and?")]),
        ]
    )
    assert turns == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "looking"},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": ""},
                {"type": "text", "text": "and?"},
            ],
        },
    ]


def test_a_window_of_blank_messages_still_starts_with_a_user() -> None:
    _, turns = _valid([Message.user("\n"), Message.assistant("hi"), Message.user(" ")])
    assert turns == [
        {"role": "user", "content": CONTINUED_PLACEHOLDER},
        {"role": "assistant", "content": "hi"},
    ]
    system, turns = to_anthropic([Message.system(" "), Message.user("\n\n")])
    assert (system, turns) == (None, [])


def thinking_block(signature: str | None) -> dict[str, Any]:
    block = {"type": "thinking", "thinking": "hmm"}
    if signature is not None:
        block["signature"] = signature
    return block


@pytest.mark.parametrize(
    ("blocks", "model", "kept"),
    [
        ([thinking_block(SIG)], "claude-opus-4-6", True),
        ([thinking_block(SIG)], None, True),
        ([{"type": "redacted_thinking", "data": "opaque"}], "claude-opus-4-6", True),
        ([thinking_block("[REDACTED_SIGNATURE]")], "claude-opus-4-6", False),
        ([thinking_block("")], "claude-opus-4-6", False),
        ([thinking_block(None)], "claude-opus-4-6", False),
        ([thinking_block("sig")], "claude-opus-4-6", False),
        ([thinking_block(SIG)], "gemini-2.5-pro", False),  # another provider's reasoning
        ([{"subject": "Plan", "description": "a Gemini thought"}], None, False),
    ],
)
def test_only_signed_anthropic_thinking_is_replayed(
    blocks: list[dict[str, Any]], model: str | None, kept: bool
) -> None:
    m = Message.assistant("answer", model=model, metadata={"thinking": blocks})
    _, turns = _valid([Message.user("q"), m])
    if kept:
        assert turns[1]["content"] == [*blocks, {"type": "text", "text": "answer"}]
    else:
        assert turns[1]["content"] == "answer"


@pytest.mark.parametrize("signature", ["[REDACTED_SIGNATURE]", SIG])
def test_a_message_of_only_thinking_is_dropped(signature: str) -> None:
    interrupted = {"thinking": [thinking_block(signature)]}  # the user stopped the response
    _, turns = _valid(
        [Message.user("q"), Message.assistant("", metadata=interrupted), Message.user("again")]
    )
    assert turns == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}],
        }
    ]


def test_merged_assistant_turns_keep_only_the_first_ones_thinking() -> None:
    signed = {"thinking": [thinking_block(SIG)]}
    _, turns = _valid(
        [
            Message.user("q"),
            Message.assistant("one", metadata=signed),
            Message.user("\n"),
            Message.assistant("two", metadata=signed),
        ]
    )
    assert [b["type"] for b in turns[1]["content"]] == ["thinking", "text", "text"]


def test_tool_input_is_always_an_object() -> None:
    calls = [
        ToolCall(id="a", name="f"),
        ToolCall(id="b", name="apply_patch", raw_arguments="*** Begin Patch"),
        ToolCall.from_json_arguments(id="c", name="g", arguments="[1, 2]"),
        ToolCall.from_json_arguments(id="d", name="h", arguments=""),
    ]
    results = [Message.tool("ok", tool_call_id=c.id) for c in calls]
    _, turns = _valid([Message.user("x"), Message.assistant("", tool_calls=calls), *results])
    assert [b["input"] for b in turns[1]["content"]] == [
        {},
        {"_raw": "*** Begin Patch"},
        {"_raw": "[1, 2]"},
        {},
    ]


def test_tool_ids_and_names_are_made_valid_and_unique_for_call_and_result() -> None:
    def chain(call_id: str, name: str, answer: str) -> list[Message]:
        call = ToolCall(id=call_id, name=name)
        return [
            Message.assistant("", tool_calls=[call]),
            Message.tool(answer, tool_call_id=call_id),
        ]

    _, turns = _valid(
        [
            Message.user("x"),
            *chain("toolu.01", "[REDACTED_NAME len=4]", "first"),
            *chain("call_1", "grep", "second"),
            *chain("call_1", "grep", "third"),  # reused id (tau-bench, SWE-agent)
        ]
    )
    uses = [t["content"][0] for t in turns if t["role"] == "assistant"]
    results = [t["content"][0] for t in turns[2::2]]
    assert [(u["id"], u["name"]) for u in uses] == [
        ("toolu_01", "_REDACTED_NAME_len_4_"),
        ("call_1", "grep"),
        ("call_1_2", "grep"),
    ]
    assert [(r["tool_use_id"], r["content"]) for r in results] == [
        ("toolu_01", "first"),
        ("call_1", "second"),
        ("call_1_2", "third"),
    ]


def test_duplicate_ids_in_one_message_pair_positionally() -> None:
    calls = [ToolCall(id="x", name="a"), ToolCall(id="x", name="b")]
    _, turns = _valid(
        [
            Message.user("go"),
            Message.assistant("", tool_calls=calls),
            Message.tool("from a", tool_call_id="x"),
            Message.tool("from b", tool_call_id="x"),
        ]
    )
    assert [b["id"] for b in turns[1]["content"]] == ["x", "x_2"]
    assert [(b["tool_use_id"], b["content"]) for b in turns[2]["content"]] == [
        ("x", "from a"),
        ("x_2", "from b"),
    ]


def test_broken_chains_are_repaired() -> None:
    call = ToolCall(id="a", name="ls")
    _, turns = _valid(
        [
            Message.tool("orphan", tool_call_id="nobody"),
            Message.user("go"),
            Message.assistant("", tool_calls=[call]),
            Message.user("never mind"),  # the result was lost
        ]
    )
    assert turns[0] == {"role": "user", "content": "go"}
    assert turns[2]["content"][0]["content"] == INTERRUPTED_RESULT


def test_an_error_result_without_output_says_so() -> None:
    call = ToolCall(id="a", name="sh")
    _, turns = _valid(
        [
            Message.user("go"),
            Message.assistant("", tool_calls=[call]),
            Message.tool("\n", tool_call_id="a", metadata={"is_error": True}),
        ]
    )
    assert turns[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "a",
        "content": EMPTY_ERROR_RESULT,
        "is_error": True,
    }


def test_media_the_api_refuses_becomes_a_placeholder() -> None:
    redacted = "[REDACTED_IMAGE_URL len=9 sha=1]"
    pdf = FilePart(uri="r.pdf", name="r.pdf", media_type="application/pdf", data="JVBE")
    _, turns = _valid(
        [
            Message.user(
                [
                    ImagePart(url=redacted),
                    ImagePart(data="Qk0=", media_type="image/bmp"),
                    ImagePart(url="data:image/tiff;base64,SUkq"),
                    FilePart(uri="notes.md", media_type="text/markdown", data="IyBoaQ=="),
                    FilePart(uri="a.zip", media_type="application/zip", data="UEs="),
                    pdf,
                ]
            )
        ]
    )
    assert turns[0]["content"] == [
        {"type": "text", "text": f"[image: {redacted}]"},
        {"type": "text", "text": "[image: image/bmp]"},
        {"type": "text", "text": "[image: image/tiff]"},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "# hi"},
            "title": "notes.md",
        },
        {"type": "text", "text": "[file: a.zip]"},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
            "title": "r.pdf",
        },
    ]


def test_final_assistant_turn_loses_trailing_whitespace() -> None:
    _, turns = _valid([Message.user("q"), Message.assistant("answer\n\n")])
    assert turns[-1]["content"] == "answer"
    _, turns = _valid(
        [Message.user("q"), Message.assistant([TextPart(text="a "), TextPart(text="b \n")])]
    )
    assert turns[-1]["content"][-1] == {"type": "text", "text": "b"}
