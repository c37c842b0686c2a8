"""OpenAIChatModel against a local server speaking Chat Completions on the wire."""

from __future__ import annotations

import pytest

from tests import llm_cases
from tests.fakes import FakeOpenAI
from tests.llm_cases import FAST, GREP_TOOL, OPENAI, ask, drain
from threadline.errors import ContextLengthExceeded, ModelError
from threadline.llm import ChatRequest, RetryEvent
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.messages import Message, ToolCall

srv, retries, model = llm_cases.srv, llm_cases.retries, llm_cases.model  # fixtures


pytestmark = pytest.mark.parametrize("case", [OPENAI], ids=["openai"])


# -- replies ---------------------------------------------------------------------


def test_request_on_the_wire(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("Hello there.")
    model.complete(ask("hi", temperature=0.2, max_tokens=50))

    sent = srv.last_request
    assert sent.path == "/v1/chat/completions"
    body = sent.json()
    assert body["model"] == "gpt-4o"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 50  # a compatible server gets the classic name


def test_stream_asks_for_usage(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.reply_text("ok")
    drain(model.stream(ask()))
    assert srv.last_json["stream_options"] == {"include_usage": True}


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


def test_other_400_is_a_model_error(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(400, message="Invalid value for 'temperature'.")
    with pytest.raises(ModelError, match=r"HTTP 400.*temperature") as info:
        model.complete(ask())
    assert not isinstance(info.value, ContextLengthExceeded)
    assert isinstance(info.value.__cause__, Exception)


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


def test_unknown_model(srv: FakeOpenAI, model: OpenAIChatModel) -> None:
    srv.fail(404)
    with pytest.raises(ModelError, match=r"404.*model name"):
        model.complete(ask())
