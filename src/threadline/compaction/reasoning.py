"""The agent's own reasoning (its thinking), read the same way whichever tool kept it.

Importers keep a model's thinking beside its turn (``metadata["thinking"]``:
Anthropic ``thinking`` blocks, the ``reasoning`` parts of OpenCode, OpenHands and
Pi, Gemini CLI's ``thoughts``). The compaction reads a fix the agent announced
there, and whether the agent spoke again (``extractive``).
"""

from __future__ import annotations

from collections.abc import Mapping

from threadline.messages import Message

_TEXT_KEYS = ("thinking", "text", "description")
"""Where each importer's block keeps the words (Anthropic, reasoning parts, Gemini)."""


def reasoning_text(m: Message) -> str:
    """The thinking kept with ``m``, block by block ("" when there is none)."""
    kept = m.metadata.get("thinking")
    if isinstance(kept, str):
        return kept
    if not isinstance(kept, list):
        return ""
    parts: list[str] = []
    for block in kept:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping):
            text = next((block[k] for k in _TEXT_KEYS if isinstance(block.get(k), str)), "")
            if text.strip():
                parts.append(text)
    return "\n\n".join(parts)


__all__ = ["reasoning_text"]
