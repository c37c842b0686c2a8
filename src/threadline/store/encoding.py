"""Preparing an append, once for every backend: each message checked
(``check_message``), stamped with id, time and token counts (``prepare_messages``),
encoded as stored (``encode_message``); a batch dated by its source (``dated``)."""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from threadline.errors import InvalidMessage, MessageTooLarge, UsageError
from threadline.json_limits import value_problem
from threadline.stamps import utcnow
from threadline.store.alongside import NOTHING, Alongside
from threadline.store.checks import (
    MAX_MESSAGE_BYTES,
    format_ts,
    good_call_id,
    good_id,
    shown,
    validate_call_id,
    validate_media_ref,
    validate_message_id,
)
from threadline.store.session_info import source_time

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from pydantic_core import SchemaSerializer

    from threadline.messages import Message


def session_family(model: str | None) -> str:
    """The key a session's appends store token counts under (``prepare_messages``): the
    model's tokenizer family, suffixed ``:estimated`` where appends store an estimate."""
    from threadline.tokens import stored_counter_for

    return stored_counter_for(model).family


class Batch(list["Message"]):
    """A batch of messages with the time it happened by its source's clock (``at``): an
    append of it moves the session's ``updated_at`` to ``at`` instead of now (imports,
    copies between stores; see ``dated`` and ``append_time``)."""

    at: datetime | None = None


def dated(messages: Sequence[Message], at: datetime) -> Batch:
    """``messages`` as a batch written at ``at`` (checked by ``source_time``)."""
    batch = messages if isinstance(messages, Batch) else Batch(messages)
    batch.at = source_time(at, "the batch's time")
    return batch


def append_time(messages: Sequence[Message]) -> datetime:
    """The time an append stores as the session's ``updated_at``: the batch's own
    (``Batch.at``), else now. Every backend moves ``updated_at`` there and never back
    (``later``), so an old batch appended late leaves a newer date as it is."""
    at = messages.at if isinstance(messages, Batch) else None
    return at if at is not None else utcnow()


def later(stored: datetime, at: datetime) -> datetime:
    """``updated_at`` after an append at ``at`` (the rule the SQL backends write as
    ``max``/``GREATEST``)."""
    return at if at > stored else stored


class Appending:
    """A batch on its way into a backend (``core.StoreCore._append``): the messages with what
    a backend stores of them, each worked out once and only when a backend asks (a
    prepared batch carries its bodies and counts already)."""

    def __init__(
        self, session_id: str, messages: Sequence[Message], alongside: Alongside = NOTHING
    ) -> None:
        self.session_id = session_id
        self.messages = messages
        self.alongside = alongside
        """What the backend writes in the same atomic step (``store/alongside.py``)."""
        self.ids = [m.id for m in messages]
        self.at = append_time(messages)
        """The session's ``updated_at`` after the batch, unless it is later already."""

    @functools.cached_property
    def bodies(self) -> list[bytes]:
        return stored_bodies(self.messages)

    @functools.cached_property
    def tokens(self) -> list[int]:
        return stored_tokens(self.messages)

    @functools.cached_property
    def times(self) -> list[str]:
        return stored_times(self.messages)

    def already_stored(self, message_id: str | None = None) -> InvalidMessage:
        """A message id of the batch is stored before it (or appears twice in it)."""
        which = "a message id in this batch" if message_id is None else f"message id {message_id}"
        return InvalidMessage(f"{which} is already stored in session {self.session_id}")

    def partly_stored(self, missing_id: str) -> InvalidMessage:
        """The batch's first message is stored but ``missing_id`` is not: batches are
        atomic, so this is not a resend of it."""
        return InvalidMessage(
            f"batch partly stored already in session {self.session_id}: "
            f"message {self.ids[0]} is stored but {missing_id} is not"
        )


class PreparedBatch(Batch):
    """Messages ``prepare_messages`` checked and stamped, each with its stored JSON
    (``bodies``, made while checking) and stored count (``tokens``, what ``primary_tokens``
    reads), so a backend encodes and looks up a message once, and the messages are the
    batch's own copies, which a backend may number in place. ``calls`` are the ids of the
    batch's tool calls, ``unanswered`` the call ids of its tool results whose call is not
    earlier in the batch (``Session.append`` looks for those in the history)."""

    bodies: list[bytes]
    tokens: list[int]
    calls: set[str]
    unanswered: list[str]


