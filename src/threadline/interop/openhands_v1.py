"""OpenHands V1 (the ``openhands-sdk`` agent SDK) events as threadline messages.

A V1 conversation is stored as a directory of one JSON file per event,
``~/.openhands/conversations/<id>/events/event-<NNNNN>-<event id>.json``: that
directory is ONE conversation (:func:`conversation_files` finds it from the directory
or from any of its event files, and :func:`joined` reads it as one JSON array). A V1
benchmark ``output.jsonl`` holds one run a line, its events in ``history``; the legacy
(V0) event shapes are read by ``openhands_events``.

Schema read (``openhands/sdk/event``; every event has ``kind``, ``id``,
``timestamp``, ``source`` of ``user`` / ``agent`` / ``environment``):

- ``SystemPromptEvent``: ``system_prompt`` and ``dynamic_context`` (``TextContent``
  ``{type: "text", text}``) become one system message. Its ``tools`` (the tool
  schemas sent beside it) are not conversation text and are left out.
- ``MessageEvent``: ``llm_message {role, content, reasoning_content,
  thinking_blocks}`` becomes a user or assistant message (``TextContent`` as text,
  ``ImageContent {image_urls}`` as images); ``extended_content`` (text the SDK
  appended, e.g. skill knowledge) follows the content; reasoning goes to
  ``metadata["thinking"]``; ``activated_skills``, ``critic_result`` (score and
  message) and ``sender`` are kept in metadata.
- ``ActionEvent``: ``thought`` (``TextContent`` list), ``reasoning_content``,
  ``thinking_blocks``, ``tool_call {id, name, arguments}`` (older SDKs: LiteLLM's
  ``{id, function: {name, arguments}}``), ``tool_name``, ``tool_call_id``,
  ``action`` (the parsed arguments, used when ``tool_call`` is absent),
  ``llm_response_id``, ``security_risk``, ``summary``. An assistant message with the
  call; actions sharing ``llm_response_id`` are one response with parallel calls.
- ``ObservationEvent``: ``observation {content, is_error, ...}`` (content a list of
  ``TextContent`` / ``ImageContent``, or older SDKs' ``output`` / string content),
  ``tool_name``, ``tool_call_id``, ``action_id``: a tool message answering
  ``tool_call_id``.
- ``UserRejectObservation`` (``rejection_reason``) and ``AgentErrorEvent``
  (``error``): tool messages answering ``tool_call_id``, flagged ``is_error``.
- ``Condensation`` (``forgotten_event_ids``, ``summary``) and
  ``CondensationSummaryEvent`` (``summary``): a native compaction, kept as a
  checkpoint covering the messages up to the last one it forgot.
- ``PauseEvent``, ``ConversationStateUpdateEvent``, ``CondensationRequest``,
  ``ConversationErrorEvent`` and any other kind: the runtime's bookkeeping, kept as
  environment events in metadata (never as messages), counted by kind.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from threadline.errors import ImportFormatError, InvalidMessage
from threadline.interop.records import mapping, stamp, timestamp
from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall

EVENT_FILE = re.compile(r"^event-\d+-[^/]+\.json$")
"""How the SDK names an event file in a conversation's ``events`` directory."""
KINDS = frozenset(
    {
        "SystemPromptEvent",
        "MessageEvent",
        "ActionEvent",
        "ObservationEvent",
        "UserRejectObservation",
        "AgentErrorEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "ConversationStateUpdateEvent",
        "ConversationErrorEvent",
        "PauseEvent",
    }
)
"""Event kinds of the SDK; :func:`is_event` accepts any ``*Event`` kind as well."""
SNIFF_BYTES = 64 * 1024
EVENT_TEXT = 500


def is_event(record: Any) -> bool:
    """Whether ``record`` is a V1 event (as opposed to a V0 action or observation)."""
    if not isinstance(record, Mapping):
        return False
    kind = record.get("kind")
    return isinstance(kind, str) and (kind in KINDS or kind.endswith("Event"))


# -- the conversation directory ------------------------------------------------------


def conversation_files(path: Path) -> list[Path] | None:
    """The event files of the conversation directory ``path`` is (or holds one event
    file of), in the SDK's order; None when it is no such directory."""
    folder = path if path.is_dir() else path.parent
    if not path.is_dir() and not EVENT_FILE.match(path.name):
        return None
    try:
        files = sorted(p for p in folder.iterdir() if EVENT_FILE.match(p.name) and p.is_file())
    except OSError:
        return None
    if not files or not _looks_like_event(files[0]):
        return None
    return files


