"""The offline memory demo (``threadline demo --memory``): what one session learns,
a later session recalls.

Two sessions of one agent with ``memory.enabled``, through the real engine: the
store, the memory recorder with the offline extractive extractor, the
pre-compaction flush, retrieval and injection into the context window, and the
memory tools. Only the model is simulated (a ``ScriptedChatModel``): in session
one it acknowledges what the user says; in session two it answers from the
memory block threadline placed before the question, and then looks a colleague
up with the ``memory_search`` tool. No LLM is called and nothing leaves the
machine.

Each run writes to its own project scope (``project:memory-demo-<id>``), so a
demo run again in the same store recalls only what its own first session said.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from threadline.agent import Agent, AgentConfig, Calibrator, MemoryConfig
from threadline.agent.memory_link import hit_line
from threadline.compaction.compactor import CompactionResult
from threadline.context.builder import MEMORY_METADATA_KEY, ContextWindow
from threadline.context.policy import ContextPolicy
from threadline.llm.base import ChatRequest
from threadline.llm.scripted import ScriptedChatModel, tool_call
from threadline.memory import Fact, MemoryHit
from threadline.store.protocol import Session, Store

MEMORY_DEMO_AGENT = "memory-demo"
MEMORY_DEMO_MODEL_SPEC = "simulated/gpt-4o"
MEMORY_DEMO_MODEL_NAME = "simulated-memory-assistant"
MEMORY_DEMO_LIMIT = 16_000
MEMORY_DEMO_THRESHOLD = 3
"""Extract every 3 flagged exchanges, so the first session shows both an automatic
extraction and (for the rest) the flush that runs before a compaction."""
MEMORY_DEMO_PROMPT = (
    "You are a helpful engineering assistant with a long-term memory. When memories are "
    "given, use them and say where they came from. (In this demo you are a simulated model.)"
)
SESSION_ONE: tuple[str, ...] = (
    "Hi, my name is Dana Whitfield. I lead the Orbit billing service at Acme this quarter.",
    "I prefer PostgreSQL for new services, and I always use pytest for tests.",
    "We decided to deploy Orbit on Fly.io in the Frankfurt region.",
    "Priya Raman owns the invoices module, and we never page Priya on weekends.",
    "Remember that the staging database for Orbit is orbit-staging-db.",
)
"""Each states something worth keeping (the recorder flags all five): the first three
are extracted automatically at the threshold, the last two by the flush that runs
before session one's closing compaction."""
SESSION_TWO: tuple[str, ...] = (
    "I'm adding a reports module to Orbit. Which database and test framework should I "
    "use, and where does Orbit deploy?",
    "Who owns the invoices module, and can I page them on Saturday?",
)
LOOKUP_QUERY = "Priya invoices weekends"
ACKNOWLEDGEMENT = "Got it."


@dataclass
class DemoTurn:
    """One turn as the demo shows it."""

    user: str
    reply: str
    recalled: list[MemoryHit] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)


@dataclass
class MemoryDemoResult:
    """What the two sessions did, and the context of the last model call."""

    scope: str
    first_session: Session
    second_session: Session
    first_turns: list[DemoTurn]
    second_turns: list[DemoTurn]
    extracted_during_session: int
    """Facts written by automatic extraction while session one ran."""
    compaction: CompactionResult
    """The compaction that closed session one (its pre-compaction flush saved the rest)."""
    flushed: int
    """Facts the pre-compaction flush wrote."""
    facts: list[Fact]
    """The scope's current facts after session one."""
    window: ContextWindow
    """The window the next model call of session two would get (with its memory block)."""
    agent: Agent


class _Tally:
    def __init__(self) -> None:
        self.recalled: list[MemoryHit] = []
        self.flushed = 0

    def on_event(self, name: str, payload: dict[str, Any]) -> None:
        if name == "memory_recalled":
            self.recalled = list(payload.get("hits") or [])
        elif name == "memory_flushed":
            self.flushed += int(payload.get("facts") or 0)


def memory_demo_config(scope: str) -> AgentConfig:
    return AgentConfig(
        name=MEMORY_DEMO_AGENT,
        description="threadline's offline memory demo agent (a simulated model)",
        model=MEMORY_DEMO_MODEL_SPEC,
        system_prompt=MEMORY_DEMO_PROMPT,
        context=ContextPolicy(context_limit=MEMORY_DEMO_LIMIT),
        summarizer="extractive",
        memory=MemoryConfig(enabled=True, scope=scope, extraction_threshold=MEMORY_DEMO_THRESHOLD),
    )