def prepare_messages(
    model: str | None, messages: Sequence[Message], *, at: datetime | None = None
) -> PreparedBatch:
    """Validate and stamp messages for storage; counts tokens once, here. ``at`` dates
    the batch by its source's clock (see ``Batch``); without it, it is written now.

    The first key of ``token_counts`` is what backends add to the session's
    ``total_tokens`` (see ``primary_tokens``): the count of ``tokens.stored_counter_for``, an
    estimate where exact counting is dear (a build counts those exactly). A count the
    message carries for the session's family, exact or estimated, is never trusted (an
    edited message keeps its old count); other families' counts ride along after it.
    """
    from threadline.messages import Message
    from threadline.tokens import ESTIMATED_SUFFIX, stored_counter_for

    if isinstance(messages, Message):
        messages = [messages]
    if not messages:
        raise UsageError("nothing to append: the batch is empty")
    counter = stored_counter_for(model)
    estimated = counter.family
    exact = estimated.removesuffix(ESTIMATED_SUFFIX)  # an exact count it carries: recounted
    prepared = PreparedBatch()
    prepared.bodies = bodies = []
    prepared.tokens = stored_tokens = []
    prepared.calls = calls = set()
    prepared.unanswered = unanswered = []
    if at is not None:
        prepared.at = source_time(at, "the batch's time")
    seen: set[str] = set()
    count = counter.count_message
    for m in messages:
        if not isinstance(m, Message):
            raise InvalidMessage(f"expected a Message, got {type(m).__name__}")
        _checked(m)
        if m.id in seen:
            raise InvalidMessage(f"message id {m.id} appears twice in one batch")
        seen.add(m.id)
        if m.tool_calls:
            calls.update([c.id for c in m.tool_calls])
        if m.role == "tool" and m.tool_call_id not in calls:
            unanswered.append(m.tool_call_id or "")
        tokens = count(m)
        counts = {estimated: tokens}
        if m.token_counts:
            counts.update(
                (k, v) for k, v in m.token_counts.items() if k != exact and k != estimated
            )
        copy = _stamped_copy(m, counts, Message)
        prepared.append(copy)
        bodies.append(encode_message(copy))
        stored_tokens.append(tokens)
    return prepared


_STAMPED: Final = frozenset({"seq", "token_counts"})


_set_attribute = object.__setattr__


def _stamped_copy(m: Message, counts: dict[str, int], message_type: type[Message]) -> Message:
    """``m.model_copy(update={"seq": None, "token_counts": counts})``, made as pydantic's
    ``__copy__`` makes it (a shallow copy of the fields) without its generic path, which was
    a sixth of a prepared message's cost; a subclass, or a message with extra or private
    attributes, takes ``model_copy`` itself. A test holds the two equal."""
    if type(m) is not message_type or m.__pydantic_extra__ or m.__pydantic_private__:
        return m.model_copy(update={"seq": None, "token_counts": counts})
    new = message_type.__new__(message_type)
    fields = m.__dict__.copy()
    fields["seq"] = None
    fields["token_counts"] = counts
    _set_attribute(new, "__dict__", fields)
    _set_attribute(new, "__pydantic_fields_set__", m.__pydantic_fields_set__ | _STAMPED)
    _set_attribute(new, "__pydantic_extra__", None)
    _set_attribute(new, "__pydantic_private__", None)
    return new


def stored_bodies(messages: Sequence[Message]) -> list[bytes]:
    """Each message's stored JSON (``encode_message``): a prepared batch's own."""
    if isinstance(messages, PreparedBatch):
        return messages.bodies
    return [encode_message(m) for m in messages]


def stored_tokens(messages: Sequence[Message]) -> list[int]:
    """Each message's stored count (``primary_tokens``): a prepared batch's own."""
    if isinstance(messages, PreparedBatch):
        return messages.tokens
    return [primary_tokens(m) for m in messages]


def stored_times(messages: Sequence[Message]) -> list[str]:
    """``format_ts`` of each message's ``created_at``. Where pydantic-core's JSON text of
    the time is already that form (UTC, with microseconds) it is taken as it is: two
    thirds of ``format_ts``'s cost, on every appended message (a test holds the two
    equal)."""
    to_text = _time_serializer().to_python
    out = []
    for m in messages:
        dt = m.created_at
        if dt.tzinfo is UTC and dt.microsecond:
            text = to_text(dt, mode="json")
            if len(text) == 27 and text[-1] == "Z":
                out.append(text)
                continue
        out.append(format_ts(dt))
    return out


@functools.cache
def _time_serializer() -> SchemaSerializer:
    from pydantic_core import SchemaSerializer, core_schema

    return SchemaSerializer(core_schema.datetime_schema())