def _looks_like_event(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    return head.lstrip()[:1] == b"{" and b'"kind"' in head


def joined(files: list[Path], read_text: Callable[[Path, int], str], limit: int) -> str:
    """The events as one JSON array (each file's text as written), read within ``limit``
    bytes in all; a file that is not one JSON object is refused, naming it."""
    texts: list[str] = []
    left = limit
    for p in files:
        text = read_text(p, left)
        left -= len(text.encode("utf-8", "surrogatepass"))
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno, path=str(p)
            ) from exc
        if not is_event(record):
            raise ImportFormatError("not an OpenHands event (no 'kind')", path=str(p))
        texts.append(text.strip())
    return "[\n" + ",\n".join(texts) + "\n]\n"


def conversation_id(files: list[Path]) -> str | None:
    """The conversation's id: the name of the directory above ``events``."""
    folder = files[0].parent
    return folder.parent.name if folder.name == "events" and folder.parent.name else None


# -- events to messages ----------------------------------------------------------------


def _texts(content: Any) -> list[Part]:
    """``TextContent`` / ``ImageContent`` blocks (or a plain string) as parts."""
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        for url in block.get("image_urls") or []:
            if isinstance(url, str):
                parts.append(ImagePart(url=url))
    return parts


def _content(parts: list[Part]) -> str | list[Part]:
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return parts


def _thinking(source: Mapping[str, Any]) -> list[Any]:
    blocks = [b for b in source.get("thinking_blocks") or [] if isinstance(b, Mapping)]
    if blocks:
        return [dict(b) for b in blocks]
    reasoning = source.get("reasoning_content")
    return [{"type": "reasoning", "text": reasoning}] if isinstance(reasoning, str) else []


def _call(ev: Mapping[str, Any], n: int) -> ToolCall:
    raw = mapping(ev.get("tool_call"))
    function = mapping(raw.get("function")) or raw
    call_id = ev.get("tool_call_id") or raw.get("id") or f"openhands-{ev.get('id', n)}"
    name = ev.get("tool_name") or function.get("name") or "action"
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        action = mapping(ev.get("action"))
        arguments = json.dumps({k: v for k, v in action.items() if k != "kind"})
    return ToolCall.from_json_arguments(id=str(call_id), name=str(name), arguments=arguments)


def _observation_text(ev: Mapping[str, Any]) -> tuple[str | list[Part], bool]:
    kind = ev.get("kind")
    if kind == "UserRejectObservation":
        return f"rejected by the user: {ev.get('rejection_reason') or ''}".strip(), True
    if kind == "AgentErrorEvent":
        return str(ev.get("error") or "error"), True
    obs = ev.get("observation")
    if not isinstance(obs, Mapping):
        return _content(_texts(obs)), False
    parts = _texts(obs.get("content"))
    if not parts and isinstance(obs.get("output"), str):
        parts = [TextPart(text=obs["output"])]
    return _content(parts), bool(obs.get("is_error"))


