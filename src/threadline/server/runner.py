"""``AgentRunner``: a cache of agents, one per recent session, and the turns they run.

A session's attach lock means a turn is running, not that an agent is cached: the
lock is taken (in the store's own atomic step) when a turn is reserved and released
when it ends, just before its ``turn_finished``. Between turns any server over the
same store may run the session's next turn, and a ``threadline chat`` may attach. A
cached agent stays a cache: when the store's last seq differs from the one the
agent saw at the end of its own last turn (another server, or a chat, wrote since),
the agent and its session handle are rebuilt from the store before the turn runs.
An agent idle for ``idle_seconds`` (30 minutes by default) is dropped and its
model's connections closed. Time comes from an injectable monotonic clock so
eviction is tested without sleeping. ``renew`` renews the lease (``TURN_LEASE``) of
each running turn's lock, every ``RENEW_SECONDS`` while turns run (and from the app's
sweeper, with ``evict_idle``).

A turn runs in a worker thread (the agent loop is synchronous); its events go
to the session's log in the hub (``EventHub`` in this process; ``SharedHub`` in the
store's engine on PostgreSQL and Redis, where every worker reads them); one turn per
session at a time. Its cancel token is
shared with every subagent under it: cancelling closes each model request in flight,
so ``turn_finished`` follows at once even when a model sends nothing. ``close``
(shutdown, SIGTERM) cancels every running turn at once, then waits for all of them
together, at most ``JOIN_SECONDS``.

Several servers over one store (PostgreSQL, Redis) share sessions through that lock:
a prompt for a session whose turn another server is running is refused at once with
``SessionBusy`` (409, "busy, held by host:pid"), before anything is stored; of two
servers prompting one session at the same moment exactly one runs the turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from threadline.agent import Agent
from threadline.agent.loop import TurnResult
from threadline.errors import (
    ConfigError,
    MissingCredentials,
    SessionLocked,
    SessionNotFound,
    ThreadlineError,
)
from threadline.llm.cancel import CancelToken
from threadline.messages import Message
from threadline.report.context import checkpoint_number
from threadline.server.config import ServerConfig
from threadline.server.events import ENDS_STREAM, INTERRUPTED, EventHub
from threadline.server.hooks import HookDispatcher
from threadline.server.shared_events import SharedHub
from threadline.server.turn_signals import (
    SETTLE_SECONDS,
    WATCH_SECONDS,
    acknowledge,
    await_reached,
    forget,
    mark_seen,
    released,
    request_cancel,
    requested,
    turn_id,
)
from threadline.session_agent import session_agent
from threadline.store.checkpoints import Checkpoint
from threadline.store.checks import format_ts
from threadline.store.locks import LockHolder, pid_alive, this_host
from threadline.store.protocol import Session, Store
from threadline.store.session_info import SessionInfo

logger = logging.getLogger(__name__)

RESULT_PREVIEW_CHARS = 2000
"""A tool result's event carries this much of its text; the store has all of it."""
JOIN_SECONDS = 10.0
"""How long ``close`` waits, in all, for the cancelled turns to store their ends."""
TURN_LEASE = timedelta(seconds=60)
"""A turn's lock lapses this long after its last renewal: a worker on another host that
died mid-turn frees its session after this (one on this host, at once: its pid is
gone)."""
RENEW_SECONDS = 15.0
"""How often a running turn's lock is renewed."""
HELD_ELSEWHERE = "held_elsewhere"
"""First event of a stream opened on a server while another one holds the session: that
server runs its turn (whose events reach this stream only through a ``SharedHub``)."""


class TurnInProgress(ThreadlineError):
    """A turn of this session is already running; wait for its ``turn_finished``."""


