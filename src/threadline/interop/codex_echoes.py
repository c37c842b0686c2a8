"""Which of a Codex rollout's ``event_msg`` user messages carry a turn of their own.

Schema (codex-rs ``protocol``: ``RolloutItem`` is ``session_meta``, ``turn_context``,
``response_item``, ``event_msg``, ``compacted``; newer versions add ``world_state``):
the model-visible history is the ``response_item`` payloads; ``event_msg`` repeats
what the UI showed. A turn's user input is written twice, as a ``response_item``
``message`` with ``role: "user"`` and as an ``event_msg`` ``user_message``
(``message``, ``images``: data URLs, ``local_images``: paths), but Codex Desktop and
some CLI versions write only the event. So an event is imported exactly when no
``response_item`` user message carries the same turn: none between the model output
before it and the model output after it (never both). A user message made only of
Codex's own context (``<environment_context>``, ``<user_instructions>``,
``# AGENTS.md instructions``, ``<recommended_plugins>``, ...: ``CONTEXT_PREFIXES``)
does not carry a turn.

Everything else ``codex_rollout`` reads from a rollout is documented there;
``event_msg`` echoes other than these (``agent_message``, ``agent_reasoning``,
``exec_command_end``, ``token_count`` for usage, ...) and ``world_state`` (the
environment Codex describes to the model in its developer messages) are not
messages and are counted as skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.messages import ImagePart, Message, Part, TextPart

MODEL_OUTPUT = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "reasoning",
    }
)
"""``response_item`` types the model produced (besides assistant messages)."""
CONTEXT_PREFIXES = (
    "<environment_context",
    "<user_instructions",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
    "<recommended_plugins",
    "<skill",
    "<user_shell_command",
    "<turn_aborted",
)
"""The context fragments Codex writes as user messages (codex-rs contextual user
fragments): none of them is what the user typed."""


def _payload(rec: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = rec.get("payload")
    return payload if isinstance(payload, Mapping) else {}


def _is_output(rec: Mapping[str, Any]) -> bool:
    p = _payload(rec)
    if rec.get("type") != "response_item":
        return False
    return p.get("type") in MODEL_OUTPUT or (
        p.get("type") == "message" and p.get("role") == "assistant"
    )


def _carries_turn(rec: Mapping[str, Any]) -> bool:
    if not _is_user_item(rec):
        return False
    texts = [c.get("text") for c in _payload(rec).get("content") or [] if isinstance(c, Mapping)]
    return not all(isinstance(t, str) and t.lstrip().startswith(CONTEXT_PREFIXES) for t in texts)


def _is_echo(rec: Mapping[str, Any]) -> bool:
    return rec.get("type") == "event_msg" and _payload(rec).get("type") == "user_message"


def user_turns(records: Sequence[Mapping[str, Any]]) -> set[int]:
    """Indexes (into ``records``) of the user-message events to import as messages."""
    keep: set[int] = set()
    window: list[int] = []
    carried = False
    for i, rec in enumerate([*records, {"type": "end"}]):
        if _is_output(rec) or rec.get("type") == "end":
            if not carried:
                keep.update(window)
            window, carried = [], False
        elif _is_echo(rec):
            window.append(i)
        elif _carries_turn(rec):
            carried = True
    return keep


_REDACTION_SHA = re.compile(r"\A\[REDACTED_\w*\s+len=\d+\s+sha=(?P<sha>[0-9a-f]+)\]\Z")
"""A sanitiser's placeholder: the same ``sha`` in the item and in the event is the same text."""


def _same_text(item: str, event: str) -> bool:
    item, event = item.strip(), event.strip()
    if not event:
        return False
    a, b = _REDACTION_SHA.match(item), _REDACTION_SHA.match(event)
    if a and b:
        return a.group("sha") == b.group("sha")
    return item == event


def _item_texts(rec: Mapping[str, Any]) -> list[str]:
    content = _payload(rec).get("content")
    return [
        c["text"]
        for c in (content if isinstance(content, list) else [])
        if isinstance(c, Mapping) and isinstance(c.get("text"), str)
    ]


def _typed_by(rec: Mapping[str, Any], events: Sequence[str]) -> bool:
    texts = _item_texts(rec)
    joined = "\n".join(texts)
    return any(_same_text(t, e) for e in events for t in [*texts, joined])


def context_items(records: Sequence[Mapping[str, Any]]) -> set[int]:
    """Indexes of the ``response_item`` user messages no person typed: in a turn whose
    ``user_message`` event says what the person typed, the user messages that are not
    that text are what Codex put beside it (AGENTS.md, environment context, a turn
    aborted notice), whatever their words (a redacted rollout hides them). A turn with no
    event (an older rollout), or none of whose items is the event's text, says nothing;
    ``CONTEXT_PREFIXES`` still reads those."""
    found: set[int] = set()
    items: list[int] = []
    events: list[str] = []
    for i, rec in enumerate([*records, {"type": "end"}]):
        if _is_output(rec) or rec.get("type") == "end":
            typed = {j for j in items if _typed_by(records[j], events)}
            if typed:  # else the typed text was rewritten (an expanded command): say nothing
                found.update(j for j in items if j not in typed)
            items, events = [], []
        elif _is_echo(rec):
            message = _payload(rec).get("message")
            events.append(message if isinstance(message, str) else "")
        elif _is_user_item(rec):
            items.append(i)
    return found


def _is_user_item(rec: Mapping[str, Any]) -> bool:
    p = _payload(rec)
    return (
        rec.get("type") == "response_item"
        and p.get("type") == "message"
        and (p.get("role") == "user")
    )


def user_message(payload: Mapping[str, Any]) -> Message:
    """The event's text and pasted images as a user message."""
    parts: list[Part] = []
    text = payload.get("message")
    if isinstance(text, str) and text:
        parts.append(TextPart(text=text))
    parts += [ImagePart(url=u) for u in payload.get("images") or [] if isinstance(u, str)]
    meta = {"codex_event": "user_message"}
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return Message.user(parts[0].text, metadata=meta)
    return Message.user(parts, metadata=meta)
