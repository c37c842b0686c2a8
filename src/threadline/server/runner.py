"""``AgentRunner``: one cached agent per active session, and the turns it runs.

An agent is built on a session's first prompt and kept while the session is
active, holding the session's attach lock (so a ``threadline chat`` elsewhere
sees who has it and does not write into a running turn). An agent idle for
``idle_seconds`` (30 minutes by default) is evicted: its lock released, its
model's connections closed. Time comes from an injectable monotonic clock so
eviction is tested without sleeping. ``renew`` re-takes every held lock, so a
lease (10 minutes) never lapses under a cached agent; the app calls it with
``evict_idle`` from its sweeper.

A turn runs in a worker thread (the agent loop is synchronous); its events go
to the session's ``EventLog``; one turn per session at a time.

Several servers over one store (PostgreSQL) share sessions through that lock:
a prompt for a session whose agent another server caches is refused at once
with ``SessionBusy`` (409, "busy, held by host:pid"), before anything is stored,
rather than waiting: the holder keeps an idle agent (and the lock) for up to
``idle_seconds``, far longer than an HTTP request should hang. The lock is taken
in the store's own atomic step, so of two servers prompting one session at the
same moment exactly one runs the turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from threadline.agent import Agent
from threadline.agent.loop import TurnResult
from threadline.errors import ConfigError, MissingCredentials, SessionLocked, ThreadlineError
from threadline.messages import Message
from threadline.report.context import checkpoint_number
from threadline.server.config import ServerConfig
from threadline.server.events import EventHub
from threadline.server.hooks import HookDispatcher
from threadline.session_agent import session_agent
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import format_ts
from threadline.store.locks import LockHolder
from threadline.store.protocol import Session, Store
from threadline.store.session_info import SessionInfo

logger = logging.getLogger(__name__)

RESULT_PREVIEW_CHARS = 2000
"""A tool result's event carries this much of its text; the store has all of it."""
JOIN_SECONDS = 30.0
HELD_ELSEWHERE = "held_elsewhere"
"""First event of a stream opened on a server while another one holds the session: that
server runs its turns, so this stream sees none of their events."""


class TurnInProgress(ThreadlineError):
    """A turn of this session is already running; wait for its ``turn_finished``."""


class SessionBusy(SessionLocked):
    """Another process (another server, a ``threadline chat``) holds the session."""

    def __init__(self, session_id: str, holder: Any) -> None:
        since = f" since {format_ts(holder.started_at)}" if isinstance(holder, LockHolder) else ""
        ThreadlineError.__init__(
            self,
            f"session {session_id} is busy, held by {holder_name(holder)}{since} (another "
            "server caches its agent until it has been idle for that server's idle timeout "
            "or stops, or a chat is attached): send this session's requests to that server, "
            "or retry later",
        )
        self.session_id = session_id
        self.holder = holder


def holder_name(holder: Any) -> str:
    """``host:pid``, how a holder is named in a 409."""
    return f"{holder.host}:{holder.pid}" if isinstance(holder, LockHolder) else str(holder)


def build_agent(config: ServerConfig, store: Store, info: SessionInfo, model_spec: str) -> Agent:
    """The agent that runs ``info``'s turns on ``model_spec``: the session's own agent
    (``threadline.session_agent``, the rule ``threadline chat`` resumes with), so a
    session the chat made answers a web prompt with the chat's agent and model.

    ``simulated/...`` is the offline scripted coding agent of ``threadline demo``
    (prompts with the text of one of its scripted turns play that turn back, tools
    included). The model is resolved here, before any message is stored: a model that
    cannot run in this server (an unknown provider, a missing key or server URL) is a
    ``ConfigError``, which a prompt answers with 400."""
    try:
        agent = session_agent(
            store, info, model=model_spec, simulated_policy=config.simulated_policy
        )
    except ConfigError as exc:
        raise ConfigError(f"model {model_spec!r} cannot be used: {exc}") from exc
    try:
        agent.model  # noqa: B018 -- resolve it now, not mid-turn
    except (ConfigError, MissingCredentials) as exc:
        agent.close()
        raise ConfigError(f"model {model_spec!r} cannot be used here: {exc}") from exc
    return agent


