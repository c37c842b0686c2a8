"""Forks: a new session that shares its parent's history up to a seq, by reference.

History stays append-only: a fork copies nothing. The child's record holds its
parent and fork seq (``FORK_KEY`` in its metadata, set once at creation), its own
messages get seqs after the fork seq, and its counters start where the shared
prefix ends (``SessionStart``, the one primitive each backend supplies). Reads of
the child chain through the parent for seqs up to the fork seq (``Session.tail``,
``Session.read_messages``, ``Session.latest_checkpoint``), so a build on a fork
costs what a build on any session costs: the window, not the history.

Forking is constant time and space when it forks at the parent's end (the
default, and what ``/fork`` does); forking earlier reads the messages between
the fork seq and the end once, to count the tokens they hold (``/rewind`` forks a
few turns back).

A parent whose forks read from it is not deleted unless asked to (``force``),
and then its forks go with it: they cannot stand without the shared history.
Search finds a message once, in the session that stored it; an export of a fork
holds its whole view (shared prefix and own tail) and imports as a plain session.
"""

from __future__ import annotations

from typing import Any

from threadline.errors import UsageError
from threadline.requests import is_request
from threadline.store.checks import TAIL_BATCH, bounded
from threadline.store.encoding import primary_tokens

# the deletion rule (forks first) lives in the store core, for Session.delete; its
# names stay importable from here
from threadline.store.lineage import all_sessions as all_sessions
from threadline.store.lineage import children_of as children_of
from threadline.store.lineage import delete_session as delete_session
from threadline.store.lineage import deletion_order as deletion_order
from threadline.store.lineage import descendants as descendants
from threadline.store.locks import LockHolder
from threadline.store.protocol import Session
from threadline.store.session_info import FORK_KEY, SessionInfo, SessionStart

MATERIALIZED_KEY = "materialized_fork_of"
"""Metadata of a plain session made from a fork's whole view (a copy to another store,
an import of its export): the fork point it had, kept as information only."""


def materialized_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata of a fork's view written out as a plain session: its fork point is
    no longer one (``FORK_KEY`` is reserved), so it moves to ``MATERIALIZED_KEY``."""
    plain = {k: v for k, v in metadata.items() if k != FORK_KEY}
    if FORK_KEY in metadata:
        plain[MATERIALIZED_KEY] = metadata[FORK_KEY]
    return plain


def fork_session(
    parent: Session,
    *,
    at: int | None = None,
    id: str | None = None,
    title: str | None = None,
    model: str | None = None,
    metadata: dict[str, Any] | None = None,
    lock: LockHolder | None = None,
) -> Session:
    """A new session sharing ``parent``'s history up to seq ``at`` (default: all of it).

    The child keeps the parent's agent, and its model and title unless given; it is
    listed under the parent, and keeps the parent's dates (an imported conversation's
    fork is as old as what it shares) until its own messages move ``updated_at`` on.
    ``at`` must lie within the parent (0 forks before its first message).
    """
    info = parent.refresh().info
    seq = info.last_seq if at is None else bounded(at, "fork seq")
    if not 0 <= seq <= info.last_seq:
        raise UsageError(
            f"cannot fork session {info.id} at seq {seq}: it holds seqs 1-{info.last_seq}"
        )
    start = SessionStart(
        parent=info.id,
        last_seq=seq,
        message_count=max(0, info.message_count - (info.last_seq - seq)),
        total_tokens=shared_tokens(parent, info, seq),
    )
    return parent.store.create_session(
        agent=info.agent,
        model=model if model is not None else info.model,
        title=title if title is not None else info.title,
        id=id,
        metadata=metadata,
        lock=lock,
        start=start,
        created_at=info.created_at,
        updated_at=info.updated_at,
    )


def shared_tokens(parent: Session, info: SessionInfo, seq: int) -> int:
    """Stored tokens of ``parent``'s view up to ``seq``: its total when ``seq`` is its
    end, else counted from whichever side of ``seq`` is shorter."""
    if seq == info.last_seq:
        return info.total_tokens
    if info.last_seq - seq <= seq:
        after = _tokens_between(parent, seq, info.last_seq)
        return max(0, info.total_tokens - after)
    return _tokens_between(parent, 0, seq)


def _tokens_between(session: Session, after: int, upto: int) -> int:
    """Tokens of the messages with ``after < seq <= upto``."""
    total = 0
    while after < upto:
        page = session.read_messages(
            after_seq=after, limit=min(TAIL_BATCH, upto - after), include_retracted=True
        )
        if not page:
            break
        total += sum(primary_tokens(m) for m in page if (m.seq or 0) <= upto)
        after = page[-1].seq or upto
    return total


def user_turn_seq(session: Session, back: int) -> int:
    """The fork seq that rewinds ``session`` by ``back`` user turns: just before its
    ``back``-th last person's request, so the fork continues where that request was
    made (the request itself is not shared)."""
    if isinstance(back, bool) or not isinstance(back, int) or back < 1:
        raise UsageError(f"rewind takes a positive number of user turns, got {back!r}")
    before: int | None = None
    seen = 0
    while True:
        page = session.tail(TAIL_BATCH, before_seq=before)
        for m in page:
            if is_request(m):
                seen += 1
                if seen == back:
                    return (m.seq or 1) - 1
        if len(page) < TAIL_BATCH:
            break
        before = page[-1].seq
    turns = f"{seen} user turn{'s' if seen != 1 else ''}"
    raise UsageError(f"cannot rewind {back} user turns: session {session.id} has {turns}")
