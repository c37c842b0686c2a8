"""The demo's delegation: the demo agent hands a review to a subagent, offline.

After the long simulated run, one more turn of the demo session: the lead (the demo
agent, its config listing ``reviewer`` in ``agents``) calls the ``task`` tool; the
runtime creates the reviewer's child session, listed under the demo session, and runs
the reviewer there. The reviewer searches the lead's stored history with the store's
full-text search (a real tool over real data) and answers from what it found; that
answer comes back as the lead's tool result, and the lead's closing reply quotes it.

Both models are scripted (no LLM): each reply that depends on a tool result is
written from that result, so what the demo prints is what the run produced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from threadline.agent import Agent, AgentConfig, Calibrator, ToolContext, ToolRegistry, make_tool
from threadline.agent.subagents import SUBAGENT_KEY, TASK_TOOL
from threadline.demo.run import REVIEWER, demo_config, reviewer_config
from threadline.errors import ThreadlineError
from threadline.llm.base import ChatRequest
from threadline.llm.scripted import ScriptedChatModel, tool_call
from threadline.messages import Message
from threadline.store.protocol import Session, Store

REVIEW_QUERY: Final = "InvalidOperation"
"""What the reviewer looks for: the error the scripted run hit and fixed."""
SEARCH_TOOL: Final = "search_history"
HITS_SHOWN: Final = 3
DELEGATION_REQUEST: Final = (
    "Before we wrap up: have a reviewer check the history for the InvalidOperation "
    "failures and whether the last test run after them passed."
)
REVIEWER_MODEL_NAME: Final = "simulated-reviewer"
LEAD_MODEL_NAME: Final = "simulated-coding-agent"


@dataclass
class SubagentDemo:
    """What the delegation turn did."""

    session: Session
    child: Session
    task_prompt: str
    answer: str
    """The reviewer's final answer, as the lead's tool result holds it."""
    reply: Message
    """The lead's closing reply."""


def _search_tool(store: Store, lead_session: str) -> ToolRegistry:
    """``search_history(query)``: the lead session's tool outputs that match, newest first."""

    def search_history(ctx: ToolContext, query: str) -> list[dict[str, Any]]:
        page = store.search(query, session_id=lead_session, role="tool", limit=20)
        return [{"seq": h.seq, "snippet": h.snippet} for h in page]

    return ToolRegistry(
        [
            make_tool(
                search_history,
                description="Search the tool outputs of the lead's session (full-text); "
                "newest first.",
                takes_context=True,
            )
        ]
    )


def _last_tool_text(request: ChatRequest) -> str:
    return next((m.text for m in reversed(request.messages) if m.role == "tool"), "")


def _review(store: Store, lead_session: str) -> Callable[[ChatRequest], str]:
    """The reviewer's answer, written from its search result (the request's last tool
    message) and the newest test summary line it can find by search."""

    def answer(request: ChatRequest) -> str:
        found = _last_tool_text(request)
        try:
            hits = json.loads(found)
        except ValueError:
            return f"My search of the lead's history failed: {found}"
        if not hits:
            return f"I found no mention of {REVIEW_QUERY} in the lead's history."
        seqs = sorted(h["seq"] for h in hits)
        later = store.get_session(lead_session).messages(after_seq=seqs[-1])
        green = [m.seq for m in later if m.role == "tool" and _all_passed(m.text)]
        verdict = (
            f"a later test run (seq {green[0]}) passed"
            if green
            else "no test run after the last of them passed"
        )
        shown = ", ".join(str(s) for s in seqs[-HITS_SHOWN:])
        return (
            f"{REVIEW_QUERY} appears in {len(hits)} stored tool output(s) of the lead's "
            f"session (most recently at seq {shown}); {verdict}."
        )

    return answer


def _all_passed(log: str) -> bool:
    """A pytest log whose summary line says it all passed (``== 40 passed ==``)."""
    tail = log.rstrip().rsplit("\n", 1)[-1]
    return tail.startswith("=") and " passed " in tail and "failed" not in tail


def _lead_closing(request: ChatRequest) -> str:
    return f"The reviewer reports: {_last_tool_text(request)}"


def run_subagent_demo(store: Store, session_id: str) -> SubagentDemo:
    """One delegation turn of the demo session (attached while it runs)."""
    session = store.get_session(session_id)
    task_prompt = (
        f"Search the lead's history for {REVIEW_QUERY!r} and say whether a test run after "
        "the last failure passed. Answer in one sentence."
    )

    def reviewer(config: AgentConfig) -> Agent:
        model = ScriptedChatModel(
            [tool_call(SEARCH_TOOL, query=REVIEW_QUERY), _review(store, session.id)],
            model=REVIEWER_MODEL_NAME,
            tokenizer_model="gpt-4o",
        )
        tools = _search_tool(store, session.id)
        return Agent(config, store=store, model=model, tools=tools, calibrator=Calibrator())

    lead_model = ScriptedChatModel(
        [
            tool_call(TASK_TOOL, agent=REVIEWER, description="Review the fix", prompt=task_prompt),
            _lead_closing,
        ],
        model=LEAD_MODEL_NAME,
        tokenizer_model="gpt-4o",
    )
    lead = Agent(
        demo_config(),  # the demo agent itself: its config lists the reviewer in ``agents``
        store=store,
        model=lead_model,
        calibrator=Calibrator(),
        subagent_factory=reviewer,
        agent_configs={REVIEWER: reviewer_config()},
    )
    with session.attached():
        turn = lead.run_turn(session, DELEGATION_REQUEST)
    result = next(m for m in turn.messages_appended if m.role == "tool")
    link = result.metadata.get(SUBAGENT_KEY)
    if result.metadata.get("is_error") or not isinstance(link, dict):
        raise ThreadlineError(f"the demo's delegation failed: {result.text}")
    child_id = link["session_id"]
    return SubagentDemo(
        session=session.refresh(),
        child=store.get_session(child_id),
        task_prompt=task_prompt,
        answer=result.text,
        reply=turn.reply,
    )
