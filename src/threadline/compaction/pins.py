"""The task survives compaction: the first and the latest request, pinned in every snapshot.

A run of one request and hundreds of tool steps is summarized many times over;
each snapshot is built from the previous one, and a ranked, word-limited
snapshot can lose the one thing an agent cannot work without: what it was
asked to do. Claude Code keeps a "Primary Request and Intent" section for the
same reason. Every checkpoint therefore opens Current State with the session's
first request and its latest one, clipped but verbatim (a clip keeps the
opening words exactly), whatever the summarizer wrote.

The first request is found once, from the start of the session, and carried in
each checkpoint's metadata, so later compactions never read old history for
it. Requests are told apart from tool wrappers and system reminders by
``threadline.requests``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.compaction.history import earlier_intent
from threadline.compaction.snapshot import (
    SKELETON_WORDS,
    SummaryResult,
    clip_words,
    parse,
    words,
)
from threadline.messages import Message
from threadline.requests import request_text, user_words
from threadline.store.checkpoints import Checkpoint
from threadline.store.protocol import Session

FIRST_KEY = "first_request"
LATEST_KEY = "latest_request"
TASK_KEY = "earlier_task"
FIRST_REQUEST_WORDS = 75
"""At most this many words of the first request (fewer when the word limit is small)."""
LATEST_REQUEST_WORDS = 50
FIRST_SCAN_LIMIT = 5_000
"""How far from the start a compaction looks for the first request when no checkpoint
recorded it (an imported session whose first checkpoint came from another tool)."""
SCAN_PAGE = 200
EARLIER = "earlier summary"
"""The source of a task an imported summary states: the messages before it are not read."""
PIN_SCORE = 1_000.0
"""Pinned bullets outrank everything a summarizer writes."""
_OWN_LABELS = frozenset(
    {"primary request", "first request", "latest request", "last request", "request"}
)
"""Current-state bullets the pins replace (the extractive summarizer writes a "Last request")."""


@dataclass(frozen=True, slots=True)
class PinnedRequest:
    seq: int
    text: str
    """Clipped, verbatim (on one line)."""
    source: str = "user"
    """Who stated it: the person, or an earlier summary (its task, as of its last seq)."""

    def as_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": self.seq, "text": self.text}
        return out if self.source == "user" else {**out, "source": self.source}

    @classmethod
    def from_metadata(cls, value: Any) -> PinnedRequest | None:
        if not isinstance(value, dict):
            return None
        seq, text, source = value.get("seq"), value.get("text"), value.get("source", "user")
        if isinstance(seq, int) and isinstance(text, str) and text and isinstance(source, str):
            return cls(seq, text, source)
        return None


def _pin(
    m: Message, limit: int, said: Callable[[Message], str | None] = request_text
) -> PinnedRequest | None:
    """``m`` pinned as a request (``said``: what counts as the person's words in it)."""
    text = said(m)
    if text is None or m.seq is None:
        return None
    return PinnedRequest(m.seq, clip_words(text, limit))


def _scan_first(session: Session, until: int, limit: int) -> PinnedRequest | None:
    after = 0
    while after < min(until, FIRST_SCAN_LIMIT):
        page = session.read_messages(after_seq=after, limit=SCAN_PAGE)
        for m in page:
            if m.seq is not None and m.seq > until:
                return None
            pinned = _pin(m, limit)
            if pinned is not None:
                return pinned
        if len(page) < SCAN_PAGE:
            return None
        after = page[-1].seq or until
    return None


def requests_to_pin(
    session: Session,
    previous: Checkpoint | None,
    summarized: Sequence[Message],
    kept_newest_first: Sequence[Message],
    *,
    max_words: int = 600,
    found: tuple[tuple[int, str] | None, tuple[int, str] | None] = (None, None),
) -> tuple[PinnedRequest | None, PinnedRequest | None]:
    """The session's first request and its latest one (None where there is none).

    ``found`` is the first and the latest request (seq, text) the trail of the whole
    covered range saw: the latest one when neither the kept tail nor the new messages
    hold one and the previous checkpoint (another tool's) recorded none.
    """
    first_limit = max(5, min(FIRST_REQUEST_WORDS, max_words // 8))
    latest_limit = max(5, min(LATEST_REQUEST_WORDS, max_words // 12))
    first = PinnedRequest.from_metadata(previous.metadata.get(FIRST_KEY)) if previous else None
    if first is None and found[0] is not None:
        first = PinnedRequest(found[0][0], clip_words(found[0][1], first_limit))
    if first is None:
        floor = previous.covers_up_to if previous else 0
        if floor == 0:
            first = next((p for m in summarized if (p := _pin(m, first_limit))), None)
        if first is None:
            first = _scan_first(session, session.last_seq, first_limit)
    latest = next(  # words typed when turning a call down are the person's turn too
        (p for m in kept_newest_first if (p := _pin(m, latest_limit, user_words))), None
    )
    if latest is None:
        latest = next(
            (p for m in reversed(summarized) if (p := _pin(m, latest_limit, user_words))), None
        )
    if latest is None and previous is not None:
        latest = PinnedRequest.from_metadata(previous.metadata.get(LATEST_KEY))
    if latest is None and found[1] is not None:
        latest = PinnedRequest(found[1][0], clip_words(found[1][1], latest_limit))
    return first, latest


def earlier_task(previous: Checkpoint | None, *, max_words: int = 600) -> PinnedRequest | None:
    """The task an earlier summary of another tool states ("Primary Request and Intent"),
    carried in each later checkpoint's metadata: after such a summary the person's first
    message is often one step ("let's stash first"), not the task."""
    if previous is None:
        return None
    carried = PinnedRequest.from_metadata(previous.metadata.get(TASK_KEY))
    if carried is not None:
        return carried
    intent = earlier_intent(previous.summary)
    if not intent:
        return None
    task = "; ".join(line.rstrip(". ") for line in intent)
    limit = max(5, min(FIRST_REQUEST_WORDS, max_words // 8))
    return PinnedRequest(previous.covers_up_to, clip_words(task, limit), EARLIER)


def pinned_bullets(
    first: PinnedRequest | None,
    latest: PinnedRequest | None,
    task: PinnedRequest | None = None,
) -> list[str]:
    """The request bullets; with an earlier summary's ``task``, that is the primary request
    and the person's first message is named as their first request."""
    out = []
    if task is not None:
        out.append(f"Primary request ({task.source}, #{task.seq}): {task.text}")
    lead = "First request" if task is not None else "Primary request"
    if first is not None and latest is not None and first.seq == latest.seq:
        return [*out, f"{lead} ({first.source}, #{first.seq}; also the latest): {first.text}"]
    if first is not None:
        out.append(f"{lead} ({first.source}, #{first.seq}): {first.text}")
    if latest is not None:
        out.append(f"Latest request (user, #{latest.seq}): {latest.text}")
    return out


def pinned_words(bullets: Sequence[str]) -> int:
    return sum(words(f"- {b}") for b in bullets)


def _label(text: str) -> str:
    head, sep, _ = text.partition(":")
    return head.split(" (")[0].strip().lower() if sep and len(head) <= 60 else ""


def _body(bullet: str) -> str:
    """What a bullet says after its label ("the task: " of an earlier summary's included)."""
    return bullet.partition("): ")[2].removeprefix("the task: ").strip().rstrip(".")


def _repeats(body: str, pinned: set[str]) -> bool:
    """``body`` says what a pinned bullet says: the same words, or their clipped start."""
    if not body:
        return False
    stem = body.removesuffix("\u2026").strip()
    return body in pinned or (stem != body and any(p.startswith(stem) for p in pinned))


def pin_requests(
    summary: SummaryResult, bullets: Sequence[str], *, max_words: int
) -> SummaryResult:
    """``summary`` with ``bullets`` opening Current State (replacing the summarizer's own
    request bullets), re-rendered under ``max_words``."""
    if not bullets:
        return summary
    parsed = parse(summary.text)
    pinned = {_body(b) for b in bullets}
    state = [
        b
        for b in parsed.current_state
        if _label(b.text) not in _OWN_LABELS and not _repeats(_body(b.text), pinned)
    ]  # nor a line that repeats a pinned one (an earlier summary's task, quoted as history)
    snapshot = parsed.model_copy(update={"current_state": []})
    for i, text in enumerate(bullets):
        snapshot.add("current_state", text, PIN_SCORE - i)
    snapshot.current_state.extend(state)
    return summary.rewritten(snapshot.render(max(max_words, SKELETON_WORDS)))


def request_metadata(
    first: PinnedRequest | None,
    latest: PinnedRequest | None,
    task: PinnedRequest | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {TASK_KEY: task.as_metadata()} if task is not None else {}
    if first is not None:
        out[FIRST_KEY] = first.as_metadata()
    if latest is not None:
        out[LATEST_KEY] = latest.as_metadata()
    return out
