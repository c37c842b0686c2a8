"""Cancel requests for a turn another server runs, carried by the store's memo.

Servers over one store share nothing but the store, so a cancel (or a delete) that
reaches a server not running the session's turn leaves a request in the session's
memo under ``CANCEL_KEY``, naming the turn by its lock (host, pid and the time the
lock was taken: a lock is taken afresh for every turn). The server running the turn
polls the memos of its running turns (one ``get_memos`` read every
``WATCH_SECONDS``), tells the named turn to stop and marks the request ``seen``; the
turn, as it stores its end, marks the request ``reached`` if it stopped cancelled
and drops it otherwise (it ended on its own first), before it lets go of the lock.
The asker waits for the end, so its answer says whether the turn stopped cancelled;
a turn told to stop that has not ended after ``SETTLE_SECONDS`` (a model that does
not close its request when cancelled) is answered True: it stops at its next step.
The server running a turn answers a cancel the same way (``AgentRunner.cancel_turn``).
``bench/server_scale.py`` checks that every ``cancelled: true`` turn ended
``stopped: cancelled`` and every ``false`` one did not. Every backend has the memo and
its compare-and-set, so this works the same on each.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from threadline.errors import SessionNotFound
from threadline.store.locks import LockHolder
from threadline.store.protocol import RESERVED_MEMO_PREFIX, Store, update_memo

CANCEL_KEY = f"{RESERVED_MEMO_PREFIX}cancel"
WATCH_SECONDS = 0.2
"""How often a server with running turns reads their cancel requests."""
MEMO_BATCH = 500
"""Memos read at once by ``left_behind``."""
REACH_SECONDS = 5.0
"""How long an asker waits for the running server to see its request."""
SETTLE_SECONDS = 1.0
"""How long an asker waits for a turn told to stop to end, before answering that it
stops (at its next step)."""


def turn_id(holder: LockHolder) -> str:
    """The turn a lock stands for (a lock is taken afresh for each turn)."""
    return f"{holder.host}:{holder.pid}:{holder.started_at.isoformat()}"


def request_cancel(store: Store, session_id: str, holder: LockHolder) -> str:
    """Ask the server holding ``holder``'s lock to cancel that turn; returns its id."""
    turn = turn_id(holder)

    def ask(memo: dict[str, Any]) -> dict[str, Any]:
        memo[CANCEL_KEY] = {"turn": turn, "reached": False}
        return memo

    update_memo(store, session_id, ask)
    return turn


def requested(store: Store, turns: dict[str, str]) -> list[str]:
    """Of ``turns`` (session id -> turn id), the sessions asked to cancel that turn."""
    if not turns:
        return []
    asked = []
    for sid, memo in store.get_memos(list(turns)).items():
        request = _request(memo, turns[sid])
        if request is not None and not request["reached"] and not request.get("seen"):
            asked.append(sid)
    return asked


def mark_seen(store: Store, session_id: str, turn: str) -> None:
    """Mark the request for ``turn`` seen (the turn was told to stop)."""
    _settle(store, session_id, turn, lambda request: {**request, "seen": True}, unless_seen=True)


def acknowledge(store: Store, session_id: str, turn: str) -> None:
    """Mark the request for ``turn`` reached (the turn stopped cancelled)."""
    _settle(store, session_id, turn, lambda _: {"turn": turn, "reached": True})


def forget(store: Store, session_id: str, turn: str) -> None:
    """At the end of a turn that was not cancelled: drop a request for it (too late)."""
    _settle(store, session_id, turn, lambda _: None)


def _settle(
    store: Store,
    session_id: str,
    turn: str,
    after: Callable[[dict[str, Any]], dict[str, Any] | None],
    *,
    unless_seen: bool = False,
) -> None:
    """Replace an open request for ``turn`` (not reached; not seen either, with
    ``unless_seen``) by what ``after`` makes of it, or drop it where that is None; a
    session deleted meanwhile has nothing to change."""

    def change(memo: dict[str, Any]) -> dict[str, Any] | None:
        request = _request(memo, turn)
        if request is None or request["reached"] or (unless_seen and request.get("seen")):
            return None
        replacement = after(request)
        if replacement is None:
            del memo[CANCEL_KEY]
        else:
            memo[CANCEL_KEY] = replacement
        return memo

    with contextlib.suppress(SessionNotFound):
        update_memo(store, session_id, change)


def await_reached(
    store: Store,
    session_id: str,
    turn: str,
    *,
    timeout: float = REACH_SECONDS,
    settle: float = SETTLE_SECONDS,
) -> bool:
    """Wait until the turn stopped cancelled (True, the request then removed), or ended
    without it, or nobody saw the request within ``timeout`` (False); a turn seen told
    to stop that has not ended within ``settle`` stops at its next step (True).

    The lock is read before the memo: a turn marks the request before it lets go of
    the lock, so a memo read after a lock read that shows the turn over holds the mark
    if there was one (read the other way round, a turn cancelled and ended between the
    two reads looked like a turn that ended without it)."""
    deadline = time.monotonic() + timeout
    seen_at: float | None = None
    while True:
        try:
            holder = store.lock_holder(session_id)
            request = _request(store.get_memo(session_id), turn)
        except SessionNotFound:
            return False
        now = time.monotonic()
        if request is not None and request["reached"]:
            _take(store, session_id, turn)
            return True
        if request is not None and request.get("seen") and seen_at is None:
            seen_at = now
        ended = request is None or holder is None or turn_id(holder) != turn or holder.is_stale()
        told = seen_at is not None and now - seen_at >= settle
        if ended or told or (seen_at is None and now >= deadline):
            _take(store, session_id, turn)
            return told and not ended
        time.sleep(WATCH_SECONDS / 2)


def released(store: Store, session_id: str, turn: str, *, timeout: float) -> bool:
    """Wait until the lock of ``turn`` is gone (the turn stored its end)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            holder = store.lock_holder(session_id)
        except SessionNotFound:
            return True
        if holder is None or turn_id(holder) != turn or holder.is_stale():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(WATCH_SECONDS / 2)


def left_behind(store: Store, session_ids: Sequence[str]) -> list[tuple[str, str]]:
    """Cancel requests whose turn is over, as (session id, turn id): the asker or the
    server running the turn died before taking it away. Harmless (the next cancel of
    the session replaces it); ``doctor`` reports them."""
    found = []
    for start in range(0, len(session_ids), MEMO_BATCH):
        for sid, memo in store.get_memos(session_ids[start : start + MEMO_BATCH]).items():
            request = memo.get(CANCEL_KEY)
            if request is None:
                continue
            turn = str(request.get("turn")) if isinstance(request, dict) else repr(request)
            try:
                holder = store.lock_holder(sid)
            except SessionNotFound:  # deleted meanwhile: its memo went with it
                continue
            if holder is None or holder.is_stale() or turn_id(holder) != turn:
                found.append((sid, turn))
    return found


def _take(store: Store, session_id: str, turn: str) -> None:
    def drop(memo: dict[str, Any]) -> dict[str, Any] | None:
        if _request(memo, turn) is None:
            return None
        del memo[CANCEL_KEY]
        return memo

    with contextlib.suppress(SessionNotFound):  # deleted meanwhile: nothing to drop
        update_memo(store, session_id, drop)


def _request(memo: dict[str, Any], turn: str) -> dict[str, Any] | None:
    request = memo.get(CANCEL_KEY)
    if isinstance(request, dict) and request.get("turn") == turn:
        return request
    return None
