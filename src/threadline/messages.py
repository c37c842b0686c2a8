"""The provider-neutral message model, and tool-chain units.

A ``Message`` is what a user, a model or a tool said, plus the metadata
threadline keeps with it. It is a typed value: the store assigns ``seq`` and
token counts once, at append, and nothing rewrites it afterwards.

A *unit* is the smallest slice of history a view may keep or drop: an
assistant message that calls tools together with the results of those calls,
or any other single message. Views never split a unit (invariant 2). History
broken by a crash is repaired here, in the view only: a call whose result is
missing gets a synthetic "interrupted" result, a result stored after a later
message is placed right after its call, and a result whose call is not in view
is left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticSerializationError, to_json

from threadline.errors import InvalidMessage, validation_problems
from threadline.json_limits import parse_json
from threadline.stamps import new_id, utcnow

Role = Literal["system", "user", "assistant", "tool"]

INTERRUPTED_RESULT = "[interrupted: no result was recorded for this tool call]"
PROTECTED_RESULT_KEY = "protected"
"""Metadata of a tool result the view never prunes or soft-trims (a loaded skill's
instructions): ``{"protected": true}``. ``context.pruning.is_protected`` reads it."""
SKILL_KEY = "skill"
"""Metadata of a ``skill`` tool result: the name of the skill it loaded, so a compaction
can say which skills were in use (``compaction.trail``)."""


class _Model(BaseModel):
    # extra="ignore": a record written by a newer threadline still loads here.
    # defer_build: a model's validator is built at its first use, so a command that
    # uses few of them (``threadline sessions list``) does not build them all at import.
    model_config = ConfigDict(extra="ignore", validate_assignment=False, defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        """Build from fields; a bad field raises ``InvalidMessage`` naming it, so callers
        meet only threadline's errors. (``model_validate``, which readers of stored and
        imported records use, keeps pydantic's ``ValidationError``.)"""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidMessage(
                f"invalid {type(self).__name__}: {validation_problems(exc)}"
            ) from exc

    # pydantic's mark for an __init__ that only wraps its own (RootModel does the same):
    # nested and model_validate validation skip it, keeping their ValidationError and speed.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str
    """The text itself."""


class ImagePart(_Model):
    """An image, by exactly one of: URL, inline base64 data, or stored media reference."""

    type: Literal["image"] = "image"
    url: str | None = None
    """An http(s) or data: URL."""
    data: str | None = None
    """Base64-encoded bytes (no data: prefix); needs ``media_type``."""
    media_ref: str | None = None
    """A reference to media kept by the store (``<session>_media/<name>``)."""
    media_type: str | None = None
    """MIME type, e.g. ``image/png``."""
    detail: Literal["auto", "low", "high"] | None = None
    """OpenAI's detail level; drives the token formula."""
    width: int | None = None
    """Pixel width when known; makes the token estimate exact."""
    height: int | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        sources = [s for s in (self.url, self.data, self.media_ref) if s is not None]
        if len(sources) != 1:
            raise ValueError("an image part needs exactly one of url, data or media_ref")
        if self.data is not None and not self.media_type:
            raise ValueError("an image given as base64 data needs media_type")
        return self


class FilePart(_Model):
    """A reference to a file (by path or URI), optionally with inline data."""

    type: Literal["file"] = "file"
    uri: str
    """A path or URI naming the file."""
    name: str | None = None
    media_type: str | None = None
    data: str | None = None
    """Base64 contents, when the file travels with the message."""


Part = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]


