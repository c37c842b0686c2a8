"""Subagents: an agent hands a task to another agent, which works on it in a child session.

An agent whose config lists ``agents`` gets the ``task`` tool (agent, description,
prompt). A call creates a session in the same store, listed under the calling
session (``SessionInfo.parent_id``) and naming in its metadata the call that made it
(``SUBAGENT_KEY``: parent session, tool call id, the seq of the reply that made the
call, agent, description, depth). The delegate runs there as an agent of its own
(its config's model, budget, compaction and ``max_steps``) for one turn, to its end;
its final answer is the tool result, and its messages stay in its own session.

The tool is ``concurrent``: several ``task`` calls in one reply run at the same time
(the turn loop's bounded thread pool). The child shares the parent's cancel event,
so cancelling the parent closes every running child's model request at once (or
stops it at its next step); the child's reply is stored (marked interrupted) and its
``task`` call gets an error result, so both sessions stay valid. Whatever goes wrong
in a child (an agent that does not load, a model error, the step limit, a child nested
too deep) is an error result the parent's model reads, never an exception in the
parent's turn.

A child's events reach the parent's ``on_event`` as ``subagent_event`` (the child's
``session_id`` with the event's name and payload), between ``subagent_started`` and
``subagent_finished``; the agent server streams them tagged with the child's id.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from threadline.agent.config import AgentConfig, load_agent
from threadline.agent.tools import Tool, ToolContext, ToolOutput, make_tool
from threadline.store.protocol import Session
from threadline.store.session_info import CHILD_KIND_KEY, SUBAGENT_CHILD, SessionInfo

logger = logging.getLogger(__name__)

TASK_TOOL: Final = "task"
SUBAGENT_KEY: Final = "subagent"
"""Child session metadata: ``{parent_session, tool_call_id, message_seq, agent,
description, depth}``."""
MAX_DEPTH: Final = 3
"""Subagents of subagents nest at most this deep (an agent may list itself)."""
MAX_HINT_CHARS: Final = 200
"""A delegate's one-line description is cut to this in hints and the tool's text."""
NO_DESCRIPTION: Final = "(no description)"
TASK_DESCRIPTION: Final = (
    "Delegate a task to a subagent. It works in a session of its own, with its own tools "
    "and model, and returns its final answer as this tool's result. It does not see this "
    "conversation: put everything it needs in `prompt`. Several task calls in one reply "
    "run in parallel. Agents:"
)

EventHandler = Callable[[str, dict[str, Any]], None]


class ChildResult(Protocol):
    """What the runtime reads from a child's finished turn (``TurnResult``)."""

    @property
    def text(self) -> str: ...
    @property
    def stopped(self) -> str: ...
    @property
    def steps(self) -> int: ...


class ChildAgent(Protocol):
    """The part of ``Agent`` a subagent run uses."""

    config: AgentConfig
    on_event: EventHandler | None

    @property
    def model_spec(self) -> str: ...

    def run_turn(
        self,
        session: Session,
        user: str,
        *,
        stream: Callable[[str], None] | None = None,
        max_steps: int | None = None,
        cancel: threading.Event | None = None,
    ) -> ChildResult: ...

    def close(self) -> None: ...


AgentFactory = Callable[[AgentConfig], ChildAgent]
"""Builds the agent that runs a delegate's config (the parent agent supplies it)."""


# -- the delegates ------------------------------------------------------------------------


@dataclass(frozen=True)
class Delegate:
    """One entry of ``agents``: the name the model calls it by, and its config or why it
    cannot be loaded."""

    name: str
    ref: str
    config: AgentConfig | None = None
    error: str | None = None

    @property
    def description(self) -> str:
        if self.config is None:
            return one_line(f"unavailable: {self.error}")
        return one_line(self.config.description or NO_DESCRIPTION)


def one_line(text: str) -> str:
    """The first line of ``text``, cut to ``MAX_HINT_CHARS``."""
    line = text.strip().splitlines()[0].strip() if text.strip() else NO_DESCRIPTION
    return line if len(line) <= MAX_HINT_CHARS else line[: MAX_HINT_CHARS - 1] + "\u2026"