class _Run:
    """One conversation's events in order, read into messages."""

    def __init__(self, skipped: Counter[str], extra: dict[str, Any]) -> None:
        self.out: list[Message] = []
        self.skipped, self.extra = skipped, extra
        self.responses: dict[str, int] = {}  # llm_response_id -> its assistant message
        self.made_by: dict[Any, int] = {}  # event id -> index of the last message it made

    def read(self, events: Iterable[Any]) -> list[Message]:
        for n, ev in enumerate(events):
            if not isinstance(ev, Mapping):
                raise InvalidMessage(f"event {n}: expected an object")
            kind = str(ev.get("kind"))
            handler = self._handlers().get(kind)
            if handler is None:
                self._environment(ev, kind)
                continue
            before = len(self.out)
            handler(ev, n)
            if len(self.out) > before or kind == "ActionEvent":
                self.made_by[ev.get("id")] = len(self.out) - 1
        return self.out

    def _handlers(self) -> dict[str, Callable[[Mapping[str, Any], int], None]]:
        return {
            "SystemPromptEvent": self._system,
            "MessageEvent": self._message,
            "ActionEvent": self._action,
            "ObservationEvent": self._observation,
            "UserRejectObservation": self._observation,
            "AgentErrorEvent": self._observation,
            "Condensation": self._condensation,
            "CondensationSummaryEvent": self._condensation,
        }

    def _add(self, m: Message, ev: Mapping[str, Any]) -> None:
        self.out.append(stamp(m, ev.get("timestamp"), source_uuid=ev.get("id")))

    def _system(self, ev: Mapping[str, Any], n: int) -> None:
        parts = _texts([ev.get("system_prompt")]) + _texts([ev.get("dynamic_context")])
        if ev.get("tools"):
            self.extra.setdefault("facts", {})["tools"] = len(ev["tools"])
        self._add(Message.system(_content(parts), metadata={"event": "system"}), ev)

    def _message(self, ev: Mapping[str, Any], n: int) -> None:
        llm = mapping(ev.get("llm_message"))
        role = llm.get("role") or ("user" if ev.get("source") == "user" else "assistant")
        if role not in ("user", "assistant", "system"):
            raise InvalidMessage(f"event {n}: unknown message role {role!r}")
        parts = _texts(llm.get("content")) + _texts(ev.get("extended_content"))
        meta: dict[str, Any] = {}
        if _thinking(llm):
            meta["thinking"] = _thinking(llm)
        critic = ev.get("critic_result")
        if isinstance(critic, Mapping):
            meta["critic"] = {k: critic[k] for k in ("score",) if k in critic}
        for key in ("activated_skills", "sender"):
            if ev.get(key):
                meta[key] = ev[key]
        m = Message(role=role, content=_content(parts), metadata=meta)
        self._add(m, ev)

    def _action(self, ev: Mapping[str, Any], n: int) -> None:
        call = _call(ev, n)
        rid = ev.get("llm_response_id")
        if isinstance(rid, str) and rid in self.responses:
            target = self.out[self.responses[rid]]
            target.tool_calls = [*target.tool_calls, call]
            return
        meta: dict[str, Any] = {}
        if _thinking(ev):
            meta["thinking"] = _thinking(ev)
        for key in ("summary", "security_risk"):
            if isinstance(ev.get(key), str) and ev[key]:
                meta[key] = ev[key]
        thought = _content(_texts(ev.get("thought")))
        m = Message.assistant(thought, tool_calls=[call], metadata=meta)
        if isinstance(rid, str):
            self.responses[rid] = len(self.out)
        self._add(m, ev)

    def _observation(self, ev: Mapping[str, Any], n: int) -> None:
        content, error = _observation_text(ev)
        call_id = ev.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InvalidMessage(f"event {n}: an observation needs 'tool_call_id'")
        meta = {"is_error": True} if error else {}
        name = ev.get("tool_name") if isinstance(ev.get("tool_name"), str) else None
        self._add(Message.tool(content, tool_call_id=call_id, name=name, metadata=meta), ev)

    def _condensation(self, ev: Mapping[str, Any], n: int) -> None:
        ids = ev.get("forgotten_event_ids") or []
        forgotten = [self.made_by[i] for i in ids if isinstance(i, str) and i in self.made_by]
        summary = ev.get("summary")
        if not isinstance(summary, str) or not summary:
            self.skipped["Condensation:without_summary"] += 1
            return
        before = max(forgotten) + 1 if forgotten else len(self.out)
        self.extra.setdefault("compactions", []).append(
            {
                "before": before,
                "summary": summary,
                "metadata": {
                    "native": "openhands",
                    "forgotten_events": len(ev.get("forgotten_event_ids") or []),
                    "source_created_at": ev.get("timestamp"),
                },
            }
        )

    def _environment(self, ev: Mapping[str, Any], kind: str) -> None:
        self.skipped[kind] += 1
        when = timestamp(ev.get("timestamp"))
        event: dict[str, Any] = {"event": kind, "after_message": len(self.out)}
        if when is not None:
            event["at"] = when.isoformat()
        detail = ev.get("key") or ev.get("detail") or ev.get("code")
        if isinstance(detail, str) and detail:
            event["detail"] = detail[:EVENT_TEXT]
        self.extra.setdefault("events", []).append(event)


def read_run(events: list[Any], skipped: Counter[str], extra: dict[str, Any]) -> list[Message]:
    """One V1 conversation's messages, in event order (see the module docstring)."""
    return _Run(skipped, extra).read(events)
