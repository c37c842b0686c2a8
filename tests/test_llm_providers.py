"""What every SDK provider does the same, each against a local server speaking its wire format.

Streaming, retries, typed errors and keys behave alike for ``AnthropicChatModel`` and
``OpenAIChatModel`` (``threadline.llm.sdk_model`` holds what they share); each test
runs once per provider. What differs (the wire format) is in ``test_llm_<provider>.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import llm_cases
from tests.fakes import FakeServer, FakeToolCall, Reply
from tests.live_server import free_port
from tests.llm_cases import CASES, FAST, GREP_TOOL, ProviderCase, ask, drain
from threadline.errors import ContextLengthExceeded, MissingCredentials, ModelError
from threadline.llm import ChatModel, RetryEvent

srv, retries, model = llm_cases.srv, llm_cases.retries, llm_cases.model  # fixtures


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> ProviderCase:
    return request.param  # type: ignore[no-any-return]


# -- replies ---------------------------------------------------------------------


def test_is_a_chat_model(model: Any) -> None:
    assert isinstance(model, ChatModel)


def test_plain_reply(case: ProviderCase, srv: Any, model: Any) -> None:
    srv.reply_text("Hello there.", usage=(12, 3))
    response = model.complete(ask())

    assert response.message.role == "assistant"
    assert response.message.text == "Hello there."
    assert response.message.tool_calls == []
    assert response.model == response.message.model == case.model
    assert response.finish_reason == case.stop_finish
    assert srv.last_request.headers["authorization"] == "Bearer test"
    body = srv.last_json
    assert "tools" not in body and "tool_choice" not in body and "stream" not in body


def test_streamed_reply(case: ProviderCase, srv: Any, model: Any) -> None:
    srv.reply_text("The quick brown fox jumps.", usage=(20, 6))
    chunks, final = drain(model.stream(ask()))

    assert len(chunks) > 1
    assert "".join(chunks) == final.message.text == "The quick brown fox jumps."
    assert final.usage.input_tokens == 20
    assert final.usage.output_tokens == 6  # Anthropic: from message_delta, not message_start
    assert final.message.usage == final.usage
    assert final.finish_reason == case.stop_finish
    assert srv.last_json["stream"] is True


def test_streamed_tool_calls_are_assembled(case: ProviderCase, srv: Any, model: Any) -> None:
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
    assert final.finish_reason == case.tool_finish


# -- retries -----------------------------------------------------------------------


def test_429_is_retried_then_succeeds(
    case: ProviderCase, srv: Any, model: Any, retries: list[RetryEvent]
) -> None:
    srv.fail(429, retry_after=0)
    srv.fail(429, retry_after=0)
    srv.reply_text("finally")
    assert model.complete(ask()).message.text == "finally"
    assert srv.request_count == 3
    assert [e.retry_number for e in retries] == [1, 2]
    assert all("HTTP 429" in e.reason and e.delay == 0 for e in retries)


def test_retries_are_bounded(srv: Any, model: Any) -> None:
    for _ in range(10):
        srv.fail(500)
    with pytest.raises(ModelError, match=r"HTTP 500.*gave up after 4 attempts"):
        model.complete(ask())
    assert srv.request_count == FAST.max_retries + 1


def test_streamed_429_is_retried(srv: Any, model: Any) -> None:
    srv.fail(429, retry_after=0)
    srv.reply_text("streamed after retry")
    chunks, final = drain(model.stream(ask()))
    assert "".join(chunks) == final.message.text == "streamed after retry"
    assert srv.request_count == 2


def test_stream_error_before_any_text_is_retried(srv: Any, model: Any) -> None:
    srv.fail_mid_stream("", error_type="overloaded_error", message="upstream hiccup")
    srv.reply_text("clean")
    chunks, _ = drain(model.stream(ask()))
    assert "".join(chunks) == "clean"
    assert srv.request_count == 2


def test_stream_error_after_text_is_raised(srv: Any, model: Any) -> None:
    srv.fail_mid_stream("half an answer", error_type="overloaded_error", message="upstream died")
    seen: list[str] = []
    with pytest.raises(ModelError, match=r"error in the stream: .*upstream died"):
        for item in model.stream(ask()):
            assert isinstance(item, str)
            seen.append(item)
    assert "".join(seen) == "half an answer"
    assert srv.request_count == 1  # text was shown: no silent retry


# -- errors ------------------------------------------------------------------------


def test_streamed_context_length_error_is_typed(srv: Any, model: Any) -> None:
    srv.fail_context_length()
    with pytest.raises(ContextLengthExceeded):
        list(model.stream(ask()))
    assert srv.request_count == 1  # never retried


def test_missing_key_names_the_variable(
    case: ProviderCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(case.key_env, raising=False)
    with pytest.raises(MissingCredentials, match=case.key_env):
        case.model_class(case.model)


def test_key_comes_from_the_environment(
    case: ProviderCase, srv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(case.key_env, "sk-from-env")
    srv.reply_text("ok")
    with case.model_class(case.model, base_url=srv.url) as chat:
        chat.complete(ask())
    assert srv.last_request.headers["authorization"] == "Bearer sk-from-env"


def test_rejected_key(case: ProviderCase, srv: Any, model: Any) -> None:
    srv.fail(401)
    with pytest.raises(MissingCredentials, match=rf"rejected the API key.*{case.key_env}"):
        model.complete(ask())
    assert srv.request_count == 1


def test_unreachable_server(case: ProviderCase) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    events: list[RetryEvent] = []
    with (
        case.model_class(
            case.model,
            api_key="x",
            base_url=url,
            provider="elsewhere",
            retry=FAST,
            on_retry=events.append,
        ) as chat,
        pytest.raises(
            ModelError, match=r"elsewhere server at http://127\.0\.0\.1:\d+/v1 is unreachable"
        ),
    ):
        chat.complete(ask())
    assert len(events) == FAST.max_retries  # connection errors are retried, boundedly


# -- properties --------------------------------------------------------------------


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def shared(request: pytest.FixtureRequest) -> Iterator[tuple[ProviderCase, FakeServer, Any]]:
    """One server and model per provider for the whole module (hypothesis runs many examples)."""
    case: ProviderCase = request.param
    with (
        case.server() as server,
        case.model_class(case.model, api_key="k", base_url=server.url, retry=FAST) as chat,
    ):
        yield case, server, chat


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
    shared: tuple[ProviderCase, FakeServer, Any],
    chunks: list[str],
    arguments: list[dict[str, object]],
) -> None:
    """Whatever the text and arguments, both paths read the same reply off the wire."""
    _, server, chat = shared
    text = "".join(chunks)
    calls = [FakeToolCall(f"tool{i}", args, id=f"call_{i}") for i, args in enumerate(arguments)]
    reply = Reply(text=text, tool_calls=tuple(calls), usage=(5, 5), chunks=tuple(chunks))
    server.enqueue(reply, reply)
    whole = chat.complete(ask())
    streamed_chunks, streamed = drain(chat.stream(ask()))
    assert "".join(streamed_chunks) == text
    for response in (whole, streamed):
        assert response.message.text == text
        assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
            (c.id, c.name, json.loads(json.dumps(c.arguments))) for c in calls
        ]
