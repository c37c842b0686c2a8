"""Memory wired into the agent: tools, the recorder, per-turn retrieval and injection.

The memory package itself (storage, extraction, ranking) is tested by its own
conformance tests; these check what an ``Agent`` with ``memory.enabled`` does with it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from threadline import ContextPolicy, Message, open_store
from threadline.agent import Agent, AgentConfig, MemoryConfig
from threadline.agent.memory_link import AgentMemory, hit_line
from threadline.context.builder import MEMORY_HEADER, MEMORY_METADATA_KEY
from threadline.demo.memory_run import SESSION_ONE, SESSION_TWO, run_memory_demo
from threadline.llm.scripted import ScriptedChatModel, tool_call
from threadline.memory import MemoryHit
from threadline.memory.project import PROJECT_KEY
from threadline.store.protocol import Store

MEMORY_TOOLS = {"memory_search", "memory_recall", "memory_write"}
FACTS = (
    "I'm Dana Whitfield and I work at Acme on the Orbit billing service.",
    "I prefer PostgreSQL for new services and I always use pytest.",
    "We decided to deploy Orbit to Fly.io in Frankfurt.",
)
QUESTION = "Which database should I use for the new Orbit reports module?"


def config(**memory: Any) -> AgentConfig:
    memory.setdefault("enabled", True)
    return AgentConfig(
        name="helper",
        model="openai/gpt-4o",
        summarizer="extractive",
        memory=MemoryConfig(**memory),
    )


def agent(store: Store, model: ScriptedChatModel | None = None, **memory: Any) -> Agent:
    return Agent(config(**memory), store=store, model=model or ScriptedChatModel(default="ok"))


def remembering(**memory: Any) -> tuple[Agent, AgentMemory]:
    """An agent with memory on, over a new in-memory store, and its memory."""
    a = agent(open_store("memory://"), **memory)
    assert a.memory is not None
    return a, a.memory


def block_of(request: Any) -> Message | None:
    return next((m for m in request.messages if MEMORY_METADATA_KEY in m.metadata), None)


def tell(a: Agent, texts: tuple[str, ...] = FACTS, project: str | None = None) -> str:
    """Say ``texts`` in a new session (in ``project`` when given) and extract them."""
    session = a.new_session(metadata={PROJECT_KEY: project} if project else None)
    for text in texts:
        a.run_turn(session, text)
    assert a.memory is not None
    a.memory.flush(session)
    return session.id


def test_memory_off_changes_nothing() -> None:
    a = Agent(
        AgentConfig(name="plain", model="openai/gpt-4o", summarizer="extractive"),
        store=open_store("memory://"),
        model=ScriptedChatModel(default="ok"),
    )
    assert a.memory is None
    assert not MEMORY_TOOLS & set(a.tools.names())
    session = a.new_session()
    a.run_turn(session, "hello")
    window = a.build(session)
    memory = next(s for s in window.report.sections if s.name == "memory")
    assert (memory.tokens, memory.detail) == (0, "off")
    assert not any(MEMORY_METADATA_KEY in m.metadata for m in window.messages)


def test_memory_tools_are_registered_and_offered_to_the_model() -> None:
    model = ScriptedChatModel(default="ok")
    a = agent(open_store("memory://"), model)
    assert set(a.tools.names()) >= MEMORY_TOOLS
    a.run_turn(a.new_session(), "hello")
    offered = {t["name"] for t in model.requests[-1].tools}
    assert offered >= MEMORY_TOOLS


def test_a_given_tool_of_the_same_name_wins() -> None:
    from threadline.agent import ToolRegistry, make_tool

    def memory_search(query: str) -> str:
        """My own search."""
        return "mine"

    registry = ToolRegistry([make_tool(memory_search)])
    a = Agent(config(), store=open_store("memory://"), tools=registry)
    tool = a.tools.get("memory_search")
    assert tool is not None and tool.description == "My own search."
    assert {"memory_recall", "memory_write"} <= set(a.tools.names())


def test_facts_from_one_session_are_recalled_in_the_next_with_provenance() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(default="ok")
    a = agent(store, model)
    first = tell(a)
    events: list[tuple[str, dict[str, Any]]] = []
    a.on_event = lambda name, payload: events.append((name, payload))
    second = a.new_session()
    a.run_turn(second, QUESTION)
    request = model.requests[-1]
    block = block_of(request)
    assert block is not None and block.role == "user"
    assert block.text.startswith(MEMORY_HEADER)
    assert "PostgreSQL" in block.text
    assert f"session {first[:8]} #" in block.text  # provenance, as the model sees it
    # the block sits right before the request, after the system prompt
    assert request.messages[-1].text == QUESTION and request.messages[-2] is block
    assert request.messages[0].role == "system" and MEMORY_HEADER not in request.messages[0].text
    recalled = [p for n, p in events if n == "memory_recalled"]
    assert len(recalled) == 1 and recalled[0]["session_id"] == second.id
    hits: list[MemoryHit] = recalled[0]["hits"]
    assert 0 < len(hits) <= a.config.memory.retrieval_limit
    assert all(h.session_id == first and h.seq is not None for h in hits if h.kind == "fact")
    window = a.build(second.refresh())
    section = next(s for s in window.report.sections if s.name == "memory")
    assert (
        section.tokens > 0
        and window.report.memories == [hit_line(h) for h in hits][: len(window.report.memories)]
    )


def test_the_memory_block_is_the_same_for_every_step_of_a_turn() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(default="ok")
    a = agent(store, model)
    tell(a)
    model.add(tool_call("memory_search", query="Orbit deploy"), "It deploys to Fly.io.")
    searches = 0

    def count(name: str, payload: dict[str, Any]) -> None:
        nonlocal searches
        searches += name == "memory_recalled"

    a.on_event = count
    session = a.new_session()
    before = len(model.requests)
    result = a.run_turn(session, QUESTION)
    steps = model.requests[before:]
    assert result.steps == 2 and len(steps) == 2
    first, second = (block_of(r) for r in steps)
    assert first is not None and second is not None and first.text == second.text
    at = steps[0].messages.index(first)
    assert [m.text for m in steps[1].messages[:at]] == [m.text for m in steps[0].messages[:at]]
    assert searches == 1  # fetched once per request, not once per step


def test_the_memory_tools_return_results_with_provenance() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(default="ok")
    a = agent(store, model)
    first = tell(a)
    model.add(
        tool_call("memory_search", query="PostgreSQL", k=3),
        tool_call("memory_write", statement="Dana's laptop is a ThinkPad X1."),
        tool_call("memory_recall", entity="Orbit"),
        "done",
    )
    session = a.new_session()
    result = a.run_turn(session, "Look things up and note my laptop.")
    results = [m for m in result.messages_appended if m.role == "tool"]
    assert [m.name for m in results] == ["memory_search", "memory_write", "memory_recall"]
    assert not any(m.metadata.get("is_error") for m in results), [m.text for m in results]
    search = json.loads(results[0].text)
    assert first in json.dumps(search)  # each hit names the session it came from
    assert a.memory is not None
    written = [f for f in a.memory.memory.list_facts(a.memory.scope) if "ThinkPad" in f.statement]
    assert len(written) == 1 and written[0].session_id == session.id  # the writing session
    assert written[0].seq is not None


def test_the_recorder_sees_every_appended_batch_and_extracts_at_the_threshold() -> None:
    a, mem = remembering(extraction_threshold=2)
    session = a.new_session()
    a.run_turn(session, FACTS[0])
    assert mem.recorder.pending(session) >= 1
    a.run_turn(session, FACTS[1])  # the second flagged exchange: extraction runs
    facts = mem.memory.list_facts(mem.scope)
    assert facts and all(f.session_id == session.id for f in facts)
    assert mem.recorder.pending(session) == 0


def test_auto_extract_off_leaves_extraction_to_flushes() -> None:
    a, mem = remembering(extraction_threshold=1, auto_extract=False)
    session = a.new_session()
    for text in FACTS:
        a.run_turn(session, text)
    assert mem.memory.list_facts(mem.scope) == []
    assert mem.recorder.pending(session) >= 1
    assert mem.flush(session) > 0
    assert mem.memory.list_facts(mem.scope)


def test_a_shared_scope_lets_one_agent_recall_what_another_learned() -> None:
    store = open_store("memory://")
    writer = Agent(
        config(scope="user:dana").model_copy(update={"name": "writer"}),
        store=store,
        model=ScriptedChatModel(default="ok"),
    )
    tell(writer)
    model = ScriptedChatModel(default="ok")
    reader = Agent(
        config(scope="user:dana").model_copy(update={"name": "reader"}), store=store, model=model
    )
    other = Agent(config(), store=store, model=ScriptedChatModel(default="ok"))
    assert reader.memory is not None and reader.memory.scope == "user:dana"
    assert other.memory is not None and other.memory.scope == "agent:helper"
    reader.run_turn(reader.new_session(), QUESTION)
    block = block_of(model.requests[-1])
    assert block is not None and "PostgreSQL" in block.text
    assert other.memory.lines(other.new_session()) == []


def test_what_this_session_still_shows_is_not_injected_again() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(default="ok")
    a = agent(store, model)
    session = a.new_session()
    for text in FACTS:
        a.run_turn(session, text)
    assert a.memory is not None
    a.memory.flush(session)
    a.run_turn(session, QUESTION)
    block = block_of(model.requests[-1])
    assert block is None or session.id[:8] not in block.text  # it is all in the window


def test_retrieval_limit_caps_the_memories_and_zero_injects_none() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(default="ok")
    a = agent(store, model, retrieval_limit=1)
    tell(a)
    a.run_turn(a.new_session(), "Tell me about Dana, Orbit, PostgreSQL, pytest and Fly.io.")
    block = block_of(model.requests[-1])
    assert block is not None and block.text.count("\n- ") == 1
    none = agent(store, ScriptedChatModel(default="ok"), retrieval_limit=0)
    window = none.build(none.new_session())
    assert next(s for s in window.report.sections if s.name == "memory").detail == "off"


def test_a_failing_memory_never_breaks_the_turn() -> None:
    store = open_store("memory://")
    a = agent(store)
    assert a.memory is not None
    events: list[str] = []
    a.on_event = lambda name, payload: events.append(name)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("index is down")

    a.memory.memory.search = broken  # type: ignore[method-assign]
    a.memory.recorder.observe = broken  # type: ignore[method-assign]
    result = a.run_turn(a.new_session(), QUESTION)
    assert result.text == "ok"
    assert events.count("memory_failed") >= 2


def test_a_bad_scope_is_a_config_error() -> None:
    from threadline.agent import parse_agent
    from threadline.errors import ConfigError

    assert parse_agent("memory: {enabled: true, scope: user:dana}").memory.scope == "user:dana"
    assert parse_agent("memory: {scope: site}").memory.scope == "project:site"
    for bad in ("user:../x", "user:", "a b"):
        with pytest.raises(ConfigError, match=r"memory\.scope"):
            parse_agent(f"memory: {{scope: '{bad}'}}")
    with pytest.raises(ConfigError, match=r"memory\.share"):
        parse_agent("memory: {share: 0.9}")


def test_the_memory_demo_recalls_session_one_in_session_two() -> None:
    store = open_store("memory://")
    r = run_memory_demo(store)
    assert [t.user for t in r.first_turns] == list(SESSION_ONE)
    assert [t.user for t in r.second_turns] == list(SESSION_TWO)
    assert r.compaction.compacted and r.facts
    assert r.extracted_during_session > 0 and r.flushed > 0  # the flush saved the rest
    assert r.extracted_during_session + r.flushed == len(r.facts)
    first = r.second_turns[0]
    assert first.recalled and all(h.session_id == r.first_session.id for h in first.recalled)
    assert "PostgreSQL" in first.reply and "pytest" in first.reply  # read from the block
    assert r.first_session.id[:8] in first.reply
    second = r.second_turns[1]
    assert second.tool_calls and second.tool_calls[0].startswith("memory_search(")
    assert "Priya" in second.tool_results[0] and "weekend" in second.reply.lower()
    assert f"session {r.first_session.id[:8]} #" in second.reply  # the hit's provenance
    section = next(s for s in r.window.report.sections if s.name == "memory")
    assert section.tokens > 0 and r.window.report.memories
    assert r.window.tokens <= r.window.limit - r.window.report.response_reserve
    r.agent.close()


def test_the_memory_demo_isolates_each_run() -> None:
    store = open_store("memory://")
    one, two = run_memory_demo(store), run_memory_demo(store)
    assert one.scope != two.scope
    assert {h.session_id for t in two.second_turns for h in t.recalled} <= {two.first_session.id}


def test_a_large_memory_share_still_leaves_nothing_unsummarized() -> None:
    store = open_store("memory://")
    a = Agent(
        config(share=0.5).model_copy(
            update={"context": ContextPolicy(context_limit=2_500, response_reserve=300)}
        ),
        store=store,
        model=ScriptedChatModel(default="Noted, " + "details " * 40),
    )
    tell(a)
    session = a.new_session()
    for i in range(25):
        result = a.run_turn(session, f"Step {i}: I prefer PostgreSQL; " + "context " * 60)
        report = result.context_report
        assert report.dropped_messages == 0  # invariant 8 holds with memories on
        assert result.context_tokens <= 2_500 - 300
        assert report.memory_reserve > 0
    assert session.checkpoints()  # it had to compact to get there


def test_what_a_session_leaves_pending_is_extracted_when_the_agent_moves_on() -> None:
    a, mem = remembering(extraction_threshold=10)
    first = a.new_session()
    a.run_turn(first, FACTS[1])
    assert mem.recorder.pending(first) > 0
    assert mem.memory.list_facts(mem.scope) == []
    a.run_turn(a.new_session(), "hello again")  # the next session's turn: the first is done
    assert mem.recorder.pending(first) == 0
    assert any("PostgreSQL" in f.statement for f in mem.memory.list_facts(mem.scope))
    last = a.new_session()
    a.run_turn(last, FACTS[2])
    a.close()  # closing flushes the current session too
    assert mem.recorder.pending(last) == 0
    off = agent(a.store, extraction_threshold=10, auto_extract=False)
    assert off.memory is not None
    kept = off.new_session()
    off.run_turn(kept, FACTS[0])
    off.close()
    assert off.memory.recorder.pending(kept) > 0  # auto_extract off: only explicit flushes


def test_a_long_request_is_searched_by_its_head_and_tail() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(default="ok")
    a = agent(store, model, retrieval_limit=100)
    tell(a)
    events: list[str] = []
    a.on_event = lambda name, payload: events.append(name)
    pasted = "Which database do I prefer? Here is the log:\n" + "line of output\n" * 2_000
    a.run_turn(a.new_session(), pasted)
    assert "memory_failed" not in events
    block = block_of(model.requests[-1])
    assert block is not None and "PostgreSQL" in block.text
