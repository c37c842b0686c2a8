"""Reading a stored message back: every backend's rule for a row it cannot read.

An unreadable message is reported (a ``CorruptRecordWarning`` naming its session and
seq), left in place and skipped, so one damaged row never hides the rest of a session.
It loads pydantic (with the message models) on the first message it decodes, not on
import: listing sessions must not pay for it (issue 13).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from threadline.store.checks import CorruptRecordWarning

if TYPE_CHECKING:
    from pydantic import ValidationError

    from threadline.messages import Message


def decode_message(session_id: str, seq: int, body: bytes | str | None) -> Message | None:
    """The message stored at ``seq``, or None (with the warning) when it cannot be read.
    The warning points at the caller's caller: the store method that read the row."""
    message_type, validation_error = _models()
    try:
        if body is None:
            raise ValueError("the message is missing from the list")
        m = message_type.model_validate_json(body)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        detail = exc.errors()[0]["msg"] if isinstance(exc, validation_error) else str(exc)
        warnings.warn(
            f"skipping unreadable message {session_id} seq {seq}: {detail}",
            CorruptRecordWarning,
            stacklevel=3,
        )
        return None
    m.seq = seq
    return m


def decode_rows(session_id: str, rows: Iterable[tuple[Any, ...]]) -> list[Message]:
    """``(seq, body)`` rows as messages, the unreadable ones skipped. A loop, not a
    comprehension (a frame of its own), so the warning names the store method."""
    out = []
    for seq, body in rows:
        m = decode_message(session_id, seq, body)
        if m is not None:
            out.append(m)
    return out


@functools.cache
def _models() -> tuple[type[Message], type[ValidationError]]:
    from pydantic import ValidationError

    from threadline.messages import Message

    return Message, ValidationError