class ToolCall(_Model):
    """One tool invocation requested by an assistant message."""

    id: str
    """The provider's call id; results answer it with ``tool_call_id``."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed JSON arguments."""
    raw_arguments: str | None = None
    """The provider's argument string, kept only when it was not a JSON object."""

    @classmethod
    def from_json_arguments(cls, *, id: str, name: str, arguments: str | None) -> ToolCall:
        """Build from a provider's JSON argument string; kept verbatim if it does not parse
        as strict JSON (``NaN`` and ``Infinity`` are not JSON, and would be stored as null)
        or nests too deep to parse safely."""
        text = arguments or ""
        if not text.strip():
            return cls(id=id, name=name)
        try:
            parsed = parse_json(text, parse_constant=_not_json)
        except ValueError:  # not strict JSON, or too deep (TooDeep)
            return cls(id=id, name=name, raw_arguments=text)
        if isinstance(parsed, dict):
            return cls(id=id, name=name, arguments=parsed)
        return cls(id=id, name=name, raw_arguments=text)

    def arguments_json(self) -> str:
        """The arguments as compact JSON text, non-ASCII kept: pydantic-core's encoder, ten
        times faster than ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``
        and the same text but for how some floats are spelled (``1e-7`` for ``1e-07``).
        Text that is not valid UTF-8 goes through ``json.dumps``, as before, so storing
        the message refuses it with ``InvalidMessage``."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        try:
            return to_json(self.arguments).decode("utf-8")
        except PydanticSerializationError:
            return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


class Usage(_Model):
    """Token usage as the provider reported it for one call."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    """Input tokens served from the provider's prompt cache."""
    cache_write_tokens: int | None = None


class Message(_Model):
    """One stored message. Build with ``Message.user(...)`` and friends."""

    role: Role
    content: str | list[Part] = ""
    """Plain text, or a list of text / image / file parts."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Assistant only: the tools it asks to run."""
    tool_call_id: str | None = None
    """Tool only: the call this result answers."""
    name: str | None = None
    """Tool name on results; optional participant name otherwise."""
    id: str = Field(default_factory=new_id)
    """A UUID chosen by the client; appends are idempotent on it."""
    seq: int | None = None
    """Position in the session, 1-based, assigned by the store."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was created (UTC; RFC 3339 when serialised)."""
    model: str | None = None
    """Which model produced it (assistant messages)."""
    usage: Usage | None = None
    synthetic: bool = False
    """Made by threadline or the runtime, not said by a user, model or tool."""
    summary: bool = False
    """Part of a compaction checkpoint (a summary, not history)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    token_counts: dict[str, int] = Field(default_factory=dict)
    """Tokens this message costs, keyed by tokenizer family; set at append."""

    @model_validator(mode="after")
    def _check_shape(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.created_at.tzinfo is None:
            self.created_at = self.created_at.replace(tzinfo=UTC)
        return self

    # -- constructors -------------------------------------------------------

    @classmethod
    def system(cls, content: str | list[Part], **kw: Any) -> Message:
        return cls(role="system", content=content, **kw)

    @classmethod
    def user(cls, content: str | list[Part], **kw: Any) -> Message:
        return cls(role="user", content=content, **kw)

    @classmethod
    def assistant(
        cls, content: str | list[Part] = "", *, tool_calls: Sequence[ToolCall] = (), **kw: Any
    ) -> Message:
        return cls(role="assistant", content=content, tool_calls=list(tool_calls), **kw)

    @classmethod
    def tool(
        cls, content: str | list[Part], *, tool_call_id: str, name: str | None = None, **kw: Any
    ) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name, **kw)

    # -- reading ------------------------------------------------------------

    @property
    def text(self) -> str:
        """The message's text, parts joined by newlines; images and files omitted."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def parts(self) -> list[TextPart | ImagePart | FilePart]:
        if isinstance(self.content, str):
            return [TextPart(text=self.content)] if self.content else []
        return list(self.content)

    def part_texts(self) -> list[str]:
        """Each part as text: text as it is, an image or a file as a placeholder
        (``[image: ...]``, ``[file: ...]``); empty plain content has no parts."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, TextPart):
                out.append(part.text)
            elif isinstance(part, ImagePart):
                out.append(f"[image: {part.url or part.media_ref or part.media_type}]")
            else:
                out.append(f"[file: {part.uri}]")
        return out

    def search_text(self) -> str:
        """Text worth indexing: the content plus tool names and arguments."""
        pieces = [self.text]
        for call in self.tool_calls:
            pieces.append(f"{call.name} {call.arguments_json()}")
        return "\n".join(p for p in pieces if p)


# -- units ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages that a view keeps or drops together."""

    messages: tuple[Message, ...]

    @property
    def is_tool_chain(self) -> bool:
        return bool(self.messages[0].tool_calls)

    @property
    def first_seq(self) -> int | None:
        return self.messages[0].seq

    def __len__(self) -> int:
        return len(self.messages)


