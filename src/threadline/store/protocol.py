"""The Store protocol and the Session handle over it (each names the other: a store
makes handles, a handle holds its store, so they share this module), and the memo's
compare-and-set loop (``update_memo``) both use.

A backend implements ``Store``: a flat set of methods keyed by session id.
Callers mostly hold a ``Session``, a small handle that binds a store to one
session and does the store-independent work of an append once, for every
backend: validate, stamp ids and times, count tokens (keyed by tokenizer
family, so views never recount stored history), check size
(``store/encoding.py``). A fork's reads chain through its ancestors
(``store/lineage.py``).

Optional abilities (full-text search, TTL) raise ``NotSupported`` on backends
that lack them; everything else every backend must do, and the conformance
suite checks it.

The rules themselves, applied on each backend's primitives, are ``StoreCore``
(``store/core.py``); the pieces it decides with live beside their records:
``LockHolder.claim`` (``locks.py``) for attach locks, ``check_checkpoint``
(``checkpoints.py``) for a checkpoint on an expected predecessor (called inside the
backend's transaction, lock or script), and ``update_memo`` here, on top of each
backend's ``replace_memo`` compare-and-set. ``CONNECTION_RETRY`` (``retry.py``) is
the one resend policy of the server backends.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol, TypedDict, Unpack, runtime_checkable

from threadline.errors import InvalidMessage, StoreUnavailable
from threadline.store import retraction
from threadline.store.alongside import AlongsideFields
from threadline.store.checkpoints import ANY_PREVIOUS, Checkpoint, ExpectPrevious
from threadline.store.checks import RESULT_LOOKBACK, TAIL_BATCH, bounded, bounded_or_none
from threadline.store.encoding import (
    Batch,
    PreparedBatch,
    append_time,
    later,
    prepare_messages,
    primary_tokens,
    session_family,
)
from threadline.store.lineage import (
    ForkPoint,
    Segment,
    chain_read,
    chain_tail,
    delete_session,
    fork_point,
    fork_segments,
    inherited_checkpoints,
)
from threadline.store.listing import ListOptions, SessionPage
from threadline.store.locks import LockHolder
from threadline.store.search_records import SearchOptions, SearchPage
from threadline.store.session_info import (
    ScratchpadEntry,
    SessionChangeFields,
    SessionFields,
    SessionInfo,
)

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import Message


class BesideOptions(TypedDict, total=False):
    """``Store.scratchpad_page_beside``'s keyword arguments beside ``limit`` and
    ``beside``, as ``scratchpad_page`` takes the first two."""

    prefix: str
    before: str | None
    names: Sequence[str]


@runtime_checkable
class Store(Protocol):
    """What every backend does. All methods take full session ids except
    ``resolve_id`` / ``get_session``, which also accept a unique prefix."""

    url: str

    # sessions
    def create_session(
        self, *, lock: LockHolder | None = None, **fields: Unpack[SessionFields]
    ) -> Session:
        """Create a session (``SessionFields``, checked by ``new_session``); with ``lock``,
        it is locked before it becomes visible. With ``start``, its counters begin there
        (a fork's shared prefix, see ``store/fork.py``) and it is listed under the fork's
        parent. ``created_at`` / ``updated_at`` date it by its source's clock (an
        imported transcript, a copied session; default now); ``parent`` lists it under
        another session, which must exist (``SessionNotFound`` otherwise)."""
        ...

    def get_session(self, id_or_prefix: str) -> Session: ...
    def resolve_id(self, id_or_prefix: str) -> str: ...
    def session_info(self, session_id: str) -> SessionInfo: ...
    def session_mark(self, session_id: str) -> tuple[datetime, int]:
        """``(created_at, last_seq)``: what moves when the session's history does (a new
        session at the same id, an append), read without the rest of ``session_info``."""
        ...

    def list_sessions(self, **options: Unpack[ListOptions]) -> SessionPage:
        """Newest updated first (ties by id): a page (``limit``, ``offset``) of every
        session, of one ``agent``'s, of the ``top_level`` ones (listed under no other) or
        of one ``parent``'s children, updated from ``updated_since`` (included) to
        ``updated_until`` (excluded) (``ListOptions``, checked by ``list_request``).
        Served by an index on the SQL backends and Redis: a page of top-level sessions,
        or of a time range deep in the listing, reads the page, not every session."""
        ...

    def count_children(self, session_ids: Sequence[str]) -> dict[str, int]:
        """How many sessions are listed directly under each of ``session_ids`` (up to
        ``MAX_PAGE_SIZE`` ids; every id is a key, 0 for none or an unknown id)."""
        ...

    def rename_session(self, session_id: str, title: str | None) -> SessionInfo: ...
    def update_session(self, session_id: str, **fields: Unpack[SessionChangeFields]) -> SessionInfo:
        """Change what is given (``session_change``) without moving ``updated_at``:
        ``metadata`` keys are merged in, ``title`` set, and ``parent`` puts a session
        that has none under an existing one (once; a loop is refused)."""
        ...

    def delete_session(self, session_id: str, *, force: bool = False) -> None: ...
    def delete_sessions(self, session_ids: Sequence[str], *, force: bool = False) -> int: ...
    def delete_all(self, *, agent: str | None = None, force: bool = False) -> int: ...

    # messages
    def append_messages(
        self, session_id: str, messages: Sequence[Message], **fields: Unpack[AlongsideFields]
    ) -> list[Message]:
        """All-or-nothing; assigns consecutive seqs. Idempotent on message ids: a batch
        whose first id is already stored returns the stored copies instead. With it, in
        the same atomic step, ``scratchpad`` entries are written and ``metadata`` keys
        merged into the session's (``store/alongside.py``); ``scratchpad_of`` names
        another session for the entries; ``expect`` (a ``Mark``): only if the session is
        still as the writer read it, so the messages get the seqs after ``last_seq``,
        else nothing is written (``SessionChanged``); on a mark the batch may be empty
        (the companions alone)."""
        ...

    def tail(self, session_id: str, limit: int, *, before_seq: int | None = None) -> list[Message]:
        """Newest first: up to ``limit`` messages with seq < ``before_seq``."""
        ...

    def read_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Oldest first: messages with seq > ``after_seq``."""
        ...

    def count_messages(self, session_id: str) -> int: ...

    # checkpoints
    def add_checkpoint(
        self,
        session_id: str,
        *,
        covers_up_to: int,
        summary: str,
        metadata: dict[str, Any] | None = None,
        expect_previous: ExpectPrevious = ANY_PREVIOUS,
    ) -> Checkpoint:
        """Append a checkpoint, atomically checked by ``check_checkpoint``: with
        ``expect_previous`` (an id, or ``None`` for none yet) only while that is still the
        latest one, else ``CheckpointConflict``."""
        ...

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None: ...
    def list_checkpoints(self, session_id: str) -> list[Checkpoint]: ...

    # scratchpad
    def scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry: ...
    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None: ...
    def scratchpad_list(self, session_id: str, *, prefix: str = "") -> list[ScratchpadEntry]:
        """Entries by name; with ``prefix``, only those whose name starts with it (a
        range of the name index on the SQL backends: the others' content is not read)."""
        ...

    def scratchpad_page(
        self, session_id: str, *, prefix: str = "", limit: int, before: str | None = None
    ) -> list[ScratchpadEntry]:
        """Up to ``limit`` entries whose names start with ``prefix`` and sort below
        ``before``, last name first: a page read from the end of the name index (the
        SQL backends read only the page), so the newest of many costs one page."""
        ...

    def scratchpad_page_contents(
        self, session_id: str, *, prefix: str = "", limit: int, before: str | None = None
    ) -> list[tuple[str, str]]:
        """``scratchpad_page`` as ``(name, content)`` pairs, without the dates: what a
        reader of the newest few records needs, with nothing made per row that it drops."""
        ...

    def scratchpad_page_beside(
        self, session_id: str, *, limit: int, beside: str, **page: Unpack[BesideOptions]
    ) -> tuple[list[tuple[str, str]], dict[str, str]]:
        """``scratchpad_page_contents`` (``prefix``, ``before``), and name -> content
        of the entries filed beside the page's: for an entry named ``prefix + rest``,
        those whose names start with ``beside + rest + "/"`` (a LangGraph checkpoint's
        pending writes), and of those named in ``names`` (what the reader expects the
        page to need). One query on the SQL backends, so a page of records and what
        hangs off them cost one round trip."""
        ...

    def scratchpad_contents(
        self, session_id: str, *, names: Sequence[str] = (), prefixes: Sequence[str] = ()
    ) -> dict[str, str]:
        """name -> content (by name) of the entries named in ``names`` or whose names
        start with one of ``prefixes``, in one read (one query on the SQL backends, one
        call on Redis): what a reader needs of many entries without their dates; a name
        not stored is left out."""
        ...

    def scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], *, keep_existing: bool = False
    ) -> None:
        """Write many entries (name -> content) at once (one transaction on the SQL
        backends); with ``keep_existing`` an entry already stored is left as it is."""
        ...

    def scratchpad_delete(self, session_id: str, name: str) -> bool: ...

    # memo: one JSON document per session for strategies and runtime state
    def get_memo(self, session_id: str) -> dict[str, Any]: ...
    def get_memos(self, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The memos of many sessions in one read (the SQL backends: one query), by
        id; an id with no session is left out. A listing reads a page's memos so."""
        ...

    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None: ...
    def replace_memo(self, session_id: str, expected: dict[str, Any], memo: dict[str, Any]) -> bool:
        """Compare-and-set, in one atomic step: store ``memo`` only if the stored memo is
        still ``expected`` (``same_memo``); False when it is not. ``update_memo`` builds
        on it."""
        ...

    # attach locks
    def acquire_lock(self, session_id: str, holder: LockHolder | None = None) -> LockHolder:
        """Take or renew the lock; raises ``SessionLocked`` naming a live holder."""
        ...

    def release_lock(self, session_id: str, holder: LockHolder | None = None) -> bool: ...
    def lock_holder(self, session_id: str) -> LockHolder | None: ...

    # search (optional: raises NotSupported); syntax, order and filters: store/search_query.py
    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """Hits newest first; options: agent, session_id, model, role, since, until,
        limit, offset."""
        ...

    def shared_place(self) -> tuple[str, Any, str] | None:
        """Where other workers sharing this store keep what they share beside it (the
        server's events): its kind (``postgres``, ``redis``), connection (libpq string,
        client) and namespace (schema, key prefix); None for a one-worker store."""
        ...

    def close(self) -> None: ...


MEMO_CAS_ATTEMPTS = 100
"""Compare-and-set rounds ``update_memo`` tries before giving up: each lost round means
another writer changed the memo in between, so this is only reached under a storm."""
RESERVED_MEMO_PREFIX = "threadline."
"""Memo keys the library keeps for itself (compaction mark, retraction index)."""


COMPACTION_MARK_KEY: Final = "threadline.compaction"
"""Memo key of a compaction in progress (written by ``compaction/compactor.py``, read by
``store/doctor.py``): named here, below both."""


def same_memo(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal as stored JSON: key order does not matter, and NaN equals NaN."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def update_memo(
    store: Store, session_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> dict[str, Any]:
    """Read the memo, let ``change`` decide, and write the result only if nobody wrote in
    between (``Store.replace_memo``), else decide again on what they wrote.

    ``change`` gets a copy and returns the new memo, or ``None`` to leave it as it is;
    whatever it raises propagates. Returns the memo as stored afterwards. This is how
    a decision on one memo key (the compaction mark) is atomic on every backend.
    """
    for _ in range(MEMO_CAS_ATTEMPTS):
        memo = store.get_memo(session_id)
        new = change(copy.deepcopy(memo))
        if new is None:
            return memo
        if store.replace_memo(session_id, memo, new):
            return new
    raise StoreUnavailable(
        f"session {session_id}: the memo changed under {MEMO_CAS_ATTEMPTS} attempts in a "
        "row to update it; too many writers at once"
    )


class Session:
    """One session of one store. Cheap to make; holds no connection of its own."""

    def __init__(self, store: Store, info: SessionInfo) -> None:
        self.store = store
        self._info = info
        self.view_state: dict[str, Any] = {}
        """In-memory state views keep between builds (the stable trim anchor)."""
        self._recent_calls: set[str] = set()
        """Call ids of the latest batch with tool calls this handle appended: the usual
        next batch answers them, and needs no read of the tail to check so."""
        self._segments: list[Segment] | None = None
        """The fork chain, newest first (see ``segments``); fork points never change."""
        self._inherited: retraction.Retractions | None = None
        """Retractions a fork inherits from its ancestors (fixed, like its fork point)."""
        self._read_with: retraction.Retractions | None = None
        """The index the latest view read through this handle used (see ``hidden_after``)."""

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, agent={self.agent!r}, messages={self.message_count})"

    # -- identity
    @property
    def id(self) -> str:
        return self._info.id

    @property
    def info(self) -> SessionInfo:
        """As of this handle's last read or append (``refresh`` reads it again)."""
        return self._info

    @property
    def agent(self) -> str:
        return self._info.agent

    @property
    def model(self) -> str | None:
        return self._info.model

    @property
    def title(self) -> str | None:
        return self._info.title

    @property
    def message_count(self) -> int:
        return self._info.message_count

    @property
    def total_tokens(self) -> int:
        return self._info.total_tokens

    @property
    def last_seq(self) -> int:
        return self._info.last_seq

    @property
    def tokenizer_family(self) -> str:
        return session_family(self._info.model)

    @property
    def parent_id(self) -> str | None:
        """The session this one is listed under (``SessionInfo.parent_id``)."""
        return self._info.parent_id

    @property
    def fork(self) -> ForkPoint | None:
        """Where this session forked from its parent; ``None`` for a root session."""
        return fork_point(self._info)

    def refresh(self) -> Session:
        self._info = self.store.session_info(self.id)
        return self

    # -- messages
    def append(
        self, messages: Message | Sequence[Message], **fields: Unpack[AlongsideFields]
    ) -> list[Message]:
        """Store a batch atomically; returns the stored copies with seq and token counts.
        ``scratchpad`` entries (of session ``scratchpad_of``, default this one) and
        ``metadata`` keys are written in the same atomic step, only if the session is
        still as ``expect`` says when given (``Store.append_messages``).

        A tool result must answer a call made in the same batch or in the recent
        history; anything else is refused (``InvalidMessage``) before storing. A batch
        dated by its source (``dated``) moves ``updated_at`` to its time, else to now.
        """
        from threadline.messages import Message

        at = messages.at if isinstance(messages, Batch) else None
        batch = [messages] if isinstance(messages, Message) else list(messages)
        prepared = prepare_messages(self.model, batch, at=at)
        self._check_results_have_calls(prepared)
        stored = self.store.append_messages(self.id, prepared, **fields)
        if prepared.calls:
            self._recent_calls = prepared.calls
        info = self._info
        metadata = fields.get("metadata")
        if metadata:  # the keys as this append wrote them, over what the handle knew
            info = info.replace(metadata={**info.metadata, **copy.deepcopy(metadata)})
        if stored and (stored[0].seq or 0) <= info.last_seq:
            self.refresh()  # a batch stored before: read the counters rather than add twice
        elif stored:  # the counters as this append left them, without reading them back
            self._info = info.replace(
                last_seq=max(info.last_seq, stored[-1].seq or 0),
                message_count=info.message_count + len(stored),
                total_tokens=info.total_tokens + sum(map(primary_tokens, stored)),
                updated_at=later(info.updated_at, append_time(prepared)),
            )
        return stored

    def _check_results_have_calls(self, batch: PreparedBatch) -> None:
        """Refuses a result whose call is neither in the batch nor in the recent history."""
        missing = [x for x in batch.unanswered if x not in self._recent_calls]
        for limit in RESULT_LOOKBACK:
            if not missing:
                return
            recent = self.tail(limit)
            earlier = {c.id for m in recent for c in m.tool_calls}
            missing = [x for x in missing if x not in earlier]
            if len(recent) < limit:
                break
        if missing:
            raise InvalidMessage(
                f"tool result for call {missing[0]!r} has no matching tool call in this batch "
                f"or the last {RESULT_LOOKBACK[-1]} messages of session {self.id}"
            )

    def messages(self, *, after_seq: int = 0, include_retracted: bool = False) -> list[Message]:
        """Every message in view after ``after_seq``, oldest first; with
        ``include_retracted``, the whole history (retracted messages and records too)."""
        return list(self.iter_messages(after_seq=after_seq, include_retracted=include_retracted))

    def iter_messages(
        self, *, after_seq: int = 0, batch: int = TAIL_BATCH, include_retracted: bool = False
    ) -> Iterator[Message]:
        while True:
            page = self.read_messages(
                after_seq=after_seq, limit=batch, include_retracted=include_retracted
            )
            yield from page
            if len(page) < batch:
                return
            after_seq = page[-1].seq or after_seq

    def read_messages(
        self, *, after_seq: int = 0, limit: int | None = None, include_retracted: bool = False
    ) -> list[Message]:
        """Oldest first: messages in view with seq > ``after_seq``, a fork's shared prefix
        included (use this, not ``store.read_messages``, which sees only the session's own
        and what was retracted)."""
        after_seq, limit = bounded(after_seq, "after_seq"), bounded_or_none(limit, "limit")
        return self._view(chain_read, retraction.visible_read, limit, after_seq, include_retracted)

    def tail(
        self, limit: int, *, before_seq: int | None = None, include_retracted: bool = False
    ) -> list[Message]:
        """Newest first: up to ``limit`` messages in view with seq < ``before_seq``, through
        a fork's shared prefix."""
        limit, before_seq = bounded(limit, "limit"), bounded_or_none(before_seq, "before_seq")
        return self._view(chain_tail, retraction.visible_tail, limit, before_seq, include_retracted)

    def _view(
        self,
        chain: Callable[[Store, list[Segment], Any, Any], list[Message]],
        visible: Callable[[retraction.RawRead, retraction.Retractions, Any, Any], list[Message]],
        limit: int | None,
        bound: int | None,
        include_retracted: bool,
    ) -> list[Message]:
        """One read of the view: ``chain`` reads the history through the fork chain (a
        page of ``limit`` from ``bound``), ``visible`` steps it over what is retracted."""

        def raw(n: Any, at: Any) -> list[Message]:
            return chain(self.store, self.segments(), n, at)

        if include_retracted:
            return raw(limit, bound)
        index = self.retractions()
        while True:
            page = visible(raw, index, limit, bound)
            healed = retraction.with_found_records(self, index, page)
            if healed is None:
                return page
            index = self._read_with = healed

    # -- retraction (store/retraction.py): append-only removal from the view
    def retractions(self) -> retraction.Retractions:
        """What is out of this session's view: its own records (memo index) and, on a
        fork, its ancestors' records up to the fork point."""
        index = retraction.index_of(self)
        if len(self.segments()) > 1:
            if self._inherited is None:
                self._inherited = retraction.Retractions()
                for seg in self.segments()[1:]:
                    assert seg.upper is not None
                    memo = self.store.get_memo(seg.session_id)
                    found = retraction.Retractions.from_memo(memo).up_to(seg.upper)
                    self._inherited = self._inherited.joined(found)
            index = index.joined(self._inherited)
        self._read_with = index
        return index

    def retract(self, seqs: Sequence[int], *, then: Sequence[Message] = ()) -> list[Message]:
        """Take ``seqs`` out of the view by appending a retraction record (and ``then`` in
        the same batch); the history keeps them. Returns the stored record and ``then``."""
        return retraction.retract(self, seqs, then=then)

    def retract_all(self) -> Message | None:
        """Take every message now in view out of it (a "clear"); None when none is."""
        if not self.tail(1):
            return None
        self.refresh()
        return retraction.retract_ranges(self, [(1, self.last_seq)])[0]

    def view_index(self) -> retraction.Retractions | None:
        """The retraction index the latest view read through this handle used (None
        before any): what a reader that keeps the view compares to know it still holds."""
        return self._read_with

    def hidden_after(self, seq: int) -> int:
        """How many seqs after ``seq`` are out of the view (retracted, or records), by the
        index the latest read through this handle used: what it read and this agree."""
        index = self._read_with if self._read_with is not None else self.retractions()
        return index.hidden_between(seq, self.last_seq)

    def shows_checkpoint(self, checkpoint: Checkpoint) -> bool:
        """Whether a window may show this checkpoint's summary (no later retraction
        took back a message it covers)."""
        return self.retractions().shows(checkpoint)

    def segments(self) -> list[Segment]:
        """Where this session's view comes from, newest first: its own messages, then each
        ancestor's up to the fork point below it. One element for a root session."""
        if self._segments is None:
            self._segments = fork_segments(self.store, self._info)
        return self._segments

    def count(self) -> int:
        return self.store.count_messages(self.id)

    # -- checkpoints
    def add_checkpoint(
        self,
        *,
        covers_up_to: int,
        summary: str,
        metadata: dict[str, Any] | None = None,
        expect_previous: ExpectPrevious = ANY_PREVIOUS,
    ) -> Checkpoint:
        """See ``Store.add_checkpoint``: pass ``expect_previous`` to build on a known one.

        On a fork, building on an inherited checkpoint (one of an ancestor's) means
        "no checkpoint of its own yet", which is what the store checks.
        """
        if isinstance(expect_previous, int) and self.fork is not None:
            latest = self.latest_checkpoint()
            if latest is not None and latest.session_id != self.id and latest.id == expect_previous:
                expect_previous = None
        return self.store.add_checkpoint(
            self.id,
            covers_up_to=covers_up_to,
            summary=summary,
            metadata=metadata,
            expect_previous=expect_previous,
        )

    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint of the view: this session's own, else the newest of an
        ancestor's that covers only shared history (its ``session_id`` names the ancestor)."""
        own = self.store.latest_checkpoint(self.id)
        if own is not None or self.fork is None:
            return own
        inherited = inherited_checkpoints(self.store, self.segments())
        return inherited[-1] if inherited else None

    def checkpoints(self) -> list[Checkpoint]:
        """Oldest first, a fork's inherited checkpoints before its own."""
        own = self.store.list_checkpoints(self.id)
        if self.fork is None:
            return own
        return inherited_checkpoints(self.store, self.segments()) + own

    # -- scratchpad and memo
    def scratchpad_write(self, name: str, content: str) -> ScratchpadEntry:
        return self.store.scratchpad_write(self.id, name, content)

    def scratchpad_read(self, name: str) -> ScratchpadEntry | None:
        return self.store.scratchpad_read(self.id, name)

    def scratchpad_list(self, *, prefix: str = "") -> list[ScratchpadEntry]:
        return self.store.scratchpad_list(self.id, prefix=prefix)

    def get_memo(self) -> dict[str, Any]:
        return self.store.get_memo(self.id)

    def set_memo(self, memo: dict[str, Any]) -> None:
        """Replace the memo, keeping the store's own keys (``RESERVED_MEMO_PREFIX``: the
        retraction index, the compaction mark) that ``memo`` does not name, in one
        compare-and-set, so an application's memo never un-retracts anything."""

        def keep_reserved(old: dict[str, Any]) -> dict[str, Any]:
            kept = {k: v for k, v in old.items() if k.startswith(RESERVED_MEMO_PREFIX)}
            return {**kept, **memo}

        self.update_memo(keep_reserved)

    def update_memo(
        self, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Change the memo atomically (see ``update_memo``)."""
        return update_memo(self.store, self.id, change)

    # -- lifecycle
    def rename(self, title: str | None) -> None:
        self._info = self.store.rename_session(self.id, title)

    def delete(self, *, force: bool = False) -> None:
        """Delete the session. One with forks is refused (``SessionHasForks``) unless
        ``force``, which deletes its forks with it and overrides attach locks."""
        delete_session(self.store, self.id, force=force)

    @contextlib.contextmanager
    def attached(self, holder: LockHolder | None = None) -> Iterator[Session]:
        """Hold the attach lock for the block; ``SessionLocked`` if someone else has it."""
        held = self.store.acquire_lock(self.id, holder)
        try:
            yield self
        finally:
            self.store.release_lock(self.id, held)
