"""The LLM and hybrid extractors against a local server speaking OpenAI's wire format."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.fakes import FakeOpenAI
from threadline import Message, open_store
from threadline.errors import ModelError
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.memory import HybridExtractor, LLMExtractor, MemoryRecorder, open_memory

SAID = datetime(2024, 3, 1, tzinfo=UTC)
MESSAGES = [
    Message.user(
        "I moved to Porto in January, and I use neovim for everything.", name="Ana", seq=3
    ),
    Message.assistant("Nice! Porto is lovely.", seq=4),
]
ANSWER = {
    "entities": [
        {"name": "Ana", "kind": "person", "aliases": ["Ana Silva"]},
        {"name": "Porto", "kind": "place", "aliases": []},
        {"name": "neovim", "kind": "tool", "aliases": ["nvim"]},
    ],
    "facts": [
        {
            "seq": 3,
            "subject": "Ana",
            "statement": "Ana lives in Porto",
            "object": "Porto",
            "slot": "lives in",
            "kind": "fact",
            "confidence": 0.9,
        },
        {
            "seq": 3,
            "subject": "Ana",
            "statement": "Ana edits with neovim",
            "object": "neovim",
            "slot": "editor",
            "kind": "preference",
            "confidence": 1.5,
        },
        {
            "seq": 99,
            "subject": "Ana",
            "statement": "Ana was never said to have a cat",
            "object": None,
            "slot": None,
            "kind": "fact",
            "confidence": 1,
        },
        {"statement": "no seq at all"},
        "not an object",
    ],
    "relations": [{"source": "Ana", "label": "lives in", "target": "Porto"}],
}


@pytest.fixture
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def model(srv: FakeOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", api_key="test", base_url=srv.url, max_retries=0)


def test_llm_extractor_sends_numbered_turns_and_keeps_only_shown_seqs(srv: FakeOpenAI) -> None:
    srv.reply_text("```json\n" + json.dumps(ANSWER) + "\n```")
    out = LLMExtractor(model(srv)).extract(
        MESSAGES, scope="agent:a", session_id="s1", observed_at=SAID
    )
    sent = srv.last_json
    assert sent["messages"][0]["role"] == "system" and "JSON" in sent["messages"][0]["content"]
    assert "[3] Ana: I moved to Porto" in sent["messages"][1]["content"]
    assert "[4] assistant: Nice!" in sent["messages"][1]["content"]
    assert [f.statement for f in out.facts] == ["Ana lives in Porto", "Ana edits with neovim"]
    assert all((f.session_id, f.seq, f.observed_at) == ("s1", 3, SAID) for f in out.facts)
    assert out.facts[1].confidence == 1.0 and out.facts[1].kind == "preference"
    assert {e.name: e.kind for e in out.entities}["neovim"] == "tool"
    assert out.relations[0].target == "Porto"


def test_llm_extractor_reply_that_is_not_json_is_a_model_error(srv: FakeOpenAI) -> None:
    srv.reply_text("Sure! Ana lives in Porto.")
    with pytest.raises(ModelError, match="not JSON"):
        LLMExtractor(model(srv)).extract(MESSAGES, scope="agent:a", session_id="s1")


def test_hybrid_adds_model_facts_and_falls_back_when_the_model_fails(
    srv: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    hybrid = HybridExtractor(model(srv))
    srv.reply_text(json.dumps(ANSWER))
    out = hybrid.extract(MESSAGES, scope="agent:a", session_id="s1", observed_at=SAID)
    statements = [f.statement for f in out.facts]
    assert "Ana lives in Porto" in statements
    assert not any(s.startswith("Ana moved") for s in statements)  # the model's phrasing won
    assert [e.seq for e in out.episodes] == [3, 4]
    srv.fail(500)
    with caplog.at_level(logging.WARNING):
        fallback = hybrid.extract(MESSAGES, scope="agent:a", session_id="s1", observed_at=SAID)
    assert hybrid.failures == 1 and "kept the extractive" in caplog.text
    assert [f.seq for f in fallback.facts] == [3]  # the extractive facts survive
    assert [e.seq for e in fallback.episodes] == [3, 4]


def test_recorder_with_the_llm_extractor_stores_facts_with_provenance(
    srv: FakeOpenAI, tmp_path: object
) -> None:
    store = open_store("memory://")
    memory = open_memory(store)
    s = store.create_session(agent="ana")
    stored = s.append(
        [Message.user("I moved to Porto in January.", name="Ana"), Message.assistant("Nice!")]
    )
    answer = {
        "entities": [],
        "facts": [
            {
                "seq": 1,
                "subject": "Ana",
                "statement": "Ana lives in Porto",
                "slot": "lives in",
                "kind": "fact",
                "confidence": 0.9,
            }
        ],
        "relations": [],
    }
    srv.reply_text(json.dumps(answer))
    recorder = MemoryRecorder(
        memory, scope="agent:ana", extractor=LLMExtractor(model(srv)), threshold=1
    )
    assert recorder.observe(s, stored) == 0  # threshold reached: extracted at once
    (fact,) = memory.list_facts("agent:ana")
    assert (fact.statement, fact.session_id, fact.seq) == ("Ana lives in Porto", s.id, 1)
