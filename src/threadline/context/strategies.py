"""Pluggable context strategies: an analyzer names a strategy, an executor applies it.

This follows the session object of the reference documents, which keeps three
states: the *full context* (every message, for audit and recovery), the
*context window* (what reaches the model) and the *memo* (long-lived
structured facts). An analyzer ``(full_context, context_window, memo,
settings) -> name | None`` looks at them and names a strategy; the executor
registered under that name returns ``(new_full_context | None,
new_context_window | None, new_memo | None)``, None meaning "unchanged".

threadline keeps its invariants around the executor's answer:

- History is append-only (invariant 1), so a new full context may only
  *append*: it must start with every existing message, same ids, unchanged.
  Anything else raises ``UsageError``. Appended messages are stored.
- A new context window is a view: it replaces the window for this call only.
- The memo is the store's per-session JSON document. Keys starting with
  ``threadline.`` are reserved (the compaction mark lives there) and are kept
  from the store whatever the executor returns.

Cost. ``full_context`` is a lazy sequence over the store: ``len()`` is free,
an index or a slice reads only those messages (in cached pages), and only
iterating the whole of it reads the whole history. Checking an executor's new
full context is free when it is built as ``full_context + [new messages]``
(or ``full_context.with_appended([...])``): the lazy sequence knows its
prefix. A plain list is compared message by message against the stored
history, which reads all of it; executors should append the lazy way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from threadline.context.builder import ContextWindow
from threadline.errors import UsageError
from threadline.messages import Message, flatten, group_units
from threadline.store.protocol import RESERVED_MEMO_PREFIX, Session
from threadline.tokens import counter_for

"""Memo keys threadline owns; executors cannot change or remove them."""
PAGE_SIZE = 256
"""Messages the lazy full context reads per store call."""
SIMPLE_CUT = "simple_cut"
MAX_LENGTH_SETTING = "max_length"
"""Setting read by the default analyzer: the window's maximum length in characters."""

Memo = dict[str, Any]
Settings = Mapping[str, Any]
Analyzer = Callable[["FullContext", list[Message], Memo, Settings], str | None]
ExecutorResult = tuple[Sequence[Message] | None, Sequence[Message] | None, Memo | None]
Executor = Callable[["FullContext", list[Message], Memo, Settings], ExecutorResult]


class _Indexed(Sequence[Message]):
    """Indexing and slicing written once over ``_at``, which gets positions in range."""

    _WHAT = ""

    def _at(self, index: int) -> Message:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        length = len(self)
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(length))]
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError(f"{self._WHAT} index out of range")
        return self._at(index)


