"""The LLM and hybrid summarizers, against a local server speaking the OpenAI wire format."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes import FakeOpenAI
from threadline import ContextPolicy, Message, ToolCall, open_store
from threadline.catalog import register_model
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.llm import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    HybridSummarizer,
    LLMSummarizer,
    append_values,
    clean_output,
    make_summarizer,
)
from threadline.compaction.snapshot import SECTION_TITLES, parse, words
from threadline.compaction.values import Value
from threadline.errors import ConfigError, ModelError, UsageError
from threadline.llm.base import ChatModel, ChatRequest, ChatResponse
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.tokens import counter_for

TINY_MODEL = "tiny-summarizer-test"
TINY_WINDOW = 3000

SNAPSHOT = """## Files Modified
- src/mod0.py: added retry logic

## Key Decisions
- Use exponential backoff

## Important Values
- https://api.example.com/v2/items

## Current State
- Tests pass; next is the docs

## Pending Tasks
- Update README.md
"""

PLANTED = [
    "/srv/app/config/settings.yaml",
    "https://api.example.com/v2/items",
    "550e8400-e29b-41d4-a716-446655440000",
    "ConnectionRefusedError: [Errno 111] Connection refused",
    "max_connections=250",
]


class Recording:
    """A ChatModel wrapper that keeps every request it forwards."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.model = inner.model
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return self.inner.complete(request)

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        raise AssertionError("the summarizer does not stream")


@pytest.fixture
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def model_for(srv: FakeOpenAI, name: str = "gpt-4o") -> Recording:
    return Recording(OpenAIChatModel(name, api_key="test", base_url=srv.url, max_retries=0))


def coding_messages(n: int = 3) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        call = ToolCall(id=f"c{i}", name="edit_file", arguments={"path": f"src/mod{i}.py"})
        out += [
            Message.user(f"Please fix the bug in src/mod{i}.py; the server at {PLANTED[1]} fails."),
            Message.assistant("Editing it now.", tool_calls=[call]),
            Message.tool(
                f"edited src/mod{i}.py\n{PLANTED[3]}\nrequest id {PLANTED[2]}",
                tool_call_id=call.id,
                name="edit_file",
            ),
            Message.assistant(f"I set {PLANTED[4]} in {PLANTED[0]} and it works."),
        ]
    return out


# -- the request ---------------------------------------------------------------------------


def test_request_has_the_structured_prompt_and_the_reference_settings(srv: FakeOpenAI) -> None:
    srv.reply_text(SNAPSHOT, usage=(1234, 56))
    model = model_for(srv)
    result = LLMSummarizer(model).summarize(coding_messages(), max_words=400)
    # what the summarizer asked of the model
    (req,) = model.requests
    assert req.temperature == 0.3
    assert req.max_tokens == DEFAULT_MAX_OUTPUT_TOKENS == 4096
    assert req.tool_choice == "none" and list(req.tools) == []
    # what went over the wire
    body = srv.last_json
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 4096
    assert "tools" not in body  # no tools at all: a model cannot call what it was not given
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    for title in SECTION_TITLES.values():
        assert f"## {title}" in system["content"]
    assert "verbatim" in system["content"] and "under 400 words" in system["content"]
    assert '"ok"' in system["content"]  # bare confirmations are dropped
    assert "Update this snapshot" not in user["content"]
    assert PLANTED[0] in user["content"] and "edit_file" in user["content"]
    # the reply, normalised, with the provider's usage
    assert result.input_tokens == 1234 and result.output_tokens == 56
    assert result.summarizer == "llm"
    assert parse(result.text).files_modified[0].text == "src/mod0.py: added retry logic"
    assert result.retention.total >= len(PLANTED)


def test_previous_snapshot_is_updated_not_replaced(srv: FakeOpenAI) -> None:
    srv.reply_text(SNAPSHOT)
    model = model_for(srv)
    LLMSummarizer(model).summarize(coding_messages(1), previous="## Current State\n- step one")
    user = srv.last_json["messages"][1]["content"]
    assert "Update this snapshot with the new messages" in user
    assert "- step one" in user


def test_reply_is_normalised_to_five_sections_under_the_limit(srv: FakeOpenAI) -> None:
    chatter = "Here is the snapshot:\n```markdown\n" + SNAPSHOT + "- extra " * 300 + "\n```\nDone."
    srv.reply_text(chatter)
    result = LLMSummarizer(model_for(srv)).summarize(coding_messages(1), max_words=120)
    assert words(result.text) <= 120
    assert "```" not in result.text and "Here is the snapshot" not in result.text
    assert [line for line in result.text.splitlines() if line.startswith("## ")] == [
        f"## {t}" for t in SECTION_TITLES.values()
    ]


def test_unstructured_reply_is_kept_as_current_state() -> None:
    text, snap = clean_output("The user fixed src/a.py.\nNext: run tests.", 600)
    assert [b.text for b in snap.current_state] == ["The user fixed src/a.py.", "Next: run tests."]
    assert "src/a.py" in text


def test_provider_failure_and_tool_calls_are_model_errors(srv: FakeOpenAI) -> None:
    srv.fail(500)
    with pytest.raises(ModelError):
        LLMSummarizer(model_for(srv)).summarize(coding_messages(1))
    srv.reply_tool_call("grep", {"q": "x"})
    with pytest.raises(ModelError, match="tool use was forbidden"):
        LLMSummarizer(model_for(srv)).summarize(coding_messages(1))


# -- fitting the summarizer's own window ---------------------------------------------------


