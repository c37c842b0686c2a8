"""AnthropicChatModel against a local server speaking the Messages API on the wire."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeAnthropic, FakeToolCall, Reply
from threadline.catalog import lookup
from threadline.errors import ContextLengthExceeded, MissingCredentials, ModelError
from threadline.llm import ChatModel, ChatRequest, ChatResponse, RetryEvent, RetryPolicy
from threadline.llm.anthropic_provider import MAX_TOKENS_CAP, AnthropicChatModel
from threadline.messages import Message, ToolCall

MODEL = "claude-haiku-4-5"
FAST = RetryPolicy(base_delay=0.001, max_delay=0.005)
GREP_TOOL = {
    "name": "grep",
    "description": "Search files for a pattern.",
    "parameters": {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    },
}


@pytest.fixture
def srv() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def retries() -> list[RetryEvent]:
    return []


@pytest.fixture
def model(srv: FakeAnthropic, retries: list[RetryEvent]) -> Iterator[AnthropicChatModel]:
    chat = AnthropicChatModel(
        MODEL, api_key="test", base_url=srv.url, retry=FAST, on_retry=retries.append
    )
    yield chat
    chat.close()


def ask(text: str = "hi", **kw: object) -> ChatRequest:
    return ChatRequest([Message.system("You are terse."), Message.user(text)], **kw)  # type: ignore[arg-type]


def drain(stream: Iterator[str | ChatResponse]) -> tuple[list[str], ChatResponse]:
    items = list(stream)
    final = items[-1]
    assert isinstance(final, ChatResponse)
    assert all(isinstance(c, str) for c in items[:-1])
    return [c for c in items[:-1] if isinstance(c, str)], final


# -- replies ---------------------------------------------------------------------


def test_is_a_chat_model(model: AnthropicChatModel) -> None:
    assert isinstance(model, ChatModel)


def test_plain_reply(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.reply_text("Hello there.", usage=(12, 3))
    response = model.complete(ask("hi", temperature=0.3))

    assert response.message.role == "assistant"
    assert response.message.text == "Hello there."
    assert response.model == response.message.model == MODEL
    assert response.finish_reason == "end_turn"

    sent = srv.last_request
    assert sent.path == "/v1/messages"
    assert sent.headers["authorization"] == "Bearer test"  # SDK 2.x sends the key as a Bearer
    assert sent.headers["anthropic-version"]
    body = sent.json()
    assert body["model"] == MODEL
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "temperature" not in body  # refused by the current API version; never sent
    assert body["max_tokens"] == min(lookup(MODEL).max_output, MAX_TOKENS_CAP)
    assert "tools" not in body and "tool_choice" not in body and "stream" not in body


def test_max_tokens_from_request_and_constructor(srv: FakeAnthropic) -> None:
    srv.reply_text("a")
    srv.reply_text("b")
    with AnthropicChatModel(MODEL, api_key="k", base_url=srv.url, max_tokens=321) as chat:
        chat.complete(ask())
        assert srv.last_json["max_tokens"] == 321
        chat.complete(ask(max_tokens=77))
        assert srv.last_json["max_tokens"] == 77


def test_streamed_reply(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.reply_text("The quick brown fox jumps.", usage=(20, 6))
    chunks, final = drain(model.stream(ask()))

    assert len(chunks) > 1
    assert "".join(chunks) == final.message.text == "The quick brown fox jumps."
    assert final.usage.input_tokens == 20
    assert final.usage.output_tokens == 6  # from message_delta, not message_start
    assert final.message.usage == final.usage
    assert final.finish_reason == "end_turn"
    assert srv.last_json["stream"] is True


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


def test_streamed_tool_calls_are_assembled(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    args = {"q": "needle in a long haystack", "paths": ["src", "tests"], "limit": 10}
    srv.reply_tool_calls(
        [
            FakeToolCall("grep", args, id="toolu_a"),
            FakeToolCall("read", {"path": "x.py"}, id="toolu_b"),
        ],
        text="Looking.",
    )
    chunks, final = drain(model.stream(ask(tools=[GREP_TOOL])))
    assert "".join(chunks) == "Looking."
    assert [(c.id, c.name, c.arguments) for c in final.message.tool_calls] == [
        ("toolu_a", "grep", args),
        ("toolu_b", "read", {"path": "x.py"}),
    ]
    assert final.finish_reason == "tool_use"


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


def test_429_is_retried_then_succeeds(
    srv: FakeAnthropic, model: AnthropicChatModel, retries: list[RetryEvent]
) -> None:
    srv.fail(429, retry_after=0)
    srv.fail(429, retry_after=0)
    srv.reply_text("finally")
    assert model.complete(ask()).message.text == "finally"
    assert srv.request_count == 3
    assert [e.retry_number for e in retries] == [1, 2]
    assert all("rate_limit_error" in e.reason and e.delay == 0 for e in retries)


def test_500_and_overloaded_are_retried(
    srv: FakeAnthropic, model: AnthropicChatModel, retries: list[RetryEvent]
) -> None:
    srv.fail(500)
    srv.fail(529)
    srv.reply_text("recovered")
    assert model.complete(ask()).message.text == "recovered"
    assert srv.request_count == 3
    assert "overloaded_error" in retries[1].reason


def test_retries_are_bounded(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    for _ in range(10):
        srv.fail(529)
    with pytest.raises(ModelError, match=r"HTTP 529.*gave up after 4 attempts"):
        model.complete(ask())
    assert srv.request_count == 4


def test_streamed_429_is_retried(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.fail(429, retry_after=0)
    srv.reply_text("streamed after retry")
    chunks, final = drain(model.stream(ask()))
    assert "".join(chunks) == final.message.text == "streamed after retry"
    assert srv.request_count == 2


def test_overloaded_event_before_any_text_is_retried(
    srv: FakeAnthropic, model: AnthropicChatModel
) -> None:
    srv.fail_mid_stream("", error_type="overloaded_error", message="Overloaded")
    srv.reply_text("clean")
    chunks, _ = drain(model.stream(ask()))
    assert "".join(chunks) == "clean"
    assert srv.request_count == 2


def test_stream_error_after_text_is_raised(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.fail_mid_stream("half an answer", error_type="overloaded_error", message="Overloaded")
    seen: list[str] = []
    with pytest.raises(ModelError, match="error in the stream: overloaded_error"):
        for item in model.stream(ask()):
            assert isinstance(item, str)
            seen.append(item)
    assert "".join(seen) == "half an answer"
    assert srv.request_count == 1


# -- errors ------------------------------------------------------------------------


def test_context_length_error_is_typed(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.fail_context_length(tokens=208_310, limit=200_000)
    with pytest.raises(ContextLengthExceeded, match="208310 tokens > 200000"):
        model.complete(ask())
    assert srv.request_count == 1


def test_streamed_context_length_error_is_typed(
    srv: FakeAnthropic, model: AnthropicChatModel
) -> None:
    srv.fail_context_length()
    with pytest.raises(ContextLengthExceeded):
        list(model.stream(ask()))


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


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingCredentials, match="ANTHROPIC_API_KEY"):
        AnthropicChatModel(MODEL)


def test_key_comes_from_the_environment(
    srv: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    srv.reply_text("ok")
    with AnthropicChatModel(MODEL, base_url=srv.url) as chat:
        chat.complete(ask())
    assert srv.last_request.headers["authorization"] == "Bearer sk-ant-from-env"


def test_rejected_key(srv: FakeAnthropic, model: AnthropicChatModel) -> None:
    srv.fail(401)
    with pytest.raises(MissingCredentials, match=r"rejected the API key.*ANTHROPIC_API_KEY"):
        model.complete(ask())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with (
        AnthropicChatModel(MODEL, api_key="x", base_url=url, retry=FAST) as chat,
        pytest.raises(
            ModelError, match=r"anthropic server at http://127\.0\.0\.1:\d+ is unreachable"
        ),
    ):
        chat.complete(ask())


# -- properties --------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_srv() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def shared_model(shared_srv: FakeAnthropic) -> Iterator[AnthropicChatModel]:
    with AnthropicChatModel(MODEL, api_key="k", base_url=shared_srv.url, retry=FAST) as chat:
        yield chat


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunks=st.lists(st.text(min_size=1, max_size=12), max_size=6),
    arguments=st.lists(st.dictionaries(st.text(max_size=10), json_values, max_size=4), max_size=3),
)
def test_stream_and_complete_agree(
    shared_srv: FakeAnthropic,
    shared_model: AnthropicChatModel,
    chunks: list[str],
    arguments: list[dict[str, object]],
) -> None:
    """Whatever the text and arguments, both paths read the same reply off the wire."""
    text = "".join(chunks)
    calls = [FakeToolCall(f"tool{i}", args, id=f"toolu_{i}") for i, args in enumerate(arguments)]
    reply = Reply(text=text, tool_calls=tuple(calls), usage=(5, 5), chunks=tuple(chunks))
    shared_srv.enqueue(reply, reply)
    whole = shared_model.complete(ask())
    streamed_chunks, streamed = drain(shared_model.stream(ask()))
    assert "".join(streamed_chunks) == text
    for response in (whole, streamed):
        assert response.message.text == text
        assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
            (c.id, c.name, json.loads(json.dumps(c.arguments))) for c in calls
        ]
