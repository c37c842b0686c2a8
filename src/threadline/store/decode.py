"""Reading a stored message back: every backend's rule for a row it cannot read.

An unreadable message is reported (a ``CorruptRecordWarning`` naming its session and
seq), left in place and skipped, so one damaged row never hides the rest of a session.
This module loads pydantic; SQLite imports it only when it reads messages (issue 13).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from threadline.messages import Message
from threadline.store.base import CorruptRecordWarning


def decode_message(session_id: str, seq: int, body: bytes | str | None) -> Message | None:
    """The message stored at ``seq``, or None (with the warning) when it cannot be read.
    The warning points at the caller's caller: the store method that read the row."""
    try:
        if body is None:
            raise ValueError("the message is missing from the list")
        m = Message.model_validate_json(body)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
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
