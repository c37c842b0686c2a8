"""A LangGraph checkpointer over any threadline store.

``ThreadlineSaver(store_or_url)`` is a ``BaseCheckpointSaver`` (sync methods, and
async ones that run them in worker threads). Each LangGraph thread is a threadline
session, listed, searched, exported, forked and retained like any other: its id is
the thread id when that is a valid session id, else ``lg-`` and a hash of it (the
thread id is kept in the session's metadata), and it is created with agent
``langgraph``.

What LangGraph stores lives in the session's scratchpad, with the store's own
durability, under three kinds of names (``<ns>``, ``<channel>`` and ``<task>`` are
the names themselves when plain, else a hash; the record holds the real ones):

    lg/c/<ns>/<checkpoint id>              the checkpoint (no channel values), its
                                           metadata and its parent's id
    lg/b/<ns>/<channel>/<version>          one channel's value at one version
    lg/w/<ns>/<checkpoint id>/<task>/<idx> one pending write

Values are LangGraph's own serialisation (``serde.dumps_typed``), so whatever a
graph keeps comes back as it was. A ``put`` writes the channel values first and
the checkpoint record last, so a crash in between leaves unused values, never a
checkpoint that reads values that are not there.

The messages channel (``messages_key``, a list of LangChain messages, in the root
namespace: a subgraph's own messages are not the thread's conversation) is also kept
as the session's messages: each message is appended once, when a checkpoint first
holds it (by its LangChain id; ``threadline.integrations.langchain`` converts it),
so ``threadline sessions show/search/export`` and the web browser see the
conversation. A checkpoint's value of that channel then refers to those messages
by seq instead of holding a copy of the conversation (LangGraph's own savers store
the whole list again at every step: 14 MB against 0.33 MB for a 100-turn thread);
a message the session does not hold exactly as the graph has it (edited, or
without an id) is kept inline. A message the graph later edits or removes stays in
the history as it was said (history is append-only); the checkpoints keep the
graph's view.

The optional abilities LangGraph's conformance suite detects are all here:
``delete_thread`` deletes the session (a thread that copies were forked from keeps
its messages, their shared history, and loses its checkpoints); ``copy_thread``
forks the session (``store/fork.py``: the copy shares the history by reference)
and copies the checkpoints; ``prune`` keeps the latest checkpoint of each
namespace (or none) and drops values no kept checkpoint reads; ``delete_for_runs``
drops the checkpoints a run made, across the threads of the saver's agent.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from threadline.errors import (
    CorruptRecord,
    SessionExists,
    SessionHasForks,
    SessionNotFound,
    UsageError,
)
from threadline.integrations.binding import missing_extra, open_or_use
from threadline.store import Store
from threadline.store.checks import MAX_PAGE_SIZE, validate_session_id
from threadline.store.protocol import Session
from threadline.store.session_info import ScratchpadEntry, SessionInfo

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
KNOWN_SESSIONS = 64
"""Thread sessions whose messages a saver keeps in memory to match checkpoints against."""
PREFIX = "lg/"
PLAIN_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""A namespace, channel, task or version kept as it is in a scratchpad name."""
DERIVED_PREFIX = "lg-"


def _part(text: str) -> str:
    """One segment of a scratchpad name: ``=name`` when plain, else ``~`` and a hash."""
    if PLAIN_NAME.fullmatch(text):
        return "=" + text
    return "~" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _version(version: Any) -> str:
    return _part(json.dumps(version))


def _typed(data: tuple[str, bytes]) -> list[str]:
    return [data[0], base64.b64encode(data[1]).decode("ascii")]


def _untyped(data: list[str]) -> tuple[str, bytes]:
    return data[0], base64.b64decode(data[1])


def thread_session_id(thread_id: str) -> str:
    """The session id of a LangGraph thread: the thread id when it is a valid session
    id, else ``lg-`` and a hash of it."""
    if not isinstance(thread_id, str) or not thread_id:
        raise UsageError(f"a LangGraph thread id must be non-empty text, got {thread_id!r}")
    try:
        return validate_session_id(thread_id)
    except UsageError:
        digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()
        return DERIVED_PREFIX + digest[:40]


