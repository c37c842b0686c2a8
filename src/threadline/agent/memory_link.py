"""What ties an agent to its long-term memory (``threadline.memory``).

With ``memory.enabled`` an agent gets four things from here:

* the ``memory_search``, ``memory_recall`` and ``memory_write`` tools;
* a recorder that sees every batch the turn appends (signal-flagging them,
  extracting every ``extraction_threshold`` flagged exchanges);
* the memories relevant to the turn's request, fetched once per request and
  reused by every step of the turn, so the memory block, and the prompt-cache
  prefix before it, stay the same within a turn;
* a ``before_compaction`` hook that flushes pending extraction for the range a
  compaction is about to summarize, so no fact is summarized away unsaved;
* with ``auto_extract``, a flush of what a session left pending below the
  threshold when the agent moves to another session or is closed, and, at its
  first session, of what an earlier run of the agent left pending (killed before
  it could flush: the pending state is durable).

Memory is an addition: a failure here is logged and reported as an agent event,
never a failed turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from threadline.agent.config import MemoryConfig, find_agent_file, load_agent_file
from threadline.agent.tools import Tool
from threadline.errors import UsageError
from threadline.memory import (
    Extractor,
    MemoryHit,
    MemoryRecorder,
    MemoryStore,
    memory_tools,
    open_memory,
    scope_for,
)
from threadline.memory.project import PROJECT_KEY, project_root, session_project
from threadline.memory.relevance import relevance
from threadline.messages import Message
from threadline.requests import request_text
from threadline.store.checks import DEFAULT_AGENT
from threadline.store.protocol import Session, Store

logger = logging.getLogger(__name__)

REQUEST_LOOKBACK = 64
"""Messages read back from the end to find the latest request outside a turn (``/context``)."""
SEARCH_SLACK = 2
"""Search this many times ``retrieval_limit``: hits still in the window are left out."""
MAX_SEARCH_K = 100
"""The most results one memory search returns."""
SHOWN_ID_CHARS = 8
QUERY_HEAD_CHARS = 600
QUERY_TAIL_CHARS = 400
"""A long request (a pasted log) is searched by its head and tail, where the ask is."""
RECALLED_SESSIONS = 64
"""Sessions whose latest recall is kept (an agent server's agent sees many)."""
PROJECTS_KEPT = 256
"""Source sessions whose project is remembered between recalls."""
EVERY_PROJECT_PREFIX = "user:"
"""A user scope holds what the user means for every project: it is never project-bound."""


@dataclass(frozen=True, slots=True)
class Injected:
    """One memory placed in the window, and why: its relevance to the request
    (the share of the request's terms it holds), its search score and its scope."""

    hit: MemoryHit
    relevance: float

    def reason(self) -> str:
        return (
            f"relevance {self.relevance:.2f}, score {self.hit.score:.2f}, "
            f"scope {self.hit.scope or '?'}, {self.hit.kind}"
        )


MemoryEvent = Literal["memory_recalled", "memory_flushed", "memory_failed"]
MemoryEventHandler = Callable[[MemoryEvent, dict[str, Any]], None]


def memory_scope(
    scope: str | None, agent: str | None, *, names: tuple[str, str] = ("scope", "agent")
) -> str:
    """``scope`` as given, else the scope ``agent`` writes to (its agent file's
    ``memory.scope``, or ``agent:NAME``; default: the built-in agent); both at once is
    refused (one of them would silently lose), naming the two as the caller calls them
    (``names``). The CLI and the MCP face both ask this."""
    if scope is not None and agent is not None:
        given, by = names
        raise UsageError(
            f"give {given} or {by}, not both ({given} {scope} names the memory itself; "
            f"{by} {agent} names the agent whose memory it is)"
        )
    if scope is not None:
        return scope_for(DEFAULT_AGENT, scope.strip())
    agent = agent if agent is not None else DEFAULT_AGENT
    configured = None
    found = find_agent_file(agent)
    if found is not None:
        configured = load_agent_file(found).memory.scope
    return scope_for(agent, configured)


def search_scopes(
    memory: MemoryStore,
    scope: str | None,
    agent: str | None,
    *,
    names: tuple[str, str] = ("scope", "agent"),
) -> list[str]:
    """The scopes a memory search reads: the one ``scope`` or ``agent`` names, else every
    scope the store holds memories in (the built-in agent's when it holds none)."""
    if scope is None and agent is None:
        return memory.scopes() or [memory_scope(None, None)]
    return [memory_scope(scope, agent, names=names)]


def hit_line(hit: MemoryHit) -> str:
    """One memory as the model sees it: the text, then where and when it was said."""
    where: list[str] = []
    if hit.session_id:
        where.append(f"session {hit.session_id[:SHOWN_ID_CHARS]}")
        if hit.seq is not None:
            where[-1] += f" #{hit.seq}"
    text = " ".join(hit.text.split())
    if hit.observed_at is not None and hit.observed_at.date().isoformat() not in text:
        where.append(hit.observed_at.date().isoformat())
    return f"{text} ({', '.join(where)})" if where else text


class AgentMemory:
    """One agent's view of its memory: scope, recorder, tools and per-turn retrieval."""

    def __init__(
        self,
        config: MemoryConfig,
        *,
        agent_name: str,
        store: Store,
        memory: MemoryStore | None = None,
        extractor: Extractor | None = None,
        now: Callable[[], datetime] | None = None,
        on_event: MemoryEventHandler | None = None,
    ) -> None:
        self.config = config
        self.scope = scope_for(agent_name, config.scope)
        self.memory = memory if memory is not None else open_memory(store)
        self._owns = memory is None
        self.recorder = MemoryRecorder(
            self.memory,
            scope=self.scope,
            extractor=extractor,
            threshold=config.extraction_threshold,
            auto_extract=config.auto_extract,
        )
        self.store = store
        self.agent_name = agent_name
        self._now = now
        self.on_event = on_event
        self._orphans_checked = False
        self._session: Session | None = None
        self._recalled: dict[str, tuple[int, list[MemoryHit]]] = {}
        """Per session: the request seq the hits were fetched for, and the hits."""
        self._injected: dict[str, list[Injected]] = {}
        self._projects: dict[str, str | None] = {}
        """Per source session id: its project (None: none recorded)."""

    def session_metadata(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        """A new session's metadata with the project it works in recorded (the git
        root, else the working directory), unless the caller recorded one."""
        out = dict(metadata or {})
        out.setdefault(PROJECT_KEY, project_root())
        return out

    def injected(self, session: Session) -> list[Injected]:
        """What the latest recall for ``session`` injected, with why (the context report)."""
        return list(self._injected.get(session.id, []))

    @property
    def scopes(self) -> list[str]:
        return [self.scope]

    def tools(self) -> list[Tool]:
        """The three memory tools, writing with the current session's provenance."""
        return memory_tools(
            self.memory,
            scopes=self.scopes,
            default_scope=self.scope,
            session=lambda: self._session,
        )

    def attach(self, session: Session) -> None:
        """The session the tools write provenance for (the one whose turn is running).

        Moving to another session ends the previous one's run of exchanges: with
        ``auto_extract`` what it left pending below the threshold is extracted now."""
        previous, self._session = self._session, session
        if previous is not None and previous.id != session.id:
            self._flush_left(previous)
        if not self._orphans_checked:
            self._orphans_checked = True
            self._flush_orphans(session)

    def _flush_orphans(self, current: Session) -> None:
        """Flush what an earlier run of this agent left pending (killed before it could):
        the pending state is durable, this is where it is picked up. Sessions another live
        process (or another agent of this one) holds are left to it."""
        if not self.config.auto_extract:
            return
        try:
            orphans = [s for s in self.memory.pending_sessions() if s != current.id]
        except Exception as exc:
            self._failed("flush", current, exc)
            return
        for session_id in orphans:
            try:
                info = self.store.session_info(session_id)
                holder = self.store.lock_holder(session_id)
            except Exception:  # deleted since: nothing to extract from
                continue
            if info.agent != self.agent_name:
                continue
            if holder is not None and not holder.is_stale():
                continue  # in use (here or elsewhere): its own agent flushes it
            session = self.store.get_session(session_id)
            try:
                self.flush(session)
            except Exception as exc:  # still pending: the next run tries again
                self._failed("flush", session, exc)

    def _flush_left(self, session: Session) -> None:
        if not self.config.auto_extract:
            return
        try:
            if self.recorder.pending(session):
                self.flush(session)
        except Exception as exc:  # the exchanges stay pending; a later flush saves them
            self._failed("flush", session, exc)

    # -- the recorder

    def observe(self, session: Session, messages: Sequence[Message]) -> int:
        """Let the recorder see appended messages; returns how many it flagged."""
        if not messages:
            return 0
        try:
            return self.recorder.observe(session, messages)
        except Exception as exc:  # memory must not break a turn
            self._failed("observe", session, exc)
            return 0

    def flush(self, session: Session, *, up_to_seq: int | None = None) -> int:
        """Run pending extraction now; returns the facts written."""
        written = self.recorder.flush(session, up_to_seq=up_to_seq)
        self._emit("memory_flushed", session_id=session.id, up_to_seq=up_to_seq, facts=written)
        return written

    def before_compaction(self, session: Session, messages: Sequence[Message]) -> None:
        """The compactor's ``before_compaction`` hook: flush what it is about to summarize.

        A failure propagates to the compactor, which records it on the result's
        ``hook_errors`` and goes on: the exchanges stay stored and pending, so a later
        flush still extracts them."""
        seqs = [m.seq for m in messages if m.seq is not None]
        self.flush(session, up_to_seq=max(seqs) if seqs else None)

    # -- retrieval

    def recall(self, session: Session, request: Message | None = None) -> list[MemoryHit]:
        """The memories for the session's latest request (``request`` when the caller just
        stored it), fetched once per request and then reused."""
        if self.config.retrieval_limit <= 0:
            return []
        found = request if request is not None else _latest_request(session)
        cached = self._recalled.get(session.id)
        if found is None or found.seq is None:  # the request is far back (a long tool run)
            return cached[1] if cached is not None else []
        if cached is not None and cached[0] == found.seq:
            return cached[1]
        query = _query_of(request_text(found) or found.text)
        if not query:
            return []
        try:
            hits = self.memory.search(
                query,
                scopes=self.scopes,
                k=min(self.config.retrieval_limit * SEARCH_SLACK, MAX_SEARCH_K),
                now=self._now() if self._now is not None else None,
            )
        except Exception as exc:
            self._failed("search", session, exc)
            return []
        chosen = self._helpful(query, _not_in_view(hits, session), session)
        chosen = chosen[: self.config.retrieval_limit]
        hits = [c.hit for c in chosen]
        for kept in (self._recalled, self._injected):
            kept.pop(session.id, None)
            if len(kept) >= RECALLED_SESSIONS:
                kept.pop(next(iter(kept)))
        self._recalled[session.id] = (found.seq, hits)
        self._injected[session.id] = chosen
        self._emit("memory_recalled", session_id=session.id, seq=found.seq, hits=hits)
        return hits

    def _helpful(self, query: str, hits: list[MemoryHit], session: Session) -> list[Injected]:
        """The hits worth injecting: facts and turns (an entity's card never takes a
        fact's slot) that clear the relevance floor and belong to this session's project
        (a user scope's facts are for every project)."""
        here = self._project_of(session.id, session)
        out = []
        for hit in hits:
            if hit.kind == "entity":
                continue
            score = relevance(query, hit.text)
            if score <= 0 or score < self.config.relevance_floor:
                continue
            if not (hit.scope or "").startswith(EVERY_PROJECT_PREFIX) and not self._same_project(
                hit, here
            ):
                continue
            out.append(Injected(hit, score))
        return out

    def _same_project(self, hit: MemoryHit, here: str | None) -> bool:
        """Whether every session the hit stands for is in project ``here`` (a hit with
        no session, written by hand, is the agent's own and goes everywhere)."""
        ids = {s.session_id for s in hit.sources} | ({hit.session_id} if hit.session_id else set())
        return all(self._project_of(sid) == here for sid in ids)

    def _project_of(self, session_id: str, session: Session | None = None) -> str | None:
        if session_id not in self._projects:
            try:
                found = session_project(session or self.store.get_session(session_id))
            except Exception:  # deleted since: no project to match
                found = None
            if len(self._projects) >= PROJECTS_KEPT:
                self._projects.pop(next(iter(self._projects)))
            self._projects[session_id] = found
        return self._projects[session_id]

    def lines(self, session: Session, request: Message | None = None) -> list[str]:
        """``recall`` as the lines ``build_context(memories=...)`` places in the window."""
        return [hit_line(h) for h in self.recall(session, request)]

    def window_args(
        self, session: Session, memories: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """The ``build_context`` arguments that place this memory in a window: the lines
        (default: those recalled for the latest request) and the budget share; none when
        ``retrieval_limit`` is 0 (nothing is injected, nothing reserved)."""
        if self.config.retrieval_limit <= 0:
            return {}
        lines = list(memories) if memories is not None else self.lines(session)
        return {"memories": lines, "memory_share": self.config.share}

    def close(self) -> None:
        """Flush what the current session left pending (``auto_extract``), then close the
        memory if this object opened it."""
        if self._session is not None:
            self._flush_left(self._session)
            self._session = None
        if self._owns:
            self.memory.close()

    # -- events

    def _failed(self, what: str, session: Session, exc: Exception) -> None:
        logger.warning("memory %s for session %s failed: %s", what, session.id, exc, exc_info=exc)
        self._emit(
            "memory_failed", session_id=session.id, step=what, error=f"{type(exc).__name__}: {exc}"
        )

    def _emit(self, name: MemoryEvent, **payload: Any) -> None:
        if self.on_event is not None:
            self.on_event(name, payload)


def _query_of(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= QUERY_HEAD_CHARS + QUERY_TAIL_CHARS:
        return text
    return f"{text[:QUERY_HEAD_CHARS]} {text[-QUERY_TAIL_CHARS:]}"


def _latest_request(session: Session) -> Message | None:
    for m in session.tail(REQUEST_LOOKBACK):
        if request_text(m) is not None:
            return m
    return None


def _not_in_view(hits: list[MemoryHit], session: Session) -> list[MemoryHit]:
    """Leave out what this session said after its newest checkpoint: those messages are
    in the window already (nothing falls out unsummarized), so repeating them is waste."""
    checkpoint = session.latest_checkpoint()
    floor = checkpoint.covers_up_to if checkpoint is not None else 0
    return [
        h for h in hits if not (h.session_id == session.id and h.seq is not None and h.seq > floor)
    ]
