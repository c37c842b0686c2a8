"""The pre-compaction flush: facts are saved before the summary that replaces their turns.

An agent with memory hooks ``AgentMemory.before_compaction`` into its compactor's
``before_compaction`` event; these tests watch the order from inside the summarizer
call, which runs after that event and before the checkpoint is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.backends import clean_store
from threadline import ContextPolicy, Message, open_store
from threadline.agent import Agent, AgentConfig, MemoryConfig
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import SummaryResult
from threadline.llm.scripted import ScriptedChatModel
from threadline.memory import is_signal
from threadline.store.protocol import Session, Store

FACTS = (
    "I'm Dana Whitfield and I work at Acme on the Orbit billing service.",
    "I prefer PostgreSQL for new services and I always use pytest.",
    "We decided to deploy Orbit to Fly.io in Frankfurt.",
    "Priya Raman owns the invoices module.",
)


class WatchingSummarizer:
    """The extractive summarizer, recording what memory and the store hold when called."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.inner = ExtractiveSummarizer()
        self.seen: list[dict[str, Any]] = []
        self.session: Session | None = None
        """The session being compacted (default: the one whose turn is running)."""

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None = None, max_words: int = 600
    ) -> SummaryResult:
        memory = self.agent.memory
        assert memory is not None
        session = self.session or memory._session
        self.seen.append(
            {
                "facts": memory.memory.list_facts(memory.scope),
                "checkpoints": len(session.checkpoints()) if session is not None else None,
                "covered": [m.seq for m in messages],
                "pending": memory.recorder.pending(session) if session is not None else None,
            }
        )
        return self.inner.summarize(messages, previous=previous, max_words=max_words)


def make_agent(store: Store, **policy: Any) -> tuple[Agent, WatchingSummarizer]:
    config = AgentConfig(
        name="flusher",
        model="openai/gpt-4o",
        summarizer="extractive",
        context=ContextPolicy(**policy),
        memory=MemoryConfig(enabled=True, auto_extract=False, extraction_threshold=1),
    )
    agent = Agent(config, store=store, model=ScriptedChatModel(default="Noted."))
    watcher = WatchingSummarizer(agent)
    agent._compactor = agent._hook_memory(Compactor(watcher, policy=config.context))
    return agent, watcher


def statements_from(facts: list[Any], session: Session, up_to: int) -> set[int]:
    return {
        f.seq for f in facts if f.session_id == session.id and f.seq is not None and f.seq <= up_to
    }


MEMORY_BACKENDS = ["memory", "sqlite", "jsonl", "postgres"]
"""Every backend that keeps memory (Redis declares it unsupported)."""


@pytest.fixture(params=MEMORY_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


def test_facts_in_the_covered_range_are_saved_before_the_checkpoint(store: Store) -> None:
    agent, watcher = make_agent(store)
    assert agent.memory is not None
    session = agent.new_session()
    for text in FACTS:
        agent.run_turn(session, text)
    assert agent.memory.memory.list_facts(agent.memory.scope) == []  # nothing extracted yet
    assert agent.memory.recorder.pending(session) > 0
    result = agent.compact(session, keep_recent=2, keep_turns=0)
    assert result.compacted and result.covers_up_to is not None
    assert not result.hook_errors
    (seen,) = watcher.seen
    assert seen["checkpoints"] == 0  # the summarizer runs before the checkpoint exists...
    facts = seen["facts"]
    assert facts  # ...and the facts of the covered turns were already in the graph
    # every flagged exchange in the covered range was extracted; the facts cite those turns
    flagged = {
        m.seq
        for m in session.messages()
        if m.seq is not None and m.seq <= result.covers_up_to and is_signal(m)
    }
    assert flagged and statements_from(facts, session, result.covers_up_to) <= flagged
    assert statements_from(facts, session, result.covers_up_to)
    # what is still pending is exactly what the compaction keeps verbatim
    kept = [m for m in session.messages() if m.seq is not None and m.seq > result.covers_up_to]
    assert seen["pending"] == sum(1 for m in kept if is_signal(m))
    assert any("PostgreSQL" in f.statement for f in facts)
    assert len(session.checkpoints()) == 1
    agent.close()


def test_the_after_turn_compaction_flushes_too() -> None:
    store = open_store("memory://")
    agent, watcher = make_agent(
        store,
        max_messages_before_summary=4,
        min_recent_messages=2,
        preserve_user_turns=1,
        preserve_fill=False,  # these short turns fit the share a compaction keeps
    )
    session = agent.new_session()
    for text in FACTS:
        agent.run_turn(session, text)
    assert watcher.seen, "the message-count trigger should have compacted"
    first = watcher.seen[0]
    assert first["checkpoints"] == 0 and first["facts"]
    covered = max(first["covered"])
    assert statements_from(first["facts"], session, covered)


def test_pending_extraction_survives_a_restart_and_is_flushed_by_the_next_compaction(
    sqlite_url: str,
) -> None:
    store = open_store(sqlite_url)
    before, _ = make_agent(store)
    session = before.new_session()
    for text in FACTS:
        before.run_turn(session, text)
    before.close()
    store.close()
    reopened = open_store(sqlite_url)  # a new process: only what is stored is known
    after, watcher = make_agent(reopened)
    again = reopened.get_session(session.id)
    watcher.session = again
    assert after.memory is not None and after.memory.recorder.pending(again) > 0
    assert after.compact(again, keep_recent=2, keep_turns=0).compacted
    assert watcher.seen[0]["facts"] and watcher.seen[0]["checkpoints"] == 0
    reopened.close()


def test_a_failing_flush_is_reported_and_the_compaction_still_runs() -> None:
    store = open_store("memory://")
    agent, _ = make_agent(store)
    assert agent.memory is not None
    session = agent.new_session()
    for text in FACTS:
        agent.run_turn(session, text)

    def broken(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("extractor unavailable")

    agent.memory.recorder.flush = broken  # type: ignore[method-assign]
    result = agent.compact(session, keep_recent=2, keep_turns=0)
    assert result.compacted
    assert [e.event for e in result.hook_errors] == ["before_compaction"]
    assert "extractor unavailable" in result.hook_errors[0].error
    assert agent.memory.recorder.pending(session) > 0  # still pending: a later flush saves it


def test_the_flush_hook_is_registered_once() -> None:
    store = open_store("memory://")
    agent, _ = make_agent(store)
    compactor = agent.compactor
    agent._hook_memory(compactor)
    assert len(compactor.hooks.listeners("before_compaction")) == 1
