"""The turn loop: user message in, model and tools until done, compaction after.

One turn (``Agent.run_turn``), following the agent server's prompt flow:

1. append the user message;
2. build the context (the agent's policy, system prompt and tool definitions);
   when that window would leave stored messages neither in it nor under a
   checkpoint, compact first and build again, between the steps of a turn if
   need be (invariant 8: a run of one request and hundreds of tool steps never
   loses its history, its request included);
3. call the model (streaming text to a callback when one is given);
4. append the reply with its model name and reported usage, *before* running
   any tool, so a crash mid-tool leaves a call without a result, which the
   view repairs (invariant 2) instead of a result nobody asked for;
5. run the tool calls through the registry and append their results as one
   batch; check for doom loops and append a warning if one is found;
6. repeat from 2 until a reply has no tool calls, or ``max_steps`` model calls
   were made (then a synthetic note says so and the turn stops);
7. after the turn, let the compactor check its triggers (the one decision it
   shares with ``threadline context``); a failed compaction is reported and
   never breaks the turn. A checkpoint written here is adopted by a ``stable``
   window only when it must re-trim anyway, so the prompt cache keeps hitting.

When the provider says the prompt is too long (``ContextLengthExceeded``), the
turn forces a compaction, rebuilds with aggressive tool-result pruning and
retries that call once; a second refusal raises ``ContextLengthExceeded``
saying what was tried.

Every model call records the builder's estimate next to the input tokens the
provider reported; the ratio calibrates budgets per model
(``threadline.agent.calibration``).

With ``memory.enabled`` (``threadline.agent.memory_link``) the turn also
fetches the memories relevant to its request once, right after step 1, and
every window of the turn carries them in a block before that request (never in
the system prompt, so the cached prefix holds); each appended batch goes to the
memory recorder, and a compaction flushes pending extraction before it
summarizes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from threadline.agent.calibration import (
    DEFAULT_CALIBRATOR,
    Calibrator,
    UsageObservation,
    calibrated_policy,
)
from threadline.agent.config import AgentConfig
from threadline.agent.doom import DoomLoopDetector, LoopWarning
from threadline.agent.prompt import (
    PromptSection,
    join_sections,
    prompt_sections,
)
from threadline.agent.skills import SKILL_TOOL, SkillSet, discover_skills
from threadline.agent.subagents import TASK_TOOL, AgentFactory, Subagents, load_delegates
from threadline.agent.tools import BUILTIN_TOOLS, ToolRegistry
from threadline.compaction.compactor import CompactionResult, Compactor
from threadline.compaction.llm import LLMSummarizer, make_summarizer
from threadline.context.builder import ContextReport, ContextWindow, Section, build_context
from threadline.context.policy import ContextPolicy
from threadline.errors import ContextLengthExceeded, ModelError, UsageError
from threadline.llm.base import ChatModel, ChatRequest, ChatResponse
from threadline.llm.cancel import CallCancelled
from threadline.llm.registry import resolve_model
from threadline.messages import ImagePart, Message, ToolCall, Usage
from threadline.store.locks import LockHolder
from threadline.store.protocol import Session, Store

if TYPE_CHECKING:
    from threadline.agent.memory_link import AgentMemory
    from threadline.memory import Extractor, MemoryStore

logger = logging.getLogger(__name__)

AgentEvent = Literal[
    "turn_started",
    "model_called",
    "tool_started",
    "tool_finished",
    "doom_loop",
    "step_limit",
    "context_length_exceeded",
    "compacted",
    "compaction_failed",
    "turn_finished",
    "memory_recalled",
    "memory_flushed",
    "memory_failed",
    "subagent_started",
    "subagent_event",
    "subagent_finished",
]
EventHandler = Callable[[str, dict[str, Any]], None]
"""``on_event(name, payload)``; payload keys per event are listed on ``Agent``."""

StopReason = Literal["done", "step_limit", "cancelled"]

STEP_LIMIT_PREFIX = "[threadline: step limit reached]"
CANCELLED_TEXT = "[cancelled before the reply began]"
"""What a turn cancelled before any text arrived stores as its reply, so the history
stays valid (the next request does not follow a user message with another)."""


class _Cancelled(Exception):
    """A streamed reply stopped by ``run_turn(cancel=...)``: the text so far and the
    window it answered."""

    def __init__(self, text: str, window: ContextWindow) -> None:
        super().__init__("cancelled")
        self.text = text
        self.window = window


STEP_LIMIT_TEXT = (
    STEP_LIMIT_PREFIX + " The agent made {steps} model calls in this turn (max_steps) and was "
    "stopped before it gave a final answer; the results of its last tool calls are above. "
    "(This note was written by threadline, not by the user.)"
)
ESTIMATE_METADATA_KEY = "estimated_input_tokens"
"""Stored on each reply: the builder's estimate of the context it answered."""
REPLY_METADATA_STEP = "step"
MAX_CONCURRENT_TOOLS = 4
"""Calls of ``concurrent`` tools (subagents) in one reply that run at the same time."""
MEDIA_SCAN_MESSAGES = 200
"""How far back the first turn of an agent on a session looks for inline images; later
images are seen as they are appended (a user's message, a tool's result)."""


