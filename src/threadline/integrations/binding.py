"""One framework session bound to one threadline session: what every adapter shares.

The framework names the session (a LangGraph thread id, the Agents SDK's
``session_id``, LangChain's history key); each face keeps its sessions under its
own id namespace (``lg-``, ``lc-``, ``pa-``, ``oa-``, ``adk-``: the key itself when
it makes a valid id, else a hash of it after ``_``, so no key typed to one face
reaches another key's session, nor another face's), and records itself and the key
on the session (``OWNER`` in its metadata). A face opens only the sessions it
created for that key: anything else at that id is refused (``NotOwned``). The
session is created on the first write; the store is opened from a URL or used as
given.

Sessions an older threadline face made carry no owner. One at the face's own id is
adopted (its owner recorded on first use) unless it records another key; one at an
id an older face used (LangGraph's thread ids, ADK's) is adopted when it records
this key (LangGraph's and ADK's metadata did), and anything else there is left
alone. ``adopt`` records the owner on a session the caller vouches for (an older
LangChain, Pydantic AI or Agents SDK session, kept at the bare key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from threadline.errors import NotOwned, SessionExists, SessionNotFound, UsageError
from threadline.store import Store, open_store
from threadline.store.checks import DEFAULT_AGENT, validate_session_id
from threadline.store.protocol import Session
from threadline.store.session_info import SessionInfo

OWNER = "face"
"""Session metadata of a session a framework face created: ``{"name", "key"}``."""


def _no_legacy(key: str) -> str | None:
    return None


def _no_record(info: SessionInfo) -> str | None:
    return None


@dataclass(frozen=True)
class Face:
    """A framework face: its name, its id namespace, where an older threadline face of
    this kind kept a key's session (``legacy_id``), and the key such a face recorded
    on a session of its own (``recorded_key``), if it recorded one."""

    name: str
    prefix: str
    namespace: Callable[[str], str] | None = None
    """The id of a key's session, when the face has its own scheme (ADK's)."""
    legacy_id: Callable[[str], str | None] = _no_legacy
    recorded_key: Callable[[SessionInfo], str | None] = _no_record

    def session_id(self, key: str) -> str:
        if self.namespace is not None:
            return self.namespace(key)
        return namespaced(self.prefix, key)

    def owner(self, key: str) -> dict[str, str]:
        return {"name": self.name, "key": key}


def namespaced(prefix: str, key: str) -> str:
    """``<prefix>-<key>`` when that is a valid session id, else ``<prefix>_`` and a
    hash of the key: the two forms never meet, so a hashed id cannot be typed."""
    if not isinstance(key, str) or not key:
        raise UsageError(f"a framework session key must be non-empty text, got {key!r}")
    plain = f"{prefix}-{key}"
    try:
        return validate_session_id(plain)
    except UsageError:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{prefix}_{digest[:40]}"


def owner_of(info: SessionInfo) -> dict[str, Any] | None:
    """The face and key recorded on a session, or None (no face made it)."""
    owner = info.metadata.get(OWNER)
    return owner if isinstance(owner, dict) else None


def keyed(face: Face, infos: list[SessionInfo]) -> list[tuple[str, SessionInfo]]:
    """``(key, session)`` of the sessions among ``infos`` that ``face`` keeps for a key:
    those it owns, and those an older face made that record their key (adopted when
    opened); not its forks, copies or anyone else's."""
    found = []
    for info in infos:
        owner = owner_of(info)
        key = owner.get("key") if owner is not None else face.recorded_key(info)
        if not isinstance(key, str) or info.id not in (face.session_id(key), face.legacy_id(key)):
            continue
        if owner is None or owner == face.owner(key):
            found.append((key, info))
    return found


def find_owned(store: Store, face: Face, key: str) -> SessionInfo | None:
    """The session ``face`` keeps for ``key``, or None before it exists. A session at
    its id that another face or key owns is refused (``NotOwned``)."""
    sid = face.session_id(key)
    info = _info(store, sid)
    if info is not None:
        return _claimed(store, info, face, key)
    old = face.legacy_id(key)
    if old is None or old == sid:
        return None
    info = _info(store, old)
    if info is None:
        return None
    owner = owner_of(info)
    if owner == face.owner(key):
        return info
    if owner is None and face.recorded_key(info) == key:
        return _adopted(store, info, face, key)
    return None  # another's session: this key's own id is still free


