"""Retraction: taking messages out of a session's view without deleting them.

History is append-only (invariant 1), so "remove the last item" (the Agents SDK's
``pop_item``) and "clear the session" (``clear_session``, LangChain's ``clear``)
append a *retraction record*: a synthetic system message whose metadata names the
seqs it retracts. The view (``Session.tail`` / ``read_messages`` / ``messages``,
and through them the context builder, exports and the framework adapters) leaves
out the retracted messages and the records; the history keeps both, for audit
(``include_retracted=True``).

One rule for every backend, here: views must not read the whole history to know
what is retracted, so the records are indexed in the session memo (key
``MEMO_KEY``, written with the ``update_memo`` compare-and-set right after the
record). The record is the truth and the memo its index: ``rebuild_index``
rescans the records when the index is missing (a store restored without memos)
or a process died between the two writes.

A checkpoint whose summary covers a retracted message would bring it back in a
window, so a retraction that reaches under the newest checkpoint appends an empty
one through the record (checkpoints only move forward, invariant 9), and a view
holding an older checkpoint drops it (``Retractions.shows``).
"""

from __future__ import annotations

import bisect
import copy
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from threadline.errors import CheckpointConflict, ThreadlineError, UsageError

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import Message


class CheckpointView(Protocol):
    """What retraction reads of a ``store.checkpoints.Checkpoint``."""

    @property
    def id(self) -> int: ...
    @property
    def covers_up_to(self) -> int: ...


class MessageReader(Protocol):
    """What retraction reads of a ``store.protocol.Store``: the raw history."""

    def read_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]: ...


class SessionView(Protocol):
    """What retraction uses of a ``store.protocol.Session``. Named here, not imported, so
    the handle in ``store/protocol.py`` builds on this module and not the other way round."""

    @property
    def id(self) -> str: ...
    @property
    def store(self) -> MessageReader: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def message_count(self) -> int: ...
    @property
    def fork(self) -> object | None: ...
    def refresh(self) -> object: ...
    def retractions(self) -> Retractions: ...
    def get_memo(self) -> dict[str, Any]: ...
    def update_memo(
        self, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]: ...
    def append(self, messages: Sequence[Message]) -> list[Message]: ...
    def latest_checkpoint(self) -> CheckpointView | None: ...
    def add_checkpoint(
        self,
        *,
        covers_up_to: int,
        summary: str,
        metadata: dict[str, Any] | None = None,
        expect_previous: int | None,
    ) -> object: ...


RECORD_KEY = "threadline_retraction"
"""Metadata key of a retraction record: ``{"ranges": [[first, last], ...]}`` (inclusive)."""
MEMO_KEY = "threadline.retractions"
"""Memo key of the index: ``{"records": [[record_seq, [[first, last], ...]], ...]}``.
Under the reserved ``threadline.`` prefix, so a memo written by an application or a
strategy keeps it (``Session.set_memo``)."""
SQLITE_SHOWN = f"""NOT EXISTS (
    SELECT 1 FROM json_each(s.memo, '$."{MEMO_KEY}".records') r
    WHERE r.type = 'array' AND json_type(r.value, '$[0]') = 'integer' AND (
        json_extract(r.value, '$[0]') = m.seq OR EXISTS (
            SELECT 1 FROM json_each(r.value, '$[1]') g
            WHERE g.type = 'array' AND json_type(g.value, '$[0]') = 'integer'
            AND json_type(g.value, '$[1]') = 'integer'
            AND m.seq BETWEEN json_extract(g.value, '$[0]')
                AND json_extract(g.value, '$[1]'))))"""
"""``Retractions.hides`` in SQLite, negated, for a search over ``messages m`` joined to
``sessions s``: the message is neither a record of its session's index nor in one of
a record's ranges. Search finds what the views show, on every backend."""
POSTGRES_SHOWN = f"""NOT EXISTS (
    SELECT 1 FROM json_array_elements(CASE
        WHEN json_typeof(s.memo -> '{MEMO_KEY}' -> 'records') = 'array'
        THEN s.memo -> '{MEMO_KEY}' -> 'records' END) r
    WHERE json_typeof(r) = 'array' AND json_typeof(r -> 0) = 'number' AND (
        CASE WHEN json_typeof(r -> 0) = 'number' THEN (r ->> 0)::numeric END = m.seq
        OR EXISTS (
            SELECT 1 FROM json_array_elements(CASE
                WHEN json_typeof(r -> 1) = 'array' THEN r -> 1 END) g
            WHERE json_typeof(g) = 'array' AND m.seq BETWEEN
                CASE WHEN json_typeof(g -> 0) = 'number' THEN (g ->> 0)::numeric END
                AND CASE WHEN json_typeof(g -> 1) = 'number' THEN (g ->> 1)::numeric END)))"""
