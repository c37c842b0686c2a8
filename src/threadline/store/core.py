"""The store core: every rule of the ``Store`` protocol, written once over the primitives
a backend supplies (docs/architecture.md has the table). A backend is a subclass of
``StoreCore`` and a line in the registry (``store/__init__.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Self, Unpack, cast

from threadline.errors import (
    SessionChanged,
    SessionLocked,
    SessionNotFound,
    ThreadlineError,
    UsageError,
)
from threadline.stamps import utcnow
from threadline.store.alongside import AlongsideFields, alongside
from threadline.store.checkpoints import ANY_PREVIOUS, Checkpoint, ExpectPrevious, new_checkpoint
from threadline.store.checks import (
    MAX_SCRATCHPAD_NAME,
    MIN_PREFIX_LENGTH,
    bounded,
    bounded_or_none,
    check_scratchpad_entry,
    check_scratchpad_name,
    check_scratchpad_prefix,
    check_title,
    pick_unique,
    prefix_bounds,
    validate_agent,
    validate_session_id,
)
from threadline.store.encoding import Appending, numbered
from threadline.store.listing import (
    ListOptions,
    ListRequest,
    SessionPage,
    children_request,
    list_request,
    memo_request,
)
from threadline.store.locks import LockHolder
from threadline.store.protocol import BesideOptions, Session, Store, same_memo
from threadline.store.session_info import (
    Mark,
    NewSession,
    ScratchpadEntry,
    SessionChange,
    SessionChangeFields,
    SessionFields,
    SessionInfo,
    check_session_fields,
    checked_parent_id,
    new_session,
    refuse_unknown,
)

if TYPE_CHECKING:
    from threadline.messages import Message


class PageBeside(NamedTuple):
    """What ``_scratchpad_page_beside`` reads, checked: a page (``prefix``, ``limit``,
    ``before``), the entries filed ``beside`` its entries, and those named."""

    prefix: str
    limit: int
    before: str | None
    beside: str
    names: list[str]


PageAndBeside = tuple[list[tuple[str, str]], dict[str, str]]
"""A page's (name, content) pairs, and name -> content of what was read beside it."""


def page_range(prefix: str, before: str | None) -> tuple[str, str | None]:
    """``(low, high)``, ``low <= name < high``: the names of a scratchpad page, those
    starting with ``prefix`` and below ``before`` (``high`` None: no bound above)."""
    low, high = prefix_bounds(prefix)
    if before is not None and (high is None or before < high):
        high = before
    return low, high


def _distinct(items: list[str]) -> list[str]:
    """``items`` without repeats, in order (most are one or two, none repeated)."""
    return list(dict.fromkeys(items)) if len(items) > 1 else items