def create_owned(store: Store, face: Face, key: str, **fields: Any) -> Session:
    """The session ``face`` keeps for ``key``, created (with ``fields``) if new."""
    found = find_owned(store, face, key)
    if found is not None:
        return Session(store, found)
    metadata = {**fields.pop("metadata", {}), OWNER: face.owner(key)}
    try:
        return store.create_session(id=face.session_id(key), metadata=metadata, **fields)
    except SessionExists:  # another writer made it meanwhile
        found = find_owned(store, face, key)
        if found is None:
            raise
        return Session(store, found)


def adopt(store: Store, face: Face, key: str, session_id: str) -> SessionInfo:
    """Record ``face`` and ``key`` as the owner of a session an older face made at
    ``session_id`` (its legacy id, e.g. a LangChain history's bare key), so the face
    opens it again; refused when another owner is recorded."""
    info = store.session_info(session_id)
    if session_id not in (face.session_id(key), face.legacy_id(key)):
        raise UsageError(
            f"{face.name} keeps key {key!r} at {face.session_id(key)}, not at {session_id}"
        )
    return _claimed(store, info, face, key)


def _claimed(store: Store, info: SessionInfo, face: Face, key: str) -> SessionInfo:
    owner = owner_of(info)
    if owner == face.owner(key):
        return info
    if owner is None:
        recorded = face.recorded_key(info)
        if recorded is None or recorded == key:
            return _adopted(store, info, face, key)
        raise NotOwned(info.id, face.name, key, f"an older {face.name} face's {recorded!r}")
    raise NotOwned(info.id, face.name, key, f"{owner.get('name')} {owner.get('key')!r}")


def _adopted(store: Store, info: SessionInfo, face: Face, key: str) -> SessionInfo:
    return store.update_session(info.id, metadata={OWNER: face.owner(key)})


def _info(store: Store, session_id: str) -> SessionInfo | None:
    try:
        return store.session_info(session_id)
    except SessionNotFound:
        return None


def bare_key(key: str) -> str | None:
    """Where an older LangChain, Pydantic AI or Agents SDK face kept a key's session:
    at the key itself (nothing on it says which face made it, so only ``adopt`` lets
    the face open it again)."""
    try:
        return validate_session_id(key)
    except UsageError:
        return None


class Binding:
    """A store and the session ``face`` keeps for one key, found or created on demand."""

    def __init__(
        self,
        face: Face,
        key: str,
        store: str | Store | None,
        *,
        model: str | None = None,
        agent: str = DEFAULT_AGENT,
    ) -> None:
        self.face, self.key = face, key
        self.session_id = face.session_id(key)
        self.model = model
        self.agent = agent
        self.store, self._owns_store = open_or_use(store)
        self._session: Session | None = None

    def find(self) -> Session | None:
        """The session, or None while it does not exist (reads never create it)."""
        if self._session is None:
            info = find_owned(self.store, self.face, self.key)
            if info is None:
                return None
            self._session = Session(self.store, info)
        return self._session

    def for_write(self) -> Session:
        """The session, created (with ``model``, ``agent``) if it is new."""
        session = self.find()
        if session is None:
            session = create_owned(
                self.store, self.face, self.key, agent=self.agent, model=self.model
            )
            self._session = session
        return session

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        if self._owns_store:
            self.store.close()


class Bound:
    """What a framework's history class shares: a ``Binding`` made from the usual
    arguments, the store, the threadline session, and ``close``."""

    face: Face

    def __init__(
        self,
        session_id: str,
        store: str | Store | None = None,
        *,
        model: str | None = None,
        agent: str = DEFAULT_AGENT,
    ) -> None:
        self._binding = Binding(self.face, session_id, store, model=model, agent=agent)
        self.session_id = session_id

    @property
    def store(self) -> Store:
        return self._binding.store

    def threadline_session(self) -> Session | None:
        """The threadline session behind this history, or None before the first write."""
        return self._binding.find()

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        self._binding.close()


def open_or_use(store: str | Store | None) -> tuple[Store, bool]:
    """``(store, owned)``: an open ``Store`` as it is (not owned), or the store a URL
    names (``None``: the default store) opened here (owned: its user closes it)."""
    if isinstance(store, Store):
        return store, False
    if store is None or isinstance(store, str):
        return open_store(store), True
    raise UsageError(f"store must be a store URL or a Store, got {type(store).__name__}")


def missing_extra(framework: str, extra: str, exc: ImportError) -> ImportError:
    """The error for an integration whose framework is not installed: it names the
    install command."""
    return ImportError(
        f"threadline's {framework} integration needs {exc.name or 'its framework'}: "
        f"pip install 'threadline[{extra}]'"
    )
