"""Ids and times stamped on new messages and store records.

Here rather than in ``threadline.messages`` so that the stores and a session listing
can stamp without loading pydantic (issue 13: ``threadline sessions list`` starts fast).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())