def memory_lines_in(request: ChatRequest) -> list[str]:
    """The memory lines threadline placed in a request (what the model was given)."""
    for m in request.messages:
        if MEMORY_METADATA_KEY in m.metadata:
            return [line[2:] for line in m.text.splitlines() if line.startswith("- ")]
    return []


def _answer_from_memory(request: ChatRequest) -> str:
    """Quote the memories threadline gave it: they reached the model with the question."""
    lines = memory_lines_in(request)
    if not lines:
        return "I don't have anything on that in memory yet."
    shown = "\n".join(f"- {line}" for line in lines)
    return f"From what you told me in an earlier session:\n{shown}"


def _answer_from_tool(request: ChatRequest) -> str:
    result = next((m for m in reversed(request.messages) if m.role == "tool"), None)
    if result is None or result.metadata.get("is_error"):
        return "The memory lookup found nothing."
    try:
        hits = json.loads(result.text)
    except json.JSONDecodeError:
        hits = []
    found = [h for h in hits if isinstance(h, dict) and h.get("text")]
    if not found:
        return "The memory lookup found nothing."
    best = found[0]
    where = f"session {str(best.get('session_id'))[:8]} #{best.get('seq')}"
    return f"memory_search found this ({where}): {best['text']}"


def memory_demo_model() -> ScriptedChatModel:
    """The simulated model: acknowledgements, then answers built from what it is sent."""
    script: list[Any] = [ACKNOWLEDGEMENT] * len(SESSION_ONE)
    lookup: Callable[[ChatRequest], Any] = lambda _: tool_call(  # noqa: E731
        "memory_search", query=LOOKUP_QUERY, k=3
    )
    script += [_answer_from_memory, lookup, _answer_from_tool]
    return ScriptedChatModel(script, model=MEMORY_DEMO_MODEL_NAME)


def _turn(agent: Agent, session: Session, text: str, tally: _Tally) -> DemoTurn:
    tally.recalled = []
    result = agent.run_turn(session, text)
    calls = [c for m in result.messages_appended for c in m.tool_calls]
    results = [m.text for m in result.messages_appended if m.role == "tool"]
    return DemoTurn(
        user=text,
        reply=result.text,
        recalled=list(tally.recalled),
        tool_calls=[
            f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in calls
        ],
        tool_results=results,
    )


def run_memory_demo(store: Store, *, scope: str | None = None) -> MemoryDemoResult:
    """Session one states facts and ends with a compaction (flushing pending extraction);
    session two asks what needs them. Returns everything the demo shows."""
    scope = scope or f"project:memory-demo-{uuid.uuid4().hex[:8]}"
    tally = _Tally()
    agent = Agent(
        memory_demo_config(scope),
        store=store,
        model=memory_demo_model(),
        on_event=tally.on_event,
        calibrator=Calibrator(),
    )
    assert agent.memory is not None  # enabled in the config
    first = agent.new_session(title="Memory demo: session one (facts and preferences)")
    with first.attached():
        first_turns = [_turn(agent, first, text, tally) for text in SESSION_ONE]
        extracted = len(agent.memory.memory.list_facts(scope))
        tally.flushed = 0
        compaction = agent.compact(first, keep_recent=1, keep_turns=0)
    facts = agent.memory.memory.list_facts(scope)
    second = agent.new_session(title="Memory demo: session two (a week later)")
    with second.attached():
        second_turns = [_turn(agent, second, text, tally) for text in SESSION_TWO]
        second.refresh()
        window = agent.build(second)
    return MemoryDemoResult(
        scope=scope,
        first_session=first.refresh(),
        second_session=second,
        first_turns=first_turns,
        second_turns=second_turns,
        extracted_during_session=extracted,
        compaction=compaction,
        flushed=tally.flushed,
        facts=facts,
        window=window,
        agent=agent,
    )


def recalled_lines(turn: DemoTurn) -> list[str]:
    """The memories recalled for a turn, as the model saw them."""
    return [hit_line(h) for h in turn.recalled]


__all__ = [
    "MEMORY_DEMO_AGENT",
    "SESSION_ONE",
    "SESSION_TWO",
    "DemoTurn",
    "MemoryDemoResult",
    "memory_demo_config",
    "memory_demo_model",
    "memory_lines_in",
    "recalled_lines",
    "run_memory_demo",
]
