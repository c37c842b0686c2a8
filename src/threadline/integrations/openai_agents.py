"""An OpenAI Agents SDK session backed by any threadline store.

``ThreadlineSession(session_id, store=...)`` drops in where ``SQLiteSession``
goes (``Runner.run(agent, input, session=...)``). It stores the SDK's Responses
items as threadline messages (``interop/responses_format.py``: one message per
user or system item, one assistant message per run of output items, one tool
message per ``function_call_output``), so the items come back exactly, and the
rest of threadline (the context builder, compaction, search, the CLI) reads the
same session.

``get_items(limit)`` answers as ``SQLiteSession`` does: all items, or the latest
``limit`` in order. The first read of a session object reads what it needs (the whole
view, or only the tail for a ``limit``); once it has read the whole view it keeps it
(``store/followed.py``), and each later read costs the session's counters and what
was appended since, by this object or any other writer (a retraction elsewhere makes
it read the view again). Runner reads the whole session every turn: what a turn reads
from the store does not grow with the conversation. With a ``policy`` the session
is *budgeted*: ``get_items`` returns threadline's window instead (the checkpoint
summary first, then the recent items that fit), where a tool result never comes
without its call, and a ``limit`` takes whole stored messages, so one response's
reasoning item and the calls it produced are replayed together or not at all.
``pop_item`` and ``clear_session`` append retraction records
(``store/retraction.py``): the items leave every view and stay in the history.

The store is synchronous; each call runs in a worker thread, one at a time per
session object, as ``SQLiteSession`` does.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from threadline.context.builder import build_context
from threadline.context.policy import ContextPolicy
from threadline.errors import UsageError
from threadline.integrations.agents_input import fit_model_input, without_orphans
from threadline.integrations.binding import Binding, Face, bare_key
from threadline.interop.responses_format import items_to_messages, messages_to_items
from threadline.messages import Message
from threadline.store import Store
from threadline.store.checks import DEFAULT_AGENT
from threadline.store.followed import FollowedView
from threadline.store.protocol import Session

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.run_config import CallModelData, ModelInputData

    from threadline.compaction.compactor import Compactor

T = TypeVar("T")

FACE = Face("openai_agents", "oa", legacy_id=bare_key)
"""An SDK session ``KEY`` is threadline session ``oa-KEY`` (``integrations/binding.py``)."""
TAIL_PAGE = 64
"""Messages read per round when a cold ``get_items(limit)`` collects the latest items."""
Held = tuple[int, str]
"""A message's items as the session keeps them between reads: how many, and their JSON
(``"item, item"``), so each read hands out fresh objects with one ``json.loads``."""


class ThreadlineSession(SessionABC):
    """An Agents SDK ``Session`` over a threadline store (see the module docstring).

    ``store`` is a store URL (opened here, closed by ``close``) or an open ``Store``
    (left open); ``None`` means the default store. The threadline session
    (``oa-<session_id>``) is created on the first ``add_items``. ``policy`` turns on the
    budgeted mode; ``model`` names the model whose window and tokenizer it uses (and
    the model a new session is created with); ``compactor`` lets budgeted reads
    compact first, so nothing falls out of the window unsummarized.
    """

    def __init__(
        self,
        session_id: str,
        store: str | Store | None = None,
        *,
        policy: ContextPolicy | None = None,
        model: str | None = None,
        compactor: Compactor | None = None,
        agent: str = DEFAULT_AGENT,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if compactor is not None and policy is None:
            raise UsageError("a compactor works in the budgeted mode: give a policy too")
        self._binding = Binding(FACE, session_id, store, model=model, agent=agent)
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.policy = policy
        self.model = model
        self.compactor = compactor
        self._lock = threading.Lock()
        self._view: FollowedView[Held] = FollowedView(_held)

    @property
    def store(self) -> Store:
        return self._binding.store

    @property
    def budgeted(self) -> bool:
        return self.policy is not None

    # -- the SDK's Session
    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """All items in order, or the latest ``limit``; in the budgeted mode, the window."""
        wanted = resolve_session_limit(limit, self.session_settings)
        return await self._run(lambda: self._get_items(wanted))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        messages = items_to_messages(items)
        await self._run(lambda: self._view.appended(self._binding.for_write().append(messages)))

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the newest item and return it (append-only: the history keeps it)."""
        return await self._run(self._pop_item)

    async def clear_session(self) -> None:
        """Retract every item (append-only: the history keeps them, for audit)."""
        await self._run(self._clear)

    def close(self) -> None:
        """Close the store if this object opened it from a URL."""
        self._binding.close()

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig(call_model_input_filter=session.input_filter)``: the model input
        (instructions, tool schemas, the stored window and the current turn) kept
        within the policy's budget (``integrations/agents_input.py``)."""
        if self.policy is None:
            raise UsageError("the input filter keeps a budget: give the session a policy")
        return fit_model_input(data, policy=self.policy, model=self.model)

    # -- threadline's side
    def threadline_session(self) -> Session | None:
        """The threadline session behind this one, or None before the first item."""
        return self._binding.find()

    async def _run(self, fn: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn()

        return await asyncio.to_thread(locked)

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        session = self.threadline_session()
        if session is None or limit == 0:
            return []
        if self.budgeted:
            window = self._window(session)
            if limit is None or limit < 0:
                return _items(window)
            return without_orphans(_whole_messages(window, limit))
        if limit is None or limit < 0:  # SQLite's LIMIT with a negative number means "all"
            return _loaded(self._view.current(session))
        if not self._view.following:  # nothing held yet: read only the tail it needs
            return _tail_items(session, limit)
        return _latest_items(self._view.current(session), limit)

    def _window(self, session: Session) -> list[Message]:
        session.refresh()
        if self.compactor is not None:
            from threadline.compaction.compactor import prepare_context

            window = prepare_context(session, self.compactor, model=self.model, policy=self.policy)
        else:
            window = build_context(session, model=self.model, policy=self.policy)
        return window.messages

    def _pop_item(self) -> TResponseInputItem | None:
        session = self.threadline_session()
        if session is None:
            return None
        newest = session.tail(1)
        if not newest:
            return None
        message = newest[0]
        assert message.seq is not None
        items = _items([message])
        if not items:  # a message with nothing to show as an item: retract it, look again
            session.retract([message.seq])
            return self._pop_item()
        rest = items_to_messages(items[:-1]) if len(items) > 1 else []
        session.retract([message.seq], then=[_like(m, message) for m in rest])
        return items[-1]

    def _clear(self) -> None:
        session = self.threadline_session()
        if session is not None:
            session.retract_all()


def _items(messages: list[Message]) -> list[TResponseInputItem]:
    return messages_to_items(messages)  # type: ignore[return-value]


def _held(message: Message) -> Held:
    items = _items([message])
    return len(items), json.dumps(items, ensure_ascii=False)[1:-1]


def _loaded(held: list[tuple[int, Held]]) -> list[TResponseInputItem]:
    """The held items as fresh objects (the caller may change them)."""
    texts = [text for _, (count, text) in held if count]
    return json.loads("[" + ",".join(texts) + "]")  # type: ignore[no-any-return]


def _latest_items(held: list[tuple[int, Held]], limit: int) -> list[TResponseInputItem]:
    """The latest ``limit`` items in order: only the messages that hold them are loaded."""
    count, first = 0, len(held)
    while first > 0 and count < limit:
        first -= 1
        count += held[first][1][0]
    return _loaded(held[first:])[-limit:]


def _tail_items(session: Session, limit: int) -> list[TResponseInputItem]:
    """The latest ``limit`` items in order, reading only as much of the tail as they
    need: a message holds one item or more, so the first read is ``limit`` messages."""
    collected: list[list[TResponseInputItem]] = []
    count = 0
    before: int | None = None
    page = min(limit, TAIL_PAGE)
    while count < limit:
        batch = session.tail(page, before_seq=before)
        for message in batch:
            items = _items([message])
            collected.append(items)
            count += len(items)
            if count >= limit:
                break
        if len(batch) < page or batch[-1].seq is None:
            break
        before = batch[-1].seq
        page = min(page * 2, 4096)
    return [item for items in reversed(collected) for item in items][-limit:]


def _whole_messages(window: list[Message], limit: int) -> list[TResponseInputItem]:
    """The items of the latest messages of ``window`` that fit in ``limit`` items, whole
    messages only: one message holds one response's output items (a reasoning item
    and the calls or text it produced), which are replayed together or not at all
    (openai-agents #2020), so a limit never cuts between them."""
    kept: list[list[TResponseInputItem]] = []
    count = 0
    for message in reversed(window):
        items = _items([message])
        if count + len(items) > limit:
            break
        kept.append(items)
        count += len(items)
    return [item for items in reversed(kept) for item in items]


def _like(made: Message, original: Message) -> Message:
    """A message re-made from some of ``original``'s items, keeping what it said about
    itself (model, usage, time)."""
    return made.model_copy(
        update={"model": original.model, "usage": original.usage, "created_at": original.created_at}
    )
