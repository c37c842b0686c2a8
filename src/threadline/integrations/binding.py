"""One framework session bound to one threadline session: what every adapter shares.

The framework names the session (the Agents SDK's ``session_id``, LangChain's
history key); threadline stores it under that exact id (never a prefix match),
creates it on the first write, and opens the store from a URL or uses an open
one.
"""

from __future__ import annotations

from threadline.errors import SessionExists, SessionNotFound, UsageError
from threadline.store import Store, open_store
from threadline.store.checks import DEFAULT_AGENT, validate_session_id
from threadline.store.protocol import Session


class Binding:
    """A store and the id of one session in it, found or created on demand."""

    def __init__(
        self,
        session_id: str,
        store: str | Store | None,
        *,
        model: str | None = None,
        agent: str = DEFAULT_AGENT,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self.model = model
        self.agent = agent
        self.store, self._owns_store = open_or_use(store)
        self._session: Session | None = None

    def find(self) -> Session | None:
        """The session, or None while it does not exist (reads never create it)."""
        if self._session is None:
            try:
                info = self.store.session_info(self.session_id)
            except SessionNotFound:
                return None
            self._session = Session(self.store, info)
        return self._session

    def for_write(self) -> Session:
        """The session, created with this id (and ``model``, ``agent``) if it is new."""
        session = self.find()
        if session is not None:
            return session
        try:
            self._session = self.store.create_session(
                id=self.session_id, agent=self.agent, model=self.model
            )
        except SessionExists:  # another process created it meanwhile
            self._session = Session(self.store, self.store.session_info(self.session_id))
        return self._session

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        if self._owns_store:
            self.store.close()


class Bound:
    """What a framework's history class shares: a ``Binding`` made from the usual
    arguments, the store, the threadline session, and ``close``."""

    def __init__(
        self,
        session_id: str,
        store: str | Store | None = None,
        *,
        model: str | None = None,
        agent: str = DEFAULT_AGENT,
    ) -> None:
        self._binding = Binding(session_id, store, model=model, agent=agent)
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