@dataclass(slots=True)
class RepairReport:
    """What view-time repair changed; storage is never touched."""

    synthesized: list[str] = field(default_factory=list)
    """Call ids that got a synthetic "interrupted" result."""
    orphans: list[int | None] = field(default_factory=list)
    """Seqs of tool results left out: no call in view is open for them (none was made,
    it is out of view, or it was already answered: a duplicate)."""
    late: list[int | None] = field(default_factory=list)
    """Seqs of results stored after a later message (parallel calls logged one block a
    line), placed right after their call."""
    duplicates: list[int | None] = field(default_factory=list)
    """The seqs of ``orphans`` whose call was in view but already answered."""

    @property
    def changed(self) -> bool:
        return bool(self.synthesized or self.orphans or self.late)


def interrupted_result(call: ToolCall) -> Message:
    return Message.tool(
        INTERRUPTED_RESULT,
        tool_call_id=call.id,
        name=call.name,
        synthetic=True,
        metadata={"repair": "missing_result"},
    )


@dataclass(slots=True)
class _Chain:
    """An assistant message's calls and the results found for them so far."""

    caller: Message
    answers: list[Message | None]

    def take(self, result: Message) -> bool:
        """Answer the first open call with the result's id; False when none is open."""
        for i, call in enumerate(self.caller.tool_calls):
            if self.answers[i] is None and call.id == result.tool_call_id:
                self.answers[i] = result
                return True
        return False


def group_units(messages: Iterable[Message]) -> tuple[list[Unit], RepairReport]:
    """Group oldest-first messages into units, repairing broken chains.

    Results pair with calls by id within the run of tool messages that follows
    an assistant message; when ids repeat (seen in real logs), each result
    answers the first call with that id that is still open, so pairing is
    positional among equal ids. Results arrive in the order the calls were
    made, whatever order the tools finished in. A result stored after a later
    message (``A(c1,c2) T(c1) A(c3) T(c2) T(c3)``: parallel calls logged one
    block a line) answers the oldest earlier call still open with its id and is
    placed right after that call (``RepairReport.late``), so both providers'
    rules hold and nothing with its call is left out. A call no result answers
    gets a synthetic "interrupted" result; a result no open call takes is left
    out (``RepairReport.orphans``).
    """
    report = RepairReport()
    slots: list[Message | _Chain] = []
    current: _Chain | None = None
    waiting: list[_Chain] = []
    """Earlier chains with a call still open, oldest first."""
    called: set[str] = set()

    for msg in messages:
        if msg.role == "tool":
            if current is not None and current.take(msg):
                continue
            earlier = next((c for c in waiting if c.take(msg)), None)
            if earlier is not None:
                report.late.append(msg.seq)
                if all(a is not None for a in earlier.answers):
                    waiting.remove(earlier)
                continue
            report.orphans.append(msg.seq)
            if msg.tool_call_id in called:
                report.duplicates.append(msg.seq)
            continue
        if current is not None and any(a is None for a in current.answers):
            waiting.append(current)
        current = None
        if msg.role == "assistant" and msg.tool_calls:
            current = _Chain(msg, [None] * len(msg.tool_calls))
            called.update(c.id for c in msg.tool_calls)
            slots.append(current)
        else:
            slots.append(msg)

    units: list[Unit] = []
    for slot in slots:
        if isinstance(slot, Message):
            units.append(Unit((slot,)))
            continue
        chain: list[Message] = [slot.caller]
        for call, answer in zip(slot.caller.tool_calls, slot.answers, strict=True):
            if answer is None:
                report.synthesized.append(call.id)
                chain.append(interrupted_result(call))
            else:
                chain.append(answer)
        units.append(Unit(tuple(chain)))
    return units, report


def flatten(units: Iterable[Unit]) -> list[Message]:
    return [m for u in units for m in u.messages]
