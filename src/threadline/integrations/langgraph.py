"""A LangGraph checkpointer over any threadline store.

``ThreadlineSaver(store_or_url)`` is a ``BaseCheckpointSaver`` (sync methods, and
async ones that run them in worker threads). Each LangGraph thread is a threadline
session, listed, searched, exported, forked and retained like any other: its id is
``lg-`` and the thread id (``lg_`` and a hash of it when that is no valid id; the
thread id is kept in the session's metadata), it is created with agent
``langgraph``, and the saver opens only the sessions it created for that thread
(``integrations/binding.py``).

What LangGraph stores lives in the session's scratchpad, with the store's own
durability, under four kinds of names (``integrations/checkpoint_records.py``;
``<ns>``, ``<channel>`` and ``<task>`` are the names themselves when plain, else a
hash; the record holds the real ones):

    lg/c/<ns>/<checkpoint id>              the checkpoint (no channel values), its
                                           metadata, its parent's id and (root
                                           namespace) its branch's session and seq
    lg/b/<ns>/<channel>/<version>          one channel's value at one version
    lg/w/<ns>/<checkpoint id>/<task>/<idx> one pending write
    lg/r/<session id>                      a fork holding a later branch

Values are LangGraph's own serialisation (``serde.dumps_typed``), so whatever a
graph keeps comes back as it was; plain values (None, bools, ints, finite floats,
text) are kept in the checkpoint record itself, as JSON, as ``PostgresSaver`` keeps
primitives in its checkpoint row. A ``put`` appends the checkpoint's new messages,
and writes the channel values and the checkpoint record, in one atomic write on every
store (``Store.append_messages`` with ``expect``), so a crash leaves all of it or none. The write is
made on the thread's sessions as the saver last knew them, with no read first; when
another writer moved them meanwhile it writes nothing (``SessionChanged``) and the put is
made again on them as they are.

The messages channel (``messages_key``, a list of LangChain messages, in the root
namespace: a subgraph's own messages are not the thread's conversation) is also kept
as threadline messages, in the session of the graph's branch: the thread's session
until the graph goes back to an earlier checkpoint (time travel, ``update_state`` on
a past checkpoint), then a fork of it at that checkpoint, so each view shows one
branch (``thread_session`` gives the current one). Within a branch each message is
appended once, when a checkpoint first holds it (by its LangChain id;
``threadline.integrations.langchain`` converts it), so ``threadline sessions
show/search/export`` and the web browser see the conversation. A checkpoint's value
of that channel then refers to those messages by seq instead of holding a copy of
the conversation (LangGraph's own savers store the whole list again at every step:
14 MB against 0.33 MB for a 100-turn thread); a message the session does not hold
exactly as the graph has it (edited, or without an id) is kept inline. A message the
graph later edits or removes stays in the history as it was said (history is
append-only); the checkpoints keep the graph's view.

The optional abilities LangGraph's conformance suite detects are all here:
``delete_thread`` deletes the session and its branches' forks (a session that copies
were forked from keeps its messages, their shared history, and loses its
checkpoints); ``copy_thread`` forks the current branch (``store/fork.py``: the copy
shares the history by reference) and copies the checkpoints; ``prune`` keeps the
latest checkpoint of each namespace (or none) and drops values no kept checkpoint
reads; ``delete_for_runs`` drops the checkpoints a run made, across the threads of
the saver's agent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import pickle
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from threadline import json_scan
from threadline.errors import (
    CorruptRecord,
    SessionChanged,
    SessionHasForks,
    SessionNotFound,
    UsageError,
)
from threadline.integrations.binding import (
    OWNER,
    Face,
    create_owned,
    find_owned,
    keyed,
    missing_extra,
    open_or_use,
)
from threadline.integrations.checkpoint_records import (
    PREFIX,
    Found,
    ThreadPad,
    blob_name,
    branch_name,
    checkpoint_name,
    filed_writes,
    latest_checkpoint,
    newest_checkpoints,
    record_of,
    typed,
    untyped,
    write_name,
    writes_prefix,
)
from threadline.store import Store
from threadline.store.checks import MAX_PAGE_SIZE, validate_session_id
from threadline.store.protocol import Session
from threadline.store.session_info import Mark, SessionInfo

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise missing_extra("LangGraph", "langgraph", exc) from exc

from threadline.integrations.langchain import (
    METADATA_KEY,
    recent_calls,
    to_langchain,
    to_threadline,
)
from threadline.messages import Message

AGENT = "langgraph"
"""The agent name of the sessions a saver creates (``ThreadlineSaver(agent=...)``)."""
METADATA = "langgraph"
"""Session metadata key: ``{"thread_id": <the LangGraph thread id>}``."""
KNOWN_SESSIONS = 1024
"""Thread sessions whose messages a saver keeps in memory to match checkpoints against
(a round robin over more threads than this reads each thread's messages every turn)."""
KNOWN_MESSAGES = 50_000
"""The messages those sessions may hold in all: the least recently used sessions are
forgotten past it, so a few long threads do not hold a saver's memory."""
PUT_ATTEMPTS = 8
"""How often a put is made again when another writer changed the thread's sessions
between this saver's knowing them and its write."""
KNOWN_THREADS = 4096
"""Threads whose session a saver remembers (its owner checked once), so a read of one
goes to its records without a lookup of the session first."""
LIST_BATCH = 64
"""Checkpoints ``list`` reads the values and writes of at once, at most (a list
without a limit starts with one, so its first checkpoint comes at once)."""
DERIVED_PREFIX = "lg-"
"""The prefix of the ids of messages kept from the messages channel (and of the
hashed thread ids an older saver made)."""


def _legacy_id(thread_id: str) -> str:
    """Where an older saver kept a thread: at the thread id when it was a valid session
    id, else at ``lg-`` and a hash of it (adopted when it records this thread id)."""
    try:
        return validate_session_id(thread_id)
    except UsageError:
        digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()
        return DERIVED_PREFIX + digest[:40]


def _recorded_thread(info: SessionInfo) -> str | None:
    kept = info.metadata.get(METADATA)
    if isinstance(kept, dict) and isinstance(kept.get("thread_id"), str):
        return str(kept["thread_id"])
    return None


FACE = Face("langgraph", "lg", legacy_id=_legacy_id, recorded_key=_recorded_thread)
"""Thread ``T`` is session ``lg-T`` (``lg_`` and a hash when ``lg-T`` is no valid id)."""


def thread_session_id(thread_id: str) -> str:
    """The session id of a new LangGraph thread (``integrations/binding.py``)."""
    if not isinstance(thread_id, str) or not thread_id:
        raise UsageError(f"a LangGraph thread id must be non-empty text, got {thread_id!r}")
    return FACE.session_id(thread_id)


T = TypeVar("T")
Batch = list[tuple[Found, CheckpointMetadata]]
Refs = list[int | None]
Records = list[dict[str, Any]]
Values = list[Any]
Texts = list[str]
Copies = dict[int, bytes]


@dataclass
class _Plan:
    """What a put keeps of the messages channel (``ThreadlineSaver._plan_messages``)."""

    batch: list[Message]
    """the messages to append, in order, after the session's last seq"""
    refs: Refs
    """per message of the value: the seq it is stored at, or None (kept inline)"""
    learned: dict[str, tuple[int, BaseMessage]]
    """LangChain id -> (seq, the message as the session will give it back) of ``batch``"""


@dataclass
class _Known:
    """What a saver knows of a thread session's messages (``ThreadlineSaver._known``)."""

    created: datetime
    last: int = 0
    messages: dict[str, tuple[int, BaseMessage]] = field(default_factory=dict)
    copies: dict[int, bytes] = field(default_factory=dict)
    """seq -> the message pickled, made when a read first gives it out: each read gives
    a copy, and unpickling one costs a quarter to a half of ``model_copy(deep=True)``"""


@dataclass(slots=True)
class _Last:
    """The root-namespace checkpoint a saver wrote last in a thread."""

    record: dict[str, Any]
    names: list[str]
    """the values it keeps outside its record (what a read of the latest reads with it)"""


class ThreadlineSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer over a threadline store (see the module docstring).

    ``store`` is a store URL (opened here, closed by ``close``), an open ``Store``
    (left open), or ``None`` for the default store. ``model`` is the model new thread
    sessions are created with (it picks the tokenizer their messages are counted
    with); ``messages_key`` names the channel kept as the session's messages.
    """

    def __init__(
        self,
        store: str | Store | None = None,
        *,
        model: str | None = None,
        agent: str = AGENT,
        messages_key: str | None = "messages",
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.store, self._owns_store = open_or_use(store)
        self.model = model
        self.agent = agent
        self.messages_key = messages_key
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, _Known] = OrderedDict()
        """session id -> what it holds of the messages channel (the latest few sessions)"""
        self._held = 0
        """the messages ``_seen`` holds in all (``KNOWN_MESSAGES`` at most, but one session)"""
        self._owned: OrderedDict[str, str] = OrderedDict()
        """thread id -> its session's id, owner checked (the latest ``KNOWN_THREADS``)"""
        self._latest: OrderedDict[str, _Last] = OrderedDict()
        """thread session id -> the root-namespace checkpoint this saver wrote last (the
        parent of the next put, read without a round trip)"""
        self._handles: OrderedDict[str, Session] = OrderedDict()
        """session id -> the session as this saver last read or wrote it: what a put
        writes on without reading it first (its ``Mark`` is checked in the write)"""

    def close(self) -> None:
        """Close the store if this saver opened it from a URL."""
        if self._owns_store:
            self.store.close()

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """LangGraph's versions as ``InMemorySaver`` makes them: the count, and a random
        part, so two branches of a thread never write one channel version (the default
        integers would: a graph that went back would overwrite the abandoned branch's
        values, and its old checkpoints would read the new branch's)."""
        if current is None:
            count = 0
        elif isinstance(current, int):
            count = current
        else:
            count = int(str(current).split(".")[0])
        return f"{count + 1:032}.{random.random():016}"

    def __enter__(self) -> ThreadlineSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ThreadlineSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    @classmethod
    def from_conn_string(cls, conn_string: str, **options: Any) -> ThreadlineSaver:
        """A saver over the store at ``conn_string`` (a threadline store URL), closed
        when the ``with`` (or ``async with``) block ends, as LangGraph's savers'
        ``from_conn_string`` gives one; ``options`` as ``ThreadlineSaver`` takes them."""
        if not isinstance(conn_string, str):
            raise UsageError(f"from_conn_string takes a store URL, got {conn_string!r}")
        return cls(conn_string, **options)

    def setup(self) -> Ready:
        """Nothing left to do: opening a store makes its tables. Here so code written
        for LangGraph's savers runs as it is, calling ``setup()`` or, as their async
        savers ask, ``await setup()``."""
        return Ready()

    # -- threads and sessions
    def thread_session(self, thread_id: str) -> Session | None:
        """The session holding the thread's current conversation: the thread's own
        session, or the fork its latest checkpoint's branch lives in (a graph that went
        back to an earlier checkpoint continues in a fork); None before the first
        checkpoint. A session at the thread's id that the thread did not create is
        refused (``NotOwned``)."""
        root = self._root(thread_id)
        if root is None:
            return None
        latest = next(newest_checkpoints(self.store, root.id, ""), None)  # one small read
        return root if latest is None else self._holder(latest[0].get("branch"), root)

    def _root(self, thread_id: str) -> Session | None:
        """The thread's own session (its checkpoints, its first branch)."""
        thread_session_id(thread_id)  # checks the thread id
        info = find_owned(self.store, FACE, thread_id)
        return None if info is None else Session(self.store, info)

    def _holder(self, session_id: object, root: Session) -> Session:
        """The session a record names as holding its messages (the root by default)."""
        if not isinstance(session_id, str) or session_id == root.id:
            return root
        try:
            return Session(self.store, self.store.session_info(session_id))
        except SessionNotFound:
            raise CorruptRecord(
                f"thread session {root.id}: a checkpoint's messages are in session "
                f"{session_id}, which is gone"
            ) from None

    def _branch(self, root: Session, thread_id: str, parent_id: str | None) -> Session:
        """The session a root-namespace checkpoint after ``parent_id`` keeps its
        messages in: the parent's, or, when that session has moved on past the parent
        (the graph went back in time) or belongs to another thread (a copy's parent),
        a new fork of it at the parent's end (``store/fork.py``), so no view merges
        two branches."""
        from threadline.store.fork import fork_session

        if not parent_id:
            return root  # a first checkpoint
        last = self._latest.get(root.id)
        record = last.record if last is not None else None
        if record is None or record["id"] != parent_id:
            entry = self.store.scratchpad_read(root.id, checkpoint_name("", parent_id))
            record = record_of(entry.content) if entry is not None else None
        if record is None or not isinstance(record.get("upto"), int):
            return root  # a first checkpoint, or one kept before branches were
        upto: int = record["upto"]
        held = record.get("branch")
        branch = self._handle(held) if isinstance(held, str) and held != root.id else root
        mine = branch.id == root.id or _recorded_thread(branch.info) == thread_id
        if mine and branch.last_seq <= upto:  # read by this put: current
            return branch
        while branch.fork is not None and upto <= branch.fork.seq:
            branch = Session(self.store, self.store.session_info(branch.fork.parent))
        fork = fork_session(
            branch,
            at=upto,
            metadata={
                METADATA: {"thread_id": thread_id, "branch_of": root.id},
                OWNER: FACE.owner(thread_id),
            },
        )
        self.store.scratchpad_write(root.id, branch_name(fork.id), json.dumps({"id": fork.id}))
        self._hold(fork)
        return fork

    def _session_for_write(self, thread_id: str) -> Session:
        """The thread's session, created if new: as this saver last knew it, else read."""
        with self._lock:
            known = self._owned.get(thread_id)
            handle = self._handles.get(known) if known is not None else None
        if handle is not None:
            return handle
        thread_session_id(thread_id)
        session = create_owned(
            self.store,
            FACE,
            thread_id,
            agent=self.agent,
            model=self.model,
            metadata={METADATA: {"thread_id": thread_id}},
        )
        self._own(thread_id, session.id)
        self._hold(session)
        return session

    def _handle(self, session_id: str) -> Session:
        """Session ``session_id`` as this saver last knew it, else read (``CorruptRecord``
        when it is gone: a record names it)."""
        with self._lock:
            handle = self._handles.get(session_id)
        if handle is None:
            try:
                handle = Session(self.store, self.store.session_info(session_id))
            except SessionNotFound:
                raise CorruptRecord(
                    f"a checkpoint's messages are in session {session_id}, which is gone"
                ) from None
            self._hold(handle)
        return handle

    def _hold(self, session: Session) -> None:
        with self._lock:
            self._handles[session.id] = session
            self._handles.move_to_end(session.id)
            while len(self._handles) > KNOWN_THREADS:
                self._handles.popitem(last=False)

    def _forget_thread(self, thread_id: str) -> None:
        """Drop what this saver knew of the thread's sessions (a write found them changed)."""
        with self._lock:
            root_id = self._owned.pop(thread_id, None)
            if root_id is None:
                return
            last = self._latest.pop(root_id, None)
            self._handles.pop(root_id, None)
            if last is not None and isinstance(last.record.get("branch"), str):
                self._handles.pop(last.record["branch"], None)

    def _read(self, session: Session) -> ThreadPad:
        return ThreadPad.whole(self.store, session.id)

    # -- reads
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """One checkpoint by id, or the namespace's latest: one read of that record and
        its pending writes (the latest is the last name of the namespace's index), and
        one more of its values when it keeps any outside the record, unless they were
        read with it (the latest the saver wrote names the values it reads)."""
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)

        def read(root_id: str) -> CheckpointTuple | None:
            contents: dict[str, str] = {}
            if checkpoint_id is None:
                expected = self._expected_values(root_id, ns)
                found, contents = latest_checkpoint(self.store, root_id, ns, expected)
            else:
                found = self._checkpoint_record(root_id, ns, checkpoint_id)
            if found is None:
                return None
            return self._tuples(root_id, thread_id, [found], read=contents)[0]

        return self._owned_read(thread_id, read, None)

    def _owned_read(self, thread_id: str, read: Callable[[str], T], absent: T) -> T:
        """``read`` of the thread's session id, or ``absent`` before the thread exists.
        The session's owner is checked when the saver first meets the thread
        (``find_owned``), then remembered; a session gone since is looked up again."""
        root_id = self._owned_id(thread_id)
        if root_id is None:
            return absent
        try:
            return read(root_id)
        except SessionNotFound:
            self._forget_owned(thread_id)
            root_id = self._owned_id(thread_id)
            return absent if root_id is None else read(root_id)

    def _owned_id(self, thread_id: str) -> str | None:
        with self._lock:
            known = self._owned.get(thread_id)
            if known is not None:
                self._owned.move_to_end(thread_id)
                return known
        root = self._root(thread_id)
        if root is not None:
            self._own(thread_id, root.id)
        return None if root is None else root.id

    def _own(self, thread_id: str, session_id: str) -> None:
        with self._lock:
            self._owned[thread_id] = session_id
            self._owned.move_to_end(thread_id)
            while len(self._owned) > KNOWN_THREADS:
                self._owned.popitem(last=False)

    def _forget_owned(self, thread_id: str) -> None:
        with self._lock:
            self._owned.pop(thread_id, None)

    def _expected_values(self, root_id: str, ns: str) -> list[str]:
        """The names of the values the root namespace's latest checkpoint that this saver
        wrote reads (read beside the latest, which it most often still is)."""
        with self._lock:
            last = self._latest.get(root_id) if ns == "" else None
        return [] if last is None else last.names

    def _checkpoint_record(self, root_id: str, ns: str, cid: str) -> Found | None:
        """The checkpoint by id with its pending writes, in one read."""
        name, writes = checkpoint_name(ns, cid), writes_prefix(ns, cid)
        contents = self.store.scratchpad_contents(root_id, names=[name], prefixes=[writes])
        content = contents.get(name)
        record = record_of(content) if content is not None else None
        if record is None or record.get("ns") != ns or record.get("id") != cid:
            return None
        return record, filed_writes(contents).get(writes, [])

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, of one thread (``config``) or of every thread of
        this saver's agent (``None``), by namespace, metadata ``filter`` and ``before``.
        One namespace of one thread is read a page at a time, as it is yielded: each
        page's records, then their values and pending writes in one read."""
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        if left is not None and left <= 0:
            return
        for root_id, thread_id, records in self._listed(config, before_id, limit):
            batch: Batch = []
            size = 1 if left is None else min(left, LIST_BATCH)  # the first soon
            for found in records:
                record = found[0]
                if before_id and record["id"] >= before_id:
                    continue
                metadata = self.serde.loads_typed(untyped(record["metadata"]))
                if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
                batch.append((found, metadata))
                if len(batch) >= size:
                    yield from self._batch_tuples(root_id, thread_id, batch)
                    left = None if left is None else left - len(batch)
                    batch = []
                    if left is not None and left <= 0:
                        break  # before the next record is read and decoded
                    size = min(size * 4, LIST_BATCH, LIST_BATCH if left is None else left)
            if batch:
                yield from self._batch_tuples(root_id, thread_id, batch)
                left = None if left is None else left - len(batch)
            if left is not None and left <= 0:
                return

    def _listed(
        self, config: RunnableConfig | None, before_id: str | None, limit: int | None
    ) -> Iterator[tuple[str, str, Iterable[Found]]]:
        """(thread session id, thread id, records newest first) to list, by namespace."""
        if config is not None:
            thread_ids = [config["configurable"]["thread_id"]]
            ns_wanted: str | None = config["configurable"].get("checkpoint_ns")
            id_wanted = get_checkpoint_id(config)
        else:
            thread_ids = list(dict.fromkeys(thread_id for thread_id, _ in self._threads()))
            ns_wanted, id_wanted = None, None
        for thread_id in thread_ids:
            root_id = self._owned_id(thread_id)
            if root_id is None:
                continue
            if ns_wanted is not None and id_wanted:
                found = self._owned_read(
                    thread_id, lambda sid: self._checkpoint_record(sid, ns_wanted, id_wanted), None
                )
                yield root_id, thread_id, [found] if found else []
            elif ns_wanted is not None:
                page = limit if limit else 64
                yield (
                    root_id,
                    thread_id,
                    newest_checkpoints(self.store, root_id, ns_wanted, before=before_id, page=page),
                )
            else:
                thread = ThreadPad.whole(self.store, root_id)
                for checkpoints in thread.checkpoints.values():
                    wanted = [cid for cid in checkpoints if not id_wanted or cid == id_wanted]
                    records = [checkpoints[cid] for cid in sorted(wanted, reverse=True)]
                    yield root_id, thread_id, [(r, None) for r in records]

    def _tuples(
        self,
        root_id: str,
        thread_id: str,
        found: Sequence[Found],
        metadata: Sequence[CheckpointMetadata] | None = None,
        read: dict[str, str] | None = None,
    ) -> Sequence[CheckpointTuple]:
        """The tuples of checkpoint records of one thread: the values they keep outside
        the record (but those ``read`` holds already), and the pending writes not read
        with them, fetched in one read (none when there are neither)."""
        checkpoints: list[Checkpoint] = []
        names: list[str] = []
        prefixes: list[str] = []
        contents: dict[str, str] = read or {}
        for record, written in found:
            checkpoint = self.serde.loads_typed(untyped(record["checkpoint"]))
            checkpoints.append(checkpoint)
            names += [n for n in _value_names(record, checkpoint) if n not in contents]
            if written is None:
                prefixes.append(writes_prefix(record["ns"], record["id"]))
        if names or prefixes:
            fetched = self.store.scratchpad_contents(root_id, names=names, prefixes=prefixes)
            contents = fetched | contents if contents else fetched
        writes = filed_writes(contents) if prefixes else {}
        return [
            self._tuple(
                root_id,
                thread_id,
                record,
                checkpoint,
                contents,
                writes.get(writes_prefix(record["ns"], record["id"]), [])
                if written is None
                else written,
                self.serde.loads_typed(untyped(record["metadata"]))
                if metadata is None
                else metadata[i],
            )
            for i, ((record, written), checkpoint) in enumerate(
                zip(found, checkpoints, strict=True)
            )
        ]

    def _batch_tuples(
        self, root_id: str, thread_id: str, batch: Batch
    ) -> Sequence[CheckpointTuple]:
        return self._tuples(root_id, thread_id, [f for f, _ in batch], [m for _, m in batch])

    def _tuple(
        self,
        root_id: str,
        thread_id: str,
        record: dict[str, Any],
        checkpoint: Checkpoint,
        contents: dict[str, str],
        written: Texts,
        metadata: CheckpointMetadata,
    ) -> CheckpointTuple:
        ns, cid = record["ns"], record["id"]
        inline: dict[str, Any] = record.get("inline", {})
        values: dict[str, Any] = {}
        for channel, version in checkpoint["channel_versions"].items():
            if channel in inline:
                values[channel] = inline[channel]
                continue
            raw = contents.get(blob_name(ns, channel, version))
            blob = record_of(raw) if raw is not None else None
            if blob is not None and "messages" in blob:
                values[channel] = self._messages_of(blob, root_id)
            elif blob is not None and blob["value"][0] != "empty":
                values[channel] = self.serde.loads_typed(untyped(blob["value"]))
        pending = []
        if written:
            writes = [w for w in map(record_of, written) if w is not None]
            writes.sort(key=_write_order)
            loads = self.serde.loads_typed
            pending = [(w["task_id"], w["channel"], loads(untyped(w["value"]))) for w in writes]
        parent = record.get("parent")
        checkpoint["channel_values"] = values  # decoded for this tuple alone
        return CheckpointTuple(
            config=_config(thread_id, ns, cid),
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=pending,
        )

    def _messages_of(self, blob: dict[str, Any], root_id: str) -> Values:
        """A messages value: from what the saver knows of the session holding them when
        the value names that session's making (``born``: a session made again under its
        id holds other messages at the same seqs), else read."""
        held = blob.get("session")
        holder_id = held if isinstance(held, str) else root_id
        born = blob.get("born")
        if isinstance(born, str):
            items = blob["messages"]
            known = self._known_by_seq(holder_id, born, [i["s"] for i in items if "s" in i])
            if known is not None:
                return self._copied_value(known, items)
        return self._messages_value(self._reader(held, root_id), blob["messages"])

    def _copied_value(self, known: Copies, items: Records) -> Values:
        """A value of messages the saver knows, each a copy (what the caller changes is
        not what the saver knows), and the inline ones."""
        return [
            pickle.loads(known[i["s"]]) if "s" in i else self.serde.loads_typed(untyped(i["v"]))
            for i in items
        ]

    def _reader(self, holder_id: object, root_id: str) -> Session:
        """The session a messages value names (its root's by default), read now."""
        sid = holder_id if isinstance(holder_id, str) else root_id
        try:
            return Session(self.store, self.store.session_info(sid))
        except SessionNotFound:
            if sid == root_id:
                raise
            raise CorruptRecord(
                f"thread session {root_id}: a checkpoint's messages are in session "
                f"{sid}, which is gone"
            ) from None

    # -- writes
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The checkpoint, its new channel values and the messages it holds first, in
        one write on the thread's sessions as this saver last knew them (one
        transaction on the SQL stores); when another writer changed them meanwhile,
        nothing is written and the put is made again on them as they are now."""
        thread_id: str = config["configurable"]["thread_id"]
        for attempt in range(PUT_ATTEMPTS):
            try:
                return self._put(config, checkpoint, metadata, new_versions)
            except (SessionChanged, SessionNotFound):
                if attempt == PUT_ATTEMPTS - 1:
                    raise
                self._forget_thread(thread_id)
        raise AssertionError("unreachable")  # pragma: no cover

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        session = self._session_for_write(thread_id)
        branch = session
        if ns == "":
            branch = self._branch(session, thread_id, configurable.get("checkpoint_id"))
        mark = Mark.of(branch.info)
        stored: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = stored.pop("channel_values", None) or {}
        plan = None
        if self.messages_key and self.messages_key in new_versions and ns == "":
            plan = self._plan_messages(branch, values.get(self.messages_key))
        inline = {c: v for c, v in values.items() if _plain(v)}
        entries: dict[str, str] = {}  # the values, then the checkpoint: one write
        for channel, version in new_versions.items():
            if channel in inline:
                continue
            blob: dict[str, Any] = {"ns": ns, "channel": channel, "version": version}
            if channel == self.messages_key and plan is not None:
                if branch.id != session.id:
                    blob["session"] = branch.id
                blob["born"] = branch.info.created_at.isoformat()
                blob["messages"] = [
                    {"s": seq} if seq is not None else {"v": typed(self.serde.dumps_typed(m))}
                    for seq, m in zip(plan.refs, values[channel], strict=True)
                ]
            elif channel in values:
                blob["value"] = typed(self.serde.dumps_typed(values[channel]))
            else:
                blob["value"] = ["empty", ""]
            entries[blob_name(ns, channel, version)] = json_scan.dumps(blob)
        full_metadata = get_checkpoint_metadata(config, metadata)
        record = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": configurable.get("checkpoint_id"),
            "checkpoint": typed(self.serde.dumps_typed(stored)),
            "metadata": typed(self.serde.dumps_typed(full_metadata)),
            "run_id": _text_or_none(full_metadata.get("run_id")),
        }
        if inline:
            record["inline"] = inline
        appended = plan.batch if plan is not None else []
        if ns == "":  # the branch's end once this put's messages are in
            record.update(branch=branch.id, upto=mark.last_seq + len(appended))
        entries[checkpoint_name(ns, checkpoint["id"])] = json_scan.dumps(record)  # the last
        if appended:
            branch.append(appended, scratchpad=entries, scratchpad_of=session.id, expect=mark)
        else:
            self.store.append_messages(
                branch.id, [], scratchpad=entries, scratchpad_of=session.id, expect=mark
            )
        with self._lock:
            if plan is not None:
                self._learned(branch.id, plan.learned, mark.last_seq + len(appended))
            if ns == "":
                self._latest[session.id] = _Last(record, _value_names(record, checkpoint))
                self._latest.move_to_end(session.id)
                while len(self._latest) > KNOWN_THREADS:
                    self._latest.popitem(last=False)
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        cid: str = configurable["checkpoint_id"]
        kept: dict[str, str] = {}  # regular writes: the first stored stays
        replaced: dict[str, str] = {}  # special ones (errors, interrupts) replace
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            stored = typed(self.serde.dumps_typed(value))
            into = kept if index >= 0 else replaced
            into[write_name(ns, cid, task_id, index)] = json_scan.dumps(
                {
                    "ns": ns,
                    "checkpoint": cid,
                    "task_id": task_id,
                    "idx": index,
                    "channel": channel,
                    "value": stored,
                    "task_path": task_path,
                }
            )

        def write(root_id: str) -> None:
            for entries, keep in ((kept, True), (replaced, False)):
                if entries:
                    self.store.scratchpad_write_many(root_id, entries, keep_existing=keep)

        with self._lock:
            known = self._owned.get(thread_id)
        if known is not None:
            try:
                return write(known)
            except SessionNotFound:
                self._forget_owned(thread_id)
        write(self._session_for_write(thread_id).id)

    def _plan_messages(self, session: Session, value: object) -> _Plan | None:
        """What a put keeps of the messages channel ``value`` in ``session``: the
        messages the session does not hold yet, once each, to append after its last
        seq; and, for each message of ``value``, the seq of the session message it is
        exactly (what the checkpoint stores in its place), or None for one the session
        does not hold as it is (an edited copy, one without an id). None when ``value``
        is not a list of messages."""
        if not isinstance(value, list) or not all(isinstance(m, BaseMessage) for m in value):
            return None
        with self._lock:
            known = self._known(session)
        refs: Refs = []
        fresh: dict[str, BaseMessage] = {}  # not held yet: the last of each id
        later: list[int] = []  # where they stand in ``value``
        for m in value:  # one pass: most are held, and equal to the copy known
            lc_id = m.id
            found = known.get(lc_id) if isinstance(lc_id, str) else None
            if found is None and isinstance(lc_id, str):
                fresh[lc_id] = m
                later.append(len(refs))
            refs.append(found[0] if found is not None and _same(found[1], m) else None)
        batch: list[Message] = []
        learned: dict[str, tuple[int, BaseMessage]] = {}
        if fresh:
            new = list(fresh.values())
            made = to_threadline(new, answerable=recent_calls(session, new))
            for seq, (m, lc) in enumerate(zip(made, new, strict=True), session.last_seq + 1):
                lc_id = lc.id or ""
                batch.append(m.model_copy(update={"id": _message_id(session.id, lc_id)}))
                learned[lc_id] = (seq, to_langchain(m))
            for at in later:
                found = learned.get(value[at].id)
                refs[at] = found[0] if found is not None and _same(found[1], value[at]) else None
        return _Plan(batch, refs, learned)

    def _known(self, session: Session) -> dict[str, tuple[int, BaseMessage]]:
        """LangChain id -> (seq, the message as the session gives it back), for the
        session's messages: read once, then only its new tail."""
        cached = self._seen.get(session.id)  # the session as read by this put
        if (
            cached is None
            or cached.created != session.info.created_at
            or cached.last > session.last_seq
        ):
            self._forget_seen(session.id)
            cached = self._seen[session.id] = _Known(session.info.created_at)
        self._seen.move_to_end(session.id)
        if session.last_seq > cached.last:
            self._learn(session.id, session.messages(after_seq=cached.last, include_retracted=True))
            cached.last = session.last_seq
            self._trim_seen()
        return cached.messages

    def _learn(self, session_id: str, stored: Iterable[Message]) -> None:
        cached = self._seen[session_id]
        for m in stored:
            kept = m.metadata.get(METADATA_KEY)
            if not (isinstance(kept, dict) and isinstance(kept.get("data"), dict)):
                continue
            lc_id = kept["data"].get("id")
            if isinstance(lc_id, str) and lc_id not in cached.messages and m.seq is not None:
                cached.messages[lc_id] = (m.seq, to_langchain(m))
                self._held += 1
            cached.last = max(cached.last, m.seq or 0)

    def _learned(
        self, session_id: str, learned: dict[str, tuple[int, BaseMessage]], last: int
    ) -> None:
        """Know what a put appended (as it planned it), the session's end now ``last``."""
        cached = self._seen.get(session_id)
        if cached is not None and cached.last <= last:
            for lc_id, known in learned.items():
                if lc_id not in cached.messages:
                    cached.messages[lc_id] = known
                    self._held += 1
            cached.last = last
            self._trim_seen()

    def _remember(self, session: Session, read: Sequence[Message]) -> None:
        """Know a session's messages from a read of all of them (a checkpoint's
        value), when the saver does not know them yet: the put that follows a read
        then appends without reading the session again, however many threads the
        saver serves (its cache holds the latest ``KNOWN_SESSIONS``)."""
        with self._lock:
            if session.id in self._seen:
                return
            self._seen[session.id] = _Known(session.info.created_at)
            self._learn(session.id, read)
            self._trim_seen()

    def _trim_seen(self) -> None:
        """Forget the least recently used sessions past ``KNOWN_SESSIONS`` or
        ``KNOWN_MESSAGES`` (the latest session stays, however long)."""
        seen = self._seen
        while len(seen) > 1 and (len(seen) > KNOWN_SESSIONS or self._held > KNOWN_MESSAGES):
            _, dropped = seen.popitem(last=False)
            self._held -= len(dropped.messages)

    def _forget_seen(self, session_id: str) -> None:
        dropped = self._seen.pop(session_id, None)
        if dropped is not None:
            self._held -= len(dropped.messages)

    def _known_by_seq(self, session_id: str, born: str, seqs: Sequence[int]) -> Copies | None:
        """seq -> message of ``seqs`` (pickled: each read unpickles its own copy), when
        this saver knows every one of them of the session made at ``born`` (its
        messages by seq never change), else None."""
        with self._lock:
            cached = self._seen.get(session_id)
            if not seqs or cached is None or cached.created.isoformat() != born:
                return None
            if cached.last < max(seqs):
                return None
            copies = cached.copies
            if any(seq not in copies for seq in seqs):
                for seq, message in cached.messages.values():
                    if seq not in copies:
                        copies[seq] = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
                if any(seq not in copies for seq in seqs):
                    return None
            return copies

    def _messages_value(self, session: Session, items: Records) -> Values:
        """A messages channel value stored by reference: session messages by seq, and
        inline the ones the session does not hold as they were."""
        seqs = [i["s"] for i in items if "s" in i]
        known = self._known_by_seq(session.id, session.info.created_at.isoformat(), seqs)
        if known is not None:
            return self._copied_value(known, items)
        by_seq: dict[int, Message] = {}
        if seqs:
            first = min(seqs)
            read = list(session.iter_messages(after_seq=first - 1, include_retracted=True))
            by_seq = {m.seq: m for m in read if m.seq is not None}
            if first == 1:
                self._remember(session, read)
        out: Values = []
        given: set[int] = set()  # read here for this value alone: each used once as it is
        for item in items:
            if "s" not in item:
                out.append(self.serde.loads_typed(untyped(item["v"])))
                continue
            stored = by_seq.get(item["s"])
            if stored is None:
                raise CorruptRecord(
                    f"thread session {session.id}: checkpoint refers to message seq "
                    f"{item['s']}, which the session does not hold"
                )
            out.append(to_langchain(stored, owned=item["s"] not in given))
            given.add(item["s"])
        return out

    # -- the optional abilities
    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's session and its branches' forks; one that copies were
        forked from keeps its messages (their shared history) and loses its
        checkpoints. No other session is touched."""
        session = self._root(thread_id)
        if session is None:
            return
        thread = self._read(session)
        pending = [*thread.branches, session.id]
        while pending:  # forks before the sessions they fork; shared ones stay
            left = []
            for sid in pending:
                try:
                    Session(self.store, self.store.session_info(sid)).delete()
                except SessionHasForks:
                    left.append(sid)
                except SessionNotFound:
                    pass
            if len(left) == len(pending):
                break
            pending = left
        if session.id in pending:
            for name in thread.names:
                self.store.scratchpad_delete(session.id, name)
        with self._lock:
            self._owned.pop(thread_id, None)
            self._latest.pop(session.id, None)
            for sid in [*thread.branches, session.id]:
                self._forget_seen(sid)
                self._handles.pop(sid, None)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """A fork of the source thread's session (sharing its messages by reference)
        with every checkpoint and pending write of the source."""
        from threadline.store.fork import fork_session

        source = self._root(source_thread_id)
        if source is None:
            return
        target_id = thread_session_id(target_thread_id)
        if self._root(target_thread_id) is not None:
            raise UsageError(f"copy_thread makes a new thread: {target_thread_id!r} already exists")
        thread = self._read(source)
        head = self.thread_session(source_thread_id) or source
        target = fork_session(
            head,
            id=target_id,
            metadata={
                METADATA: {"thread_id": target_thread_id},
                OWNER: FACE.owner(target_thread_id),
            },
        )
        copied = self._copied(thread, source, head, target)
        # values first, checkpoint records last (as put writes them)
        for name in sorted(copied, key=lambda n: n.startswith(PREFIX + "c/")):
            self.store.scratchpad_write(target.id, name, copied[name])

    def _copied(
        self, thread: ThreadPad, source: Session, head: Session, target: Session
    ) -> dict[str, str]:
        """The source thread's scratchpad as the copy keeps it: its current branch's
        checkpoints continue in the copy; message values name the session they are in
        (the source's, which the copy's fork keeps), inline when that is a branch the
        copy does not share (the source may delete it)."""
        kept = {head.id}
        at: Session | None = head
        while at is not None and at.fork is not None:
            kept.add(at.fork.parent)
            at = self._holder(at.fork.parent, source)
        out: dict[str, str] = {}
        for name, raw in thread.names.items():
            kind = name[len(PREFIX) : len(PREFIX) + 1]
            record = record_of(raw)
            if kind == "r" or record is None:
                continue
            if kind == "c" and record["ns"] == "" and "upto" in record:
                holder = record.get("branch", source.id)
                record["branch"] = target.id if holder == head.id else holder
            elif kind == "b" and "messages" in record:
                holder = record.get("session", source.id)
                if holder in kept:
                    record["session"] = holder
                else:
                    values = self._messages_value(self._holder(holder, source), record["messages"])
                    record.pop("session")
                    record["messages"] = [{"v": typed(self.serde.dumps_typed(m))} for m in values]
            out[name] = json.dumps(record) if kind in "cb" else raw
        return out

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep each namespace's latest checkpoint (``keep_latest``) or none
        (``delete``), with the pending writes and values the kept ones read. The
        session and its messages stay."""
        if strategy not in ("keep_latest", "delete"):
            raise UsageError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            session = self._root(thread_id)
            if session is None:
                continue
            thread = self._read(session)
            drop = {
                (ns, cid)
                for ns, checkpoints in thread.checkpoints.items()
                for cid in checkpoints
                if strategy == "delete" or cid != max(checkpoints)
            }
            self._drop(session, thread, drop)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop every checkpoint (and its pending writes) whose metadata names one of
        ``run_ids``, in every thread of this saver's agent."""
        wanted = set(run_ids)
        if not wanted:
            return
        for _, info in self._threads():
            session = Session(self.store, info)
            thread = self._read(session)
            drop = {
                (ns, cid)
                for ns, checkpoints in thread.checkpoints.items()
                for cid, record in checkpoints.items()
                if record.get("run_id") in wanted
            }
            if drop:
                self._drop(session, thread, drop)

    def _drop(self, session: Session, thread: ThreadPad, drop: set[tuple[str, str]]) -> None:
        """Delete checkpoints first (a crash leaves unread values, never a checkpoint
        without its values), then their writes, then values no checkpoint reads."""
        if not drop:
            return
        for ns, cid in sorted(drop):
            self.store.scratchpad_delete(session.id, checkpoint_name(ns, cid))
        for (ns, cid), writes in (thread.writes or {}).items():
            if (ns, cid) in drop:
                for w in writes:
                    name = write_name(ns, cid, w["task_id"], w["idx"])
                    self.store.scratchpad_delete(session.id, name)
        read: set[str] = set()
        for ns, checkpoints in thread.checkpoints.items():
            for cid, record in checkpoints.items():
                if (ns, cid) in drop:
                    continue
                stored = self.serde.loads_typed(untyped(record["checkpoint"]))
                read.update(blob_name(ns, c, v) for c, v in stored["channel_versions"].items())
        for name in thread.blobs or {}:
            if name not in read:
                self.store.scratchpad_delete(session.id, name)

    def _threads(self) -> Threads:
        """``(thread id, session)`` of every thread this saver's agent holds: the
        sessions the face owns, and those an older saver made (adopted when opened)."""
        return keyed(FACE, _agent_sessions(self.store, self.agent))

    # -- async: the same methods, each in a worker thread
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self, config: RunnableConfig | None, **options: Any
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` (same options: filter, before, limit), each checkpoint read in a
        worker thread and yielded as it is read."""
        found = self.list(config, **options)
        while True:
            item = await asyncio.to_thread(next, found, None)
            if item is None:
                return
            yield item

    async def aput(self, *args: Any, **kwargs: Any) -> RunnableConfig:
        """``put`` (same arguments) in a worker thread."""
        return await asyncio.to_thread(self.put, *args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        """``put_writes`` (same arguments) in a worker thread."""
        await asyncio.to_thread(self.put_writes, *args, **kwargs)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)


class Ready:
    """What ``setup`` returns: nothing to wait for, and awaitable all the same."""

    def __await__(self) -> Generator[None, None, None]:
        return
        yield


Infos = list[SessionInfo]
Threads = list[tuple[str, SessionInfo]]


def _agent_sessions(store: Store, agent: str) -> Infos:
    """Every session of ``agent``, page by page."""
    out: Infos = []
    while True:
        page = store.list_sessions(agent=agent, limit=MAX_PAGE_SIZE, offset=len(out))
        out.extend(page.items)
        if not page.items or len(out) >= page.total:
            return out


def _value_names(record: dict[str, Any], checkpoint: Checkpoint) -> list[str]:
    """The names of the values a checkpoint keeps outside its record."""
    ns, inline = record["ns"], record.get("inline", ())
    return [
        blob_name(ns, c, v) for c, v in checkpoint["channel_versions"].items() if c not in inline
    ]


def _write_order(write: dict[str, Any]) -> tuple[str, str, int]:
    """Pending writes in the order LangGraph's savers give them: by task, then index."""
    return write.get("task_path", ""), write["task_id"], write["idx"]


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _message_id(session_id: str, lc_id: str) -> str:
    """The threadline id of a LangChain message appended to a session: the same for
    the same message, so a resend is recognised (``Store.append_messages``)."""
    digest = hashlib.sha256(f"{session_id}\0{lc_id}".encode("utf-8", "surrogatepass"))
    return DERIVED_PREFIX + digest.hexdigest()[:40]


def _same(known: BaseMessage, given: BaseMessage) -> bool:
    """``known == given``, as Pydantic answers it, with its common case first: the
    same type, fields, extra and private values (a put asks it of every message of the
    conversation, and Pydantic's own checks cost twice this)."""
    if (
        type(known) is type(given)
        and known.__dict__ == given.__dict__
        and known.__pydantic_extra__ == given.__pydantic_extra__
        and known.__pydantic_private__ == given.__pydantic_private__
    ):
        return True
    return bool(known == given)


def _plain(value: object) -> bool:
    """A channel value the checkpoint record holds itself, as JSON (as LangGraph's
    ``PostgresSaver`` keeps primitive values in its checkpoint row): None, a bool, an
    int, a finite float or a string that JSON keeps exactly (the types exactly, so a
    subclass such as an enum keeps its serde round trip)."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is str:
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError:  # a lone surrogate: not JSON every store keeps
            return False
        return "\x00" not in value  # type: ignore[operator]
    return False


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
