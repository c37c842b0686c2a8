"""The offline demo run: hundreds of turns of a simulated coding agent through the real engine.

``run_demo`` gives a ``SimulatedCodingModel`` (a playback of ``coding_run``,
no LLM, no network) to a real ``Agent``: every turn appends to the store,
builds the context under a deliberately small window, prunes old tool output,
and compacts with the offline extractive summarizer when a trigger fires. The
window is small (``DEMO_CONTEXT_LIMIT``) so that a few minutes of simulated
work show what a long real session does: the history grows without bound,
the context stays inside its budget, and compaction and pruning happen again
and again. ``resume_demo`` continues the same session from the store alone,
which is how the demo proves a restart loses nothing.

The session records its own scenario (``metadata["demo"]``: seed and turns),
so resuming needs only the session id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from threadline.agent import Agent, AgentConfig, Calibrator
from threadline.agent.loop import TurnResult
from threadline.compaction.compactor import CompactionResult
from threadline.context.builder import ContextReport
from threadline.context.policy import ContextPolicy
from threadline.demo.coding_run import Turn, coding_run
from threadline.demo.sample import DEMO_AGENT
from threadline.demo.simulated import (
    SIMULATED_KEY,
    SIMULATED_MODEL_NAME,
    SimulatedCodingModel,
    simulated_tools,
    user_message,
)
from threadline.demo.skill_step import demo_skills, with_skill_step
from threadline.errors import UsageError
from threadline.messages import SKILL_KEY
from threadline.store.locks import LockHolder
from threadline.store.protocol import Session, Store

DEFAULT_TURNS = 300
DEFAULT_SEED = 0
DEMO_MODEL_SPEC = "simulated/gpt-4o"
"""The session's model: budgets and token counts as for gpt-4o, answers simulated."""
DEMO_CONTEXT_LIMIT = 32_000
"""Small on purpose, so compaction and pruning both happen many times in 300 turns."""
DEMO_MAX_MESSAGES_BEFORE_SUMMARY = 120
"""Roomier than the default 30: the window fills up between compactions, so the context
trigger, trimming and the pruning of large test logs all get their turn."""
DEMO_PRUNE_MIN_CHARS = 20_000
"""Below the default 50,000: in a 32k window one large log is already worth pruning."""
DEMO_POLICY = ContextPolicy(
    context_limit=DEMO_CONTEXT_LIMIT,
    max_messages_before_summary=DEMO_MAX_MESSAGES_BEFORE_SUMMARY,
    prune_min_chars=DEMO_PRUNE_MIN_CHARS,
)
DEMO_SYSTEM_PROMPT = (
    "You are demo-coder, a careful coding agent working on the invoices service. Read before "
    "you write, run the tests after every change, and report exactly what you changed. "
    "(In this demo you are a simulated model replaying a scripted session.)"
)
REVIEWER = "reviewer"
"""The demo agent's one delegate (``demo.subagent_run`` runs it)."""
DEMO_METADATA_KEY = "demo"


@dataclass(frozen=True, slots=True)
class DemoStatus:
    """Where the run is, after each turn (what the live status line shows)."""

    turn: int
    """Turns done so far (1-based)."""
    turns: int
    stored_messages: int
    context_tokens: int
    """The builder's estimate of the last context sent."""
    limit: int
    compactions: int
    pruned_results: int
    """Distinct tool results shrunk in some view so far."""
    pruned_in_view: int
    """Tool results shrunk in the last context sent."""
    elapsed: float


@dataclass
class DemoResult:
    """What a demo run did."""

    session_id: str
    turns: int
    seed: int
    stored_messages: int
    compactions: int
    checkpoints: int
    pruned_results: int
    max_context_tokens: int
    limit: int
    budget: int
    """limit - response reserve: what a built context may never exceed."""
    model: str
    """The name the simulated model reports on every reply."""
    simulated: bool
    elapsed: float
    last_report: ContextReport | None = None
    tool_calls: int = 0
    tool_errors: int = 0
    skills_loaded: list[str] = field(default_factory=list)
    """The skills the agent loaded with the ``skill`` tool, in order."""


@dataclass
class _Tally:
    compactions: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    pruned: set[int] = field(default_factory=set)
    skills: list[str] = field(default_factory=list)

    def on_event(self, name: str, payload: dict[str, Any]) -> None:
        if name == "compacted":
            self.compactions += 1
        elif name == "tool_finished":
            self.tool_calls += 1
            self.tool_errors += bool(payload.get("is_error"))
            skill = payload["result"].metadata.get(SKILL_KEY)
            if isinstance(skill, str) and not payload.get("is_error"):
                self.skills.append(skill)


def demo_config() -> AgentConfig:
    """The demo agent: the small window, the extractive summarizer, no built-in tools; it
    may delegate to the reviewer (``demo.subagent_run``)."""
    return AgentConfig(
        name=DEMO_AGENT,
        description="threadline's offline demo agent (a simulated model)",
        model=DEMO_MODEL_SPEC,
        system_prompt=DEMO_SYSTEM_PROMPT,
        context=DEMO_POLICY,
        summarizer="extractive",
        tools=(),
        agents=(REVIEWER,),
    )


