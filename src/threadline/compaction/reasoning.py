"""The agent's own reasoning (its thinking) as the source of why it chose what it did.

Importers keep a model's thinking beside its turn (``metadata["thinking"]``:
Anthropic ``thinking`` blocks, the ``reasoning`` parts of OpenCode, OpenHands and
Pi, Gemini CLI's ``thoughts``). That is where an agent weighs its options ("I think
it's cleaner to keep the old functions separate rather than risk tight coupling")
and its visible text seldom repeats the reason. Reasoning deliberates and changes
its mind, so only its conclusion counts: the last sentence of one turn's reasoning
that states a choice of the agent's own (``decisions.agent_strength``), and it is a
decision only once a call carries it out, as a choice said in text is.
"""

from __future__ import annotations

from collections.abc import Mapping

from threadline.compaction.decisions import agent_strength
from threadline.compaction.prose import sentences
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


def concluded_choice(m: Message) -> tuple[str, float] | None:
    """The last choice ``m``'s reasoning states, with how surely it is one; None when its
    reasoning states none. Only announced choices count (they wait for the call that
    carries them out): a "done" report in thinking is the model talking to itself."""
    last: tuple[str, float] | None = None
    for sentence in sentences(reasoning_text(m)):
        strength, waits = agent_strength(sentence)
        if strength and waits:
            last = (sentence, strength)
    return last


__all__ = ["concluded_choice", "reasoning_text"]