class _Thread:
    """What a thread's scratchpad holds: all of it, read in one call (``whole``), or
    one namespace's checkpoint records, with the values and writes a checkpoint reads
    fetched by name when it reads them (``namespace``: what ``get_tuple`` needs, so
    its cost follows the checkpoint, not the thread's history of values)."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store, self.session_id = store, session_id
        self.checkpoints: dict[str, dict[str, dict[str, Any]]] = {}
        """namespace -> checkpoint id -> record"""
        self.blobs: dict[str, str] | None = None
        """blob name -> its stored JSON, decoded only when read (None: not read yet)"""
        self.writes: dict[tuple[str, str], list[dict[str, Any]]] | None = None
        """(namespace, checkpoint id) -> write records (None: not read yet)"""
        self.names: dict[str, str] = {}
        """scratchpad name -> its raw content, of what was read (what a copy writes)"""

    @classmethod
    def whole(cls, store: Store, session_id: str) -> _Thread:
        thread = cls(store, session_id)
        thread.blobs, thread.writes = {}, {}
        thread._take(store.scratchpad_list(session_id, prefix=PREFIX))
        return thread

    @classmethod
    def namespace(cls, store: Store, session_id: str, ns: str) -> _Thread:
        thread = cls(store, session_id)
        thread._take(store.scratchpad_list(session_id, prefix=f"{PREFIX}c/{_part(ns)}/"))
        return thread

    def _take(self, entries: Iterable[ScratchpadEntry]) -> None:
        for entry in entries:
            name = entry.name
            self.names[name] = entry.content
            kind = name[len(PREFIX) : len(PREFIX) + 1]
            if kind == "b" and self.blobs is not None:
                self.blobs[name] = entry.content
                continue
            record = _record(entry.content)
            if record is None:
                continue  # not ours to judge: skip what does not decode
            if kind == "c":
                self.checkpoints.setdefault(record["ns"], {})[record["id"]] = record
            elif kind == "w" and self.writes is not None:
                self.writes.setdefault((record["ns"], record["checkpoint"]), []).append(record)

    def blob(self, name: str) -> str | None:
        if self.blobs is not None:
            return self.blobs.get(name)
        entry = self.store.scratchpad_read(self.session_id, name)
        return None if entry is None else entry.content

    def writes_of(self, ns: str, cid: str) -> list[dict[str, Any]]:
        if self.writes is not None:
            return self.writes.get((ns, cid), [])
        prefix = f"{PREFIX}w/{_part(ns)}/{_part(cid)}/"
        found = [
            _record(e.content) for e in self.store.scratchpad_list(self.session_id, prefix=prefix)
        ]
        return [r for r in found if r is not None]


Refs = list[int | None]
Records = list[dict[str, Any]]
Values = list[Any]


@dataclass
class _Known:
    """What a saver knows of a thread session's messages (``ThreadlineSaver._known``)."""

    created: datetime
    last: int = 0
    messages: dict[str, tuple[int, BaseMessage]] = field(default_factory=dict)


