"""Compaction hooks: callables a Compactor calls around each compaction.

Three events, as in the agent server document: ``before_compaction`` (where a
memory flush saves what the summary might lose), ``context_compacted`` after a
checkpoint is written, and ``compaction_failed``. Hooks are registered per
``Compactor``, not globally, so two agents in one process do not see each
other's compactions.

A hook that raises is logged and recorded, never propagated: a broken
listener must not break a turn, and must not stop the other listeners.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from threadline.errors import UsageError

logger = logging.getLogger(__name__)

EventName = Literal["before_compaction", "context_compacted", "compaction_failed"]
EVENTS: tuple[EventName, ...] = ("before_compaction", "context_compacted", "compaction_failed")

Hook = Callable[..., Any]
"""``before_compaction(session, messages)``, ``context_compacted(session, checkpoint,
result)``, ``compaction_failed(session, error, result)``."""


@dataclass(frozen=True, slots=True)
class HookError:
    """A hook that raised: which event, which hook, and what it said."""

    event: EventName
    hook: str
    error: str


@dataclass
class CompactionHooks:
    """Listeners per event, called in registration order."""

    _hooks: dict[EventName, list[Hook]] = field(
        default_factory=lambda: {name: [] for name in EVENTS}
    )

    def on(self, event: EventName, hook: Hook) -> Hook:
        """Register ``hook`` for ``event``; returns it, so this works as a decorator body."""
        if event not in self._hooks:
            raise UsageError(f"unknown compaction event {event!r}; known: {', '.join(EVENTS)}")
        self._hooks[event].append(hook)
        return hook

    def off(self, event: EventName, hook: Hook) -> bool:
        """Unregister; False when it was not registered."""
        hooks = self._hooks.get(event, [])
        if hook in hooks:
            hooks.remove(hook)
            return True
        return False

    def listeners(self, event: EventName) -> list[Hook]:
        return list(self._hooks.get(event, []))

    def emit(self, event: EventName, *args: Any) -> list[HookError]:
        """Call every listener; return the errors of those that raised."""
        errors: list[HookError] = []
        for hook in self.listeners(event):
            try:
                hook(*args)
            except Exception as exc:  # a listener's bug must not break the turn
                name = getattr(hook, "__qualname__", None) or repr(hook)
                logger.warning("compaction hook %s for %s failed: %s", name, event, exc)
                errors.append(
                    HookError(event=event, hook=name, error=f"{type(exc).__name__}: {exc}")
                )
        return errors