"""``SQLITE_SHOWN`` for PostgreSQL (``memo`` is a ``json`` column)."""
CHECKPOINT_KEY = "retraction"
"""Metadata key of the empty checkpoint a retraction writes: the record's seq."""
log = logging.getLogger(__name__)
REBUILD_PAGE = 1000
CHECKPOINT_ATTEMPTS = 20
"""Rounds of writing the superseding checkpoint while compactions keep adding one."""

Range = tuple[int, int]
RawRead = Callable[[Any, Any], "list[Message]"]
"""``(limit, bound) -> messages``: a raw page of the history: a tail (``limit``,
``before_seq``) or a forward read (``limit`` or ``None``, ``after_seq``)."""


def merge_ranges(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, merged inclusive ranges (adjacent ones join)."""
    out: list[Range] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def ranges_of(seqs: Iterable[int]) -> list[Range]:
    return merge_ranges((s, s) for s in seqs)


def record_message(ranges: Sequence[Range]) -> Message:
    """The retraction record for ``ranges`` (as the history shows it)."""
    from threadline.messages import Message

    named = ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)
    return Message.system(
        f"[threadline: messages {named} were retracted from this session's view; "
        "they remain in its history]",
        synthetic=True,
        metadata={RECORD_KEY: {"ranges": [list(r) for r in ranges]}},
    )


def record_ranges(m: Message) -> list[Range] | None:
    """The ranges a retraction record retracts, or ``None`` for any other message."""
    raw = m.metadata.get(RECORD_KEY) if m.role == "system" and m.synthetic else None
    if not isinstance(raw, dict) or not isinstance(raw.get("ranges"), list):
        return None
    ranges = [_range(r) for r in raw["ranges"]]
    good = [r for r in ranges if r is not None]
    return merge_ranges(good) if len(good) == len(ranges) and good else None


def _range(raw: object) -> Range | None:
    if not isinstance(raw, list) or len(raw) != 2:
        return None
    lo, hi = raw
    if type(lo) is not int or type(hi) is not int or not 1 <= lo <= hi:
        return None
    return lo, hi


@dataclass(frozen=True)
class Retractions:
    """The index: which records exist and what they retract; answers the views' questions
    (is this seq visible, where does the next visible one start) in O(log n)."""

    records: tuple[tuple[int, tuple[Range, ...]], ...] = ()
    _starts: list[int] = field(init=False, repr=False, compare=False)
    _ends: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        hidden = merge_ranges(
            [(seq, seq) for seq, _ in self.records]
            + [r for _, ranges in self.records for r in ranges]
        )
        object.__setattr__(self, "_starts", [lo for lo, _ in hidden])
        object.__setattr__(self, "_ends", [hi for _, hi in hidden])

    def __bool__(self) -> bool:
        return bool(self.records)

    @classmethod
    def from_memo(cls, memo: dict[str, Any]) -> Retractions:
        raw = memo.get(MEMO_KEY)
        records: list[tuple[int, tuple[Range, ...]]] = []
        if isinstance(raw, dict) and isinstance(raw.get("records"), list):
            for entry in raw["records"]:
                parsed = _memo_entry(entry)
                if parsed is not None:
                    records.append(parsed)
        return cls(tuple(sorted(records)))

    def to_memo(self) -> dict[str, Any]:
        return {"records": [[seq, [list(r) for r in ranges]] for seq, ranges in self.records]}

    def with_record(self, seq: int, ranges: Sequence[Range]) -> Retractions:
        if any(s == seq for s, _ in self.records):
            return self
        return Retractions(tuple(sorted([*self.records, (seq, tuple(ranges))])))

    def up_to(self, seq: int) -> Retractions:
        """Only the records at or before ``seq``: what a fork inherits at its fork point."""
        return Retractions(tuple(r for r in self.records if r[0] <= seq))

    def joined(self, other: Retractions) -> Retractions:
        return Retractions(tuple(sorted(set(self.records) | set(other.records))))

    # -- questions the views ask
    def _range_at(self, seq: int) -> int | None:
        i = bisect.bisect_right(self._starts, seq) - 1
        return i if i >= 0 and seq <= self._ends[i] else None

    def hides(self, seq: int | None) -> bool:
        return seq is not None and self._range_at(seq) is not None

    def below(self, before: int) -> int:
        """``before`` lowered past the hidden run just below it: reading the tail before
        the result skips that run without reading it."""
        i = self._range_at(before - 1)
        return self._starts[i] if i is not None else before

    def above(self, after: int) -> int:
        """``after`` raised past the hidden run just above it (for forward reads)."""
        i = self._range_at(after + 1)
        return self._ends[i] if i is not None else after

    def hidden_between(self, low: int, high: int) -> int:
        """How many seqs in ``low < seq <= high`` are out of the view."""
        total = 0
        for lo, hi in zip(self._starts, self._ends, strict=True):
            total += max(0, min(hi, high) - max(lo, low + 1) + 1)
        return total

    def shows(self, checkpoint: CheckpointView) -> bool:
        """Whether a window may show ``checkpoint``'s summary: no record after it retracted
        a message it covers (such a summary would bring that message back)."""
        k = checkpoint.covers_up_to
        return not any(ranges and ranges[0][0] <= k < seq for seq, ranges in self.records)


def own_index(memo: dict[str, Any]) -> dict[str, Any]:
    """Only the index entry of a memo (a copy): what a search snapshot needs of it."""
    return {MEMO_KEY: copy.deepcopy(memo[MEMO_KEY])} if MEMO_KEY in memo else {}


def _memo_entry(entry: object) -> tuple[int, tuple[Range, ...]] | None:
    if not isinstance(entry, list) or len(entry) != 2 or type(entry[0]) is not int:
        return None
    if not isinstance(entry[1], list):
        return None
    ranges = [_range(r) for r in entry[1]]
    if any(r is None for r in ranges):
        return None
    return entry[0], tuple(merge_ranges(r for r in ranges if r is not None))


# -- reading the view ---------------------------------------------------------------


def visible_tail(
    raw: RawRead, index: Retractions, limit: int, before_seq: int | None
) -> list[Message]:
    """Newest first: up to ``limit`` visible messages with seq < ``before_seq``, reading
    pages of the raw tail and stepping over hidden runs without reading them."""
    if not index or limit <= 0:
        return raw(limit, before_seq)
    out: list[Message] = []
    before = before_seq
    while len(out) < limit:
        if before is not None:
            before = index.below(before)
            if before <= 1:
                break
        want = limit - len(out)
        page = raw(want, before)
        out.extend(m for m in page if not index.hides(m.seq))
        if len(page) < want or page[-1].seq is None:
            break
        before = page[-1].seq
    return out


def visible_read(
    raw: RawRead, index: Retractions, limit: int | None, after_seq: int
) -> list[Message]:
    """Oldest first: up to ``limit`` (``None``: all) visible messages with seq >
    ``after_seq``, stepping over hidden runs without reading them."""
    if not index or (limit is not None and limit <= 0):
        return raw(limit, after_seq)
    out: list[Message] = []
    after = after_seq
    while limit is None or len(out) < limit:
        after = index.above(after)
        want = None if limit is None else limit - len(out)
        page = raw(want, after)
        out.extend(m for m in page if not index.hides(m.seq))
        if want is None or len(page) < want or page[-1].seq is None:
            break
        after = page[-1].seq
    return out


def visible_count(session: SessionView) -> int:
    """How many messages the session's view shows: the stored count (a fork's shared
    prefix included) less what its index hides (retracted messages and the records)."""
    return _visible(session, session.retractions())


def _visible(session: SessionView, index: Retractions) -> int:
    return max(0, session.message_count - index.hidden_between(0, session.last_seq))


def visible_counts(
    sessions: Sequence[SessionView],
    get_memos: Callable[[list[str]], dict[str, dict[str, Any]]],
) -> dict[str, int]:
    """``visible_count`` of many sessions by id, their memos read in one batch
    (``Store.get_memos``). A fork's view also hides its ancestors' records, and a
    session gone meanwhile must fail as it would alone: those go one by one."""
    plain = [s for s in sessions if s.message_count and s.fork is None]
    memos = get_memos([s.id for s in plain]) if plain else {}
    counts: dict[str, int] = {}
    for s in sessions:
        if not s.message_count:
            counts[s.id] = 0
        elif s.fork is None and s.id in memos:
            counts[s.id] = _visible(s, Retractions.from_memo(memos[s.id]))
        else:
            counts[s.id] = visible_count(s)
    return counts


def view_memo(session: SessionView) -> dict[str, Any]:
    """The session's memo with the index of its whole view (a fork's inherited records
    too): what a copy that materializes the view must hold, so it hides the same."""
    memo = session.get_memo()
    if session.fork is not None:
        index = session.retractions()
        if index:
            memo[MEMO_KEY] = index.to_memo()
    return memo


# -- writing ------------------------------------------------------------------------


def index_of(session: SessionView) -> Retractions:
    """The session's own index (from its memo)."""
    return Retractions.from_memo(session.get_memo())


