"""A Google ADK session service over any threadline store.

``ThreadlineSessionService(store_or_url)`` is a ``BaseSessionService``: create, get
(with ``GetSessionConfig``: recent events, after a timestamp), list (paged, see
``list_sessions``), delete, append events with state deltas at app, user and
session scope, and ``get_user_state``. It passes ADK's own session-service
contract tests (``tests/test_adk_contract.py``).

How ADK's model sits in the store, so the rest of threadline reads it too:

- An ADK session is a threadline session (id ``adk-`` and a hash of app, user and
  ADK id, kept exactly as given; the ADK id is its title; the service opens only the
  sessions it created, ``integrations/binding.py``), of agent ``<app name>`` (``adk`` when the name
  is not a valid agent name), listed under its user's session.
- Each (app, user) has a user session (``adk-u-...``) holding the user's state, and
  each app an app session (``adk-a-...``) holding the app's state; the user
  sessions are listed under the app's. ``threadline sessions list`` shows app >
  users > sessions, and ``list_sessions`` for a user reads one page of one
  parent's children (an index), not every session.
- State is session metadata, one key per state key (``adk.state.<key>``): ADK's
  state delta replaces whole values and never removes a key, which is exactly how
  ``update_session`` merges metadata, atomically, on every backend. ``temp:`` keys
  are never stored.
- Each event is one threadline message (role ``user`` for the user's events,
  ``assistant`` for an agent's, text and function calls as the context engine
  reads them), or one ``tool`` message per function response, dated at the
  event's timestamp, with the whole event (ADK's JSON) in the first message's
  metadata, so it reads back exactly. A message another face appended (the CLI
  chat, the Agents SDK adapter) reads back as a plain text event.

Each method runs the store's synchronous calls in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from threadline.errors import SessionExists, SessionNotFound, UsageError
from threadline.integrations.binding import (
    OWNER,
    Face,
    create_owned,
    find_owned,
    missing_extra,
    open_or_use,
)
from threadline.messages import Message, ToolCall
from threadline.store import Store
from threadline.store.checks import MAX_PAGE_SIZE, RESULT_LOOKBACK, TAIL_BATCH, validate_agent
from threadline.store.encoding import dated
from threadline.store.protocol import Session
from threadline.store.session_info import SessionInfo

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session as AdkSession
    from google.adk.sessions.state import State
    from google.genai import types
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise missing_extra("Google ADK", "adk", exc) from exc

T = TypeVar("T")

META = "adk"
"""Metadata key of every session this service makes: ``{"kind", "app", "user", "id"}``;
on a message, the event (ADK's JSON) it holds."""
PART = "adk_part"
"""Message metadata of a second or later message of one event: ``{"event", "index"}``."""
STATE = "adk.state."
"""Metadata key prefix of one state key."""
UPDATED = "adk.last_update_time"
"""Metadata key of ADK's ``last_update_time`` (the latest event's own timestamp)."""
FALLBACK_AGENT = "adk"
STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
"""ADK's database service's words for a stale session object."""


class ListSessionsPage(ListSessionsResponse):
    """A page of ``list_sessions``: pass ``next_page_token`` back for the next one."""

    next_page_token: str | None = None


def _digest(*parts: str) -> str:
    joined = "\0".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(joined).hexdigest()[:40]


def session_key(app_name: str, user_id: str, session_id: str) -> str:
    """The threadline id of an ADK session."""
    return "adk-" + _digest(app_name, user_id, session_id)


def _key(app_name: str, user_id: str, session_id: str) -> str:
    """The face's key of an ADK session (``integrations/binding.py``)."""
    return json.dumps([app_name, user_id, session_id])


def _recorded_key(info: SessionInfo) -> str | None:
    meta = info.metadata.get(META)
    if isinstance(meta, dict) and meta.get("kind") == "session":
        return _key(str(meta.get("app")), str(meta.get("user")), str(meta.get("id")))
    return None


FACE = Face(
    "adk", "adk", namespace=lambda key: session_key(*json.loads(key)), recorded_key=_recorded_key
)
"""An ADK session is ``adk-`` and a hash of app, user and id."""


def _container_key(meta: dict[str, Any]) -> str:
    """The key of an app's session (``[app]``) or a user's (``[app, user]``)."""
    return json.dumps([meta["app"], meta["user"]] if "user" in meta else [meta["app"]])


def _recorded_container(info: SessionInfo) -> str | None:
    meta = info.metadata.get(META)
    if isinstance(meta, dict) and meta.get("kind") in ("app", "user") and "app" in meta:
        return _container_key(meta)
    return None


USERS = Face(
    "adk-user",
    "adk",
    namespace=lambda key: user_key(*json.loads(key)),
    recorded_key=_recorded_container,
)
"""Each (app, user) has a session holding the user's state: ``adk-u-`` and a hash."""
APPS = Face(
    "adk-app",
    "adk",
    namespace=lambda key: app_key(*json.loads(key)),
    recorded_key=_recorded_container,
)
"""Each app has a session holding the app's state: ``adk-a-`` and a hash."""


def user_key(app_name: str, user_id: str) -> str:
    return "adk-u-" + _digest(app_name, user_id)


def app_key(app_name: str) -> str:
    return "adk-a-" + _digest(app_name)


def _split_state(state: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A state (or state delta) by scope: ``app``, ``user`` and ``session`` keys,
    each without its prefix; ``temp:`` keys are left out (never stored)."""
    scopes: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for key, value in (state or {}).items():
        if key.startswith(State.APP_PREFIX):
            scopes["app"][key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            scopes["user"][key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            scopes["session"][key] = value
    return scopes


def _stored_state(state: dict[str, Any]) -> dict[str, Any]:
    """State keys as metadata keys, each value as JSON holds it (a value JSON cannot
    hold, such as a function, is stored as its text, as ADK's database service does)."""
    return {STATE + k: to_jsonable_python(v, fallback=str) for k, v in state.items()}


def _read_state(metadata: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    return {prefix + k[len(STATE) :]: v for k, v in metadata.items() if k.startswith(STATE)}


class ThreadlineSessionService(BaseSessionService):
    """An ADK session service over a threadline store (see the module docstring).

    ``store`` is a store URL (opened here, closed by ``close``), an open ``Store``
    (left open), or ``None`` for the default store; ``model`` is the model new
    sessions are created with (it picks the tokenizer their messages are counted with).
    """

    def __init__(self, store: str | Store | None = None, *, model: str | None = None) -> None:
        self.store, self._owns_store = open_or_use(store)
        self.model = model

    def close(self) -> None:
        """Close the store if this service opened it from a URL."""
        if self._owns_store:
            self.store.close()

    # -- ADK's methods: each runs the synchronous one below (same keywords) in a worker
    # thread; ``list_sessions`` also takes ``page_size`` and ``page_token``
    async def create_session(self, **options: Any) -> AdkSession:
        return await _run(lambda: self.create_session_sync(**options))

    async def get_session(self, **options: Any) -> AdkSession | None:
        return await _run(lambda: self.get_session_sync(**options))

    async def list_sessions(self, **options: Any) -> ListSessionsResponse:
        return await _run(lambda: self.list_sessions_sync(**options))

    async def delete_session(self, **options: Any) -> None:
        await _run(lambda: self.delete_session_sync(**options))

    async def get_user_state(self, **options: Any) -> dict[str, Any]:
        return await _run(lambda: self.get_user_state_sync(**options))

    async def append_event(self, session: AdkSession, event: Event) -> Event:
        """Store the event and its state delta, then apply it to ``session`` as ADK's
        base class does (``temp:`` keys reach the session object only). A session
        object older than what is stored is refused (``StaleSessionError``, as ADK's
        database service refuses it); an event ``session`` already holds (the same id,
        delivered again) is neither stored nor held twice."""
        if event.partial:
            return event
        held = next((e for e in session.events if e.id == event.id), None)
        if held is not None:
            return held
        await _run(lambda: self._check_fresh(session))
        event = await super().append_event(session=session, event=event)
        info = await _run(lambda: self._store_event(session, event))
        session.last_update_time = event.timestamp
        session._storage_update_marker = _marker(info)
        return event

    # -- the synchronous implementation
    def create_session_sync(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        sid = session_id or uuid.uuid4().hex  # kept exactly, as ADK's database service does
        key = _key(app_name, user_id, sid)
        if find_owned(self.store, FACE, key) is not None:
            raise AlreadyExistsError(f"Session with id {sid} already exists.")
        scopes = _split_state(state)
        parent = self._user_session(app_name, user_id)
        now = datetime.now(UTC)
        metadata = {
            META: {"kind": "session", "app": app_name, "user": user_id, "id": sid},
            OWNER: FACE.owner(key),
            UPDATED: now.timestamp(),
            **_stored_state(scopes["session"]),
        }
        try:
            created = self.store.create_session(
                id=session_key(app_name, user_id, sid),
                agent=_agent(app_name),
                model=self.model,
                title=sid[:500],
                metadata=metadata,
                parent=parent,
                created_at=now,
            )
        except SessionExists:
            raise AlreadyExistsError(f"Session with id {sid} already exists.") from None
        self._update_state(app_key(app_name), scopes["app"])
        self._update_state(parent, scopes["user"])
        made = AdkSession(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            state=self._merged(created.info, app_name, user_id),
            last_update_time=float(metadata[UPDATED]),
        )
        made._storage_update_marker = _marker(created.info)
        return made

    def get_session_sync(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        sid = session_id
        info = find_owned(self.store, FACE, _key(app_name, user_id, sid))
        if info is None:
            return None
        session = Session(self.store, info)
        limit = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        events = [] if limit == 0 else _events(session, limit)
        if after is not None:
            events = [e for e in events if e.timestamp >= after]
        return self._adk_session(info, app_name, user_id, sid, events)

    def list_sessions_sync(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> ListSessionsResponse:
        """ADK's listing: every session of the user (or of the app, ``user_id=None``),
        least recently updated first, state merged, no events. With ``page_size``, one
        page of them instead, most recently updated first (what a picker shows), read
        through the store's index; ``next_page_token`` asks for the next."""
        if page_size is not None:
            return self._page(app_name, user_id, page_size, page_token)
        infos = [i for page in self._pages(app_name, user_id) for i in page]
        infos.reverse()  # the store lists newest first; ADK lists oldest first
        return ListSessionsResponse(sessions=self._listed(app_name, infos))

    def delete_session_sync(self, *, app_name: str, user_id: str, session_id: str) -> None:
        info = find_owned(self.store, FACE, _key(app_name, user_id, session_id))
        if info is None:
            return
        with contextlib.suppress(SessionNotFound):  # deleted meanwhile
            Session(self.store, info).delete()

    def get_user_state_sync(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        info = self._info(user_key(app_name, user_id))
        return {} if info is None else _read_state(info.metadata)

    # -- helpers
    def _info(self, session_id: str) -> SessionInfo | None:
        try:
            return self.store.session_info(session_id)
        except SessionNotFound:
            return None

    def _container(self, face: Face, meta: dict[str, str], title: str, parent: str | None) -> str:
        """The app's or a user's session, created on first use (``face``: ``APPS`` or
        ``USERS``; a session at its id that the service did not make is refused)."""
        created = create_owned(
            self.store,
            face,
            _container_key(meta),
            agent=_agent(meta["app"]),
            title=title[:500],
            metadata={META: {"kind": face.name.removeprefix("adk-"), **meta}},
            parent=parent,
        )
        return created.id

    def _user_session(self, app_name: str, user_id: str) -> str:
        app = self._container(APPS, {"app": app_name}, f"ADK app {app_name}", None)
        meta = {"app": app_name, "user": user_id}
        return self._container(USERS, meta, f"ADK user {user_id} of {app_name}", app)

    def _update_state(self, session_id: str, delta: dict[str, Any]) -> None:
        if delta:
            self.store.update_session(session_id, metadata=_stored_state(delta))

    def _merged(
        self,
        info: SessionInfo,
        app_name: str,
        user_id: str,
        *,
        app_state: dict[str, Any] | None = None,
        user_state: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """ADK's view of a session's state: its own keys, ``app:`` and ``user:`` ones
        (``app_state`` / ``user_state`` when the caller read them already)."""
        if app_state is None:
            app_state = self._state_of(app_key(app_name), State.APP_PREFIX)
        if user_state is None:
            user_state = self._state_of(user_key(app_name, user_id), State.USER_PREFIX)
        return {**_read_state(info.metadata), **app_state, **user_state}

    def _state_of(self, session_id: str, prefix: str) -> dict[str, Any]:
        info = self._info(session_id)
        return {} if info is None else _read_state(info.metadata, prefix)

    def _adk_session(
        self,
        info: SessionInfo,
        app_name: str,
        user_id: str,
        sid: str,
        events: list[Event],
        *,
        app_state: dict[str, Any] | None = None,
        user_state: dict[str, Any] | None = None,
    ) -> AdkSession:
        updated = info.metadata.get(UPDATED)
        made = AdkSession(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            state=self._merged(info, app_name, user_id, app_state=app_state, user_state=user_state),
            events=events,
            last_update_time=(
                float(updated)
                if isinstance(updated, int | float) and not isinstance(updated, bool)
                else info.updated_at.timestamp()
            ),
        )
        made._storage_update_marker = _marker(info)
        return made

    def _listed(self, app_name: str, infos: list[SessionInfo]) -> list[AdkSession]:
        app_state = self._state_of(app_key(app_name), State.APP_PREFIX)
        users: dict[str, dict[str, Any]] = {}  # each user's state read once
        out = []
        for info in infos:
            meta = info.metadata.get(META)
            if isinstance(meta, dict) and meta.get("kind") == "session":
                user = meta["user"]
                if user not in users:
                    users[user] = self._state_of(user_key(app_name, user), State.USER_PREFIX)
                out.append(
                    self._adk_session(
                        info,
                        app_name,
                        user,
                        meta["id"],
                        [],
                        app_state=app_state,
                        user_state=users[user],
                    )
                )
        return out

    def _listing(self, app_name: str, user_id: str | None) -> dict[str, Any]:
        """The store's ``list_sessions`` options of one user's sessions, or of every
        session of the app."""
        if user_id is not None:
            return {"parent": user_key(app_name, user_id)}
        return {"agent": _agent(app_name)}

    def _pages(self, app_name: str, user_id: str | None) -> Iterator[list[SessionInfo]]:
        options = self._listing(app_name, user_id)
        offset = 0
        while True:
            page = self.store.list_sessions(limit=MAX_PAGE_SIZE, offset=offset, **options)
            yield [i for i in page.items if _in_app(i, app_name, user_id)]
            offset += len(page.items)
            if not page.items or offset >= page.total:
                return

    def _page(
        self, app_name: str, user_id: str | None, size: int, token: str | None
    ) -> ListSessionsPage:
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise UsageError(f"page_size must be between 1 and {MAX_PAGE_SIZE}, got {size}")
        offset = _offset(token)
        page = self.store.list_sessions(
            limit=size, offset=offset, **self._listing(app_name, user_id)
        )
        infos = [i for i in page.items if _in_app(i, app_name, user_id)]
        end = offset + len(page.items)
        return ListSessionsPage(
            sessions=self._listed(app_name, infos),
            next_page_token=str(end) if page.items and end < page.total else None,
        )

    def _check_fresh(self, session: AdkSession) -> None:
        """Refuse a session object that misses what is stored since it was read: by
        its revision marker when this service gave it one (the session's last seq),
        else, as ADK does, when storage is newer and its latest event is not the
        object's."""
        info = find_owned(self.store, FACE, _key(session.app_name, session.user_id, session.id))
        if info is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        if session._storage_update_marker is not None:
            if session._storage_update_marker != _marker(info):
                raise StaleSessionError(STALE)
            return
        updated = info.metadata.get(UPDATED)
        if isinstance(updated, int | float) and updated > session.last_update_time:
            latest = _events(Session(self.store, info), 1)
            mine = session.events[-1].id if session.events else None
            if (latest[-1].id if latest else None) != mine:
                raise StaleSessionError(STALE)

    def _store_event(self, session: AdkSession, event: Event) -> SessionInfo:
        """The event and its session-scoped state in one atomic step (a crash keeps both
        or neither); then the app's and the user's state, which other sessions hold."""
        key = session_key(session.app_name, session.user_id, session.id)
        handle = Session(self.store, self.store.session_info(key))
        when = datetime.fromtimestamp(event.timestamp, UTC)
        scopes = _split_state(event.actions.state_delta if event.actions else None)
        handle.append(
            dated(_event_messages(handle, event), min(when, datetime.now(UTC))),
            metadata={UPDATED: event.timestamp, **_stored_state(scopes["session"])},
        )
        self._update_state(app_key(session.app_name), scopes["app"])
        self._update_state(user_key(session.app_name, session.user_id), scopes["user"])
        return handle.info


async def _run(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


def _agent(app_name: str) -> str:
    try:
        return validate_agent(app_name)
    except UsageError:
        return FALLBACK_AGENT


def _marker(info: SessionInfo) -> str:
    """A session's stored revision: its last seq moves with every event stored."""
    return str(info.last_seq)


def _in_app(info: SessionInfo, app_name: str, user_id: str | None) -> bool:
    meta = info.metadata.get(META)
    return (
        isinstance(meta, dict)
        and meta.get("kind") == "session"
        and meta.get("app") == app_name
        and (user_id is None or meta.get("user") == user_id)
    )


def _offset(token: str | None) -> int:
    if token is None:
        return 0
    if not token.isdigit():
        raise UsageError(f"page_token {token!r} is not one this service gave")
    return int(token)


# -- events as messages -------------------------------------------------------------


def _event_messages(session: Session, event: Event) -> list[Message]:
    """One message for the event (a ``tool`` message per function response), the
    first holding the event itself."""
    parts = list(event.content.parts or []) if event.content else []
    text = "\n".join(p.text for p in parts if p.text and not p.thought)
    base_id = "adk-" + _digest(session.id, event.id)
    when = datetime.fromtimestamp(event.timestamp, UTC)
    held = {META: event.model_dump(exclude_none=True, mode="json")}
    responses = [p.function_response for p in parts if p.function_response is not None]
    if not responses:
        calls = [
            ToolCall(id=p.function_call.id, name=p.function_call.name or "", arguments=_args(p))
            for p in parts
            if p.function_call is not None and p.function_call.id
        ]
        role = "user" if event.author == "user" else "assistant"
        return [
            Message(
                id=base_id,
                role=role,
                content=text,
                tool_calls=calls,
                name=None if role == "user" else _name(event.author),
                metadata=held,
                created_at=when,
            )
        ]
    answerable = _recent_call_ids(session)
    out = []
    for index, response in enumerate(responses):
        body = json.dumps(to_jsonable_python(response.response, fallback=str))
        content = f"{text}\n{body}" if index == 0 and text else body
        meta = held if index == 0 else {PART: {"event": event.id, "index": index}}
        msg_id = base_id if index == 0 else f"{base_id}.{index}"
        if response.id and response.id in answerable:
            out.append(
                Message.tool(
                    content,
                    tool_call_id=response.id,
                    name=response.name,
                    id=msg_id,
                    metadata=meta,
                    created_at=when,
                )
            )
        else:  # a response to no call this session holds: kept as what the user sent
            out.append(
                Message(id=msg_id, role="user", content=content, metadata=meta, created_at=when)
            )
    return out


def _args(part: types.Part) -> dict[str, Any]:
    args = part.function_call.args if part.function_call else None
    return dict(to_jsonable_python(args, fallback=str)) if isinstance(args, dict) else {}


def _name(author: str) -> str | None:
    return author[:64] if author else None


def _recent_call_ids(session: Session) -> set[str]:
    return {c.id for m in session.tail(RESULT_LOOKBACK[-1]) for c in m.tool_calls}


def _events(session: Session, limit: int | None) -> list[Event]:
    """The session's events, oldest first, or the latest ``limit`` of them, reading
    only the tail they need."""
    if limit is None:
        return [e for m in session.iter_messages() if (e := _event(m)) is not None]
    found: list[Message] = []
    heads = 0
    before: int | None = None
    while heads < limit:
        page = session.tail(TAIL_BATCH, before_seq=before)
        for m in page:
            found.append(m)
            if PART not in m.metadata:
                heads += 1
                if heads >= limit:
                    break
        if len(page) < TAIL_BATCH or page[-1].seq is None:
            break
        before = page[-1].seq
    return [e for m in reversed(found) if (e := _event(m)) is not None]


def _event(m: Message) -> Event | None:
    """The event a message holds; a plain text event for a message another face
    appended; None for the second or later message of one event."""
    if PART in m.metadata:
        return None
    held = m.metadata.get(META)
    if isinstance(held, dict):
        return Event.model_validate(held)
    return Event(
        id=m.id,
        invocation_id="",
        author="user" if m.role == "user" else (m.name or "threadline"),
        content=types.Content(
            role="user" if m.role == "user" else "model", parts=[types.Part(text=m.text)]
        ),
        timestamp=m.created_at.timestamp(),
    )
