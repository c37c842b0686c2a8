"""The recorder: flags exchanges as they are appended, extracts every ``threshold`` flags.

Flagging is cheap (``is_signal``: one regex per message); extraction runs on the
flagged messages and the reply after each, once ``threshold`` are pending (or
when ``flush`` is called, as the compactor does before it summarizes). Pending
state lives in the memory's own records, per session, so a flush after a restart
still finds what was flagged before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadline.errors import UsageError
from threadline.memory.base import Extractor, Fact, MemoryStore, check_scope
from threadline.memory.extract import ExtractiveExtractor, is_signal
from threadline.messages import Message
from threadline.store.protocol import Session

__all__ = ["MemoryRecorder", "is_signal", "read_watermark", "save_watermark"]


def read_watermark(memory: MemoryStore, session_id: str) -> tuple[list[int], int]:
    """A session's durable extraction state: the flagged seqs still pending, and the seq
    extraction has covered up to (the recorder and ``build_memory`` share it)."""
    state = memory.pending(session_id)
    done = int(state.get("extracted_to", 0))
    return sorted(int(s) for s in state.get("flagged", []) if int(s) > done), done


def save_watermark(memory: MemoryStore, session_id: str, flagged: Sequence[int], done: int) -> None:
    state: dict[str, Any] = {
        "flagged": sorted(s for s in set(flagged) if s > done),
        "extracted_to": done,
    }
    memory.set_pending(session_id, state)


class MemoryRecorder:
    """Signal-flags exchanges as they are appended; extracts every ``threshold`` flagged ones."""

    def __init__(
        self,
        memory: MemoryStore,
        *,
        scope: str,
        extractor: Extractor | None = None,
        threshold: int = 5,
        auto_extract: bool = True,
    ) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise UsageError(f"extraction threshold must be a positive integer, got {threshold!r}")
        self.memory = memory
        self.scope = check_scope(scope)
        self.extractor: Extractor = extractor or ExtractiveExtractor()
        self.threshold = threshold
        self.auto_extract = auto_extract

    def _state(self, session: Session) -> tuple[list[int], int]:
        return read_watermark(self.memory, session.id)

    def _save(self, session: Session, flagged: Sequence[int], done: int) -> None:
        save_watermark(self.memory, session.id, flagged, done)

    def observe(self, session: Session, messages: Sequence[Message]) -> int:
        """Flag the signal messages among ``messages`` (already appended, so with seqs).

        Returns how many flagged messages are pending after this call (0 right after
        an automatic extraction)."""
        flagged, done = self._state(session)
        new = [m.seq for m in messages if m.seq is not None and m.seq > done and is_signal(m)]
        if not new:
            return len(flagged)
        flagged = sorted(set(flagged) | set(new))
        self._save(session, flagged, done)
        if self.auto_extract and len(flagged) >= self.threshold:
            self.flush(session)
            return self.pending(session)
        return len(flagged)

    def pending(self, session: Session) -> int:
        """Flagged messages not yet extracted."""
        return len(self._state(session)[0])

    def flush(self, session: Session, *, up_to_seq: int | None = None) -> int:
        """Extract the pending flagged messages (those at or before ``up_to_seq``) now.

        Returns how many facts were written."""
        flagged, done = self._state(session)
        take = [s for s in flagged if up_to_seq is None or s <= up_to_seq]
        if not take:
            return 0
        wanted = set(take) | {s + 1 for s in take}
        last = max(wanted)
        messages: list[Message] = []
        for m in session.iter_messages(after_seq=min(take) - 1):
            if m.seq is not None and m.seq > last:
                break
            if m.seq in wanted:
                messages.append(m)
        resumed = done > 0 and any(m.role == "user" and not m.name for m in messages)
        known = session_facts(self.memory, self.scope, session.id) if resumed else []
        extraction = self.extractor.extract(
            messages, scope=self.scope, session_id=session.id, known=known
        )
        written = self.memory.store_extraction(self.scope, extraction)
        rest = [s for s in flagged if s not in take]
        self._save(session, rest, max(done, *take))
        return written


def session_facts(memory: MemoryStore, scope: str, session_id: str) -> list[Fact]:
    """The current facts ``scope`` holds from ``session_id``'s turns, oldest turn first."""
    found = [f for f in memory.list_facts(scope) if f.session_id == session_id]
    return sorted(found, key=lambda f: f.seq or 0)
