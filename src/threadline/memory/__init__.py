"""Long-term memory: an entity graph of facts that outlives sessions.

``open_memory(store)`` opens the memory kept beside a store's sessions (same URL:
SQLite, PostgreSQL, JSONL or in-memory; Redis raises ``NotSupported``).
``MemoryRecorder`` flags exchanges as they are appended and extracts facts every
``threshold`` flagged ones; ``memory_tools`` gives an agent ``memory_search``,
``memory_recall`` and ``memory_write``. Re-exports only.
"""

from threadline.memory.base import (
    Entity,
    EntityReport,
    Episode,
    Extraction,
    Extractor,
    Fact,
    MemoryHit,
    MemoryImport,
    MemoryStore,
    Origin,
    Relation,
    Source,
    scope_for,
)
from threadline.memory.extract import ExtractiveExtractor
from threadline.memory.llm_extract import HybridExtractor, LLMExtractor
from threadline.memory.opening import open_memory
from threadline.memory.recorder import MemoryRecorder, is_signal
from threadline.memory.tools import memory_tools

__all__ = [
    "Entity",
    "EntityReport",
    "Episode",
    "Extraction",
    "ExtractiveExtractor",
    "Extractor",
    "Fact",
    "HybridExtractor",
    "LLMExtractor",
    "MemoryHit",
    "MemoryImport",
    "MemoryRecorder",
    "MemoryStore",
    "Origin",
    "Relation",
    "Source",
    "is_signal",
    "memory_tools",
    "open_memory",
    "scope_for",
]