def numbered(messages: Sequence[Message], first_seq: int) -> list[Message]:
    """The stored copies of a batch given seqs from ``first_seq``: a prepared batch's
    own messages, numbered in place (their fields set already names ``seq``, so the
    field is written without pydantic's ``__setattr__``); copies of anyone else's."""
    if isinstance(messages, PreparedBatch):
        for seq, m in enumerate(messages, first_seq):
            m.__dict__["seq"] = seq
        return list(messages)  # not the batch: its bodies are not the caller's to keep
    return [m.model_copy(update={"seq": seq}) for seq, m in enumerate(messages, first_seq)]


def check_message(m: object) -> Message:
    """The rules a message must meet to be stored, on every write path (``prepare_messages``
    for appends and imports, ``copy_sessions`` for messages read from another store).

    Ids must be ids (a message id names rows and keys; a tool-call id is the provider's,
    unique within its message), media references stay under the store, inline data is
    base64 that decodes the same everywhere, and tool arguments and metadata are JSON
    that can be read back (no NaN, no nesting past ``MAX_JSON_DEPTH``).
    """
    from threadline.messages import Message

    if not isinstance(m, Message):
        raise InvalidMessage(f"expected a Message, got {type(m).__name__}")
    return _checked(m)


def _checked(m: Message) -> Message:
    """``check_message``'s rules, for what is known to be a ``Message``. A step of every
    append: the usual message passes the quick tests, and only a failing one builds the
    validators' error texts."""
    if not good_id(m.id):
        validate_message_id(m.id)
    if m.tool_calls:
        _check_calls(m)
    if m.tool_call_id is not None and not good_call_id(m.tool_call_id):
        validate_call_id(m.tool_call_id, what=f"message {m.id}: tool_call_id")
    if type(m.content) is not str:  # text alone has nothing more to check
        _check_parts(m)
    if m.metadata:
        problem = value_problem(m.metadata)
        if problem is not None:
            raise InvalidMessage(f"message {m.id}: metadata: {problem}")
    return m


def _check_calls(m: Message) -> None:
    calls: set[str] = set()
    for call in m.tool_calls:
        if not good_call_id(call.id):
            validate_call_id(call.id, what=f"message {m.id}: tool call id")
        if call.id in calls:
            raise InvalidMessage(f"message {m.id}: tool call id {shown(call.id)} appears twice")
        calls.add(call.id)
        problem = value_problem(call.arguments) if call.arguments else None
        if problem is not None:
            raise InvalidMessage(f"message {m.id}: tool call {call.id} arguments: {problem}")


def _check_parts(m: Message) -> None:
    from threadline.messages import FilePart, ImagePart

    for part in m.content:
        if isinstance(part, ImagePart) and part.media_ref is not None:
            validate_media_ref(part.media_ref)
        if isinstance(part, ImagePart | FilePart) and part.data is not None:
            try:
                base64.b64decode(part.data, validate=True)
            except binascii.Error as exc:
                raise InvalidMessage(
                    f"message {m.id}: {part.type} data is not base64 ({exc}); "
                    "give the bytes base64-encoded, without a data: prefix"
                ) from exc


_SEQ: Final[set[str]] = {"seq"}
"""Not in a stored body: backends keep a message's seq beside it."""


def encode_message(m: Message) -> bytes:
    """The stored JSON form; refuses invalid UTF-8 and oversized messages.

    A plain ``Message`` (not a subclass, no extra fields: what appends almost always
    store) is written from its fields by pydantic-core's ``to_json``, which infers each
    value's type: the same bytes as the model's serializer, which first checks every value
    against the schema; about 1 us less a message on real transcripts, a twenty-fifth of
    an append (a property test holds the two equal). Any other message goes through its
    model's serializer."""
    plain, to_json = _plain_encoder()
    try:
        if type(m) is plain and not m.__pydantic_extra__:
            body = to_json(m.__dict__, exclude=_SEQ)
        else:
            body = type(m).__pydantic_serializer__.to_json(m, exclude=_SEQ)
    except (UnicodeEncodeError, ValueError) as exc:
        raise InvalidMessage(f"message {m.id} is not valid UTF-8 text: {exc}") from exc
    if len(body) > MAX_MESSAGE_BYTES:
        raise MessageTooLarge(
            f"message {m.id} is {len(body):,} bytes; the limit is {MAX_MESSAGE_BYTES:,} "
            "(store large data as a file reference instead)"
        )
    return body


@functools.cache
def _plain_encoder() -> tuple[type[Message], Callable[..., bytes]]:
    from pydantic_core import to_json

    from threadline.messages import Message

    return Message, to_json


def primary_tokens(m: Message) -> int:
    return next(iter(m.token_counts.values()), 0)
