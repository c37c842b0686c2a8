"""The sanity gate: a model-written snapshot worse than the offline one is not kept.

Against a local server speaking OpenAI's wire format: a reply that leaves a section
empty the messages had something for, or that keeps fewer exact values than the
extractive snapshot, gives way to the extractive snapshot, with a note in the
checkpoint's metadata; a sound reply is kept.
"""

from __future__ import annotations

import pytest

from tests.fakes import FakeOpenAI
from threadline import ContextPolicy, Message, ToolCall, open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.gate import FALLBACK_KEY, check
from threadline.compaction.llm import HybridSummarizer, LLMSummarizer
from threadline.compaction.snapshot import Snapshot, SummaryResult
from threadline.llm.openai_provider import OpenAIChatModel

URL = "https://api.example.com/v2/items"
SETTING = "max_connections=250"
SOUND = f"""## Files Modified
- src/mod0.py: retry added
- src/mod1.py: retry added

## Key Decisions
- Retry with backoff, because the server drops requests

## Important Values
- {URL}
- {SETTING}

## Current State
- The fix is in; the tests pass

## Pending Tasks
- Document the retry in README.md
"""
NO_FILES = SOUND.replace("- src/mod0.py: retry added\n- src/mod1.py: retry added\n", "")
PARAPHRASED = SOUND.replace(URL, "the items endpoint").replace(SETTING, "a higher limit")


@pytest.fixture
def srv(openai_server: FakeOpenAI) -> FakeOpenAI:
    return openai_server


def messages() -> list[Message]:
    out: list[Message] = []
    for i in range(6):
        call = ToolCall(
            id=f"c{i}",
            name="Edit",
            arguments={"file_path": f"src/mod{i % 2}.py", "old_string": "a", "new_string": "b"},
        )
        out += [
            Message.user(f"Add a retry to src/mod{i % 2}.py; {URL} drops requests."),
            Message.assistant("Adding it, because the server drops requests.", tool_calls=[call]),
            Message.tool("ok", tool_call_id=call.id, name="Edit"),
            Message.assistant(f"Done; I also set {SETTING}. Next: document it in README.md."),
        ]
    return out


def compact(srv: FakeOpenAI, reply: str, *, hybrid: bool = False) -> dict[str, object]:
    srv.reply_text(reply, usage=(700, 90))
    store = open_store("memory://")
    session = store.create_session(model="gpt-4o")
    session.append(messages())
    llm = LLMSummarizer(OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url, max_retries=0))
    summarizer = HybridSummarizer(llm) if hybrid else llm
    result = Compactor(summarizer, policy=ContextPolicy()).compact(
        session, force=True, keep_recent=2, keep_turns=0
    )
    assert result.checkpoint is not None
    return {"summary": result.checkpoint.summary, **result.checkpoint.metadata}


def test_a_snapshot_with_an_empty_section_falls_back(srv: FakeOpenAI) -> None:
    md = compact(srv, NO_FILES)
    note = md[FALLBACK_KEY]
    assert isinstance(note, dict)
    assert note["from"] == "llm" and any("Files Modified" in r for r in note["reasons"])
    assert (note["input_tokens"], note["output_tokens"]) == (700, 90)  # what the model cost
    assert md["summarizer"] == "extractive"
    assert "`src/mod0.py`" in str(md["summary"])


def test_a_snapshot_that_loses_exact_values_falls_back(srv: FakeOpenAI) -> None:
    md = compact(srv, PARAPHRASED)
    note = md[FALLBACK_KEY]
    assert isinstance(note, dict)
    assert any("retention" in r for r in note["reasons"])
    assert note["model_retention"] < note["extractive_retention"]
    assert URL in str(md["summary"]) and SETTING in str(md["summary"])


def test_a_sound_hybrid_snapshot_is_kept(srv: FakeOpenAI) -> None:
    md = compact(srv, SOUND, hybrid=True)
    assert FALLBACK_KEY not in md
    assert md["summarizer"] == "hybrid"
    assert "Retry with backoff" in str(md["summary"])


def test_the_verdict_compares_with_the_extractive_snapshot() -> None:
    extractive = ExtractiveSummarizer().summarize(messages())
    empty = SummaryResult.counted(Snapshot().render(), Snapshot(), [], summarizer="llm")
    verdict = check(empty, extractive)
    assert not verdict.passed
    assert "Files Modified" in verdict.empty_sections
    assert verdict.model_retention < verdict.extractive_retention
    assert check(extractive, extractive).passed
