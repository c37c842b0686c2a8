"""Claude Code's queued prompts: what a user typed while the agent was busy.

Schema read (Claude Code session JSONL, ``type: "queue-operation"``): ``operation``
is ``enqueue`` (``content``: the text typed, absent for a queued attachment),
``dequeue`` (the oldest prompt was sent as the next turn, a ``user`` record of its
own), ``remove`` (a prompt the
user typed was taken out of the queue, to go to the model in the middle of a turn or
as a turn: the oldest one, never a ``<task-notification>`` Claude Code queued itself,
which it delivers as a turn of its own) or ``popAll``.

A prompt sent as a turn of its own is also the ``user`` record that follows, and is
imported there. One taken mid-turn reaches the model with its next request but is
written nowhere else (the model answers it: "The user says ..."): it becomes a user
message (``metadata["queued"]``) placed before the next response, unless a ``user``
record repeating it comes first (never both). A queued slash command (``/mcp``) is
run by Claude Code, not sent: counted as ``queue-operation:command``. The choice is
made by what follows, not by the whole file, so a transcript read while it grows
gives the same messages: a
prompt taken but not yet followed by a response when the file ends waits (counted as
``queue-operation:waiting_for_a_response``). A prompt still queued when the file ends
was never sent: counted as ``queue-operation:undelivered``. Each operation record is
counted as ``queue-operation``.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from threadline.messages import Message


class Queue:
    def __init__(self, skipped: Counter[str]) -> None:
        self.waiting: deque[Any] = deque()
        self.skipped = skipped

    def take(self, rec: Mapping[str, Any]) -> list[Message]:
        """The prompts a queue operation took out, as messages to hold (see the module
        docstring)."""
        op = rec.get("operation")
        self.skipped["queue-operation"] += 1  # the record itself is not a message
        if op == "enqueue":
            self.waiting.append(rec.get("content"))
            return []
        if op == "dequeue":  # sent as the next turn: its own ``user`` record follows
            if self.waiting:
                self.waiting.popleft()
            return []
        if op == "remove":
            typed = [i for i, t in enumerate(self.waiting) if not _notification(t)]
            at = typed[0] if typed else 0
            taken = [self.waiting[at]] if self.waiting else []
            if self.waiting:
                del self.waiting[at]
        elif op == "popAll":
            taken, self.waiting = list(self.waiting), deque()
        else:
            self.skipped[f"queue-operation:{op}"] += 1
            return []
        commands = [t for t in taken if isinstance(t, str) and _COMMAND.match(t)]
        if commands:  # run by Claude Code itself (its record follows), never sent
            self.skipped["queue-operation:command"] += len(commands)
        return [
            Message.user(text, metadata={"queued": op})
            for text in taken
            if isinstance(text, str) and text.strip() and text not in commands
        ]

    def delivered(self, made: list[Message]) -> None:
        """Prompts still queued that a ``user`` record just delivered as a turn."""
        said = "\n".join(m.text for m in made if m.role == "user")
        kept = [t for t in self.waiting if not (isinstance(t, str) and t.strip() in said)]
        self.waiting = deque(kept)

    def finish(self, held: list[Message]) -> None:
        if held:
            self.skipped["queue-operation:waiting_for_a_response"] += len(held)
        left = sum(1 for text in self.waiting if isinstance(text, str) and text.strip())
        if left:
            self.skipped["queue-operation:undelivered"] += left


_COMMAND = re.compile(r"^\s*/[A-Za-z][\w:-]*(?:\s|$)")
"""A slash command (``/mcp``, ``/compact``): Claude Code runs it, the model never sees it."""


def _notification(text: Any) -> bool:
    return isinstance(text, str) and text.lstrip().startswith("<task-notification>")


def not_repeated(held: list[Message], made: list[Message]) -> list[Message]:
    """The held prompts that the user messages just read do not repeat."""
    said = "\n".join(m.text for m in made if m.role == "user")
    return [m for m in held if m.text.strip() not in said]