def load_delegates(
    config: AgentConfig,
    dirs: Sequence[Path] | None = None,
    known: Mapping[str, AgentConfig] | None = None,
) -> list[Delegate]:
    """``config.agents`` loaded, in their listed order (a name in ``known``, configs a
    program built in code, before any file); one that does not load is kept with its
    error (a call to it is an error result that says why)."""
    out: list[Delegate] = []
    seen: set[str] = set()
    for ref in config.agents:
        try:
            loaded = known[ref] if known and ref in known else load_agent(ref, dirs=dirs)
            delegate = Delegate(name=loaded.name, ref=ref, config=loaded)
        except Exception as exc:  # a ConfigError, or an unreadable file
            logger.warning("agent %s cannot delegate to %s: %s", config.name, ref, exc)
            delegate = Delegate(name=_ref_name(ref), ref=ref, error=str(exc))
        if delegate.name in seen:
            logger.warning(
                "agent %s: %s repeats the delegate name %r", config.name, ref, delegate.name
            )
            continue
        seen.add(delegate.name)
        out.append(delegate)
    return out


def _ref_name(ref: str) -> str:
    path = Path(ref)
    return path.stem if path.suffix in (".yaml", ".yml") else ref


def subagent_hints(
    config: AgentConfig,
    dirs: Sequence[Path] | None = None,
    known: Mapping[str, AgentConfig] | None = None,
) -> list[tuple[str, str]]:
    """``(name, one-line description)`` of each agent ``config`` may delegate to, in its
    listed order (stable, for the system prompt's cached prefix)."""
    return [(d.name, d.description) for d in load_delegates(config, dirs, known)]


# -- the task tool -------------------------------------------------------------------------


def depth_of(info: SessionInfo) -> int:
    """How deep a session is among subagents (0: not a subagent's session)."""
    raw = info.metadata.get(SUBAGENT_KEY)
    depth = raw.get("depth") if isinstance(raw, dict) else None
    return depth if isinstance(depth, int) and not isinstance(depth, bool) else 0


