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
    p = _payload(rec)
    if rec.get("type") != "response_item" or p.get("type") != "message" or p.get("role") != "user":
        return False
    texts = [c.get("text") for c in p.get("content") or [] if isinstance(c, Mapping)]
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