class StoreCore:
    """The rules every backend follows, written once: each backend subclasses this and
    supplies the primitives, each one atomic step of its own: the methods below that
    raise ``NotImplementedError`` (most named with a leading underscore) and the plain
    reads and writes of the ``Store`` protocol that have no rule around them
    (checkpoints, scratchpad entries, memo and lock read whole, ``search``).
    docs/architecture.md has the table.
    """

    def session_info(self, session_id: str) -> SessionInfo:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def shared_place(self) -> tuple[str, Any, str] | None:
        """See ``Store.shared_place``: here a store only one worker opens."""
        return None

    def _driver_error(self, exc: Exception) -> ThreadlineError | None:
        """Primitive: the error of the ``ThreadlineError`` tree a driver's (or the file
        system's) exception means, or None to let it through as it is."""
        return None

    @contextlib.contextmanager
    def _translate(self) -> Iterator[None]:
        """Driver errors become ours (``_driver_error``); ours pass as they are."""
        try:
            yield
        except ThreadlineError:
            raise
        except Exception as exc:
            ours = self._driver_error(exc)
            if ours is None:
                raise
            raise ours from exc

    def _matching_ids(self, id_or_prefix: str, *, prefix: bool) -> list[str]:
        """Primitive: ``[id_or_prefix]`` when that session exists; otherwise, with
        ``prefix``, the ids it is a prefix of (sorted, a few are enough to call it
        ambiguous); otherwise none. One read, under the backend's own lock or snapshot."""
        raise NotImplementedError

    def _add_checkpoint(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        """Primitive: in one atomic step, read the session's last seq and its latest
        checkpoint, decide with ``check_checkpoint`` (which may return the one already
        stored, or refuse), and store ``new`` under the next id."""
        raise NotImplementedError

    def _insert_session(self, new: NewSession, lock: LockHolder | None) -> SessionInfo:
        """Primitive: store ``new`` (held by ``lock``) in one atomic step and return it as
        stored; ``SessionExists`` when its id is taken, ``SessionNotFound`` when it names
        a parent that does not exist."""
        raise NotImplementedError

    def _list_page(self, request: ListRequest) -> SessionPage:
        """Primitive: the page of sessions ``request`` admits, newest updated first (ties
        by id), with the total it admits (``ListRequest.page`` does it for a scan)."""
        raise NotImplementedError

    def _count_children(self, parent_ids: list[str]) -> dict[str, int]:
        """Primitive: how many sessions list each of ``parent_ids`` (distinct, at most a
        page) as their parent; a parent with none may be left out."""
        raise NotImplementedError

    def _set_title(self, session_id: str, title: str | None, now: datetime) -> SessionInfo:
        """Primitive: store ``title`` (checked) and ``updated_at = now`` in one step and
        return the session as stored; ``SessionNotFound`` when it does not exist."""
        raise NotImplementedError

    def create_session(
        self, *, lock: LockHolder | None = None, **fields: Unpack[SessionFields]
    ) -> Session:
        """See ``Store.create_session``: the id, fields and times checked and stamped here."""
        return Session(cast(Store, self), self._insert_session(new_session(fields), lock))

    def list_sessions(self, **options: Unpack[ListOptions]) -> SessionPage:
        return self._list_page(list_request(options))

    def count_children(self, session_ids: Sequence[str]) -> dict[str, int]:
        counts = dict.fromkeys(children_request(session_ids), 0)
        if counts:
            counts.update(self._count_children(list(counts)))
        return counts

    def rename_session(self, session_id: str, title: str | None) -> SessionInfo:
        return self._set_title(session_id, check_title(title), utcnow())

    def delete_session(self, session_id: str, *, force: bool = False) -> None:
        if self.delete_sessions([session_id], force=force) == 0:
            raise SessionNotFound(session_id)

    def _delete(self, session_ids: list[str], check: Callable[[str, object], None]) -> int:
        """Primitive: in one atomic step, read the stored attach lock of each of
        ``session_ids`` (distinct) that exists, pass it to ``check`` (which refuses the lot
        by raising), then delete those sessions, their children made top-level. Returns
        how many it deleted."""
        raise NotImplementedError

    def _session_ids(self, agent: str | None) -> list[str]:
        """Primitive: the ids of every session (of ``agent``, checked, when given)."""
        raise NotImplementedError

    def delete_sessions(self, session_ids: Sequence[str], *, force: bool = False) -> int:
        """All or nothing: a live attach lock on any of them refuses the lot, unless
        ``force``; a lock record that cannot be read is ``CorruptRecord`` (``force``
        deletes it)."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return 0

        def check(session_id: str, stored_lock: object) -> None:
            if force:
                return
            holder = LockHolder.stored(stored_lock, where=f"session {session_id}")
            if holder is not None and not holder.is_stale():
                raise SessionLocked(session_id, holder)

        return self._delete(ids, check)

    def delete_all(self, *, agent: str | None = None, force: bool = False) -> int:
        return self.delete_sessions(
            self._session_ids(None if agent is None else validate_agent(agent)), force=force
        )

    # -- messages: the core checks bounds and numbers, the backend stores and reads --

    def _append(self, session_id: str, batch: Appending) -> int | list[Message]:
        """Primitive: in one atomic step, store ``batch`` after the session's last seq
        and return the first seq it gave (the core numbers the batch), or, when the
        batch's first id is stored already (a resend), return the stored copies
        (``Appending.partly_stored`` when only some are). ``SessionNotFound`` when the
        session (or ``batch.alongside.pad_of``) does not exist,
        ``Appending.already_stored`` for an id stored before. In the same step, first
        ``batch.alongside.expect`` is checked against the session (``Mark.holds``:
        nothing written when off), then its companions are written (``store/alongside.py``).
        The batch may be empty (written on a mark): the check and the companions
        alone, ``updated_at`` left as it is."""
        raise NotImplementedError

    def _tail_range(self, session_id: str, limit: int, before_seq: int | None) -> list[Message]:
        """Primitive: newest first, up to ``limit`` (> 0) messages with seq <
        ``before_seq`` (> 1, or None); ``SessionNotFound`` when the session does not
        exist."""
        raise NotImplementedError

    def _read_range(self, session_id: str, after_seq: int, limit: int | None) -> list[Message]:
        """Primitive: oldest first, up to ``limit`` (> 0, or None for all) messages with
        seq > ``after_seq`` (>= 0); ``SessionNotFound`` when the session does not exist."""
        raise NotImplementedError

    def append_messages(
        self, session_id: str, messages: Sequence[Message], **fields: Unpack[AlongsideFields]
    ) -> list[Message]:
        """See ``Store.append_messages``: ``scratchpad`` and ``metadata`` go in the
        batch's atomic step (``store/alongside.py``); a batch needs a message for them,
        unless it is written on a mark (``expect``)."""
        extra = alongside(session_id, fields)
        if not messages and extra.expect is None:
            if extra:
                raise UsageError("scratchpad entries or metadata go with a batch of messages")
            return []
        try:
            stored = self._append(session_id, Appending(session_id, messages, extra))
        except SessionChanged:
            resent = self._resent_on_mark(session_id, messages, extra.expect)
            if resent is None:
                raise
            return resent
        return numbered(messages, stored) if isinstance(stored, int) else stored

    def _resent_on_mark(
        self, session_id: str, messages: Sequence[Message], expect: Mark | None
    ) -> list[Message] | None:
        """A batch written on a mark, then sent again (a retry after a lost reply) finds the
        mark moved by itself: when the messages right after the mark are this batch, it
        was stored, and the stored copies answer, as for any resent batch."""
        if not messages or expect is None:
            return None
        created, _ = self.session_mark(session_id)
        after = self.read_messages(session_id, after_seq=expect.last_seq, limit=len(messages))
        same = created == expect.created_at and [m.id for m in after] == [m.id for m in messages]
        return after if same else None

    def tail(self, session_id: str, limit: int, *, before_seq: int | None = None) -> list[Message]:
        limit, before_seq = bounded(limit, "limit"), bounded_or_none(before_seq, "before_seq")
        if limit <= 0 or (before_seq is not None and before_seq <= 1):
            self.session_info(session_id)  # nothing to read, but the session must exist
            return []
        return self._tail_range(session_id, limit, before_seq)

    def read_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """A limit of 0 or below reads nothing, on every backend."""
        after_seq, limit = bounded(after_seq, "after_seq"), bounded_or_none(limit, "limit")
        if limit is not None and limit <= 0:
            self.session_info(session_id)
            return []
        return self._read_range(session_id, max(0, after_seq), limit)

    def count_messages(self, session_id: str) -> int:
        return self.session_info(session_id).message_count

    def session_mark(self, session_id: str) -> tuple[datetime, int]:
        """See ``Store.session_mark``: from ``session_info`` unless a backend reads the
        two fields alone."""
        info = self.session_info(session_id)
        return info.created_at, info.last_seq

    def _update_session(self, session_id: str, change: SessionChange) -> SessionInfo:
        """Primitive: in one atomic step, apply ``change`` (its parent checked against the
        stored one with ``change.new_parent``, its metadata merged with ``change.merged``)
        and return the session as stored; ``SessionNotFound`` when it or the new parent
        does not exist."""
        raise NotImplementedError

    def _scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        """Primitive: store the entry (checked), keeping its ``created_at`` when it exists."""
        raise NotImplementedError

    def _scratchpad_list(self, session_id: str, prefix: str) -> list[ScratchpadEntry]:
        """Primitive: the entries whose names start with ``prefix`` (checked), by name."""
        raise NotImplementedError

    def update_session(self, session_id: str, **fields: Unpack[SessionChangeFields]) -> SessionInfo:
        return self._update_session(
            session_id, session_change(cast(Store, self), session_id, fields)
        )

    def scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        check_scratchpad_entry(name, content)
        return self._scratchpad_write(session_id, name, content)

    def scratchpad_list(self, session_id: str, *, prefix: str = "") -> list[ScratchpadEntry]:
        return self._scratchpad_list(session_id, check_scratchpad_prefix(prefix))

    def scratchpad_page(
        self, session_id: str, *, prefix: str = "", limit: int, before: str | None = None
    ) -> list[ScratchpadEntry]:
        """See ``Store.scratchpad_page``."""
        prefix, limit = self._page_checked(session_id, prefix, limit, before)
        return self._scratchpad_page(session_id, prefix, limit, before) if limit > 0 else []

    def scratchpad_page_contents(
        self, session_id: str, *, prefix: str = "", limit: int, before: str | None = None
    ) -> list[tuple[str, str]]:
        """See ``Store.scratchpad_page_contents``."""
        prefix, limit = self._page_checked(session_id, prefix, limit, before)
        if limit <= 0:
            return []
        return self._scratchpad_page_contents(session_id, prefix, limit, before)

    def _page_checked(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> tuple[str, int]:
        """A page's prefix and limit, checked; the session too, when the page is empty."""
        prefix, limit = check_scratchpad_prefix(prefix), bounded(limit, "limit")
        if before is not None:
            check_scratchpad_prefix(before)
        if limit <= 0:
            self.session_info(session_id)
        return prefix, limit

    def _scratchpad_page_contents(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> list[tuple[str, str]]:
        """Primitive, optional: ``_scratchpad_page`` as ``(name, content)`` pairs."""
        return [
            (e.name, e.content) for e in self._scratchpad_page(session_id, prefix, limit, before)
        ]

    def scratchpad_page_beside(
        self, session_id: str, *, limit: int, beside: str, **page: Unpack[BesideOptions]
    ) -> tuple[list[tuple[str, str]], dict[str, str]]:
        """See ``Store.scratchpad_page_beside``."""
        before, names = page.get("before"), page.get("names", ())
        prefix, limit = self._page_checked(session_id, page.get("prefix", ""), limit, before)
        if isinstance(names, str):
            raise UsageError("scratchpad_page_beside takes a list of names, not text")
        wanted = _distinct([check_scratchpad_name(n) for n in names])
        ask = PageBeside(prefix, limit, before, check_scratchpad_prefix(beside), wanted)
        if limit <= 0:
            return [], self._scratchpad_contents(session_id, wanted, []) if wanted else {}
        return self._scratchpad_page_beside(session_id, ask)

    def _scratchpad_page_beside(self, session_id: str, ask: PageBeside) -> PageAndBeside:
        """Primitive, optional: the page, then the entries filed beside its entries and
        those named, in two reads (the SQL backends join them in one query)."""
        page = self._scratchpad_page_contents(session_id, ask.prefix, ask.limit, ask.before)
        starts = [ask.beside + name[len(ask.prefix) :] + "/" for name, _ in page]
        starts = [s for s in starts if len(s) <= MAX_SCRATCHPAD_NAME]  # longer: no name
        if not starts and not ask.names:
            return page, {}
        return page, self._scratchpad_contents(session_id, ask.names, starts)

    def _scratchpad_page(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> list[ScratchpadEntry]:
        """Primitive, optional: up to ``limit`` (> 0) entries starting with ``prefix``
        and named below ``before``, last name first. A scan of the prefix unless a
        backend reads a range of its name index."""
        found = self._scratchpad_list(session_id, prefix)
        below = [e for e in reversed(found) if before is None or e.name < before]
        return below[:limit]

    def scratchpad_contents(
        self, session_id: str, *, names: Sequence[str] = (), prefixes: Sequence[str] = ()
    ) -> dict[str, str]:
        """See ``Store.scratchpad_contents``."""
        if isinstance(names, str) or isinstance(prefixes, str):
            raise UsageError("scratchpad_contents takes lists of names and prefixes, not text")
        wanted = _distinct([check_scratchpad_name(n) for n in names])
        starts = _distinct([check_scratchpad_prefix(p) for p in prefixes])
        if not wanted and not starts:
            self.session_info(session_id)
            return {}
        found = self._scratchpad_contents(session_id, wanted, starts)
        return {name: found[name] for name in sorted(found)}

    def _scratchpad_contents(
        self, session_id: str, names: list[str], prefixes: list[str]
    ) -> dict[str, str]:
        """Primitive: name -> content of the entries named in ``names`` or starting with
        one of ``prefixes`` (checked; not both empty), in any order, in one read."""
        raise NotImplementedError

    def scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], *, keep_existing: bool = False
    ) -> None:
        """See ``Store.scratchpad_write_many``."""
        for name, content in entries.items():
            check_scratchpad_entry(name, content)
        if entries:
            self._scratchpad_write_many(session_id, entries, keep_existing)
        else:
            self.session_info(session_id)

    def _scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], keep_existing: bool
    ) -> None:
        """Primitive: store the (checked, not empty) entries in one step;
        ``keep_existing`` leaves entries that exist as they are."""
        raise NotImplementedError

    def _swap_memo(
        self, session_id: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> bool:
        """Primitive: in one atomic step, read the session's memo (``SessionNotFound``
        when the session does not exist) and store what ``decide`` returns for it, unless
        that is None. True when it stored."""
        raise NotImplementedError

    def _swap_lock(
        self, session_id: str, decide: Callable[[LockHolder | None], LockHolder | None]
    ) -> LockHolder | None:
        """Primitive: in one atomic step, read the session's attach lock
        (``SessionNotFound`` when the session does not exist) and store what ``decide``
        returns for it (which may raise), unless that is the very holder it was given.
        Returns what is stored. ``decide`` may be called again when the step is retried."""
        raise NotImplementedError

    def replace_memo(self, session_id: str, expected: dict[str, Any], memo: dict[str, Any]) -> bool:
        return self._swap_memo(
            session_id, lambda stored: memo if same_memo(stored, expected) else None
        )

    def acquire_lock(self, session_id: str, holder: LockHolder | None = None) -> LockHolder:
        """Take or renew the lock as ``LockHolder.claim`` decides."""
        wanted = holder or LockHolder.current()
        taken = self._swap_lock(session_id, lambda current: wanted.claim(session_id, current))
        assert taken is not None
        return taken

    def release_lock(self, session_id: str, holder: LockHolder | None = None) -> bool:
        """False when the lock is not held by ``holder`` (or the session is gone)."""
        wanted = holder or LockHolder.current()
        released = False

        def release(current: LockHolder | None) -> LockHolder | None:
            nonlocal released
            released = current is not None and current.same_holder(wanted)
            return None if released else current

        try:
            self._swap_lock(session_id, release)
        except SessionNotFound:
            return False
        return released

    def add_checkpoint(
        self,
        session_id: str,
        *,
        covers_up_to: int,
        summary: str,
        metadata: dict[str, Any] | None = None,
        expect_previous: ExpectPrevious = ANY_PREVIOUS,
    ) -> Checkpoint:
        """See ``Store.add_checkpoint``: the fields checked and stamped once, before the
        first attempt, so a resend after a lost reply is the checkpoint it stored."""
        new = new_checkpoint(
            session_id, covers_up_to=covers_up_to, summary=summary, metadata=metadata
        )
        return self._add_checkpoint(new, expect_previous)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_session(self, id_or_prefix: str) -> Session:
        return Session(cast(Store, self), self.session_info(self.resolve_id(id_or_prefix)))

    def resolve_id(self, id_or_prefix: str) -> str:
        """A session id, or a unique prefix of ``MIN_PREFIX_LENGTH`` or more characters;
        an exact id wins over the ids it prefixes."""
        validate_session_id(id_or_prefix)
        found = self._matching_ids(id_or_prefix, prefix=len(id_or_prefix) >= MIN_PREFIX_LENGTH)
        if id_or_prefix in found:
            return id_or_prefix
        return pick_unique(id_or_prefix, found)

    def get_memos(self, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The memos of those of ``session_ids`` that exist, by id (for a listing's
        visible counts)."""
        ids = memo_request(session_ids)
        return self._memos(ids) if ids else {}

    def _memos(self, session_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Primitive, optional: the memos of those of ``session_ids`` (checked, distinct,
        not empty) that exist. One ``get_memo`` each unless a backend reads them at once."""
        memos: dict[str, dict[str, Any]] = {}
        for session_id in session_ids:
            with contextlib.suppress(SessionNotFound):
                memos[session_id] = cast(Store, self).get_memo(session_id)
        return memos


def session_change(store: Store, session_id: str, fields: SessionChangeFields) -> SessionChange:
    """``update_session``'s arguments checked: the fields as ``check_session_fields`` and
    ``check_title`` have them, and a parent that exists and would not put the session
    under its own descendant (a loop would take both out of every listing)."""
    refuse_unknown("update_session", fields, SessionChangeFields)
    model, metadata = fields.get("model"), fields.get("metadata")
    title, parent = fields.get("title"), fields.get("parent")
    check_session_fields(model, metadata)
    if title is not None:
        title = check_title(title)
    if parent is not None:
        parent = checked_parent_id(session_id, parent)
        seen = {session_id}
        up: str | None = parent
        while up is not None:
            if up in seen:
                raise UsageError(
                    f"session {session_id} cannot be listed under {parent}: {parent} is "
                    f"listed under {session_id}"
                )
            seen.add(up)
            up = store.session_info(up).parent_id
    return SessionChange(model=model, metadata=metadata, title=title, parent=parent)
