"""Agent configuration: ``agents/NAME.yaml`` files, validated, and the built-in default.

An agent file is the reference CLI's format (``shared/seeds/000``/``001``)::

    name: coder
    model:
      provider: anthropic/claude-sonnet-4-5-20250929   # or simply  model: openai/gpt-4o
      temperature: 0.2
    system_prompt: You are a careful coding assistant.
    context:                       # any ContextPolicy field
      max_messages_before_summary: 30
      min_recent_messages: 6
    memory:                        # long-term memory across sessions (see MemoryConfig)
      enabled: true
      scope: user:alice            # default: this agent's own scope, agent:NAME
    max_steps: 10
    summarizer: auto
    tools: [scratchpad_write, scratchpad_read, scratchpad_list]
    agents: [researcher, ./agents/reviewer.yaml]   # may delegate to these (the task tool)
    skills: [release-notes, ./skills/review]   # see threadline.agent.skills

``load_agent(NAME)`` looks in ``./agents`` first (a project's own agents win),
then in the user config directory; a path to a file works too. Every problem
is a ``ConfigError`` naming the file, the field path (``context.min_recent_messages``)
and what was expected; YAML syntax errors name the line. Unknown keys are
errors, not silently ignored: a typo in a threshold should not quietly fall
back to the default.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from threadline.agent.tools import BUILTIN_TOOLS
from threadline.context.builder import DEFAULT_MEMORY_SHARE
from threadline.context.policy import ContextPolicy
from threadline.errors import (
    ConfigError,
    InvalidSessionId,
    ThreadlineError,
    UsageError,
    file_validation_error,
)
from threadline.llm.base import DEFAULT_FIRST_BYTE_TIMEOUT, DEFAULT_TIMEOUT
from threadline.store.checks import DEFAULT_AGENT, validate_agent
from threadline.yaml_limits import load_yaml

APP_NAME = "threadline"
AGENTS_DIRNAME = "agents"
AGENT_SUFFIXES = (".yaml", ".yml")
CONFIG_DIR_ENV = "THREADLINE_CONFIG_DIR"
"""Overrides the user config directory (``platformdirs.user_config_dir("threadline")``)."""
MODEL_ENV = "THREADLINE_MODEL"
"""The default agent's model, as ``provider/model``."""
DEFAULT_MODEL_SPEC = "openai/gpt-4o"
DEFAULT_MAX_STEPS = 10
"""Model calls per turn (the agent server's ``maxSteps``)."""
MAX_STEPS_LIMIT = 1000
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer clearly and concisely. When tools are available, "
    "use them when they help, and say what you did. If you are unsure, say so."
)
DEFAULT_TOOLS: tuple[str, ...] = tuple(BUILTIN_TOOLS)
"""The built-in agent gets the scratchpad tools."""
MAX_AGENT_FILE_BYTES = 1024 * 1024
MAX_MEMORY_SHARE = 0.5
MAX_RETRIEVAL_LIMIT = 100
"""Memories may not crowd out the conversation they serve."""
MAX_DELEGATES = 32
"""Agents one agent may delegate to; each is a line of its prompt and of its task tool."""

