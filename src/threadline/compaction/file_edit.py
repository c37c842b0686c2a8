"""One file's record in the artifact trail: what a session did to it, and when.

Its own module so that the trail (``toolcalls``) and the rule that takes back a change
whose call did not happen (``applied``) share it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class FileEdit:
    """What a session did to one file: its actions with counts, and when."""

    path: str
    """As shown: relative to the working directory when the file is under it."""
    actions: dict[str, int] = field(default_factory=dict)
    first: int = 0
    """Index of the first message that changed it..."""
    last: int = 0
    """...and of the last one."""
    other: str | None = None
    """Where it was moved to, or copied from."""
    symbols: list[str] = field(default_factory=list)
    note: str | None = None
    """Why, in the agent's words (set by a summarizer)."""
    failed: str | None = None
    """The error of the last attempt, while no later attempt succeeded."""
    mentioned_only: bool = False
    """Known only from the assistant saying it changed the file."""
    last_action: str = ""
    """What happened to it last: ``deleted`` means it is gone (unless created again)."""

    @property
    def count(self) -> int:
        return sum(self.actions.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"actions": dict(self.actions), "first": self.first}
        out.update(last=self.last, last_action=self.last_action)
        for name in ("other", "note", "failed"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.symbols:
            out["symbols"] = list(self.symbols)
        return out

    @classmethod
    def from_json(cls, path: str, data: Mapping[str, Any]) -> FileEdit:
        """The record ``to_json`` wrote; a malformed field raises ``ValueError``."""
        actions = data.get("actions")
        if not isinstance(actions, dict) or not all(
            isinstance(k, str) and isinstance(v, int) for k, v in actions.items()
        ):
            raise ValueError(f"bad actions for {path!r}")
        first, last = data.get("first"), data.get("last")
        if not isinstance(first, int) or not isinstance(last, int):
            raise ValueError(f"bad positions for {path!r}")
        symbols = data.get("symbols") or []
        texts = {k: data.get(k) for k in ("other", "note", "failed", "last_action")}
        if not isinstance(symbols, list) or not all(
            v is None or isinstance(v, str) for v in texts.values()
        ):
            raise ValueError(f"bad text fields for {path!r}")
        return cls(
            path,
            dict(actions),
            first,
            last,
            texts["other"],
            [str(x) for x in symbols],
            texts["note"],
            texts["failed"],
            False,
            texts["last_action"] or "",
        )

    def describe(self) -> str:
        """``edited ×3, created``: the actions, most frequent first; a move or copy last, so
        the bullet can go on "to `where`". A file whose last action deleted it says so
        first: ``deleted (after edited ×2)``; one made again after a deletion says that last:
        ``created (deleted before)``."""
        rest = {a: n for a, n in self.actions.items() if a != "deleted"}
        if self.last_action == "deleted":
            earlier = FileEdit(self.path, rest).describe() if rest else ""
            return f"deleted (after {earlier})" if earlier else "deleted"
        if rest and len(rest) < len(self.actions) and self.last_action:
            return f"{FileEdit(self.path, rest).describe()} (deleted before)"  # made again
        order = sorted(self.actions.items(), key=lambda kv: (kv[0] in ("moved", "copied"), -kv[1]))
        return ", ".join(f"{a} \u00d7{n}" if n > 1 else a for a, n in order)

    def absorb(self, other: FileEdit) -> None:
        """Fold another record of the same file into this one."""
        for action, n in other.actions.items():
            self.actions[action] = self.actions.get(action, 0) + n
        newer = other.last >= self.last
        self.first, self.last = min(self.first, other.first), max(self.last, other.last)
        self.symbols = list(dict.fromkeys([*self.symbols, *other.symbols]))
        if newer:
            self.last_action = other.last_action or self.last_action
            self.other = other.other or self.other
            self.note = other.note or self.note
            self.failed = other.failed
        self.mentioned_only = self.mentioned_only and other.mentioned_only


__all__ = ["FileEdit"]