class SessionBusy(SessionLocked):
    """Another process (another server, a ``threadline chat``) holds the session."""

    def __init__(self, session_id: str, holder: Any) -> None:
        since = f" since {format_ts(holder.started_at)}" if isinstance(holder, LockHolder) else ""
        ThreadlineError.__init__(
            self,
            f"session {session_id} is busy, held by {holder_name(holder)}{since} (a turn "
            "is running there, or a chat is attached): wait for its turn_finished, or "
            "retry later",
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
    for note in agent.notes:  # which agent runs, on the server's console too
        logger.warning("session %s: %s", info.id, note)
    return agent


@dataclass
class CachedAgent:
    session_id: str
    agent: Agent
    model_spec: str
    session: Session
    last_used: float
    seen_seq: int
    """The store's last seq when this agent last ran (or was built): a store that says
    otherwise was written by someone else since, and the agent is rebuilt."""
    running: bool = False
    held: LockHolder | None = None
    """The session's lock, held while a turn runs (and only then)."""
    thread: threading.Thread | None = field(default=None, repr=False)
    cancel: CancelToken = field(default_factory=CancelToken, repr=False)
    ended: tuple[CancelToken, str | None] | None = field(default=None, repr=False)
    """The last turn's token (one per turn) and how it stopped (None: it failed)."""


class AgentRunner:
    """See the module docstring."""

    def __init__(
        self,
        store: Store,
        config: ServerConfig,
        *,
        hooks: HookDispatcher | None = None,
        hub: EventHub | SharedHub | None = None,
        clock: Callable[[], float] | None = None,
        agent_factory: Callable[[Store, SessionInfo, str], Agent] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.hooks = hooks or HookDispatcher()
        self.hub: EventHub | SharedHub = hub or EventHub(1000)
        self.clock = clock or config.clock or time.monotonic
        self.holder = LockHolder.current(lease=TURN_LEASE)
        self._factory = agent_factory or (
            lambda store, info, spec: build_agent(config, store, info, spec)
        )
        self._cache: dict[str, CachedAgent] = {}
        self._lock = threading.RLock()
        self._watcher: threading.Thread | None = None
        self._closing = threading.Event()
        self._elsewhere: dict[str, LockHolder] = {}
        """Turns other servers run that followers here wait on (see ``follow_elsewhere``)."""

    # -- the cache ------------------------------------------------------------------

    def cached(self) -> list[str]:
        with self._lock:
            return list(self._cache)

    def _entry(self, session_id: str, model_spec: str) -> CachedAgent:
        """The session's cached agent on ``model_spec``, (re)built from the store when
        there is none, when it is on another model, or when the store was written since
        it last ran. Called with ``_lock`` held, the session's lock taken."""
        entry = self._cache.get(session_id)
        if entry is not None and entry.model_spec == model_spec:
            last_seq = self.store.session_info(session_id).last_seq
            if last_seq == entry.seen_seq:
                entry.session.refresh()
                return entry
        session = self.store.get_session(session_id)
        agent = self._factory(self.store, session.info, model_spec)
        if entry is not None:
            _close_agent(entry.agent)
        fresh = CachedAgent(session_id, agent, model_spec, session, self.clock(), session.last_seq)
        self._cache[session_id] = fresh
        return fresh

    def evict(self, session_id: str) -> bool:
        """Drop the session's agent (``TurnInProgress`` mid-turn)."""
        with self._lock:
            entry = self._cache.get(session_id)
            if entry is None:
                return False
            if entry.running:
                raise TurnInProgress(f"a turn of session {session_id} is running")
            del self._cache[session_id]
        _close_agent(entry.agent)
        return True

    def evict_idle(self) -> list[str]:
        """Drop every agent idle for ``idle_seconds``; returns their session ids."""
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
            _close_agent(entry.agent)
        return [e.session_id for e in idle]

    def renew(self) -> None:
        """Renew the lease of each running turn's lock; a lock lost to someone else (the
        lease lapsed) cancels that turn, which no longer owns the session.

        Each renewal is made with ``_lock`` held, after checking the turn still runs:
        a turn that ended (and released the lock) between the list and its renewal
        would otherwise have its lock taken again, by nobody, refusing every other
        server's prompts (409) until the lease ran out."""
        with self._lock:
            entries = [e for e in self._cache.values() if e.running and e.held is not None]
        for entry in entries:
            with self._lock:
                if not entry.running or entry.held is None:
                    continue
                try:
                    self.store.acquire_lock(entry.session_id, self.holder)
                except SessionLocked:
                    logger.warning("lost the lock of %s; cancelling its turn", entry.session_id)
                    entry.cancel.set()
                except Exception as exc:
                    logger.warning("could not renew the lock of %s: %s", entry.session_id, exc)

    def close(self) -> None:
        """Cancel every running turn at once, wait for them together (``JOIN_SECONDS`` in
        all), then evict everything."""
        self._closing.set()
        with self._lock:
            running = [e for e in self._cache.values() if e.running]
            threads = [e.thread for e in running if e.thread is not None]
        for entry in running:
            entry.cancel.set()
        deadline = time.monotonic() + JOIN_SECONDS
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        with self._lock:
            entries = list(self._cache.values())
            self._cache.clear()
            for entry in entries:
                self._unlock(entry)
        for entry in entries:
            _close_agent(entry.agent)

    def _unlock(self, entry: CachedAgent) -> None:
        """End the turn's hold on the session (with ``_lock`` held)."""
        entry.running = False
        if entry.held is None:
            return
        entry.held = None
        try:
            self.store.release_lock(entry.session_id, self.holder)
        except Exception as exc:  # deleted meanwhile, or the store is closing
            logger.info("releasing the lock of %s: %s", entry.session_id, exc)

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
        """Claim the session for one turn (its lock taken, its agent current); then store
        the user message and ``launch``, or ``cancel`` if that fails.

        Raises ``TurnInProgress`` while another turn runs here, ``SessionBusy`` while
        another process runs one (or a chat is attached)."""
        with self._lock:
            if self.is_running(session_id):
                raise TurnInProgress(
                    f"a turn of session {session_id} is already running; wait for its "
                    "turn_finished event"
                )
            try:
                held = self.store.acquire_lock(session_id, self.holder)
            except SessionLocked as exc:
                raise SessionBusy(session_id, exc.holder) from exc
            try:
                entry = self._entry(session_id, model_spec)
            except BaseException:
                self.store.release_lock(session_id, self.holder)
                raise
            entry.running = True
            entry.held = held
            entry.cancel = CancelToken()
            entry.last_used = self.clock()
            return entry

    def cancel_turn(self, session_id: str, settle: float = SETTLE_SECONDS) -> bool:
        """Stop the session's running turn (``agent.cancel``): the model requests in
        flight (its own and its subagents') are closed, the reply so far is stored once
        and marked interrupted, else the turn stops at its next step; ``turn_finished``
        then says ``stopped: cancelled``. True once the turn ended so, or when it has
        not ended within ``settle`` (it stops at its next step); False when no turn of
        that session runs here, or it ended on its own first (a turn storing its end
        still counts as running)."""
        with self._lock:
            entry = self._cache.get(session_id)
            if entry is None or not entry.running:
                return False
            entry.cancel.set()
            token = entry.cancel
        deadline = time.monotonic() + settle
        while True:
            with self._lock:
                ended = entry.ended
            if ended is not None and ended[0] is token:
                return ended[1] == "cancelled"
            if time.monotonic() >= deadline:
                return True
            time.sleep(WATCH_SECONDS / 4)

    def _check_elsewhere(self, session_id: str, holder: LockHolder) -> None:
        try:
            current = self.store.lock_holder(session_id)
        except SessionNotFound:
            with self._lock:
                self._elsewhere.pop(session_id, None)
            self.hub.log(session_id).publish(ENDS_STREAM, {"sessionId": session_id})
            return
        except Exception as exc:  # the store is away for a moment: look again
            logger.info("watching the turn of %s: %s", session_id, exc)
            return
        same = current is not None and turn_id(current) == turn_id(holder)
        if same and current is not None and not current.is_stale():
            return  # still running there
        with self._lock:
            self._elsewhere.pop(session_id, None)
        log = self.hub.log(session_id)
        died = (same and current is not None) or (
            holder.host == this_host() and not pid_alive(holder.pid)
        )
        if died:
            reason = "the server running the turn is gone; the session keeps what it stored"
            log.publish(
                INTERRUPTED,
                {"sessionId": session_id, "holder": holder_name(holder), "reason": reason},
            )
            return
        if isinstance(self.hub, SharedHub):
            return  # the turn's own turn_finished reached every worker through the engine
        try:
            last_seq = self.store.session_info(session_id).last_seq
        except Exception:
            return
        log.publish(
            "turn_finished",
            {"sessionId": session_id, "ranOn": holder_name(holder), "seq": last_seq},
        )

    def cancel_elsewhere(self, session_id: str) -> bool:
        """Ask the server running the session's turn to cancel it (``turn_signals``);
        True once it did, False when no turn of that session runs elsewhere."""
        return self._cancelled_elsewhere(session_id) is not None

    def _cancelled_elsewhere(self, session_id: str) -> str | None:
        """The id of the turn another server ran and cancelled when asked, else None."""
        holder = self.held_elsewhere(session_id)
        if holder is None:
            return None
        turn = request_cancel(self.store, session_id, holder)
        return turn if await_reached(self.store, session_id, turn) else None

    def stop_turn(self, session_id: str, timeout: float = JOIN_SECONDS) -> bool:
        """Cancel the session's running turn, here or on another server, and wait (at
        most ``timeout``) until it has stored its end and let go of the session."""
        with self._lock:
            entry = self._cache.get(session_id)
            thread = entry.thread if entry is not None and entry.running else None
            if entry is not None and entry.running:
                entry.cancel.set()
        if thread is not None:
            thread.join(timeout)
            return True
        turn = self._cancelled_elsewhere(session_id)
        return turn is not None and released(self.store, session_id, turn, timeout=timeout)

    def cancel(self, entry: CachedAgent) -> None:
        """Undo ``reserve``: the turn will not run."""
        with self._lock:
            self._unlock(entry)
            entry.seen_seq = -1  # whatever was stored meanwhile, rebuild next time
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
            self._start_watch()
        thread.start()
        return before

    def follow_elsewhere(self, session_id: str, holder: LockHolder) -> None:
        """A follower here waits on the turn ``holder`` runs on another server, whose
        events this server may not see: when that turn is over, publish what the store
        tells of its end, ``interrupted`` when its server died (its process gone, or its
        lease lapsed), else (with an in-process hub only: a shared one carried the
        turn's own) ``turn_finished`` with ``ranOn`` (its server) and the session's last
        ``seq``; so no follower waits on silence."""
        with self._lock:
            if session_id not in self._elsewhere:
                self._elsewhere[session_id] = holder
                self._start_watch()

    def _start_watch(self) -> None:
        if self._watcher is None and not self._closing.is_set():
            self._watcher = threading.Thread(
                target=self._watch, name="threadline-turn-watch", daemon=True
            )
            self._watcher.start()

    def _watch(self) -> None:
        """While turns run here, or followers here wait on turns run elsewhere: cancel
        those another server asked to cancel, renew their locks, see others' turns end."""
        renewed = time.monotonic()
        while not self._closing.wait(WATCH_SECONDS):
            with self._lock:
                turns = {
                    e.session_id: turn_id(e.held)
                    for e in self._cache.values()
                    if e.running and e.held is not None
                }
                elsewhere = dict(self._elsewhere)
                if not turns and not elsewhere:
                    self._watcher = None
                    return
            for sid, holder in elsewhere.items():
                self._check_elsewhere(sid, holder)
            if time.monotonic() - renewed >= RENEW_SECONDS:
                self.renew()
                renewed = time.monotonic()
            try:
                asked = requested(self.store, turns)
            except Exception as exc:  # the store is away for a moment: try again
                logger.warning("reading cancel requests: %s", exc)
                continue
            for sid in asked:
                with self._lock:
                    entry = self._cache.get(sid)
                    if entry is None or entry.held is None or turn_id(entry.held) != turns[sid]:
                        continue
                    entry.cancel.set()  # the turn marks the request when it has stopped
                mark_seen(self.store, sid, turns[sid])
        with self._lock:
            self._watcher = None

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
            seen = self._saved(sid)
            if entry.held is not None:  # a cancel request is answered by how the turn ended
                cancelled = result is not None and result.stopped == "cancelled"
                settle = acknowledge if cancelled else forget
                settle(self.store, sid, turn_id(entry.held))
            with self._lock:  # free for any server before anyone hears the turn ended
                entry.ended = (entry.cancel, None if result is None else result.stopped)
                self._unlock(entry)
                entry.seen_seq = seen
                entry.thread = None
                entry.last_used = self.clock()
            log.publish("turn_finished", data)

    def _saved(self, session_id: str) -> int:
        """``session_save``, before ``turn_finished``: a client that saw the turn end can
        count on its hooks having run. Returns the session's last seq (-1: gone)."""
        try:
            info = self.store.session_info(session_id)
        except Exception:  # deleted meanwhile: nothing was saved for anyone to hear about
            return -1
        self.hooks.fire(
            "session_save",
            {"sessionId": session_id, "messageCount": info.message_count, "lastSeq": info.last_seq},
        )
        return info.last_seq

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
