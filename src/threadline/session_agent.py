"""Which agent runs a session: one rule for the chat, the CLI's reports and the server.

A session goes on with the agent and model it was running with (``llm -c`` keeps its
model too): the model stored on the session, and the agent (name or file) and display
settings the chat stored in its metadata under ``CHAT_KEY``. An explicit model or
agent overrides them. A session that was not made by the chat (an import, another
program, the server) uses its agent's file when there is one, else the built-in
agent, and says so: a note naming the agent and where its file was looked for, in
every window's report (``threadline context``, the chat's ``/context``, the web
page's context panel, ``session.get``) and on ``serve``'s console.

``session_agent`` builds that agent; a ``simulated/...`` model is the offline
scripted coding agent of ``threadline demo`` (its system prompt, policy and tools),
so ``threadline context`` and the web page report on a demo session what its turns
get. ``threadline context``, ``threadline compact``, the chat and the agent server
all find a session's agent here, so their reports agree.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from threadline.agent import Agent, AgentConfig, Calibrator, default_agent, load_agent
from threadline.compaction.compactor import Compactor
from threadline.context.policy import ContextPolicy
from threadline.errors import ConfigError, UsageError, validation_problems
from threadline.llm.registry import parse_model
from threadline.store.protocol import Store
from threadline.store.session_info import SessionInfo

CHAT_KEY = "chat"
"""Session metadata the chat keeps: ``{"agent": name or file, "tokens": bool}``."""
SIMULATED_PROVIDER: Final = "simulated"
"""``simulated/<model>``: the offline scripted coding agent of ``threadline demo``."""
SIMULATED_TURNS: Final = 12
"""How many scripted turns the simulated model knows (prompts with their text play back)."""


@dataclass
class ChatSetup:
    """The agent config to chat with, and what the user should be told about it."""

    config: AgentConfig
    agent_ref: str | None
    """What to load the agent from again (its name or file); None: the built-in agent."""
    show_tokens: bool = False
    notes: list[str] = field(default_factory=list)


def agent_ref(name: str | None) -> str | None:
    """An AGENT argument as it can be loaded again from anywhere: a file by absolute path."""
    if name is None:
        return None
    path = Path(name).expanduser()
    return str(path.resolve()) if path.suffix in (".yaml", ".yml") and path.is_file() else name


def chat_settings(info: SessionInfo) -> dict[str, Any]:
    raw = info.metadata.get(CHAT_KEY)
    return raw if isinstance(raw, dict) else {}


def settings_metadata(setup_ref: str | None, *, show_tokens: bool) -> dict[str, Any]:
    """What a chat stores on its session so that resuming it restores the same setup."""
    return {CHAT_KEY: {"agent": setup_ref, "tokens": show_tokens}}


def is_simulated(spec: str | None) -> bool:
    """Whether ``spec`` names the demo's offline simulated model."""
    return spec is not None and spec.strip().partition("/")[0] == SIMULATED_PROVIDER


def setup_for(info: SessionInfo | None, *, agent: str | None, model: str | None) -> ChatSetup:
    """The agent and model for a chat on ``info`` (None: a new session): explicit AGENT
    and ``--model`` first, then what the session stored, then the defaults."""
    notes: list[str] = []
    settings = chat_settings(info) if info is not None else {}
    ref = agent_ref(agent)
    explicit_agent = ref is not None
    if ref is not None:
        config = load_agent(ref)
    else:
        stored = settings.get("agent")
        candidate = stored if isinstance(stored, str) else (info.agent if info else None)
        config, ref = default_agent(), None
        if candidate is not None and candidate != config.name:
            try:
                config, ref = load_agent(candidate), candidate
            except ConfigError as exc:  # names the agent and where it was looked for
                notes.append(f"{exc}; using the built-in agent's prompt and tools instead")
    # an explicit AGENT brings its own model; the stored one applies to the stored agent
    spec = model or (info.model if info is not None and not explicit_agent else None)
    if spec and spec != config.model_spec:
        try:
            parse_model(spec)  # an unknown provider (a demo's "simulated/...") falls back
            config = config.with_model(spec)
        except ConfigError as exc:
            if model:
                raise
            notes.append(
                f"the session's model {spec!r} cannot be used ({exc}); using {config.model_spec}"
            )
    tokens = settings.get("tokens")
    return ChatSetup(config, ref, show_tokens=tokens is True, notes=notes)


def with_context(config: AgentConfig, overrides: Mapping[str, Any]) -> AgentConfig:
    """``config`` with some of its ``ContextPolicy`` fields replaced (validated)."""
    if not overrides:
        return config
    try:
        policy = ContextPolicy.model_validate({**config.context.model_dump(), **overrides})
    except ValidationError as exc:
        raise UsageError(f"invalid context options: {validation_problems(exc)}") from exc
    return config.model_copy(update={"context": policy})


def session_agent(
    store: Store,
    info: SessionInfo,
    *,
    agent: str | None = None,
    model: str | None = None,
    fit_only: bool = False,
    compactor: Compactor | None = None,
    calibrator: Calibrator | None = None,
    context: Mapping[str, Any] | None = None,
    simulated_policy: ContextPolicy | None = None,
) -> Agent:
    """The agent that runs ``info``'s turns (see the module docstring); close it after.

    ``model`` and ``agent`` override the session's own; ``context`` overrides fields of
    the agent's policy; ``simulated_policy`` replaces the demo's policy for a simulated
    model (the server's tests shrink it). The model itself is resolved on first use.
    ``fit_only``: the agent only builds windows (a report), so ``model`` is taken as
    given even when no provider serves it (the catalog's defaults fit it, with a
    warning); otherwise such a model raises ``ConfigError``."""
    spec = model or info.model
    if is_simulated(spec) and agent is None:
        assert spec is not None
        config, model_obj, tools = _simulated(info.agent, spec.strip(), simulated_policy)
        from threadline.demo.skill_step import demo_skills  # the demo agent's prompt, whole

        return Agent(
            with_context(config, context or {}),
            store=store,
            model=model_obj,
            tools=tools,
            compactor=compactor,
            calibrator=calibrator or Calibrator(),
            skills=demo_skills(),
        )
    if fit_only and model is not None:
        setup = setup_for(info, agent=agent, model=None)
        config = setup.config.with_model(model)
    else:
        setup = setup_for(info, agent=agent, model=model)
        config = setup.config
    return Agent(
        with_context(config, context or {}),
        store=store,
        compactor=compactor,
        calibrator=calibrator,
        notes=setup.notes,
    )


def _simulated(name: str, spec: str, policy: ContextPolicy | None) -> tuple[AgentConfig, Any, Any]:
    from threadline.demo.run import DEMO_POLICY, DEMO_SYSTEM_PROMPT
    from threadline.demo.simulated import SimulatedCodingModel, simulated_tools

    scenario = _scenario()
    config = AgentConfig(
        name=name,
        description="the offline simulated coding agent",
        model=spec,
        system_prompt=DEMO_SYSTEM_PROMPT,
        context=policy or DEMO_POLICY,
        summarizer="extractive",
        tools=(),
    )
    return config, SimulatedCodingModel(scenario), simulated_tools(scenario)


@functools.lru_cache(maxsize=1)
def _scenario() -> Any:
    """The simulated model's scripted turns (made once: a page shows a report per view)."""
    from threadline.demo.coding_run import coding_run

    return coding_run(SIMULATED_TURNS)
