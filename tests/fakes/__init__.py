"""Fakes for tests: local HTTP servers that speak each provider's real wire format.

``FakeOpenAI`` (Chat Completions) and ``FakeAnthropic`` (Messages) are real
servers on 127.0.0.1 that the official SDKs talk to; a test scripts their
answers and reads back what was sent. They are shared by the provider, agent
loop and summarizer tests.

    with FakeOpenAI() as srv:
        srv.reply_text("hi", usage=(10, 2))
        srv.reply_tool_call("grep", {"q": "x"})
        srv.fail(429, retry_after=0)
        srv.fail_context_length()
        model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url)
        ...
        assert srv.last_json["tools"][0]["function"]["name"] == "grep"

    with FakeAnthropic() as srv:  # scripted the same way
        srv.reply_text("hi", usage=(10, 2))
        model = AnthropicChatModel("claude-sonnet-4-5", api_key="test", base_url=srv.url)
"""

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.base import FakeServer, FakeToolCall, RecordedRequest, Reply
from tests.fakes.openai_server import FakeOpenAI

__all__ = ["FakeAnthropic", "FakeOpenAI", "FakeServer", "FakeToolCall", "RecordedRequest", "Reply"]
