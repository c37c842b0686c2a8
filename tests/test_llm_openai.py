"""OpenAIChatModel against a local server speaking Chat Completions on the wire."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeOpenAI, FakeToolCall, Reply
from threadline.errors import ContextLengthExceeded, MissingCredentials, ModelError
from threadline.llm import ChatModel, ChatRequest, ChatResponse, RetryEvent, RetryPolicy
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.messages import Message, ToolCall

FAST = RetryPolicy(base_delay=0.001, max_delay=0.005)
"""Real backoff shape, tiny delays."""
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
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def retries() -> list[RetryEvent]:
    return []


@pytest.fixture
def model(srv: FakeOpenAI, retries: list[RetryEvent]) -> Iterator[OpenAIChatModel]:
    chat = OpenAIChatModel(
        "gpt-4o", api_key="test", base_url=srv.url, retry=FAST, on_retry=retries.append
    )
    yield chat
    chat.close()


def ask(text: str = "hi", **kw: object) -> ChatRequest:
    return ChatRequest([Message.system("You are terse."), Message.user(text)], **kw)  # type: ignore[arg-type]


def drain(stream: Iterator[str | ChatResponse]) -> tuple[list[str], ChatResponse]:
    items = list(stream)
    final = items[-1]
    assert isinstance(final, ChatResponse)
    chunks = items[:-1]
    assert all(isinstance(c, str) for c in chunks)
    return [c for c in chunks if isinstance(c, str)], final


# -- replies ---------------------------------------------------------------------


def test_is_a_chat_model(model: OpenAIChatModel) -> None:
    assert isinstance(model, ChatModel)


def test_plain_reply(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("Hello there.", usage=(12, 3))
    response = model.complete(ask("hi", temperature=0.2, max_tokens=50))

    assert response.message.role == "assistant"
    assert response.message.text == "Hello there."
    assert response.message.tool_calls == []
    assert response.model == response.message.model == "gpt-4o"
    assert response.finish_reason == "stop"

    sent = srv.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer test"
    body = sent.json()
    assert body["model"] == "gpt-4o"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 50  # a compatible server gets the classic name
    assert "tools" not in body and "tool_choice" not in body and "stream" not in body


def test_streamed_reply(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("The quick brown fox jumps.", usage=(20, 6))
    chunks, final = drain(model.stream(ask()))

    assert len(chunks) > 1
    assert "".join(chunks) == final.message.text == "The quick brown fox jumps."
    assert final.usage.input_tokens == 20 and final.usage.output_tokens == 6
    assert final.message.usage == final.usage
    assert final.finish_reason == "stop"
    body = srv.last_json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_usage_recorded(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("ok", usage=(1500, 42), cached_tokens=1024)
    message = model.complete(ask()).message
    assert message.usage is not None
    assert message.usage.input_tokens == 1500
    assert message.usage.output_tokens == 42
    assert message.usage.cached_tokens == 1024


def test_tool_call_round_trip(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_tool_call("grep", {"q": "TODO"}, id="call_1", usage=(30, 8))
    srv.reply_text("Found 3 TODOs.")
    history = [Message.user("find the TODOs")]

    first = model.complete(ChatRequest(history, tools=[GREP_TOOL]))
    assert first.finish_reason == "tool_calls"
    assert first.message.text == ""
    assert first.message.tool_calls == [ToolCall(id="call_1", name="grep", arguments={"q": "TODO"})]
    assert srv.last_json["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "grep",
                "description": "Search files for a pattern.",
                "parameters": GREP_TOOL["parameters"],
            },
        }
    ]

    history += [first.message, Message.tool("a.py:1 TODO\nb.py:7 TODO", tool_call_id="call_1")]
    second = model.complete(ChatRequest(history, tools=[GREP_TOOL]))
    assert second.message.text == "Found 3 TODOs."
    sent = srv.last_json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"q":"TODO"}'},
            }
        ],
    }
    assert sent[2] == {
        "role": "tool",
        "content": "a.py:1 TODO\nb.py:7 TODO",
        "tool_call_id": "call_1",
    }


def test_streamed_tool_calls_are_assembled(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    args = {"q": "needle in a long haystack", "paths": ["src", "tests"], "limit": 10}
    srv.reply_tool_calls(
        [
            FakeToolCall("grep", args, id="call_a"),
            FakeToolCall("read", {"path": "x.py"}, id="call_b"),
        ],
        text="Looking.",
    )
    chunks, final = drain(model.stream(ask(tools=[GREP_TOOL])))
    assert "".join(chunks) == "Looking."
    assert [(c.id, c.name, c.arguments) for c in final.message.tool_calls] == [
        ("call_a", "grep", args),
        ("call_b", "read", {"path": "x.py"}),
    ]
    assert final.finish_reason == "tool_calls"


def test_malformed_tool_arguments_are_kept_verbatim(
    srv: FakeOpenAI, model: OpenAIChatModel
) -> None:
    srv.reply_tool_call("grep", '{"q": "unterminated', id="call_x")
    call = model.complete(ask(tools=[GREP_TOOL])).message.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"q": "unterminated'


def test_tool_choice_passes_through(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("no tools used")
    model.complete(ask(tools=[GREP_TOOL], tool_choice="none"))
    assert srv.last_json["tool_choice"] == "none"
    srv.reply_text("forced")
    model.complete(ask(tools=[GREP_TOOL], tool_choice="grep"))
    assert srv.last_json["tool_choice"] == {"type": "function", "function": {"name": "grep"}}


def test_extra_parameters_reach_the_body(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("ok")
    model.complete(ChatRequest([Message.user("hi")], extra={"seed": 7, "top_p": 0.5}))
    assert srv.last_json["seed"] == 7 and srv.last_json["top_p"] == 0.5


def test_max_completion_tokens_dialect(srv: FakeOpenAI) -> None:
    srv.reply_text("ok")
    with OpenAIChatModel(
        "gpt-5", api_key="k", base_url=srv.url, max_tokens_param="max_completion_tokens"
    ) as chat:
        chat.complete(ask(max_tokens=99))
    assert srv.last_json["max_completion_tokens"] == 99 and "max_tokens" not in srv.last_json


def test_reported_model_name_is_kept(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("ok", model="gpt-4o-2024-08-06")
    assert model.complete(ask()).message.model == "gpt-4o-2024-08-06"


# -- retries -----------------------------------------------------------------------


def test_429_is_retried_then_succeeds(
    srv: FakeOpenAI, model: OpenAIChatModel, retries: list[RetryEvent]
) -> None:
    srv.fail(429, retry_after=0)
    srv.fail(429, retry_after=0)
    srv.reply_text("finally")
    assert model.complete(ask()).message.text == "finally"
    assert srv.request_count == 3
    assert [e.retry_number for e in retries] == [1, 2]
    assert all("429" in e.reason and e.delay == 0 for e in retries)


def test_retry_after_is_honoured(
    srv: FakeOpenAI, model: OpenAIChatModel, retries: list[RetryEvent]
) -> None:
    srv.fail(429, retry_after=0.02)
    srv.reply_text("ok")
    model.complete(ask())
    assert [e.delay for e in retries] == [0.02]


def test_500_is_retried(srv: FakeOpenAI, model: OpenAIChatModel, retries: list[RetryEvent]) -> None:
    srv.fail(500)
    srv.fail(503)
    srv.reply_text("recovered")
    assert model.complete(ask()).message.text == "recovered"
    assert srv.request_count == 3
    assert all(0 < e.delay <= FAST.max_delay for e in retries)


def test_retries_are_bounded(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    for _ in range(10):
        srv.fail(500)
    with pytest.raises(ModelError, match=r"HTTP 500.*gave up after 4 attempts"):
        model.complete(ask())
    assert srv.request_count == FAST.max_retries + 1


def test_a_long_retry_after_fails_at_once(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(429, retry_after=3600)
    with pytest.raises(ModelError, match="asked to wait 3600s"):
        model.complete(ask())
    assert srv.request_count == 1


def test_a_dropped_connection_is_retried(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.disconnect()
    srv.reply_text("second try")
    assert model.complete(ask()).message.text == "second try"
    assert srv.request_count == 2


def test_streamed_429_is_retried(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(429, retry_after=0)
    srv.reply_text("streamed after retry")
    chunks, final = drain(model.stream(ask()))
    assert "".join(chunks) == final.message.text == "streamed after retry"
    assert srv.request_count == 2


def test_stream_error_before_any_text_is_retried(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail_mid_stream("", error_type="server_error", message="upstream hiccup")
    srv.reply_text("clean")
    chunks, _ = drain(model.stream(ask()))
    assert "".join(chunks) == "clean"
    assert srv.request_count == 2


def test_stream_error_after_text_is_raised(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail_mid_stream("half an answer", error_type="server_error", message="upstream died")
    seen: list[str] = []
    with pytest.raises(ModelError, match="upstream died"):
        for item in model.stream(ask()):
            assert isinstance(item, str)
            seen.append(item)
    assert "".join(seen) == "half an answer"
    assert srv.request_count == 1  # text was shown: no silent retry


# -- errors ------------------------------------------------------------------------


def test_context_length_error_is_typed(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail_context_length(limit=128_000, requested=140_000)
    with pytest.raises(ContextLengthExceeded, match="maximum context length is 128000"):
        model.complete(ask())
    assert srv.request_count == 1  # never retried


@pytest.mark.parametrize(
    ("message", "error_type", "code"),
    [
        (  # vLLM
            "This model's maximum context length is 4096 tokens. However, you requested "
            "5000 tokens (4000 in the messages, 1000 in the completion).",
            "BadRequestError",
            None,
        ),
        (  # llama.cpp server
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            None,
        ),
    ],
)
def test_compatible_servers_context_errors_are_typed(
    srv: FakeOpenAI, model: OpenAIChatModel, message: str, error_type: str, code: str | None
) -> None:
    srv.fail(400, message=message, error_type=error_type, code=code)
    with pytest.raises(ContextLengthExceeded):
        model.complete(ask())


def test_streamed_context_length_error_is_typed(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail_context_length()
    with pytest.raises(ContextLengthExceeded):
        list(model.stream(ask()))


def test_other_400_is_a_model_error(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(400, message="Invalid value for 'temperature'.")
    with pytest.raises(ModelError, match=r"HTTP 400.*temperature") as info:
        model.complete(ask())
    assert not isinstance(info.value, ContextLengthExceeded)
    assert isinstance(info.value.__cause__, Exception)


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingCredentials, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o")


def test_key_comes_from_the_environment(srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    srv.reply_text("ok")
    with OpenAIChatModel("gpt-4o", base_url=srv.url) as chat:
        chat.complete(ask())
    assert srv.last_request.headers["authorization"] == "Bearer sk-from-env"


def test_keyless_local_server(srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    srv.reply_text("local")
    with OpenAIChatModel(
        "llama3.1",
        base_url=srv.url,
        provider="ollama",
        api_key_env="OLLAMA_API_KEY",
        require_api_key=False,
    ) as chat:
        assert chat.complete(ask()).message.text == "local"


def test_rejected_key(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(401)
    with pytest.raises(MissingCredentials, match=r"rejected the API key.*OPENAI_API_KEY"):
        model.complete(ask())
    assert srv.request_count == 1


def test_unknown_model(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(404)
    with pytest.raises(ModelError, match=r"404.*model name"):
        model.complete(ask())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    events: list[RetryEvent] = []
    with (
        OpenAIChatModel(
            "llama3.1",
            api_key="x",
            base_url=url,
            provider="ollama",
            retry=FAST,
            on_retry=events.append,
        ) as chat,
        pytest.raises(
            ModelError, match=r"ollama server at http://127\.0\.0\.1:\d+/v1 is unreachable"
        ),
    ):
        chat.complete(ask())
    assert len(events) == FAST.max_retries  # connection errors are retried, boundedly


# -- properties --------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def shared_model(shared_srv: FakeOpenAI) -> Iterator[OpenAIChatModel]:
    with OpenAIChatModel("gpt-4o", api_key="k", base_url=shared_srv.url, retry=FAST) as chat:
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
    shared_srv: FakeOpenAI,
    shared_model: OpenAIChatModel,
    chunks: list[str],
    arguments: list[dict[str, object]],
) -> None:
    """Whatever the text and arguments, both paths read the same reply off the wire."""
    text = "".join(chunks)
    calls = [FakeToolCall(f"tool{i}", args, id=f"call_{i}") for i, args in enumerate(arguments)]
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