@dataclass
class CachedAgent:
    session_id: str
    agent: Agent
    model_spec: str
    session: Session
    last_used: float
    running: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)


class AgentRunner:
    """See the module docstring."""

    def __init__(
        self,
        store: Store,
        config: ServerConfig,
        *,
        hooks: HookDispatcher | None = None,
        hub: EventHub | None = None,
        clock: Callable[[], float] | None = None,
        agent_factory: Callable[[Store, SessionInfo, str], Agent] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.hooks = hooks or HookDispatcher()
        self.hub = hub or EventHub(1000)
        self.clock = clock or config.clock or time.monotonic
        self.holder = LockHolder.current()
        self._factory = agent_factory or (
            lambda store, info, spec: build_agent(config, store, info, spec)
        )
        self._cache: dict[str, CachedAgent] = {}
        self._lock = threading.RLock()

    # -- the cache ------------------------------------------------------------------

    def cached(self) -> list[str]:
        with self._lock:
            return list(self._cache)

    def get(self, session_id: str, model_spec: str) -> CachedAgent:
        """The session's cached agent on ``model_spec``, built (and the lock taken) if need be.

        Raises ``SessionLocked`` when another process holds the session."""
        with self._lock:
            entry = self._cache.get(session_id)
            if entry is None:
                session = self.store.get_session(session_id)
                try:
                    self.store.acquire_lock(session_id, self.holder)
                except SessionLocked as exc:
                    raise SessionBusy(session_id, exc.holder) from exc
                try:
                    agent = self._factory(self.store, session.info, model_spec)
                except BaseException:
                    self.store.release_lock(session_id, self.holder)
                    raise
                entry = CachedAgent(session_id, agent, model_spec, session, self.clock())
                self._cache[session_id] = entry
            elif entry.model_spec != model_spec and not entry.running:
                old = entry.agent
                entry.agent = self._factory(self.store, entry.session.refresh().info, model_spec)
                entry.model_spec = model_spec
                _close_agent(old)
            entry.last_used = self.clock()
            return entry

    def evict(self, session_id: str) -> bool:
        """Drop the session's agent and release its lock (``TurnInProgress`` mid-turn)."""
        with self._lock:
            entry = self._cache.get(session_id)
            if entry is None:
                return False
            if entry.running:
                raise TurnInProgress(f"a turn of session {session_id} is running")
            del self._cache[session_id]
        self._release(entry)
        return True

    def evict_idle(self) -> list[str]:
        """Evict every agent idle for ``idle_seconds``; returns their session ids."""
        now = self.clock()
        with self._lock:
            idle = [
                e
                for e in self._cache.values()
                if not e.running and now - e.last_used >= self.config.idle_seconds
            ]
            for entry in idle:
                del self._cache[entry.session_id]
        for entry in idle:
            self._release(entry)
        return [e.session_id for e in idle]

    def renew(self) -> None:
        """Renew the lease of every held lock; a session lost to someone else is dropped."""
        with self._lock:
            entries = list(self._cache.values())
        for entry in entries:
            try:
                self.store.acquire_lock(entry.session_id, self.holder)
            except SessionLocked:
                logger.warning("lost the lock of %s; dropping its agent", entry.session_id)
                with self._lock:
                    self._cache.pop(entry.session_id, None)
                _close_agent(entry.agent)
            except Exception as exc:
                logger.warning("could not renew the lock of %s: %s", entry.session_id, exc)

    def close(self) -> None:
        """Wait for running turns, then evict everything."""
        with self._lock:
            threads = [e.thread for e in self._cache.values() if e.thread is not None]
        for thread in threads:
            thread.join(JOIN_SECONDS)
        with self._lock:
            entries = list(self._cache.values())
            self._cache.clear()
        for entry in entries:
            self._release(entry)

    def _release(self, entry: CachedAgent) -> None:
        try:
            self.store.release_lock(entry.session_id, self.holder)
        except Exception as exc:  # deleted meanwhile, or the store is closing
            logger.info("releasing the lock of %s: %s", entry.session_id, exc)
        _close_agent(entry.agent)

    # -- turns ----------------------------------------------------------------------

    def held_elsewhere(self, session_id: str) -> LockHolder | None:
        """The session's live lock holder when it is another process, whose turns (and
        their events) this server never sees; None when free, stale or ours."""
        holder = self.store.lock_holder(session_id)
        if holder is None or holder.same_holder(self.holder) or holder.is_stale():
            return None
        return holder

    def is_running(self, session_id: str) -> bool:
        with self._lock:
            entry = self._cache.get(session_id)
            return entry is not None and entry.running

    def reserve(self, session_id: str, model_spec: str) -> CachedAgent:
        """Claim the session for one turn (its agent built, its lock held); then store the
        user message and ``launch``, or ``cancel`` if that fails.

        Raises ``TurnInProgress`` while another turn runs, ``SessionLocked`` when another
        process holds the session."""
        with self._lock:
            if self.is_running(session_id):
                raise TurnInProgress(
                    f"a turn of session {session_id} is already running; wait for its "
                    "turn_finished event"
                )
            entry = self.get(session_id, model_spec)
            entry.running = True
            entry.cancel = threading.Event()
            return entry

    def cancel_turn(self, session_id: str) -> bool:
        """Ask the session's running turn to stop (``agent.cancel``): a streamed reply
        ends where it is, stored once and marked interrupted, else the turn stops at its
        next step; ``turn_finished`` then says ``stopped: cancelled``. False when no
        turn of that session runs here."""
        with self._lock:
            entry = self._cache.get(session_id)
            if entry is None or not entry.running:
                return False
            entry.cancel.set()
            return True

    def cancel(self, entry: CachedAgent) -> None:
        with self._lock:
            entry.running = False
            entry.last_used = self.clock()

    def launch(self, entry: CachedAgent, message: Message) -> int:
        """Run the reserved turn in a worker thread; returns the last event id before it.

        ``message`` is already stored: the turn appends it again, which the store
        answers idempotently (same message id), so the turn starts from it.
        """
        log = self.hub.log(entry.session_id)
        before = log.last_id
        thread = threading.Thread(
            target=self._run,
            args=(entry, message),
            name=f"threadline-turn-{entry.session_id[:8]}",
            daemon=True,
        )
        with self._lock:
            entry.thread = thread
        thread.start()
        return before

    def run_turn(self, session_id: str, text: str, model_spec: str) -> int:
        """Store ``text`` as a user message and start its turn (what ``agent.prompt`` does)."""
        entry = self.reserve(session_id, model_spec)
        try:
            stored = entry.session.append(Message.user(text))[0]
        except BaseException:
            self.cancel(entry)
            raise
        return self.launch(entry, stored)

    def _run(self, entry: CachedAgent, message: Message) -> None:
        log = self.hub.log(entry.session_id)
        sid = entry.session_id

        def on_event(name: str, payload: dict[str, Any]) -> None:
            self._relay(sid, name, payload)

        def on_text(text: str) -> None:
            log.publish("text_delta", {"text": text})

        agent = entry.agent
        agent.on_event = on_event
        ok = False
        result: TurnResult | None = None
        try:
            entry.session.refresh()
            result = agent.run_turn(
                entry.session,
                message,
                stream=on_text,
                cancel=entry.cancel,
            )
            ok = True
        except Exception as exc:
            trace = None if isinstance(exc, ThreadlineError) else exc  # expected: one line
            logger.warning("turn of %s failed: %s", sid, exc, exc_info=trace)
            log.publish("error", {"code": type(exc).__name__, "message": str(exc)})
        finally:
            agent.on_event = None
            data: dict[str, Any] = {"sessionId": sid, "ok": ok}
            if result is not None:
                data.update(
                    seq=result.reply.seq,
                    text=result.reply.text,
                    steps=result.steps,
                    stopped=result.stopped,
                    contextTokens=result.context_tokens,
                    usage=result.usage.model_dump(mode="json"),
                )
            self._saved(sid)
            with self._lock:
                entry.running = False
                entry.thread = None
                entry.last_used = self.clock()
            log.publish("turn_finished", data)

    def _saved(self, session_id: str) -> None:
        """``session_save``, before ``turn_finished``: a client that saw the turn end can
        count on its hooks having run."""
        try:
            info = self.store.session_info(session_id)
        except Exception:  # deleted meanwhile: nothing was saved for anyone to hear about
            return
        self.hooks.fire(
            "session_save",
            {"sessionId": session_id, "messageCount": info.message_count, "lastSeq": info.last_seq},
        )

    def _relay(
        self,
        session_id: str,
        name: str,
        payload: dict[str, Any],
        tag: dict[str, Any] | None = None,
    ) -> None:
        """Agent events -> the session's SSE events (and the compaction hook).

        A subagent's events (``subagent_event``) go to the same stream, each tagged with
        the child's ``sessionId`` and its ``parentSessionId``; ``subagent_started`` and
        ``subagent_finished`` frame them. ``tag`` is that tag while relaying one."""
        log = self.hub.log(session_id)
        tag = tag or {}
        subject = tag.get("sessionId", session_id)
        if name == "subagent_event":
            inner = {
                "sessionId": payload["session_id"],
                "parentSessionId": payload["parent_session_id"],
            }
            event, data = payload["event"], payload["payload"]
            if event == "text_delta":
                log.publish("text_delta", {**inner, "text": data["text"]})
            elif event != "turn_started":  # subagent_started says it
                self._relay(session_id, event, data, inner)
        elif name in ("subagent_started", "subagent_finished"):
            log.publish(
                name,
                {
                    "sessionId": payload["session_id"],
                    "parentSessionId": payload["parent_session_id"],
                    "toolCallId": payload["call_id"],
                    "agent": payload["agent"],
                    **{k: payload[k] for k in ("description", "stopped", "steps") if k in payload},
                },
            )
        elif name == "turn_started":
            log.publish("turn_started", {"sessionId": session_id})
        elif name == "tool_started":
            call = payload["call"]
            log.publish(
                "tool_call",
                {
                    **tag,
                    "step": payload["step"],
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                },
            )
        elif name == "tool_finished":
            result: Message = payload["result"]
            text = result.text
            log.publish(
                "tool_result",
                {
                    **tag,
                    "step": payload["step"],
                    "toolCallId": payload["call"].id,
                    "name": payload["call"].name,
                    "isError": payload["is_error"],
                    "content": text[:RESULT_PREVIEW_CHARS],
                    "truncated": len(text) > RESULT_PREVIEW_CHARS,
                },
            )
        elif name == "compacted":
            r = payload["result"]
            data = {
                **tag,
                "sessionId": subject,
                "coversFrom": r.covers_from,
                "coversUpTo": r.covers_up_to,
                "messagesSummarized": r.messages_summarized,
                "messagesKept": r.messages_kept,
                "checkpointId": r.checkpoint.id if r.checkpoint is not None else None,
                "checkpointNumber": self._checkpoint_number(subject, r.checkpoint),
                "reason": r.reason,
            }
            log.publish("context_compacted", data)
            self.hooks.fire("context_compacted", data)
        elif name in ("compaction_failed", "doom_loop", "step_limit", "context_length_exceeded"):
            detail = str(payload.get("result") or payload)
            log.publish("notice", {**tag, "kind": name, "detail": detail})

    def _checkpoint_number(self, session_id: str, checkpoint: Checkpoint | None) -> int | None:
        """The checkpoint's number within its session (#1 its first), as pages show it."""
        if checkpoint is None:
            return None
        checkpoints = self.store.get_session(session_id).checkpoints()
        return checkpoint_number(checkpoints, checkpoint.id)


def _close_agent(agent: Agent) -> None:
    try:
        agent.close()
    except Exception as exc:
        logger.info("closing an agent: %s", exc)