class FullContext(_Indexed):
    """A session's stored history as a read-only, lazily read sequence.

    Its length is fixed when it is made (the session's ``last_seq``), so
    messages appended meanwhile do not shift it. Messages are positions
    ``0 .. len-1`` for seqs ``1 .. len``: the store assigns seqs consecutively
    and never deletes single messages.
    """

    _WHAT = "full context"

    def __init__(self, session: Session, *, length: int | None = None) -> None:
        self.session = session
        self._length = session.last_seq if length is None else length
        self._pages: dict[int, list[Message]] = {}
        self.messages_read = 0
        """How many messages this view has read from the store (the cost, for tests)."""

    def __len__(self) -> int:
        return self._length

    def _page(self, number: int) -> list[Message]:
        page = self._pages.get(number)
        if page is None:
            start = number * PAGE_SIZE
            limit = min(PAGE_SIZE, self._length - start)
            page = self.session.read_messages(after_seq=start, limit=limit, include_retracted=True)
            self.messages_read += len(page)
            self._pages[number] = page
        return page

    def _at(self, index: int) -> Message:
        page = self._page(index // PAGE_SIZE)
        offset = index % PAGE_SIZE
        if offset >= len(page):
            raise IndexError(f"message {index + 1} of session {self.session.id} is not stored")
        return page[offset]

    def __iter__(self) -> Iterator[Message]:
        for number in range((self._length + PAGE_SIZE - 1) // PAGE_SIZE):
            yield from self._page(number)

    def with_appended(self, messages: Sequence[Message]) -> AppendedContext:
        """This history plus ``messages``: the cheap way for an executor to append."""
        return AppendedContext(self, list(messages))

    def __add__(self, other: Sequence[Message]) -> AppendedContext:
        """``full_context + [new messages]``, the same as ``with_appended``."""
        return self.with_appended(other)

    def __repr__(self) -> str:
        return f"FullContext(session={self.session.id!r}, messages={self._length})"


class AppendedContext(_Indexed):
    """A full context plus messages to append; checking it costs only the new part."""

    _WHAT = "context"

    def __init__(self, base: FullContext, extra: list[Message]) -> None:
        self.base = base
        self.extra = extra

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def _at(self, index: int) -> Message:
        n = len(self.base)
        return self.base[index] if index < n else self.extra[index - n]

    def __iter__(self) -> Iterator[Message]:
        yield from self.base
        yield from self.extra

    def __add__(self, other: Sequence[Message]) -> AppendedContext:
        return AppendedContext(self.base, [*self.extra, *other])


@dataclass
class StrategyRun:
    """What one run of the strategies did."""

    strategy: str | None
    """The strategy the analyzers chose; None when none applied."""
    messages: list[Message]
    """The context window to send now (the input window when nothing changed it)."""
    window: ContextWindow | None = None
    """The input ``ContextWindow`` with ``messages`` in place, when one was given."""
    appended: list[Message] = field(default_factory=list)
    """Messages the executor appended to the history, as stored."""
    memo: Memo | None = None
    """The memo as stored after the run, when the executor changed it."""

    @property
    def window_changed(self) -> bool:
        return self.strategy is not None and self.window is not None


def text_length(messages: Sequence[Message]) -> int:
    """Characters of text and tool-call arguments: the unit of ``max_length``."""
    return sum(len(m.search_text()) for m in messages)


def simple_cut_analyzer(
    full_context: FullContext, window: list[Message], memo: Memo, settings: Settings
) -> str | None:
    """Name ``simple_cut`` when the window is longer than ``settings["max_length"]``."""
    limit = settings.get(MAX_LENGTH_SETTING)
    if limit is None:
        return None
    return SIMPLE_CUT if text_length(window) > int(limit) else None


def simple_cut(
    full_context: FullContext, window: list[Message], memo: Memo, settings: Settings
) -> ExecutorResult:
    """Keep the leading system/summary messages and the newest whole units that fit.

    The newest unit is always kept, even alone over the limit: a window
    without the latest message is useless, and the budget proper is the
    builder's business.
    """
    limit = int(settings.get(MAX_LENGTH_SETTING) or 0)
    head_end = 0
    while head_end < len(window) and (
        window[head_end].role == "system" or window[head_end].summary
    ):
        head_end += 1
    head, rest = window[:head_end], window[head_end:]
    units, _ = group_units(rest)
    room = limit - text_length(head)
    kept = 0
    used = 0
    for unit in reversed(units):
        size = text_length(unit.messages)
        if kept and used + size > room:
            break
        kept += 1
        used += size
    return None, [*head, *flatten(units[len(units) - kept :])], None


class StrategyRegistry:
    """Analyzers (tried in order) and named executors, applied by ``run``."""

    def __init__(self, *, defaults: bool = True) -> None:
        self._analyzers: list[Analyzer] = []
        self._executors: dict[str, Executor] = {}
        if defaults:
            self.register_analyzer(simple_cut_analyzer)
            self.register_executor(SIMPLE_CUT, simple_cut)

    def register_analyzer(self, fn: Analyzer) -> Analyzer:
        """Add an analyzer; it runs after those registered before it."""
        self._analyzers.append(fn)
        return fn

    def register_executor(self, name: str, fn: Executor) -> Executor:
        """Register (or replace) the executor for strategy ``name``."""
        if not isinstance(name, str) or not name:
            raise UsageError("a strategy name must be a non-empty string")
        self._executors[name] = fn
        return fn

    @property
    def analyzers(self) -> list[Analyzer]:
        return list(self._analyzers)

    @property
    def executors(self) -> dict[str, Executor]:
        return dict(self._executors)

    def choose(
        self, full: FullContext, window: list[Message], memo: Memo, settings: Settings
    ) -> str | None:
        """The first strategy name an analyzer returns, or None."""
        for analyzer in self._analyzers:
            name = analyzer(full, list(window), dict(memo), settings)
            if name is not None:
                if name not in self._executors:
                    raise UsageError(
                        f"analyzer {getattr(analyzer, '__name__', analyzer)!r} chose strategy "
                        f"{name!r}, but no executor is registered under that name "
                        f"(known: {', '.join(sorted(self._executors)) or 'none'})"
                    )
                return name
        return None

    def run(
        self,
        session: Session,
        window: ContextWindow | Sequence[Message],
        settings: Settings | None = None,
    ) -> StrategyRun:
        """Analyze, execute the chosen strategy, and apply its answer.

        Appends what the executor appended to the full context (after checking
        that it only appended), stores its memo, and returns the window to send.
        """
        settings = settings or {}
        messages = list(window.messages if isinstance(window, ContextWindow) else window)
        full = FullContext(session)
        memo = session.get_memo()
        name = self.choose(full, messages, memo, settings)
        given_window = window if isinstance(window, ContextWindow) else None
        if name is None:
            return StrategyRun(strategy=None, messages=messages, window=given_window)
        new_full, new_window, new_memo = self._executors[name](
            full, list(messages), dict(memo), settings
        )
        appended: list[Message] = []
        if new_full is not None:
            extra = appended_messages(full, new_full, strategy=name)
            if extra:
                appended = session.append(extra)
        stored_memo: Memo | None = None
        if new_memo is not None:
            stored_memo = _store_memo(session, new_memo, strategy=name)
        out = list(new_window) if new_window is not None else messages
        return StrategyRun(
            strategy=name,
            messages=out,
            window=_replace_window(given_window, out, name) if given_window else None,
            appended=appended,
            memo=stored_memo,
        )


def appended_messages(
    full: FullContext, new_full: Sequence[Message], *, strategy: str = "executor"
) -> list[Message]:
    """The messages ``new_full`` adds after ``full``; ``UsageError`` if it changes history."""
    if new_full is full:
        return []
    if isinstance(new_full, AppendedContext) and new_full.base is full:
        extra = list(new_full.extra)
    else:
        if len(new_full) < len(full):
            raise UsageError(
                f"strategy {strategy!r} returned a full context of {len(new_full)} messages "
                f"for a history of {len(full)}: history is append-only, an executor may add "
                "messages but never remove them (return a new context window instead)"
            )
        for i, stored in enumerate(full):
            given = new_full[i]
            if given is stored:
                continue
            if given.id != stored.id or given.model_dump() != stored.model_dump():
                raise UsageError(
                    f"strategy {strategy!r} changed stored message {i + 1} (id {stored.id}): "
                    "history is append-only; return a new context window to change the view"
                )
        extra = list(new_full[len(full) :])
    for m in extra:
        if not isinstance(m, Message):
            raise UsageError(f"strategy {strategy!r} appended a {type(m).__name__}, not a Message")
        if m.seq is not None:
            raise UsageError(
                f"strategy {strategy!r} appended message {m.id}, which is already stored "
                f"(seq {m.seq}); append new messages only"
            )
    return extra


def _store_memo(session: Session, memo: Memo, *, strategy: str) -> Memo:
    if not isinstance(memo, dict):
        raise UsageError(f"strategy {strategy!r} returned a memo that is not a dict")
    current = session.get_memo()
    merged = {k: v for k, v in memo.items() if not k.startswith(RESERVED_MEMO_PREFIX)}
    merged.update({k: v for k, v in current.items() if k.startswith(RESERVED_MEMO_PREFIX)})
    session.set_memo(merged)
    return merged


def _replace_window(window: ContextWindow, messages: list[Message], name: str) -> ContextWindow:
    """The window with ``messages`` in place, its token total recounted."""
    counter = counter_for(window.model)
    tokens = counter.count_messages(messages)
    if window.tools:
        tokens += counter.count_tools(window.tools)
    report = window.report.model_copy(
        update={"notes": [*window.report.notes, f"strategy {name!r} replaced the window"]}
    )
    return dataclasses.replace(window, messages=messages, tokens=tokens, report=report)


def default_registry() -> StrategyRegistry:
    """A registry with the reference ``simple_cut`` strategy (reads ``max_length``)."""
    return StrategyRegistry(defaults=True)
