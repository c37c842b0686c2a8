"""Extraction with a model: a structured (JSON) prompt through any ``threadline.llm`` provider.

The model sees the turns numbered by seq and answers with one JSON object of
entities, facts and relations; each fact names the seq it came from, and a fact
citing a seq that was not shown is dropped, so provenance stays real. The hybrid
runs the extractive extractor too: its episodes and facts are kept whatever the
model does, and a model failure (an error, or a reply that is not the JSON asked
for) falls back to them with a warning instead of losing the exchange.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from threadline.errors import ModelError
from threadline.llm.base import ChatModel, ChatRequest
from threadline.memory.base import Entity, Extraction, Extractor, Fact, Origin, Relation, Source
from threadline.memory.extract import ExtractiveExtractor, speaker_of
from threadline.messages import Message

logger = logging.getLogger(__name__)

MAX_TURN_CHARS = 2000
MAX_OUTPUT_TOKENS = 2000
ENTITY_KINDS = ("person", "place", "project", "tool", "path", "id", "date", "organization", "thing")
FACT_KINDS = ("fact", "preference", "decision", "event")

SYSTEM_PROMPT = """You extract long-term memory from a conversation.
Reply with ONE JSON object and nothing else, with exactly these keys:
{"entities": [{"name": str, "kind": one of %(kinds)s, "aliases": [str]}],
 "facts": [{"seq": int, "subject": str or null, "statement": str, "object": str or null,
            "slot": str or null, "kind": one of %(fact_kinds)s, "confidence": number 0-1}],
 "relations": [{"source": str, "label": str, "target": str}]}
Rules:
- Only what a participant states about people, places, projects, tools, files, ids, dates,
  preferences ("I prefer / I use / always / never"), decisions and lasting facts. No chit-chat.
- "seq" is the number of the turn the fact comes from, exactly as shown in [brackets].
- Write each statement in the third person with names, never "I" or "you".
- "slot" names what the fact is the value of when it can only have one value at a time
  (e.g. "lives in", "works at", "favorite editor"), so a newer fact can replace it; else null.
- Empty lists when there is nothing worth remembering."""


def transcript(messages: Sequence[Message]) -> str:
    lines = []
    for m in messages:
        if m.seq is None or m.role not in ("user", "assistant") or not m.text.strip():
            continue
        text = m.text.strip()[:MAX_TURN_CHARS]
        lines.append(f"[{m.seq}] {speaker_of(m)}: {text}")
    return "\n".join(lines)


def parse_reply(text: str) -> dict[str, Any]:
    """The JSON object in a reply (code fences and text around it tolerated)."""
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.S)
    raw = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ModelError(f"the memory extractor's reply is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ModelError("the memory extractor's reply is not a JSON object")
    return data


def _str(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _items(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = data.get(key, [])
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class LLMExtractor(Extractor):
    """Entities, facts and relations from a chat model's structured answer."""

    def __init__(self, model: ChatModel, *, temperature: float | None = 0.0) -> None:
        self.model = model
        self.temperature = temperature
        self.requests = 0

    def extract_from(self, messages: list[Message], origin: Origin) -> Extraction:
        shown = transcript(messages)
        if not shown:
            return Extraction()
        prompt = SYSTEM_PROMPT % {
            "kinds": "|".join(ENTITY_KINDS),
            "fact_kinds": "|".join(FACT_KINDS),
        }
        request = ChatRequest(
            messages=[Message.system(prompt), Message.user(shown)],
            temperature=self.temperature,
            max_tokens=MAX_OUTPUT_TOKENS,
            tool_choice="none",
        )
        response = self.model.complete(request)
        self.requests += 1
        data = parse_reply(response.message.text)
        when = {m.seq: origin.observed_at or m.created_at for m in messages if m.seq is not None}
        return self._build(data, origin.scope, origin.session_id, when)

    def _build(
        self, data: dict[str, Any], scope: str, session_id: str, when: dict[int, datetime]
    ) -> Extraction:
        out = Extraction()
        latest = max(when.values())
        for item in _items(data, "entities"):
            name = _str(item.get("name"))
            if name is None:
                continue
            kind = item.get("kind") if item.get("kind") in ENTITY_KINDS else "thing"
            aliases = [a.strip() for a in item.get("aliases") or [] if _str(a)]
            out.entities.append(
                Entity(scope=scope, name=name, kind=str(kind), aliases=aliases, last_seen=latest)
            )
        for item in _items(data, "facts"):
            seq, statement = item.get("seq"), _str(item.get("statement"))
            if statement is None or not isinstance(seq, int) or seq not in when:
                continue  # a fact must point at a turn that was shown
            confidence = item.get("confidence", 0.8)
            if isinstance(confidence, bool) or not isinstance(confidence, int | float):
                confidence = 0.8
            out.facts.append(
                Fact(
                    scope=scope,
                    subject=_str(item.get("subject")),
                    statement=statement,
                    object=_str(item.get("object")),
                    slot=_str(item.get("slot")),
                    kind=item.get("kind") if item.get("kind") in FACT_KINDS else "fact",
                    session_id=session_id,
                    seq=seq,
                    sources=[Source(session_id=session_id, seq=seq)],
                    observed_at=when[seq],
                    confidence=min(1.0, max(0.0, float(confidence))),
                )
            )
        for item in _items(data, "relations"):
            source, label, target = (_str(item.get(k)) for k in ("source", "label", "target"))
            if source and label and target:
                out.relations.append(
                    Relation(
                        scope=scope, source=source, label=label, target=target, observed_at=latest
                    )
                )
        return out


class HybridExtractor(Extractor):
    """The extractive extractor, plus a model's facts when the model answers well."""

    def __init__(self, model: ChatModel, *, extractive: ExtractiveExtractor | None = None) -> None:
        self.llm = LLMExtractor(model)
        self.extractive = extractive or ExtractiveExtractor()
        self.failures = 0

    def extract_from(self, messages: list[Message], origin: Origin) -> Extraction:
        base = self.extractive.extract_from(messages, origin)
        try:
            found = self.llm.extract_from(messages, origin)
        except ModelError as exc:
            self.failures += 1
            logger.warning("memory extraction with the model failed, kept the extractive: %s", exc)
            return base
        # the model's phrasing wins where both found the same turn's fact
        model_turns = {f.seq for f in found.facts}
        kept = [f for f in base.facts if f.seq not in model_turns]
        base.facts = [*found.facts, *kept]
        base.entities += found.entities
        base.relations += found.relations
        return base
