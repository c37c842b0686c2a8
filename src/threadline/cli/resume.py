"""Which agent and model a resumed chat runs: the session's own, unless overridden.

``threadline chat -c`` / ``-s ID`` and ``/session ID`` go on with the agent and
model the session was chatting with (``llm -c`` keeps its model too): the model
stored on the session, and the agent (name or file) and display settings the chat
stored in its metadata under ``CHAT_KEY``. ``--model`` and an AGENT argument
override them. A session that was not made by the chat (an import, another
program) uses its agent's file when there is one, else the built-in agent, and
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.agent import AgentConfig, default_agent, load_agent
from threadline.errors import ConfigError
from threadline.llm.registry import parse_model
from threadline.store.base import SessionInfo, Store

CHAT_KEY = "chat"
"""Session metadata the chat keeps: ``{"agent": name or file, "tokens": bool}``."""


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


def resume_target(
    store: Store, *, agent: str | None, session_id: str | None, resume_last: bool
) -> SessionInfo | None:
    """The session ``-s`` names, or for ``-c`` the most recently updated one (of AGENT,
    when given); None when there is none to resume."""
    if session_id is not None:
        return store.session_info(store.resolve_id(session_id))
    if not resume_last:
        return None
    name = load_agent(agent).name if agent else None
    latest = store.list_sessions(agent=name, limit=1).items
    return latest[0] if latest else None


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
            except ConfigError:
                notes.append(
                    f"agent {candidate!r} has no agent file here; using the built-in agent"
                )
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
