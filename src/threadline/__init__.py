"""threadline: durable LLM-agent sessions, and context windows that fit.

The public API is what this module exports; everything else is internal.
"""

from typing import TYPE_CHECKING

from threadline.errors import (  # cheap: no dependencies
    AmbiguousSessionId,
    CheckpointConflict,
    CompactionInProgress,
    ConfigError,
    ContextLengthExceeded,
    ContextOverflow,
    CorruptRecord,
    ImportFormatError,
    ImportTooLarge,
    InvalidMessage,
    InvalidSessionId,
    MessageTooLarge,
    MissingCredentials,
    ModelError,
    NotAThreadlineStore,
    NotSupported,
    SchemaTooNew,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    StoreDamaged,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.lazy_exports import lazy_attributes

if TYPE_CHECKING:
    from threadline.agent import (
        Agent,
        AgentConfig,
        Tool,
        ToolRegistry,
        TurnResult,
        default_agent,
        load_agent,
    )
    from threadline.compaction.compactor import CompactionResult, Compactor, prepare_context
    from threadline.compaction.extractive import ExtractiveSummarizer
    from threadline.compaction.llm import HybridSummarizer, LLMSummarizer, make_summarizer
    from threadline.compaction.triggers import TriggerDecision, check_triggers
    from threadline.context import ContextPolicy, ContextReport, ContextWindow, build_context
    from threadline.context.strategies import StrategyRegistry
    from threadline.messages import (
        FilePart,
        ImagePart,
        Message,
        TextPart,
        ToolCall,
        Unit,
        Usage,
        group_units,
    )
    from threadline.store import (
        Checkpoint,
        LockHolder,
        ScratchpadEntry,
        SearchHit,
        Session,
        SessionInfo,
        SessionPage,
        Store,
        default_store_url,
        open_store,
    )

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "Agent",
            "AgentConfig",
            "Tool",
            "ToolRegistry",
            "TurnResult",
            "default_agent",
            "load_agent",
        ),
        "threadline.agent",
    ),
    **dict.fromkeys(
        ("CompactionResult", "Compactor", "prepare_context"), "threadline.compaction.compactor"
    ),
    **dict.fromkeys(("ExtractiveSummarizer",), "threadline.compaction.extractive"),
    **dict.fromkeys(
        ("HybridSummarizer", "LLMSummarizer", "make_summarizer"), "threadline.compaction.llm"
    ),
    **dict.fromkeys(("TriggerDecision", "check_triggers"), "threadline.compaction.triggers"),
    **dict.fromkeys(
        ("ContextPolicy", "ContextReport", "ContextWindow", "build_context"), "threadline.context"
    ),
    **dict.fromkeys(("StrategyRegistry",), "threadline.context.strategies"),
    **dict.fromkeys(
        (
            "FilePart",
            "ImagePart",
            "Message",
            "TextPart",
            "ToolCall",
            "Unit",
            "Usage",
            "group_units",
        ),
        "threadline.messages",
    ),
    **dict.fromkeys(
        (
            "Checkpoint",
            "LockHolder",
            "ScratchpadEntry",
            "SearchHit",
            "Session",
            "SessionInfo",
            "SessionPage",
            "Store",
            "default_store_url",
            "open_store",
        ),
        "threadline.store",
    ),
}
"""Public name -> the module it lives in. Imported on first use (PEP 562), so
``import threadline.store`` or ``threadline --version`` does not load the agent
loop, the compactor and the providers behind them."""

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentConfig",
    "AmbiguousSessionId",
    "Checkpoint",
    "CheckpointConflict",
    "CompactionInProgress",
    "CompactionResult",
    "Compactor",
    "ConfigError",
    "ContextLengthExceeded",
    "ContextOverflow",
    "ContextPolicy",
    "ContextReport",
    "ContextWindow",
    "CorruptRecord",
    "ExtractiveSummarizer",
    "FilePart",
    "HybridSummarizer",
    "ImagePart",
    "ImportFormatError",
    "ImportTooLarge",
    "InvalidMessage",
    "InvalidSessionId",
    "LLMSummarizer",
    "LockHolder",
    "Message",
    "MessageTooLarge",
    "MissingCredentials",
    "ModelError",
    "NotAThreadlineStore",
    "NotSupported",
    "SchemaTooNew",
    "ScratchpadEntry",
    "SearchHit",
    "Session",
    "SessionExists",
    "SessionInfo",
    "SessionLocked",
    "SessionNotFound",
    "SessionPage",
    "Store",
    "StoreDamaged",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "StrategyRegistry",
    "TextPart",
    "ThreadlineError",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "TriggerDecision",
    "TurnResult",
    "Unit",
    "Usage",
    "UsageError",
    "__version__",
    "build_context",
    "check_triggers",
    "default_agent",
    "default_store_url",
    "group_units",
    "load_agent",
    "make_summarizer",
    "open_store",
    "prepare_context",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
