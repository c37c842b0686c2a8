"""AnthropicChatModel against a local server speaking the Messages API on the wire."""

from __future__ import annotations

import pytest

from tests import llm_cases
from tests.fakes import FakeAnthropic
from tests.llm_cases import ANTHROPIC, GREP_TOOL, ask, drain
from threadline.catalog import lookup
from threadline.errors import ContextLengthExceeded, ModelError
from threadline.llm import ChatRequest, RetryEvent
from threadline.llm.anthropic_provider import MAX_TOKENS_CAP, AnthropicChatModel
from threadline.messages import Message, ToolCall

MODEL = ANTHROPIC.model
srv, retries, model = llm_cases.srv, llm_cases.retries, llm_cases.model  # fixtures


pytestmark = pytest.mark.parametrize("case", [ANTHROPIC], ids=["anthropic"])


# -- replies ---------------------------------------------------------------------


def test_request_on_the_wire(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.reply_text("Hello there.")
    model.complete(ask("hi", temperature=0.3))

    sent = srv.last_request
    assert sent.path == "/v1/messages"
    assert sent.headers["anthropic-version"]  # and the key as a Bearer (SDK 2.x)
    body = sent.json()
    assert body["model"] == MODEL
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "temperature" not in body  # refused by the current API version; never sent
    assert body["max_tokens"] == min(lookup(MODEL).max_output, MAX_TOKENS_CAP)


def test_max_tokens_from_request_and_constructor(srv: FakeAnthropic) -> None:
    srv.reply_text("a")
    srv.reply_text("b")
    with AnthropicChatModel(MODEL, api_key="k", base_url=srv.url, max_tokens=321) as chat:
        chat.complete(ask())
        assert srv.last_json["max_tokens"] == 321
        chat.complete(ask(max_tokens=77))
        assert srv.last_json["max_tokens"] == 77


def test_usage_recorded_with_cache(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    # on the wire: input_tokens=200 uncached, 1000 read from cache, 300 written to it
    srv.reply_text("ok", usage=(1500, 42), cached_tokens=1000, cache_write_tokens=300)
    assert srv.pending == 1
    message = model.complete(ask()).message
    assert message.usage is not None
    assert message.usage.input_tokens == 1500  # the whole prompt
    assert message.usage.output_tokens == 42
    assert message.usage.cached_tokens == 1000
    assert message.usage.cache_write_tokens == 300


def test_streamed_usage_with_cache(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.reply_text("ok then", usage=(900, 7), cached_tokens=800)
    _, final = drain(model.stream(ask()))
    assert (final.usage.input_tokens, final.usage.output_tokens) == (900, 7)
    assert final.usage.cached_tokens == 800


def test_tool_call_round_trip(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.reply_tool_call("grep", {"q": "TODO"}, id="toolu_1", text="Let me search.")
    srv.reply_text("Found 3 TODOs.")
    history = [Message.user("find the TODOs")]

    first = model.complete(ChatRequest(history, tools=[GREP_TOOL]))
    assert first.finish_reason == "tool_use"
    assert first.message.text == "Let me search."
    assert first.message.tool_calls == [
        ToolCall(id="toolu_1", name="grep", arguments={"q": "TODO"})
    ]
    assert srv.last_json["tools"] == [
        {
            "name": "grep",
            "description": "Search files for a pattern.",
            "input_schema": GREP_TOOL["parameters"],
        }
    ]

    history += [first.message, Message.tool("a.py:1 TODO", tool_call_id="toolu_1", name="grep")]
    second = model.complete(ChatRequest(history, tools=[GREP_TOOL]))
    assert second.message.text == "Found 3 TODOs."
    sent = srv.last_json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me search."},
            {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "TODO"}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py:1 TODO"}],
    }


def test_streamed_malformed_tool_input_is_kept_verbatim(
    srv: FakeAnthropic, model: AnthropicChatModel
) -> None:
    srv.reply_tool_call("grep", '{"q": "unterminated', id="toolu_x")
    _, final = drain(model.stream(ask(tools=[GREP_TOOL])))
    call = final.message.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"q": "unterminated'


def test_tool_choice(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.reply_text("no tools")
    model.complete(ask(tools=[GREP_TOOL], tool_choice="none"))
    assert srv.last_json["tool_choice"] == {"type": "none"}
    srv.reply_text("forced")
    model.complete(ask(tools=[GREP_TOOL], tool_choice="grep"))
    assert srv.last_json["tool_choice"] == {"type": "tool", "name": "grep"}
    srv.reply_text("any")
    model.complete(ask(tools=[GREP_TOOL], tool_choice="required"))
    assert srv.last_json["tool_choice"] == {"type": "any"}


# -- retries -----------------------------------------------------------------------


def test_500_and_overloaded_are_retried(
    srv: FakeAnthropic, model: AnthropicChatModel, retries: list[RetryEvent]
) -> None:
    srv.fail(500)
    srv.fail(529)
    srv.reply_text("recovered")
    assert model.complete(ask()).message.text == "recovered"
    assert srv.request_count == 3
    assert "overloaded_error" in retries[1].reason


# -- errors ------------------------------------------------------------------------


def test_context_length_error_is_typed(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.fail_context_length(tokens=208_310, limit=200_000)
    with pytest.raises(ContextLengthExceeded, match="208310 tokens > 200000"):
        model.complete(ask())
    assert srv.request_count == 1


def test_request_too_large_is_a_context_error(
    srv: FakeAnthropic, model: AnthropicChatModel
) -> None:
    srv.fail(413)
    with pytest.raises(ContextLengthExceeded):
        model.complete(ask())


def test_other_400_is_a_model_error(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.fail(400, message="messages: roles must alternate between user and assistant")
    with pytest.raises(ModelError, match="invalid_request_error: messages: roles") as info:
        model.complete(ask())
    assert not isinstance(info.value, ContextLengthExceeded)