def _record(content: str) -> dict[str, Any] | None:
    try:
        record = json.loads(content)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class ThreadlineSaver(BaseCheckpointSaver[int]):
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

    def close(self) -> None:
        """Close the store if this saver opened it from a URL."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> ThreadlineSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- threads and sessions
    def thread_session(self, thread_id: str) -> Session | None:
        """The session of a thread, or None before its first checkpoint."""
        try:
            info = self.store.session_info(thread_session_id(thread_id))
        except SessionNotFound:
            return None
        return Session(self.store, info)

    def _session_for_write(self, thread_id: str) -> Session:
        session = self.thread_session(thread_id)
        if session is not None:
            return session
        sid = thread_session_id(thread_id)
        try:
            return self.store.create_session(
                id=sid,
                agent=self.agent,
                model=self.model,
                metadata={METADATA: {"thread_id": thread_id}},
            )
        except SessionExists:  # created by another writer meanwhile
            return Session(self.store, self.store.session_info(sid))

    def _read(self, session: Session) -> _Thread:
        return _Thread.whole(self.store, session.id)

    # -- reads
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        session = self.thread_session(thread_id)
        if session is None:
            return None
        thread = _Thread.namespace(self.store, session.id, ns)
        checkpoints = thread.checkpoints.get(ns, {})
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            if not checkpoints:
                return None
            checkpoint_id = max(checkpoints)
        record = checkpoints.get(checkpoint_id)
        if record is None:
            return None
        return self._tuple(session, thread_id, thread, record)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, of one thread (``config``) or of every thread of
        this saver's agent (``None``), by namespace, metadata ``filter`` and ``before``."""
        if config is not None:
            thread_ids = [config["configurable"]["thread_id"]]
            ns_wanted: str | None = config["configurable"].get("checkpoint_ns")
            id_wanted = get_checkpoint_id(config)
        else:
            thread_ids = [self._thread_id(info) for info in self._agent_sessions()]
            ns_wanted, id_wanted = None, None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id in thread_ids:
            session = self.thread_session(thread_id)
            if session is None:
                continue
            thread = self._read(session)
            for ns, checkpoints in thread.checkpoints.items():
                if ns_wanted is not None and ns != ns_wanted:
                    continue
                for cid in sorted(checkpoints, reverse=True):
                    if id_wanted and cid != id_wanted:
                        continue
                    if before_id and cid >= before_id:
                        continue
                    record = checkpoints[cid]
                    metadata = self.serde.loads_typed(_untyped(record["metadata"]))
                    if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                    if left is not None:
                        if left <= 0:
                            return
                        left -= 1
                    yield self._tuple(session, thread_id, thread, record, metadata=metadata)

    def _tuple(
        self,
        session: Session,
        thread_id: str,
        thread: _Thread,
        record: dict[str, Any],
        *,
        metadata: CheckpointMetadata | None = None,
    ) -> CheckpointTuple:
        ns, cid = record["ns"], record["id"]
        checkpoint: Checkpoint = self.serde.loads_typed(_untyped(record["checkpoint"]))
        values: dict[str, Any] = {}
        for channel, version in checkpoint["channel_versions"].items():
            raw = thread.blob(_blob_name(ns, channel, version))
            blob = _record(raw) if raw is not None else None
            if blob is not None and "messages" in blob:
                values[channel] = self._messages_value(session, blob["messages"])
            elif blob is not None and blob["value"][0] != "empty":
                values[channel] = self.serde.loads_typed(_untyped(blob["value"]))
        writes = sorted(
            thread.writes_of(ns, cid),
            key=lambda w: (w.get("task_path", ""), w["task_id"], w["idx"]),
        )
        parent = record.get("parent")
        return CheckpointTuple(
            config=_config(thread_id, ns, cid),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=(
                metadata
                if metadata is not None
                else self.serde.loads_typed(_untyped(record["metadata"]))
            ),
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=[
                (w["task_id"], w["channel"], self.serde.loads_typed(_untyped(w["value"])))
                for w in writes
            ],
        )

    # -- writes
    def put(
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
        stored: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = stored.pop("channel_values", None) or {}
        refs = None
        if self.messages_key and self.messages_key in new_versions and ns == "":
            refs = self._keep_messages(session, values.get(self.messages_key))
        for channel, version in new_versions.items():
            blob: dict[str, Any] = {"ns": ns, "channel": channel, "version": version}
            if channel == self.messages_key and refs is not None:
                blob["messages"] = [
                    {"s": seq} if seq is not None else {"v": _typed(self.serde.dumps_typed(m))}
                    for seq, m in zip(refs, values[channel], strict=True)
                ]
            elif channel in values:
                blob["value"] = _typed(self.serde.dumps_typed(values[channel]))
            else:
                blob["value"] = ["empty", ""]
            self.store.scratchpad_write(
                session.id, _blob_name(ns, channel, version), json.dumps(blob)
            )
        full_metadata = get_checkpoint_metadata(config, metadata)
        record = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": configurable.get("checkpoint_id"),
            "checkpoint": _typed(self.serde.dumps_typed(stored)),
            "metadata": _typed(self.serde.dumps_typed(full_metadata)),
            "run_id": _text_or_none(full_metadata.get("run_id")),
        }
        self.store.scratchpad_write(
            session.id, _checkpoint_name(ns, checkpoint["id"]), json.dumps(record)
        )
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
        session = self._session_for_write(thread_id)
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            name = _write_name(ns, cid, task_id, index)
            if index >= 0 and self.store.scratchpad_read(session.id, name) is not None:
                continue  # a regular write is kept as first stored; special ones replace
            record = {
                "ns": ns,
                "checkpoint": cid,
                "task_id": task_id,
                "idx": index,
                "channel": channel,
                "value": _typed(self.serde.dumps_typed(value)),
                "task_path": task_path,
            }
            self.store.scratchpad_write(session.id, name, json.dumps(record))

    def _keep_messages(self, session: Session, value: object) -> Refs | None:
        """Append the messages of ``value`` the session does not hold yet, once each.

        Returns, for each message, the seq of the session message it is exactly (what
        the checkpoint stores in its place), or None for one the session does not hold
        as it is (an edited copy, one without an id); None when ``value`` is not a
        list of messages."""
        if not isinstance(value, list) or not all(isinstance(m, BaseMessage) for m in value):
            return None
        with self._lock:
            known = self._known(session)
            new = list(
                {m.id: m for m in value if isinstance(m.id, str) and m.id not in known}.values()
            )
            if new:
                batch = to_threadline(new, answerable=recent_calls(session, new))
                batch = [
                    m.model_copy(update={"id": _message_id(session.id, lc.id or "")})
                    for m, lc in zip(batch, new, strict=True)
                ]
                self._learn(session.id, session.append(batch))
            refs: Refs = []
            for m in value:
                found = known.get(m.id) if isinstance(m.id, str) else None
                refs.append(found[0] if found is not None and found[1] == m else None)
            return refs

    def _known(self, session: Session) -> dict[str, tuple[int, BaseMessage]]:
        """LangChain id -> (seq, the message as the session gives it back), for the
        session's messages: read once, then only its new tail."""
        session.refresh()
        cached = self._seen.get(session.id)
        if (
            cached is None
            or cached.created != session.info.created_at
            or cached.last > session.last_seq
        ):
            cached = _Known(session.info.created_at)
            self._seen[session.id] = cached
        self._seen.move_to_end(session.id)
        while len(self._seen) > KNOWN_SESSIONS:
            self._seen.popitem(last=False)
        if session.last_seq > cached.last:
            self._learn(session.id, session.messages(after_seq=cached.last, include_retracted=True))
            cached.last = session.last_seq
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
            cached.last = max(cached.last, m.seq or 0)

    def _messages_value(self, session: Session, items: Records) -> Values:
        """A messages channel value stored by reference: session messages by seq, and
        inline the ones the session does not hold as they were."""
        seqs = [i["s"] for i in items if "s" in i]
        by_seq: dict[int, Message] = {}
        if seqs:
            first = min(seqs)
            for m in session.iter_messages(after_seq=first - 1, include_retracted=True):
                if m.seq is not None:
                    by_seq[m.seq] = m
        out: Values = []
        for item in items:
            if "s" not in item:
                out.append(self.serde.loads_typed(_untyped(item["v"])))
                continue
            stored = by_seq.get(item["s"])
            if stored is None:
                raise CorruptRecord(
                    f"thread session {session.id}: checkpoint refers to message seq "
                    f"{item['s']}, which the session does not hold"
                )
            out.append(to_langchain(stored))
        return out

    # -- the optional abilities
    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's session; one that copies were forked from keeps its
        messages (their shared history) and loses its checkpoints."""
        session = self.thread_session(thread_id)
        if session is None:
            return
        try:
            session.delete()
        except SessionHasForks:
            for name in self._read(session).names:
                self.store.scratchpad_delete(session.id, name)
        except SessionNotFound:
            pass
        with self._lock:
            self._seen.pop(session.id, None)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """A fork of the source thread's session (sharing its messages by reference)
        with every checkpoint and pending write of the source."""
        from threadline.store.fork import fork_session

        source = self.thread_session(source_thread_id)
        if source is None:
            return
        target_id = thread_session_id(target_thread_id)
        if self.thread_session(target_thread_id) is not None:
            raise UsageError(f"copy_thread makes a new thread: {target_thread_id!r} already exists")
        thread = self._read(source)
        target = fork_session(
            source, id=target_id, metadata={METADATA: {"thread_id": target_thread_id}}
        )
        # values first, checkpoint records last (as put writes them)
        for name in sorted(thread.names, key=lambda n: n.startswith(PREFIX + "c/")):
            self.store.scratchpad_write(target.id, name, thread.names[name])

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep each namespace's latest checkpoint (``keep_latest``) or none
        (``delete``), with the pending writes and values the kept ones read. The
        session and its messages stay."""
        if strategy not in ("keep_latest", "delete"):
            raise UsageError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            session = self.thread_session(thread_id)
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
        for info in self._agent_sessions():
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

    def _drop(self, session: Session, thread: _Thread, drop: set[tuple[str, str]]) -> None:
        """Delete checkpoints first (a crash leaves unread values, never a checkpoint
        without its values), then their writes, then values no checkpoint reads."""
        if not drop:
            return
        for ns, cid in sorted(drop):
            self.store.scratchpad_delete(session.id, _checkpoint_name(ns, cid))
        for (ns, cid), writes in (thread.writes or {}).items():
            if (ns, cid) in drop:
                for w in writes:
                    name = _write_name(ns, cid, w["task_id"], w["idx"])
                    self.store.scratchpad_delete(session.id, name)
        read: set[str] = set()
        for ns, checkpoints in thread.checkpoints.items():
            for cid, record in checkpoints.items():
                if (ns, cid) in drop:
                    continue
                stored = self.serde.loads_typed(_untyped(record["checkpoint"]))
                read.update(_blob_name(ns, c, v) for c, v in stored["channel_versions"].items())
        for name in thread.blobs or {}:
            if name not in read:
                self.store.scratchpad_delete(session.id, name)

    def _agent_sessions(self) -> Infos:
        return _agent_sessions(self.store, self.agent)

    @staticmethod
    def _thread_id(info: SessionInfo) -> str:
        kept = info.metadata.get(METADATA)
        if isinstance(kept, dict) and isinstance(kept.get("thread_id"), str):
            return str(kept["thread_id"])
        return info.id

    # -- async: the same methods, each in a worker thread
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self, config: RunnableConfig | None, **options: Any
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` (same options: filter, before, limit), read in a worker thread."""
        found = await asyncio.to_thread(lambda: list(self.list(config, **options)))
        for item in found:
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


Infos = list[SessionInfo]


def _agent_sessions(store: Store, agent: str) -> Infos:
    """Every session of ``agent``, page by page."""
    out: Infos = []
    while True:
        page = store.list_sessions(agent=agent, limit=MAX_PAGE_SIZE, offset=len(out))
        out.extend(page.items)
        if not page.items or len(out) >= page.total:
            return out


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _checkpoint_name(ns: str, cid: str) -> str:
    return f"{PREFIX}c/{_part(ns)}/{_part(cid)}"


def _blob_name(ns: str, channel: str, version: Any) -> str:
    return f"{PREFIX}b/{_part(ns)}/{_part(channel)}/{_version(version)}"


def _write_name(ns: str, cid: str, task_id: str, idx: int) -> str:
    return f"{PREFIX}w/{_part(ns)}/{_part(cid)}/{_part(task_id)}/{idx}"


def _message_id(session_id: str, lc_id: str) -> str:
    """The threadline id of a LangChain message appended to a session: the same for
    the same message, so a resend is recognised (``Store.append_messages``)."""
    digest = hashlib.sha256(f"{session_id}\0{lc_id}".encode("utf-8", "surrogatepass"))
    return DERIVED_PREFIX + digest.hexdigest()[:40]


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
