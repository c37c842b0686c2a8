"""Invariant 8 through the real agent loop: no model call ever receives a window that leaves
stored messages neither in it nor under the summary it shows.

The runs have the commonest real shape: one user request followed by hundreds of tool
steps, so "keep the last user turns" would keep everything and only a cut inside the turn
can make room. The check reads the request the model receives (summary metadata and the
seqs of the history it holds) against the store, at every call.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Agent, AgentConfig, Message, Tool, ToolRegistry, open_store
from threadline.compaction.compactor import Compactor
from threadline.context.builder import ContextWindow
from threadline.llm.base import ChatRequest
from threadline.llm.scripted import ScriptedChatModel, tool_call
from threadline.store.protocol import Session

REQUEST = "Work on bead spotter-dov: make the transcript renderer stream large results"


class UncoveredHistory(AssertionError):
    pass


def check_request(session: Session, messages: list[Message]) -> int:
    """Raise when the request leaves a stored message out unsummarized; returns the floor."""
    floor = max((int(m.metadata.get("covers_up_to", 0)) for m in messages if m.summary), default=0)
    shown = {m.seq for m in messages if m.seq is not None}
    session.refresh()
    missing = [q for q in range(floor + 1, session.last_seq + 1) if q not in shown]
    if missing:
        raise UncoveredHistory(
            f"{len(missing)} stored message(s) neither shown nor summarized, e.g. {missing[:5]}"
        )
    if not any(m.text.startswith(REQUEST) for m in messages):
        summary = "\n".join(m.text for m in messages if m.summary)
        assert REQUEST in summary, "the request is neither in the window nor in the summary"
    return floor


def run(
    *,
    steps: int,
    sizes: list[int],
    limit: int,
    min_recent: int,
    strategy: str,
    pruning: bool,
    seed: int,
) -> dict[str, Any]:
    rng = random.Random(seed)
    store = open_store("memory://")
    config = AgentConfig.model_validate(
        {
            "name": "runner",
            "model": "openai/gpt-4o",
            "system_prompt": "You are a coding agent.",
            "summarizer": "extractive",
            "max_steps": steps + 1,
            "context": {
                "context_limit": limit,
                "response_reserve": 1_000,
                "min_recent_messages": min_recent,
                "trim_strategy": strategy,
                "pruning": pruning,
            },
        }
    )
    tools = ToolRegistry()

    def shell(command: str) -> str:
        size = rng.choice(sizes)
        line = f"$ {command}\n"
        return line + "".join(f"{command} line {i}: ok {i * 31 % 97}\n" for i in range(size // 24))

    tools.register(
        Tool(
            name="bash",
            description="run a command",
            parameters={
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
            func=shell,
        )
    )
    state: dict[str, Any] = {"calls": 0, "floors": []}
    holder: dict[str, Session] = {}

    def answer(request: ChatRequest) -> Any:
        state["floors"].append(check_request(holder["session"], list(request.messages)))
        state["calls"] += 1
        if state["calls"] > steps:
            return "done: the renderer streams large results"
        return tool_call("bash", command=f"mix test test/file_{state['calls']}_test.exs")

    model = ScriptedChatModel(default=answer, model="gpt-4o")
    agent = Agent(config, store=store, model=model, tools=tools)
    session = agent.new_session()
    holder["session"] = session
    result = agent.run_turn(session, REQUEST)
    state["result"] = result
    state["session"] = session
    return state


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {
            "steps": st.integers(500, 560),
            "sizes": st.lists(
                st.sampled_from([120, 900, 4_000, 12_000, 60_000]), min_size=1, max_size=4
            ),
            "limit": st.integers(9_000, 40_000),
            "min_recent": st.integers(0, 8),
            "strategy": st.sampled_from(["stable", "greedy"]),
            "pruning": st.booleans(),
            "seed": st.integers(0, 10_000),
        }
    )
)
def test_every_model_call_sees_all_history_or_its_summary(params: dict[str, Any]) -> None:
    state = run(**params)
    steps = params["steps"]
    assert state["calls"] == steps + 1
    session = state["session"]
    assert session.last_seq == 2 + 2 * steps  # request, steps x (call, result), answer
    assert session.checkpoints(), "a run this long must have compacted"
    assert state["floors"] == sorted(state["floors"])  # the summary only moves forward


def test_without_compaction_between_steps_the_check_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above can fail: with the mechanism removed, history falls out."""

    def build_only(
        self: Compactor, session: Session, build: Any, *, model: str | None = None
    ) -> tuple[ContextWindow, None]:
        return build(), None

    monkeypatch.setattr(Compactor, "compact_to_fit", build_only)
    with pytest.raises(UncoveredHistory):
        run(
            steps=500,
            sizes=[4_000],
            limit=12_000,
            min_recent=6,
            strategy="stable",
            pruning=True,
            seed=1,
        )