def retract(
    session: SessionView, seqs: Iterable[int], *, then: Sequence[Message] = ()
) -> list[Message]:
    """Append a record retracting ``seqs`` (and ``then``, in the same atomic batch: a
    message that takes the place of a retracted one), index it, and keep checkpoints
    from showing what it retracted. Returns the stored record and ``then``.

    Retracting a seq that is not in the session, or the empty set, is a usage error.
    """
    wanted = list(seqs)
    for seq in wanted:
        if type(seq) is not int:
            raise UsageError(f"a seq must be an integer, got {type(seq).__name__}")
    return retract_ranges(session, ranges_of(wanted), then=then)


def retract_ranges(
    session: SessionView, ranges: Sequence[Range], *, then: Sequence[Message] = ()
) -> list[Message]:
    """``retract`` for inclusive seq ranges (a clear is one range, whatever its length)."""
    ranges = merge_ranges(ranges)
    if not ranges:
        raise UsageError("nothing to retract: no seqs given")
    session.refresh()
    first, last = ranges[0][0], ranges[-1][1]
    if first < 1 or last > session.last_seq:
        raise UsageError(
            f"session {session.id} holds seqs 1-{session.last_seq}; cannot retract "
            f"{first if first < 1 else last}"
        )
    stored = session.append([record_message(ranges), *then])
    record_seq = stored[0].seq
    assert record_seq is not None
    index_record(session, record_seq, ranges)
    _supersede_checkpoint(session, record_seq, first)
    return stored