SummarizerKind = Literal["extractive", "llm", "hybrid", "auto"]
TimeResolution = Literal["date", "hour", "none"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Config):
    """Which model an agent talks to, and how."""

    provider: str = Field(min_length=1)
    """The model string, ``provider/model`` (the reference CLI's key name)."""
    base_url: str | None = None
    """An OpenAI-compatible server's URL (Ollama, vLLM, ...); overrides the provider's."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    """Cap on the reply's length; None leaves it to the provider."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    """Seconds one whole model request may take (a long reply from a slow local model
    can take minutes)."""
    first_byte_timeout: float = Field(default=DEFAULT_FIRST_BYTE_TIMEOUT, gt=0)
    """Seconds to wait for a reply's first byte, and for each next chunk: a server that
    accepted the request and sends nothing is given up on (and retried) after this."""

    @property
    def spec(self) -> str:
        return self.provider.strip()


class MemoryConfig(_Config):
    """Long-term memory across sessions (``threadline.memory``): an entity graph of facts.

    When enabled, exchanges are signal-flagged as they are appended and extracted into
    facts every ``extraction_threshold`` flagged ones (and always before a compaction
    summarizes them); each turn, up to ``retrieval_limit`` memories relevant to the
    user's message go into the window, inside ``share`` of the budget and after the
    stable prefix; and the agent gets the ``memory_search``, ``memory_recall`` and
    ``memory_write`` tools.
    """

    enabled: bool = False
    extraction_threshold: int = Field(default=5, ge=1)
    """Extract every N signal-flagged exchanges."""
    retrieval_limit: int = Field(default=10, ge=0, le=MAX_RETRIEVAL_LIMIT)
    """Inject up to N memories per turn (0: the tools only)."""
    auto_extract: bool = True
    """Extract automatically; off, facts come from the tools and pre-compaction flushes."""
    scope: str | None = None
    """Whose memories: ``agent:NAME`` (default: this agent's own), or a ``user:NAME`` /
    ``project:NAME`` scope several agents share (a bare name is a project scope)."""
    share: float = Field(default=DEFAULT_MEMORY_SHARE, ge=0.0, le=MAX_MEMORY_SHARE)
    """The share of the context budget kept for injected memories."""
    relevance_floor: float = Field(default=0.15, ge=0.0, le=1.0)
    """The share of the request's terms a memory must contain (and at least two) to be
    injected: when none clears it, nothing is injected."""

    @field_validator("scope")
    @classmethod
    def _check_scope(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from threadline.memory import scope_for  # the memory package's rule, loaded on use

        try:
            return scope_for(DEFAULT_AGENT, value.strip())
        except UsageError as exc:
            raise ValueError(str(exc)) from None


class RuntimeContextConfig(_Config):
    """What the system prompt says about the runtime (see ``threadline.agent.prompt``)."""

    time: TimeResolution = "date"
    """``date`` (default) or ``hour``: coarse on purpose, so the prompt prefix stays
    cacheable; ``none`` leaves the time out."""
    working_directory: bool = True
    os: bool = True


class AgentConfig(_Config):
    """One agent: model, prompt, context policy and tools."""

    name: str = DEFAULT_AGENT
    """Validated like a session id: it becomes part of stored records."""
    description: str | None = None
    model: ModelConfig = Field(default_factory=lambda: ModelConfig(provider=DEFAULT_MODEL_SPEC))
    """A ``provider/model`` string, or a mapping (provider, base_url, temperature, max_tokens)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    context: ContextPolicy = Field(default_factory=ContextPolicy)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=MAX_STEPS_LIMIT)
    summarizer: SummarizerKind = "auto"
    """How compaction summarizes: offline ``extractive``, the agent's ``llm``, ``hybrid``,
    or ``auto`` (the LLM when one is configured, extractive otherwise)."""
    tools: tuple[str, ...] = ()
    """Built-in tools to enable, by name."""
    runtime_context: RuntimeContextConfig = Field(default_factory=RuntimeContextConfig)
    agents: tuple[str, ...] = ()
    """Agents this one may delegate to with the ``task`` tool (``threadline.agent.subagents``):
    names (looked up like ``load_agent``) or agent-file paths (relative to the working
    directory). Each runs in a child session of its own."""
    skills: tuple[str, ...] | None = None
    """Skills to offer (``threadline.agent.skills``): names found in ``./.threadline/skills``
    or the user's skills folder, paths to skill folders, ``"*"`` for all found. Unset:
    every skill found in those folders."""

    @field_validator("skills")
    @classmethod
    def _check_skills(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if any(not entry.strip() for entry in value):
            raise ValueError("an empty skill name or path")
        if len(set(value)) != len(value):
            raise ValueError("a skill is listed twice")
        return tuple(entry.strip() for entry in value)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        try:
            return validate_agent(value)
        except InvalidSessionId as exc:
            raise ValueError(str(exc)) from None

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"provider": value}
        if value is None or isinstance(value, Mapping | ModelConfig):
            return value
        raise ValueError(
            "expected a provider/model string (openai/gpt-4o) or a mapping with provider, "
            "base_url, temperature, max_tokens"
        )

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [name for name in value if name not in BUILTIN_TOOLS]
        if unknown:
            raise ValueError(
                f"unknown tool(s) {', '.join(map(repr, unknown))}; built-in tools: "
                f"{', '.join(BUILTIN_TOOLS)}"
            )
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value

    @field_validator("agents")
    @classmethod
    def _check_agents(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_DELEGATES:
            raise ValueError(f"at most {MAX_DELEGATES} agents to delegate to, got {len(value)}")
        checked: list[str] = []
        for entry in value:
            ref = entry.strip()
            if not ref:
                raise ValueError("an empty agent name; use an agent's name or its file's path")
            if not _looks_like_path(ref):
                try:
                    validate_agent(ref)
                except InvalidSessionId as exc:
                    raise ValueError(f"{ref!r}: {exc}") from None
            checked.append(ref)
        if len(set(checked)) != len(checked):
            raise ValueError("an agent is listed twice")
        return tuple(checked)

    @property
    def model_spec(self) -> str:
        """The ``provider/model`` string."""
        return self.model.spec

    def with_model(self, spec: str) -> AgentConfig:
        """This agent on another model (``--model``): keeps ``base_url`` only for the same
        provider, since another provider's server would not serve it."""
        spec = spec.strip()
        if not spec:
            raise ConfigError("an empty model name; use provider/model, e.g. openai/gpt-4o")
        same_provider = spec.split("/", 1)[0] == self.model.spec.split("/", 1)[0]
        model = self.model.model_copy(
            update={"provider": spec, "base_url": self.model.base_url if same_provider else None}
        )
        return self.model_copy(update={"model": model})


# -- loading -------------------------------------------------------------------------


def user_config_dir() -> Path:
    """``$THREADLINE_CONFIG_DIR``, else the platform's user config dir for threadline."""
    override = os.environ.get(CONFIG_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def agent_dirs(cwd: Path | None = None) -> list[Path]:
    """Where agents are looked up, in order: ``./agents``, then the user config dir."""
    return [(cwd or Path.cwd()) / AGENTS_DIRNAME, user_config_dir() / AGENTS_DIRNAME]


def _looks_like_path(text: str) -> bool:
    return "/" in text or os.sep in text or text.endswith(AGENT_SUFFIXES)


def find_agent_file(name: str, dirs: Sequence[Path] | None = None) -> Path | None:
    """The first ``NAME.yaml`` (or ``.yml``) in the search dirs, or None."""
    validate_agent(name)
    for directory in dirs if dirs is not None else agent_dirs():
        for suffix in AGENT_SUFFIXES:
            candidate = directory / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def list_agents(dirs: Sequence[Path] | None = None) -> dict[str, Path]:
    """Agent names found in the search dirs, each with the file that wins the lookup."""
    found: dict[str, Path] = {}
    for directory in dirs if dirs is not None else agent_dirs():
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix not in AGENT_SUFFIXES or not path.is_file():
                continue
            try:
                validate_agent(path.stem)
            except InvalidSessionId:
                continue
            found.setdefault(path.stem, path)
    return found


def load_agent(name_or_path: str | Path, *, dirs: Sequence[Path] | None = None) -> AgentConfig:
    """An agent by name (``./agents`` then the user config dir) or by file path.

    ``default`` with no file of that name is the built-in default agent.
    """
    if isinstance(name_or_path, Path) or _looks_like_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ConfigError(f"agent file not found: {path}")
        return load_agent_file(path)
    try:
        name = validate_agent(name_or_path)
    except InvalidSessionId as exc:
        raise ConfigError(str(exc)) from exc
    search = list(dirs) if dirs is not None else agent_dirs()
    found = find_agent_file(name, search)
    if found is not None:
        return load_agent_file(found)
    if name == DEFAULT_AGENT:
        return default_agent()
    looked = ", ".join(str(d / f"{name}.yaml") for d in search)
    known = sorted(list_agents(search))
    hint = f"; agents found: {', '.join(known)}" if known else ""
    raise ConfigError(f"agent {name!r} not found (looked for {looked}){hint}")


def read_text_file(
    path: Path,
    *,
    max_bytes: int,
    what: str,
    error: type[ThreadlineError] = ConfigError,
    single_link: bool = False,
) -> str:
    """A small UTF-8 file a user wrote (an agent file, a SKILL.md): every way it cannot be
    read is an ``error`` naming the file, never an OSError or a decode error. Only a
    regular file is read (a FIFO would hang the reader), never more than ``max_bytes``.

    ``single_link``: the file must be itself, not a symbolic link, and have no other
    hard link, which could be a file anywhere on the disk (the ``skill`` tool's files,
    checked on the descriptor read, so a file swapped after a check is caught too)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if single_link:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{path}: not a regular file, so not read as {what}")
            if single_link and info.st_nlink > 1:
                raise error(
                    f"{path}: has {info.st_nlink} hard links (it may be a file outside "
                    f"this folder), so it is not read as {what}"
                )
            if info.st_size > max_bytes:
                raise error(f"{path}: {info.st_size:,} bytes is too large for {what}")
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise error(f"{path}: more than {max_bytes:,} bytes is too large for {what}")
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as open()
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from exc


def load_agent_file(path: Path) -> AgentConfig:
    """Read and validate one agent file; the name defaults to the file's stem."""
    text = read_text_file(path, max_bytes=MAX_AGENT_FILE_BYTES, what="an agent file")
    return parse_agent(text, source=str(path), default_name=path.stem)


def parse_agent(
    text: str, *, source: str = "<agent>", default_name: str | None = None
) -> AgentConfig:
    """Validate agent YAML; errors name ``source``, the line or the field."""
    data = load_yaml(text, source=source, error=ConfigError)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: an agent file must be a mapping of fields (name, model, ...), "
            f"got {type(data).__name__}"
        )
    data = dict(data)
    if default_name is not None and "name" not in data:
        try:
            data["name"] = validate_agent(default_name)
        except InvalidSessionId as exc:
            raise ConfigError(f"{source}: {exc}") from exc
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            file_validation_error(
                exc,
                source,
                what="agent configuration",
                unknown_field="unknown field (check the spelling; see the agent file reference)",
            )
        ) from exc


# -- the built-in agent ---------------------------------------------------------------


def default_agent(model: str | None = None) -> AgentConfig:
    """The agent used when none is given: ``$THREADLINE_MODEL`` or ``openai/gpt-4o``,
    a short helpful prompt and the scratchpad tools."""
    spec = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL_SPEC
    return AgentConfig(
        name=DEFAULT_AGENT,
        description="threadline's built-in agent",
        model=ModelConfig(provider=spec),
        system_prompt=DEFAULT_SYSTEM_PROMPT,
        tools=DEFAULT_TOOLS,
    )