class Subagents:
    """The ``task`` tool of one agent: its delegates and how their runs are started.

    ``cancel`` gives the parent's current cancel event (None outside a turn); ``emit``
    takes the parent's events (``subagent_started``, ``subagent_event``,
    ``subagent_finished``)."""

    def __init__(
        self,
        delegates: Sequence[Delegate],
        *,
        factory: AgentFactory,
        cancel: Callable[[], threading.Event | None],
        emit: EventHandler,
    ) -> None:
        self.delegates = {d.name: d for d in delegates}
        self._factory = factory
        self._cancel = cancel
        self._emit = emit

    def tool(self) -> Tool:
        names = list(self.delegates)
        listing = "\n".join(f"- {d.name}: {d.description}" for d in self.delegates.values())
        return make_tool(
            self.run_task,
            name=TASK_TOOL,
            description=f"{TASK_DESCRIPTION}\n{listing}",
            parameters={
                "type": "object",
                "properties": {
                    "agent": {
                        "type": "string",
                        "enum": names,
                        "description": "Which agent does the task.",
                    },
                    "description": {
                        "type": "string",
                        "description": "A short title of the task (3-5 words).",
                    },
                    "prompt": {
                        "type": "string",
                        "description": "The whole task: what to do, what to return, and "
                        "every fact it needs.",
                    },
                },
                "required": ["agent", "description", "prompt"],
            },
            takes_context=True,
            concurrent=True,
        )

    def run_task(self, ctx: ToolContext, agent: str, description: str, prompt: str) -> ToolOutput:
        """Run one delegation to its end; every failure is an error output."""
        delegate = self.delegates.get(agent)
        if delegate is None:
            known = ", ".join(self.delegates) or "none"
            return _error(f"no agent named {agent!r} to delegate to (agents: {known})", "bad_agent")
        if delegate.config is None:
            return _error(f"agent {agent!r} cannot run: {delegate.error}", "bad_agent")
        if not prompt.strip():
            return _error("the task's prompt is empty", "bad_arguments")
        depth = depth_of(ctx.session.info) + 1
        if depth > MAX_DEPTH:
            return _error(
                f"subagents nest at most {MAX_DEPTH} deep; do this task here instead",
                "subagent_depth",
            )
        cancel = self._cancel()
        if cancel is not None and cancel.is_set():
            return _error(f"cancelled before subagent {agent!r} started", "cancelled")
        try:
            child_agent = self._factory(delegate.config)
        except Exception as exc:
            return _error(f"agent {agent!r} cannot run: {type(exc).__name__}: {exc}", "bad_agent")
        try:
            return self._run(ctx, child_agent, delegate, description, prompt, depth, cancel)
        finally:
            try:
                child_agent.close()
            except Exception as exc:
                logger.info("closing subagent %s: %s", agent, exc)

    def _run(
        self,
        ctx: ToolContext,
        child_agent: ChildAgent,
        delegate: Delegate,
        description: str,
        prompt: str,
        depth: int,
        cancel: threading.Event | None,
    ) -> ToolOutput:
        link = {
            "parent_session": ctx.session.id,
            "tool_call_id": ctx.call.id,
            "message_seq": ctx.message_seq,
            "agent": delegate.name,
            "description": description,
            "depth": depth,
        }
        try:
            child = ctx.store.create_session(
                agent=child_agent.config.name,
                model=child_agent.model_spec,
                title=one_line(description) if description.strip() else None,
                parent=ctx.session.id,
                metadata={CHILD_KIND_KEY: SUBAGENT_CHILD, SUBAGENT_KEY: link},
            )
        except Exception as exc:
            return _error(f"could not create the subagent's session: {exc}", "subagent_failed")
        tag = {
            "session_id": child.id,
            "parent_session_id": ctx.session.id,
            "call_id": ctx.call.id,
            "agent": delegate.name,
        }
        meta: dict[str, dict[str, Any]] = {
            SUBAGENT_KEY: {"session_id": child.id, "agent": delegate.name}
        }

        def forward(name: str, payload: dict[str, Any]) -> None:
            if name == "subagent_event":  # a grandchild's: keeps its own session id
                self._emit(name, payload)
            else:
                self._emit("subagent_event", {**tag, "event": name, "payload": payload})

        def on_text(text: str) -> None:
            forward("text_delta", {"text": text})

        child_agent.on_event = forward
        self._emit("subagent_started", {**tag, "description": description})
        try:
            result = child_agent.run_turn(child, prompt, stream=on_text, cancel=cancel)
        except Exception as exc:
            logger.info("subagent %s in %s failed: %s", delegate.name, child.id, exc)
            self._finished(tag, "failed", None)
            return _error(
                f"subagent {delegate.name!r} failed (session {child.id}): "
                f"{type(exc).__name__}: {exc}",
                "subagent_failed",
                meta,
            )
        self._finished(tag, result.stopped, result.steps)
        meta[SUBAGENT_KEY].update(stopped=result.stopped, steps=result.steps)
        if result.stopped == "cancelled":
            return _error(
                f"subagent {delegate.name!r} was cancelled (session {child.id})", "cancelled", meta
            )
        if result.stopped == "step_limit":
            return _error(
                f"subagent {delegate.name!r} stopped at its step limit ({result.steps} model "
                f"calls) before a final answer (session {child.id})",
                "subagent_step_limit",
                meta,
            )
        return ToolOutput(result.text, metadata=meta)

    def _finished(self, tag: dict[str, Any], stopped: str, steps: int | None) -> None:
        self._emit("subagent_finished", {**tag, "stopped": stopped, "steps": steps})


def _error(text: str, kind: str, metadata: dict[str, Any] | None = None) -> ToolOutput:
    return ToolOutput(text, metadata=metadata or {}, is_error=True, error_kind=kind)