@dataclass
class TurnResult:
    """What one turn did."""

    reply: Message
    """The last assistant message, as stored (with ``seq``)."""
    steps: int
    """Model calls made (retries after a context-length error not counted)."""
    messages_appended: list[Message]
    """Everything the turn stored, in order: user, replies, tool results, notices."""
    compaction: CompactionResult | None
    """The after-turn compaction check (None when the agent has no compactor)."""
    usage: Usage
    """Summed over the turn's model calls."""
    context_report: ContextReport
    """The report of the last context built."""
    context_tokens: int
    """The builder's estimate of the last context sent."""
    observations: list[UsageObservation] = field(default_factory=list)
    """Per model call: estimated vs reported input tokens."""
    stopped: StopReason = "done"
    loop_warnings: list[LoopWarning] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    """What the context-length recovery did, when it ran."""

    @property
    def text(self) -> str:
        return self.reply.text

    @property
    def estimated_input_tokens(self) -> int:
        return self.context_tokens

    @property
    def reported_input_tokens(self) -> int | None:
        return self.observations[-1].reported_input_tokens if self.observations else None


def add_usage(total: Usage, more: Usage | None) -> Usage:
    """Field-wise sum; a field stays None until some call reports it."""
    if more is None:
        return total

    def plus(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else a + b

    return Usage(
        input_tokens=plus(total.input_tokens, more.input_tokens),
        output_tokens=plus(total.output_tokens, more.output_tokens),
        cached_tokens=plus(total.cached_tokens, more.cached_tokens),
        cache_write_tokens=plus(total.cache_write_tokens, more.cache_write_tokens),
    )


@dataclass(frozen=True, slots=True)
class _Call:
    """One answered model call: the reply, the window it answered, how it was recovered."""

    response: ChatResponse
    window: ContextWindow
    recovery: list[str]
    duration_ms: float


class Agent:
    """An agent: a config, a store, a chat model, tools and a compactor.

    ``model`` defaults to ``resolve_model(config.model_spec)`` on first use;
    ``tools`` to the config's built-in tools (a given registry is copied and
    combined with them, so register tools before making the agent);
    ``compactor`` to one with the config's summarizer and policy (``auto``
    means hybrid with this agent's model: it calls the model to summarize, so
    give a scripted model ``summarizer: extractive``).

    Events (``on_event(name, payload)``; a handler that raises is logged, never
    propagated): ``turn_started {session_id, message}``, ``model_called {step,
    model, estimated_input_tokens, reported_input_tokens, output_tokens,
    duration_ms, tool_calls}``, ``tool_started {step, call}``, ``tool_finished
    {step, call, result, is_error, duration_ms}``, ``doom_loop {warning}``,
    ``step_limit {steps}``, ``context_length_exceeded {step, error,
    estimated_input_tokens}``, ``compacted {result}``, ``compaction_failed
    {result}``, ``turn_finished {result}``; with memory, ``memory_recalled
    {session_id, seq, hits}``, ``memory_flushed {session_id, up_to_seq, facts}`` and
    ``memory_failed {session_id, step, error}``; with ``config.agents``,
    ``subagent_started {session_id, parent_session_id, call_id, agent, description}``,
    ``subagent_event {session_id, parent_session_id, call_id, agent, event, payload}``
    (a child's own event; ``session_id`` is the child's) and ``subagent_finished {...,
    stopped, steps}``.

    With ``config.memory.enabled`` the agent opens the memory beside ``store``
    (or uses ``memory``, which it then does not close), adds the memory tools
    (a given tool of the same name wins) and hooks the pre-compaction flush
    into its compactor; ``extractor`` overrides the recorder's default.

    With ``config.agents`` the agent gets the ``task`` tool (``threadline.agent.subagents``);
    ``subagent_factory`` builds the agent that runs a delegate's config (default: an
    ``Agent`` on this store with the delegate's own model); delegates are the configs
    ``agent_configs`` names (built in code), else files in ``agent_dirs`` (default
    ``./agents`` then the user config dir).

    Skills (``threadline.agent.skills``) are discovered from the config's ``skills`` and
    the skills folders (or given as ``skills``); when there are any, the system prompt
    lists them and the agent gets the ``skill`` tool. A skill that cannot be loaded is
    logged and listed in ``skill_problems``, never raised. ``subagent_hints`` are the (name,
    description) hints of the agents this one may delegate to (default: its
    delegates'); the prompt lists them, sorted.
    """

    def __init__(
        self,
        config: AgentConfig,
        *,
        store: Store,
        model: ChatModel | None = None,
        tools: ToolRegistry | None = None,
        compactor: Compactor | None = None,
        on_event: EventHandler | None = None,
        calibrator: Calibrator | None = None,
        detector: DoomLoopDetector | None = None,
        now: Callable[[], datetime] | None = None,
        memory: MemoryStore | None = None,
        extractor: Extractor | None = None,
        subagent_factory: AgentFactory | None = None,
        agent_dirs: Sequence[Path] | None = None,
        agent_configs: Mapping[str, AgentConfig] | None = None,
        skills: SkillSet | None = None,
        subagent_hints: Sequence[tuple[str, str]] | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.notes = list(notes)
        """What its caller was told about how this agent was chosen (an agent file not
        found, so the built-in agent runs): every window's report carries them."""
        self.store = store
        self._model = model
        self._owns_model = model is None
        self._cancel: threading.Event | None = None
        self.tools = _combine_tools(tools, config.tools)
        self.skills = skills if skills is not None else discover_skills(config.skills)
        for problem in self.skills.problems:
            logger.warning("agent %s: a skill was left out: %s", config.name, problem)
        if self.skills and SKILL_TOOL not in self.tools:
            self.tools.register(self.skills.tool())
        self._media: set[str] = set()
        """Sessions known to hold inline images: their prompts carry the media section."""
        self._media_checked: set[str] = set()
        self.on_event = on_event
        self.calibrator = calibrator or DEFAULT_CALIBRATOR
        self.detector = detector or DoomLoopDetector()
        self._now = now
        self._calibration_loaded: set[str] = set()
        self.memory: AgentMemory | None = None
        """The agent's long-term memory (None unless ``memory.enabled``)."""
        if config.memory.enabled:
            from threadline.agent.memory_link import AgentMemory  # only agents that use it

            self.memory = AgentMemory(
                config.memory,
                agent_name=config.name,
                store=store,
                memory=memory,
                extractor=extractor,
                now=now,
                on_event=lambda name, payload: self._emit(name, **payload),
            )
            for tool in self.memory.tools():
                if tool.name not in self.tools:
                    self.tools.register(tool)
        self._subagent_factory = subagent_factory
        self._agent_dirs = agent_dirs
        self._agent_configs = agent_configs
        self.subagents: Subagents | None = None
        """The ``task`` tool's delegates (None unless ``config.agents``)."""
        if config.agents:
            self.subagents = Subagents(
                load_delegates(config, agent_dirs, agent_configs),
                factory=subagent_factory or self._child_agent,
                cancel=lambda: self._cancel,
                emit=lambda name, payload: self._emit(name, **payload),  # type: ignore[arg-type]
            )
            if TASK_TOOL not in self.tools:
                self.tools.register(self.subagents.tool())
        self.subagent_hints: list[tuple[str, str]] = (
            list(subagent_hints)
            if subagent_hints is not None
            else [(d.name, d.description) for d in self.subagents.delegates.values()]
            if self.subagents is not None
            else []
        )
        """What the system prompt says of the delegates (name, one-line description)."""
        self._compactor = compactor
        if compactor is not None:
            self._hook_memory(compactor)

    def __repr__(self) -> str:
        return f"Agent({self.config.name!r}, model={self.model_spec!r})"

    # -- parts ------------------------------------------------------------------------

    @property
    def model_spec(self) -> str:
        """``provider/model``: what budgets, token counts and calibration are keyed by."""
        return self.config.model_spec

    @property
    def policy(self) -> ContextPolicy:
        return self.config.context

    @property
    def model(self) -> ChatModel:
        """The chat model, resolved from the config on first use (may raise
        ``MissingCredentials`` or ``ConfigError`` naming what to set)."""
        if self._model is None:
            overrides: dict[str, Any] = {
                "timeout": self.config.model.timeout,
                "first_byte_timeout": self.config.model.first_byte_timeout,
            }
            if self.config.model.base_url:
                overrides["base_url"] = self.config.model.base_url
            self._model = resolve_model(self.model_spec, **overrides)
        return self._model

    @property
    def compactor(self) -> Compactor:
        if self._compactor is None:
            kind = self.config.summarizer
            needs_model = kind in ("llm", "hybrid", "auto")
            summarizer = make_summarizer(
                None if kind == "auto" else kind,
                self.model if needs_model else None,
                max_words=self.policy.summary_max_words,
            )
            self._compactor = self._hook_memory(Compactor(summarizer, policy=self.policy))
        return self._compactor

    def _hook_memory(self, compactor: Compactor) -> Compactor:
        """Flush pending memory extraction before ``compactor`` summarizes (once), and let
        a cancelled turn close its model summarizer's request."""
        llm = getattr(compactor.summarizer, "llm", compactor.summarizer)
        if isinstance(llm, LLMSummarizer) and llm.cancel is None:
            llm.cancel = lambda: self._cancel
        if self.memory is not None:
            flush = self.memory.before_compaction
            if flush not in compactor.hooks.listeners("before_compaction"):
                compactor.on("before_compaction", flush)
        return compactor

    def close(self) -> None:
        """Close the model's connections if this agent created the model, and the memory
        if it opened it."""
        if self.memory is not None:
            self.memory.close()
        if self._owns_model and self._model is not None:
            close = getattr(self._model, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _child_agent(self, config: AgentConfig) -> Agent:
        """The default subagent: the delegate's config on its own model, sharing this
        agent's store, calibrator, clock and way of building subagents."""
        return Agent(
            config,
            store=self.store,
            calibrator=self.calibrator,
            now=self._now,
            subagent_factory=self._subagent_factory,
            agent_dirs=self._agent_dirs,
            agent_configs=self._agent_configs,
        )

    # -- sessions and views -------------------------------------------------------------

    def new_session(
        self,
        *,
        title: str | None = None,
        id: str | None = None,
        lock: LockHolder | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """A new session of this agent on this agent's model (with memory on, recording
        the project it works in, so its memories stay with that project)."""
        if self.memory is not None:
            metadata = self.memory.session_metadata(metadata)
        return self.store.create_session(
            agent=self.config.name,
            model=self.model_spec,
            title=title,
            id=id,
            metadata=metadata,
            lock=lock,
        )

    @property
    def skill_problems(self) -> list[str]:
        """Skills left out because they could not be loaded, one line each."""
        return list(self.skills.problems)

    def prompt_sections(
        self, now: datetime | None = None, *, session: Session | None = None
    ) -> list[PromptSection]:
        """The system prompt's sections (``prompt.prompt_sections``): the media section
        when ``session`` is known to hold inline images."""
        when = now or (self._now() if self._now is not None else None)
        return prompt_sections(
            self.config.system_prompt,
            self.config.runtime_context,
            skills=self.skills.hints(),
            subagents=self.subagent_hints,
            media=session is not None and self._has_media(session),
            now=when,
            session=session.info.metadata if session is not None else None,
        )

    def system_prompt(self, now: datetime | None = None, *, session: Session | None = None) -> str:
        """The assembled system prompt; byte-identical from turn to turn within a day."""
        return join_sections(self.prompt_sections(now, session=session))

    def _has_media(self, session: Session) -> bool:
        """Whether ``session`` holds inline images: its recent tail is looked at once per
        agent (a resumed session, ``threadline context``), later appends as they come."""
        if session.id not in self._media_checked:
            self._media_checked.add(session.id)
            self._note_media(session, session.tail(MEDIA_SCAN_MESSAGES))
        return session.id in self._media

    def _note_media(self, session: Session, messages: Sequence[Message]) -> None:
        """Remember that ``session`` holds inline images once any of ``messages`` does."""
        if session.id not in self._media and any(_has_image(m) for m in messages):
            self._media.add(session.id)

    def build(
        self,
        session: Session,
        *,
        aggressive: bool = False,
        system_prompt: str | Sequence[PromptSection] | None = None,
        calibrated: bool = True,
        memories: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> ContextWindow:
        """The window the next model call would get (what ``/context`` shows).

        With memory on, ``memories`` are the lines to place before the latest request
        (default: those recalled for it). ``system_prompt`` and ``tools`` replace the
        agent's own (``threadline context --system/--tools``); given as sections (a turn's
        prompt, assembled once), the report lists them."""
        self._load_calibration(session)
        policy = self.policy
        factor = self.calibrator.factor(self.model_spec)
        if calibrated:
            policy = calibrated_policy(policy, model=self.model_spec, factor=factor)
        if system_prompt is None:
            system_prompt = self.prompt_sections(session=session)
        sections = None if isinstance(system_prompt, str) else list(system_prompt)
        window = build_context(
            session,
            model=self.model_spec,
            system_prompt=join_sections(sections) if sections is not None else str(system_prompt),
            tools=list(tools) if tools is not None else self.tools.definitions(),
            policy=policy,
            aggressive=aggressive,
            **self._memory_args(session, memories),
        )
        if sections is not None:
            window.report.prompt_sections = _section_costs(sections, window.model)
        if self.memory is not None and memories is None:
            reasons = [i.reason() for i in self.memory.injected(session)]
            window.report.memory_reasons = reasons[: len(window.report.memories)]
        window.report.notes.extend(self.notes)
        for problem in self.skills.problems:
            window.report.notes.append(f"skill left out: {problem}")
        if policy is not self.policy:
            window.report.notes.append(
                f"budget calibrated: {self.model_spec} counts {factor:.3f}x our estimate, so "
                f"the window is built against {policy.context_limit:,} estimated tokens"
            )
        return window

    def _memory_args(self, session: Session, memories: Sequence[str] | None) -> dict[str, Any]:
        return {} if self.memory is None else self.memory.window_args(session, memories)

    def compact(
        self,
        session: Session,
        *,
        force: bool = True,
        keep_recent: int | None = None,
        keep_turns: int | None = None,
        focus: str | None = None,
    ) -> CompactionResult:
        """Compact now (``/compact [focus]``); raises on failure, unlike the after-turn check.

        The kept tail is sized for this agent's window (the budget of its next build)."""
        return self.compactor.compact(
            session,
            force=force,
            model=self.model_spec,
            budget=self.build(session).budget,
            keep_recent=keep_recent,
            keep_turns=keep_turns,
            focus=focus,
        )

    # -- the turn -------------------------------------------------------------------------

    def run_turn(
        self,
        session: Session,
        user: str | Message,
        *,
        stream: Callable[[str], None] | None = None,
        max_steps: int | None = None,
        cancel: threading.Event | None = None,
    ) -> TurnResult:
        """Run one user turn to its end; see the module docstring for the steps.

        Setting ``cancel`` (from another thread) stops the turn: the model request in
        flight is closed (a ``CancelToken`` at once, a plain event within a tenth of a
        second; a model without HTTP stops at its next piece), the reply so far is stored
        once, marked interrupted, and the result says ``stopped="cancelled"``; between
        steps the turn stops at the next step boundary."""
        message = _user_message(user)
        self._cancel = cancel
        limit = max_steps if max_steps is not None else self.config.max_steps
        if limit < 1:
            raise UsageError(f"max_steps must be at least 1, got {limit}")
        self._ensure_model(session)
        self._load_calibration(session)
        self._emit("turn_started", session_id=session.id, message=message)

        appended: list[Message] = list(session.append(message))
        memories = self._remember(session, appended)
        self._note_media(session, appended)
        system_prompt = self.prompt_sections(session=session)  # one time for the whole turn
        tool_defs = self.tools.definitions()
        observations: list[UsageObservation] = []
        warnings: list[LoopWarning] = []
        recovered: list[str] = []
        usage = Usage()
        steps = 0
        stopped: StopReason = "done"
        while True:
            steps += 1
            try:
                call = self._call_model(
                    session, system_prompt, tool_defs, stream=stream, step=steps, memories=memories
                )
            except _Cancelled as cut:
                partial = Message.assistant(
                    cut.text or CANCELLED_TEXT, metadata={"interrupted": True}
                )
                stored_reply = session.append(partial)[0]
                appended.append(stored_reply)
                window, stopped = cut.window, "cancelled"
                break
            window = call.window
            recovered += call.recovery
            reply = self._stamp_reply(call.response, window, steps)
            observation = self.calibrator.observe(
                self.model_spec, estimated=window.tokens, usage=reply.usage, step=steps
            )
            observations.append(observation)
            usage = add_usage(usage, reply.usage)
            stored_reply = session.append(reply)[0]
            appended.append(stored_reply)
            self._observe(session, [stored_reply])
            self._emit(
                "model_called",
                step=steps,
                model=stored_reply.model,
                estimated_input_tokens=window.tokens,
                reported_input_tokens=observation.reported_input_tokens,
                output_tokens=observation.output_tokens,
                duration_ms=round(call.duration_ms, 3),
                tool_calls=list(stored_reply.tool_calls),
            )
            if not stored_reply.tool_calls:
                break
            # the results, and any notice about them, are stored as one batch
            batch = self._run_tools(session, stored_reply, steps)
            warning = self.detector.check([*appended, *batch])
            if warning is not None:
                warnings.append(warning)
                batch.append(warning.message())
            if steps >= limit:
                stopped = "step_limit"
                batch.append(
                    Message.user(
                        STEP_LIMIT_TEXT.format(steps=steps),
                        synthetic=True,
                        metadata={"step_limit": {"steps": steps, "max_steps": limit}},
                    )
                )
            stored_batch = session.append(batch)
            appended += stored_batch
            self._note_media(session, stored_batch)
            self._observe(session, stored_batch)
            if warning is not None:
                self._emit("doom_loop", warning=warning)
            if stopped == "step_limit":
                self._emit("step_limit", steps=steps)
                break
            if self._cancel is not None and self._cancel.is_set():
                stopped = "cancelled"
                break

        self._cancel = None
        self._save_calibration(session, observations)
        compaction = None
        # a cancelled turn stops now: the next turn compacts if the history needs it
        if observations and stopped != "cancelled":
            last = observations[-1]
            real_context = (
                last.reported_input_tokens
                or self.calibrator.real_tokens(self.model_spec, last.estimated_input_tokens)
            ) + (last.output_tokens or 0)
            compaction = self._compact_after_turn(session, real_context, window)
        result = TurnResult(
            reply=stored_reply,
            steps=steps,
            messages_appended=appended,
            compaction=compaction,
            usage=usage,
            context_report=window.report,
            context_tokens=window.tokens,
            observations=observations,
            stopped=stopped,
            loop_warnings=warnings,
            recovered=recovered,
        )
        self._emit("turn_finished", result=result)
        return result

    # -- steps ------------------------------------------------------------------------------

    def _request(self, window: ContextWindow) -> ChatRequest:
        return ChatRequest(
            messages=window.messages,
            tools=window.tools,
            temperature=self.config.model.temperature,
            max_tokens=self.config.model.max_tokens,
            cancel=self._cancel,
        )

    def _send(
        self, window: ContextWindow, stream: Callable[[str], None] | None, recovery: list[str]
    ) -> _Call:
        started = time.perf_counter()
        pieces: list[str] = []
        if stream is None:
            try:
                response = self.model.complete(self._request(window))
            except CallCancelled:
                raise _Cancelled("", window) from None
        else:
            final: ChatResponse | None = None
            try:
                for item in self.model.stream(self._request(window)):
                    if self._cancel is not None and self._cancel.is_set():
                        raise _Cancelled("".join(pieces), window)
                    if isinstance(item, ChatResponse):
                        final = item
                    elif item:
                        pieces.append(item)
                        stream(item)
            except CallCancelled:  # the provider closed the request in flight
                raise _Cancelled("".join(pieces), window) from None
            if final is None:
                raise ModelError(f"{self.model_spec}: the stream ended without a final reply")
            response = final
        return _Call(response, window, recovery, (time.perf_counter() - started) * 1000)

    def _call_model(
        self,
        session: Session,
        system_prompt: Sequence[PromptSection],
        tool_defs: Sequence[Mapping[str, Any]],
        *,
        stream: Callable[[str], None] | None,
        step: int,
        memories: Sequence[str] | None = None,
    ) -> _Call:
        """One model call; on a context-length refusal, compact, prune hard, retry once."""
        window = self._fit(session, system_prompt, memories)
        try:
            return self._send(window, stream, [])
        except ContextLengthExceeded as first:
            self._emit(
                "context_length_exceeded",
                step=step,
                error=str(first),
                estimated_input_tokens=window.tokens,
            )
            tried = [f"the first request ({window.tokens:,} estimated tokens) was refused"]
            tried.append(self._emergency_compaction(session))
            retry = self.build(
                session, system_prompt=system_prompt, aggressive=True, memories=memories
            )
            pruned = len(retry.report.pruned)
            tried.append(
                f"aggressive pruning ({pruned} tool result{'s' if pruned != 1 else ''} "
                f"shrunk) rebuilt it at {retry.tokens:,} estimated tokens"
            )
            try:
                return self._send(retry, stream, tried)
            except ContextLengthExceeded as second:
                raise ContextLengthExceeded(
                    f"{self.model_spec} still refused the prompt as too long after recovery: "
                    + "; ".join(tried)
                    + f"; the retry was refused too ({second}). The window is "
                    f"{retry.limit:,} tokens with {self.policy.response_reserve:,} reserved for "
                    "the reply: lower context.context_limit or raise response_reserve in the "
                    "agent file, shorten the system prompt or tools, or start a new session."
                ) from second

    def _fit(
        self,
        session: Session,
        system_prompt: Sequence[PromptSection],
        memories: Sequence[str] | None = None,
    ) -> ContextWindow:
        """The next window; when it would leave stored messages neither in it nor under a
        checkpoint, compact first, mid-turn if need be (invariant 8)."""
        window, result = self.compactor.compact_to_fit(
            session,
            lambda: self.build(session, system_prompt=system_prompt, memories=memories),
            model=self.model_spec,
        )
        if result is not None and result.compacted:
            self._emit("compacted", result=result)
        elif result is not None and result.status == "failed":
            self._emit("compaction_failed", result=result)
        return window

    def _emergency_compaction(self, session: Session) -> str:
        """The provider refused the prompt although it fitted our count: summarize all but
        the newest message, which the model must answer."""
        try:
            result = self.compactor.compact(
                session, force=True, model=self.model_spec, keep_recent=1, keep_turns=0
            )
        except Exception as exc:  # the retry still goes ahead, with pruning only
            logger.warning("emergency compaction of %s failed: %s", session.id, exc)
            return f"a forced compaction failed ({type(exc).__name__}: {exc})"
        if result.compacted:
            self._emit("compacted", result=result)
            return (
                f"a forced compaction summarized messages {result.covers_from}-"
                f"{result.covers_up_to}"
            )
        return f"a forced compaction did nothing ({result.reason or result.status})"

    def _stamp_reply(self, response: ChatResponse, window: ContextWindow, step: int) -> Message:
        reply = response.message
        if reply.role != "assistant":
            raise ModelError(f"{self.model_spec}: the model's reply has role {reply.role!r}")
        metadata = dict(reply.metadata)
        metadata[ESTIMATE_METADATA_KEY] = window.tokens
        metadata[REPLY_METADATA_STEP] = step
        return reply.model_copy(
            update={
                "model": reply.model or response.model or self.model.model,
                "usage": reply.usage or response.usage,
                "metadata": metadata,
                "seq": None,
                "token_counts": {},
            }
        )

    def _run_tools(self, session: Session, reply: Message, step: int) -> list[Message]:
        """The results in call order; calls of ``concurrent`` tools (subagents) run at the
        same time, in up to ``MAX_CONCURRENT_TOOLS`` threads, beside the others."""
        calls = list(reply.tool_calls)

        def run(call: ToolCall) -> Message:
            self._emit("tool_started", step=step, call=call)
            started = time.perf_counter()
            result = self.tools.run(call, session=session, message_seq=reply.seq)
            self._emit(
                "tool_finished",
                step=step,
                call=call,
                result=result,
                is_error=bool(result.metadata.get("is_error")),
                duration_ms=(time.perf_counter() - started) * 1000,
            )
            return result

        together = [i for i, call in enumerate(calls) if self._concurrent(call)]
        if len(together) < 2:
            return [run(call) for call in calls]
        workers = min(MAX_CONCURRENT_TOOLS, len(together))
        with ThreadPoolExecutor(workers, thread_name_prefix="threadline-tool") as pool:
            futures = {i: pool.submit(run, calls[i]) for i in together}
            results = [None if i in futures else run(call) for i, call in enumerate(calls)]
            return [r if r is not None else futures[i].result() for i, r in enumerate(results)]

    def _concurrent(self, call: ToolCall) -> bool:
        tool = self.tools.get(call.name)
        return tool is not None and tool.concurrent and call.raw_arguments is None

    def _compact_after_turn(
        self, session: Session, context_tokens: int, window: ContextWindow
    ) -> CompactionResult | None:
        try:
            result = self.compactor.compact_if_needed(
                session,
                model=self.model_spec,
                context_tokens=context_tokens,
                budget=window.budget,
                window=window.report,
            )
        except Exception as exc:  # compact_if_needed should not raise; a turn never fails here
            logger.warning("after-turn compaction of %s failed: %s", session.id, exc, exc_info=exc)
            result = CompactionResult(
                session_id=session.id, status="failed", error=f"{type(exc).__name__}: {exc}"
            )
        if result.compacted:
            self._emit("compacted", result=result)
        elif result.status == "failed":
            self._emit("compaction_failed", result=result)
        return result

    # -- memory ---------------------------------------------------------------------------

    def _remember(self, session: Session, appended: Sequence[Message]) -> list[str] | None:
        """After the request is stored: show it to the recorder, fetch its memories once
        for the whole turn, and let the memory tools write with this session's provenance."""
        if self.memory is None:
            return None
        self.memory.attach(session)
        self.memory.observe(session, appended)
        return self.memory.lines(session, appended[0])

    def _observe(self, session: Session, messages: Sequence[Message]) -> None:
        if self.memory is not None:
            self.memory.observe(session, messages)

    # -- bookkeeping ------------------------------------------------------------------------

    def _ensure_model(self, session: Session) -> None:
        """A session without a model takes the agent's, so appends count with its tokenizer."""
        if session.model is None:
            self.store.update_session(session.id, model=self.model_spec)
            session.refresh()

    def _load_calibration(self, session: Session) -> None:
        if session.id in self._calibration_loaded:
            return
        try:
            self.calibrator.load(session)
        except Exception as exc:  # calibration is an optimisation; never fail a turn for it
            logger.warning("could not load the calibration of %s: %s", session.id, exc)
        self._calibration_loaded.add(session.id)

    def _save_calibration(self, session: Session, observations: Sequence[UsageObservation]) -> None:
        try:
            self.calibrator.save(session, observations)
        except Exception as exc:
            logger.warning("could not save the calibration of %s: %s", session.id, exc)

    def _emit(self, name: AgentEvent, **payload: Any) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(name, payload)
        except Exception as exc:  # a listener's bug must not break the turn
            logger.warning("agent event handler failed on %s: %s", name, exc, exc_info=exc)


def _has_image(m: Message) -> bool:
    return not isinstance(m.content, str) and any(isinstance(p, ImagePart) for p in m.content)


def _section_costs(sections: Sequence[PromptSection], model: str) -> list[Section]:
    """Each section's tokens and a one-line detail: the names a hint list gives, else the
    section's first line of content."""
    from threadline.tokens import counter_for

    counter = counter_for(model)
    out = []
    for s in sections:
        lines = [ln for ln in s.text.splitlines() if ln.strip() and not ln.startswith("# ")]
        hints = [ln[2:].split(":", 1)[0] for ln in lines if ln.startswith("- ")]
        listed = s.name in ("skills", "subagents")
        detail = ", ".join(hints) if listed else (lines[0] if lines else "")
        count = len(hints) if listed else 0
        out.append(
            Section(name=s.name, tokens=counter.count_text(s.text), messages=count, detail=detail)
        )
    return out


def _user_message(user: str | Message) -> Message:
    if isinstance(user, str):
        if not user.strip():
            raise UsageError("the user message is empty")
        return Message.user(user)
    if not isinstance(user, Message) or user.role != "user":
        raise UsageError("run_turn takes the user's text or a user Message")
    return user


def _combine_tools(tools: ToolRegistry | None, builtin: Sequence[str]) -> ToolRegistry:
    """The given tools plus the config's built-ins (a given tool of the same name wins)."""
    combined = ToolRegistry(list(tools) if tools is not None else [])
    for name in builtin:
        if name not in combined:
            combined.register(BUILTIN_TOOLS[name])
    return combined