def reviewer_config() -> AgentConfig:
    return AgentConfig(
        name=REVIEWER,
        description="Reviews the lead's work by searching its session history (simulated)",
        model=DEMO_MODEL_SPEC,
        system_prompt="You are the reviewer: check claims against the stored history.",
        context=DEMO_POLICY,
        summarizer="extractive",
        max_steps=4,
    )


def demo_agent(
    store: Store,
    scenario: list[Turn],
    *,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> Agent:
    """A real ``Agent`` whose model and tools play back ``scenario``; it offers the demo's
    skill and loads it in the first turn (``demo.skill_step``)."""
    skills = demo_skills()
    return Agent(
        demo_config(),
        store=store,
        model=SimulatedCodingModel(with_skill_step(scenario, skills)),
        tools=simulated_tools(scenario),
        on_event=on_event,
        calibrator=Calibrator(),
        skills=skills,
        agent_configs={REVIEWER: reviewer_config()},
    )


def _check(turns: int) -> None:
    if turns < 1:
        raise UsageError(f"the demo needs at least one turn, got {turns}")


def run_demo(
    store: Store,
    *,
    turns: int = DEFAULT_TURNS,
    seed: int = DEFAULT_SEED,
    on_status: Callable[[DemoStatus], None] | None = None,
) -> DemoResult:
    """Run ``turns`` simulated turns in a new session of ``store``, attached (locked) throughout."""
    _check(turns)
    started = time.perf_counter()
    scenario = coding_run(turns, seed=seed)
    tally = _Tally()
    agent = demo_agent(store, scenario, on_event=tally.on_event)
    session = agent.new_session(
        title=f"Simulated coding run (demo, {turns} turns, seed {seed})",
        metadata={DEMO_METADATA_KEY: {"seed": seed, "turns": turns}, SIMULATED_KEY: True},
        lock=LockHolder.current(),
    )
    max_tokens = 0
    result: TurnResult | None = None
    try:
        for i in range(turns):
            result = agent.run_turn(session, user_message(scenario, i))
            max_tokens = max(max_tokens, result.context_tokens)
            report = result.context_report
            tally.pruned.update(int(p["seq"]) for p in report.pruned if "seq" in p)
            if on_status is not None:
                on_status(
                    DemoStatus(
                        turn=i + 1,
                        turns=turns,
                        stored_messages=session.message_count,
                        context_tokens=result.context_tokens,
                        limit=report.limit,
                        compactions=tally.compactions,
                        pruned_results=len(tally.pruned),
                        pruned_in_view=len(report.pruned),
                        elapsed=time.perf_counter() - started,
                    )
                )
    finally:
        store.release_lock(session.id)
    assert result is not None  # turns >= 1
    report = result.context_report
    return DemoResult(
        session_id=session.id,
        turns=turns,
        seed=seed,
        stored_messages=session.refresh().message_count,
        compactions=tally.compactions,
        checkpoints=len(session.checkpoints()),
        pruned_results=len(tally.pruned),
        max_context_tokens=max_tokens,
        limit=report.limit,
        budget=report.limit - report.response_reserve,
        model=agent.model.model,
        simulated=True,
        elapsed=time.perf_counter() - started,
        last_report=report,
        tool_calls=tally.tool_calls,
        tool_errors=tally.tool_errors,
        skills_loaded=list(tally.skills),
    )


@dataclass
class ResumeResult:
    """The extra turn a resumed demo session ran."""

    session: Session
    agent: Agent
    turn: TurnResult
    messages_before: int
    """Stored messages found on disk when the session was resumed."""
    checkpoint_id: int | None
    """The checkpoint the resumed view started from."""
    compaction: CompactionResult | None


def demo_scenario_of(session: Session) -> tuple[int, int]:
    """(seed, turns) a demo session was made with; ``UsageError`` for any other session."""
    meta = session.info.metadata.get(DEMO_METADATA_KEY)
    if not isinstance(meta, dict):
        raise UsageError(f"session {session.id} is not a demo session (no demo metadata)")
    seed, turns = meta.get("seed"), meta.get("turns")
    if not isinstance(seed, int) or not isinstance(turns, int) or turns < 1:
        raise UsageError(f"session {session.id} has malformed demo metadata: {meta!r}")
    return seed, turns


def resume_demo(store: Store, session_id: str) -> ResumeResult:
    """Reopen a demo session from the store and run the scenario's next turn, attached."""
    session = store.get_session(session_id)
    seed, turns = demo_scenario_of(session)
    scenario = coding_run(turns + 1, seed=seed)
    before = session.message_count
    checkpoint = session.latest_checkpoint()
    agent = demo_agent(store, scenario)
    with session.attached():
        turn = agent.run_turn(session, user_message(scenario, turns))
    return ResumeResult(
        session=session.refresh(),
        agent=agent,
        turn=turn,
        messages_before=before,
        checkpoint_id=checkpoint.id if checkpoint else None,
        compaction=turn.compaction,
    )


__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_TURNS",
    "DEMO_CONTEXT_LIMIT",
    "DEMO_MODEL_SPEC",
    "DEMO_POLICY",
    "SIMULATED_MODEL_NAME",
    "DemoResult",
    "DemoStatus",
    "ResumeResult",
    "demo_agent",
    "demo_config",
    "demo_scenario_of",
    "resume_demo",
    "run_demo",
]