def index_record(session: SessionView, record_seq: int, ranges: Sequence[Range]) -> None:
    """Add one record to the memo index (idempotent; concurrent records all land)."""

    def change(memo: dict[str, Any]) -> dict[str, Any] | None:
        index = Retractions.from_memo(memo)
        grown = index.with_record(record_seq, ranges)
        if grown is index:
            return None
        memo[MEMO_KEY] = grown.to_memo()
        return memo

    session.update_memo(change)


def _supersede_checkpoint(session: SessionView, record_seq: int, first: int) -> None:
    """When the newest checkpoint covers a retracted seq, append an empty checkpoint
    through the record, so no window shows the old summary again."""
    latest: CheckpointView | None = None
    for _ in range(CHECKPOINT_ATTEMPTS):
        latest = session.latest_checkpoint()
        if latest is None or latest.covers_up_to < first or latest.covers_up_to >= record_seq:
            return
        try:
            session.add_checkpoint(
                covers_up_to=record_seq,
                summary="",
                metadata={CHECKPOINT_KEY: record_seq, "supersedes": latest.id},
                expect_previous=latest.id,
            )
            return
        except CheckpointConflict:
            continue  # a compaction wrote one meanwhile: decide again on it
    raise CheckpointConflict(
        f"session {session.id}: checkpoints kept changing while retraction {record_seq} "
        "was being written; its messages are retracted, but an older summary may still "
        "show them until the next compaction",
        expected=None,
        latest=latest.id if latest is not None else None,
    )


def with_found_records(
    session: SessionView, index: Retractions, page: Sequence[Message]
) -> Retractions | None:
    """A record that a view's page shows is one the index lacks: the process that
    wrote it died before indexing it. Returns ``index`` with the page's records added
    (None when it shows none), and writes them to the memo, with the superseding
    checkpoint, as the retraction would have; a handle that cannot write (read-only)
    still hides them for this read."""
    found = list(find_records(page))
    if not found:
        return None
    for seq, ranges in found:
        index = index.with_record(seq, ranges)
        try:
            index_record(session, seq, ranges)
            _supersede_checkpoint(session, seq, min(first for first, _ in ranges))
        except ThreadlineError as exc:
            log.warning("session %s: retraction %s not indexed: %s", session.id, seq, exc)
    return index


def find_records(messages: Iterable[Message]) -> Iterator[tuple[int, list[Range]]]:
    for m in messages:
        ranges = record_ranges(m)
        if ranges is not None and m.seq is not None:
            yield m.seq, ranges


def rebuild_index(session: SessionView) -> Retractions:
    """Rescan the session's own history for records and write the index they give.
    O(history): for repair (a memo lost, or a crash between record and index)."""
    found: dict[int, list[Range]] = {}
    after = 0
    while True:
        page = session.store.read_messages(session.id, after_seq=after, limit=REBUILD_PAGE)
        found.update(find_records(page))
        if len(page) < REBUILD_PAGE or page[-1].seq is None:
            break
        after = page[-1].seq

    def change(memo: dict[str, Any]) -> dict[str, Any] | None:
        index = Retractions.from_memo(memo)
        for seq, ranges in found.items():
            index = index.with_record(seq, ranges)
        memo[MEMO_KEY] = index.to_memo()
        return memo

    return Retractions.from_memo(session.update_memo(change))
