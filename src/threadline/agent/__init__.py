"""The agent runtime: configuration, tools, doom-loop detection and the turn loop.

Re-exports only; see ``loop`` for how a turn runs and ``config`` for agent files.
"""

from threadline.agent.calibration import (
    DEFAULT_CALIBRATOR,
    Calibrator,
    UsageObservation,
    last_usage,
)
from threadline.agent.config import (
    AgentConfig,
    MemoryConfig,
    ModelConfig,
    RuntimeContextConfig,
    agent_dirs,
    default_agent,
    list_agents,
    load_agent,
    parse_agent,
)
from threadline.agent.doom import DoomLoopDetector, LoopWarning
from threadline.agent.loop import Agent, AgentEvent, TurnResult
from threadline.agent.prompt import build_system_prompt, runtime_context
from threadline.agent.tools import (
    BUILTIN_TOOLS,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    builtin_registry,
    make_tool,
)

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_CALIBRATOR",
    "Agent",
    "AgentConfig",
    "AgentEvent",
    "Calibrator",
    "DoomLoopDetector",
    "LoopWarning",
    "MemoryConfig",
    "ModelConfig",
    "RuntimeContextConfig",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "TurnResult",
    "UsageObservation",
    "agent_dirs",
    "build_system_prompt",
    "builtin_registry",
    "default_agent",
    "last_usage",
    "list_agents",
    "load_agent",
    "make_tool",
    "parse_agent",
    "runtime_context",
]