def test_input_larger_than_the_window_is_chunked_and_folded(srv: FakeOpenAI) -> None:
    register_model(TINY_MODEL, context_window=TINY_WINDOW, max_output=600, tokenizer="o200k_base")
    for i in range(40):
        srv.reply_text(SNAPSHOT.replace("Tests pass", f"fold {i}"), usage=(100, 10))
    model = model_for(srv, TINY_MODEL)
    summarizer = LLMSummarizer(model)
    assert summarizer.max_output_tokens == 600
    messages = coding_messages(40)  # ~ 10,000 tokens of transcript
    for i, m in enumerate(messages):
        m.seq = i + 1
    huge = Message.tool("line of log output\n" * 2000, tool_call_id="cbig", name="read_log")
    huge.seq = len(messages) + 1
    big_call = Message.assistant("", tool_calls=[ToolCall(id="cbig", name="read_log")])
    result = summarizer.summarize([*messages, big_call, huge], max_words=200)
    folds = len(model.requests)
    assert folds > 3
    counter = counter_for(TINY_MODEL)
    for req in model.requests:
        assert req.max_tokens == 600
        assert counter.count_messages(list(req.messages)) + 600 <= TINY_WINDOW
    users = [req.messages[1].text for req in model.requests]
    # each fold after the first carries the snapshot the previous fold returned
    assert "Update this snapshot" not in users[0]
    for i in range(1, folds):
        assert f"fold {i - 1}" in users[i]
    # every message reached the model, in order; the huge result in several parts
    labels = [int(s) for u in users for s in re.findall(r"^\[#(\d+) ", u, re.M)]
    assert sorted(set(labels)) == list(range(1, huge.seq + 1))
    assert labels == sorted(labels)
    assert sum(u.count("(part ") for u in users) >= 2
    assert result.input_tokens == 100 * folds and result.output_tokens == 10 * folds
    assert f"fold {folds - 1}" in result.text


def test_a_window_too_small_for_anything_is_a_config_error(srv: FakeOpenAI) -> None:
    register_model("micro-summarizer-test", context_window=800, max_output=100)
    with pytest.raises(ConfigError, match="window"):
        LLMSummarizer(model_for(srv, "micro-summarizer-test")).summarize(coding_messages(1))
    assert srv.request_count == 0


# -- the hybrid ------------------------------------------------------------------------------


def test_hybrid_appends_the_values_the_model_dropped(srv: FakeOpenAI) -> None:
    srv.reply_text(SNAPSHOT, usage=(500, 80))  # keeps only the URL of the planted values
    model = model_for(srv)
    hybrid = HybridSummarizer(LLMSummarizer(model), ExtractiveSummarizer())
    result = hybrid.summarize(coding_messages(), max_words=600)
    assert result.summarizer == "hybrid"
    assert result.input_tokens == 500 and result.output_tokens == 80
    snap = parse(result.text)
    important = [b.text for b in snap.important_values]
    for value in PLANTED:
        assert value in result.text, value
    assert important[0] == "https://api.example.com/v2/items"  # the model's own line first
    assert PLANTED[2] in important  # appended verbatim, as its own bullet
    assert words(result.text) <= 600
    assert result.retention.ratio > 0.9
    # the model was asked for fewer words, keeping room for the values
    assert "under 480 words" in srv.last_json["messages"][0]["content"]


def test_hybrid_appending_is_bounded() -> None:
    text, snap = clean_output(SNAPSHOT, 600)
    many = [Value("path", f"src/pkg/module_{i}.py") for i in range(50)]
    out, added = append_values(text, snap, many, max_values=7, max_words=600)
    assert len(added) == 7 and all(f"- {v.text}" in out for v in added)
    out, added = append_values(text, snap, many, max_values=50, max_words=words(text) + 5)
    assert len(added) == 5 and words(out) <= words(text) + 5
    assert out.index("module_0") < out.index("## Current State")


def test_make_summarizer_defaults(srv: FakeOpenAI) -> None:
    model = model_for(srv)
    assert isinstance(make_summarizer(), ExtractiveSummarizer)
    assert isinstance(make_summarizer(model=model), HybridSummarizer)
    assert isinstance(make_summarizer("llm", model), LLMSummarizer)
    assert isinstance(make_summarizer("extractive", model), ExtractiveSummarizer)
    with pytest.raises(UsageError, match="needs a chat model"):
        make_summarizer("hybrid")
    with pytest.raises(UsageError, match="unknown summarizer"):
        make_summarizer("magic", model)  # type: ignore[arg-type]


# -- through the compactor -------------------------------------------------------------------


def test_compactor_with_the_hybrid_records_tokens_and_model(srv: FakeOpenAI) -> None:
    srv.reply_text(SNAPSHOT, usage=(900, 120))
    store = open_store("memory://")
    s = store.create_session(model="gpt-4o")
    s.append(coding_messages(8))
    comp = Compactor(make_summarizer(model=model_for(srv)), policy=ContextPolicy())
    r = comp.compact(s, force=True, keep_turns=1)  # eight short turns fit the kept share
    assert r.checkpoint is not None
    md: dict[str, Any] = r.checkpoint.metadata
    assert md["summarizer"] == "hybrid" and md["summarizer_model"] == "gpt-4o"
    assert (md["input_tokens"], md["output_tokens"]) == (900, 120)
    assert md["retention"]["kept"] <= md["retention"]["total"]


def test_compactor_survives_a_provider_outage(srv: FakeOpenAI) -> None:
    srv.fail(503)
    store = open_store("memory://")
    s = store.create_session(model="gpt-4o")
    s.append(coding_messages(8))
    failed: list[Any] = []
    comp = Compactor(
        make_summarizer("llm", model_for(srv)),
        policy=ContextPolicy(max_messages_before_summary=10, preserve_fill=False),
        hooks={"compaction_failed": lambda *a: failed.append(a)},
    )
    r = comp.compact_if_needed(s)
    assert r.status == "failed" and "503" in (r.error or "")
    assert failed and s.latest_checkpoint() is None
