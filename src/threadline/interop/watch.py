"""Following agent session folders: what ``threadline sessions sync --watch`` does.

A ``Follower`` keeps one ``Syncer`` over a store and brings each source whose file
changed up to date: a new transcript becomes a session, a grown one gets its new
messages, an unchanged one costs a hash (the ``Syncer``'s own rules, so following is
as idempotent as importing). Changes come from ``watchfiles`` in debounced batches.

A JSON Lines file whose last line has no newline yet is being written: it waits
until the line is finished (the next change), or until it has been still for
``settle`` seconds, when it is imported as it stands (the reader keeps what is whole
of a torn last line, and the rest arrives with the file's next change). Likewise a
conversation's last reply (its last assistant message and what follows) is held
(``hold_reply``): an agent may still add text or tool calls to it (Claude Code writes
a reply's blocks as lines of their own, results between them), and a stored message
is not grown. It is stored when the next reply begins, or when the file has been
still for ``settle`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from threadline.interop.sync import (
    Source,
    Syncer,
    SyncResult,
    SyncStatus,
    is_candidate,
    source_of,
    sources_under,
)

if TYPE_CHECKING:
    from threading import Event

AGENT_FOLDERS: tuple[tuple[str, str], ...] = (
    ("Claude Code", "~/.claude/projects"),
    ("Codex", "~/.codex/sessions"),
    ("Gemini CLI", "~/.gemini/tmp"),
    ("OpenHands", "~/.openhands/conversations"),
    ("Pi", "~/.pi/agent/sessions"),
    ("Oh My Pi", "~/.omp/agent/sessions"),
    ("agsh", "~/.local/share/agsh"),
)
"""Where the agents whose formats threadline reads keep their sessions."""
SETTLE_SECONDS = 5.0
DEBOUNCE_MS = 800
TICK_MS = 1000
"""How often the watch wakes without a change, to import files that have settled."""


def agent_folders() -> list[tuple[str, Path]]:
    """The ``AGENT_FOLDERS`` that exist on this machine (for the current ``$HOME``)."""
    found = [(agent, Path(folder).expanduser()) for agent, folder in AGENT_FOLDERS]
    return [(agent, path) for agent, path in found if path.is_dir()]


def unfinished(path: Path) -> bool:
    """A JSON Lines file whose last line is still being written (no newline after it)."""
    if path.suffix != ".jsonl":
        return False
    try:
        with path.open("rb") as handle:
            if handle.seek(0, 2) == 0:
                return False
            handle.seek(-1, 2)
            return handle.read(1) != b"\n"
    except OSError:
        return False


@dataclass(slots=True)
class Change:
    """What one source became: its results, or ``waiting`` for its last line."""

    source: Source
    results: list[SyncResult] = field(default_factory=list)
    waiting: bool = False

    @property
    def changed(self) -> bool:
        """Worth a status line: a session new or grown, a failure, or a file now waiting."""
        quiet = (SyncStatus.UNCHANGED, SyncStatus.SKIPPED)
        return self.waiting or any(r.status not in quiet for r in self.results)


class Follower:
    """Keeps ``folders`` in step with ``syncer``'s store (see the module docstring)."""

    def __init__(
        self,
        syncer: Syncer,
        folders: Sequence[Path],
        *,
        settle: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.syncer, self.folders, self.settle, self.clock = syncer, list(folders), settle, clock
        self._waiting: dict[Path, float] = {}
        """Unfinished files and held replies, by when their file last changed."""
        self._torn: set[Path] = set()
        """Files whose unfinished last line has been reported."""

    def catch_up(self, *, hold: bool = True) -> list[Change]:
        """Every source under the folders, synced now (what changed while not watching);
        without ``hold``, last lines and replies are imported as they stand (a one-off
        sync that will not come back for them)."""
        return [self._sync(s, wait=hold) for folder in self.folders for s in sources_under(folder)]

    def changed(self, paths: Iterable[Path]) -> list[Change]:
        """The sources of the files that changed, each once; an unfinished file waits."""
        sources: dict[Path, Source] = {}
        for path in paths:
            if not is_candidate(path.name) or path.is_symlink() or not path.is_file():
                continue
            source = source_of(path, found=True)
            if source.path is not None:
                sources.setdefault(source.path, source)
        return [self._sync(source) for source in sources.values()]

    def due(self) -> list[Change]:
        """Waiting files that have been still for ``settle`` seconds, synced as they are."""
        now = self.clock()
        settled = [p for p, since in self._waiting.items() if now - since >= self.settle]
        for path in settled:
            del self._waiting[path]
        return [self._sync(Source(path, found=True), wait=False) for path in settled]

    def _sync(self, source: Source, *, wait: bool = True) -> Change:
        path = source.path
        if path is not None and wait and unfinished(path):
            said = path in self._torn
            self._torn.add(path)
            self._waiting[path] = self.clock()
            return Change(source, waiting=not said)
        results = self.syncer.sync_source(source, hold_reply=wait)
        if path is not None:
            self._torn.discard(path)
            if any(r.held for r in results):
                self._waiting[path] = self.clock()
            else:
                self._waiting.pop(path, None)
        return Change(source, results)

    def follow(
        self,
        report: Callable[[Change], None],
        *,
        caught_up: Callable[[list[Change]], None] | None = None,
        stop: Event | None = None,
        debounce_ms: int = DEBOUNCE_MS,
    ) -> None:
        """Watch the folders until ``stop`` is set (or Ctrl-C, which propagates), telling
        ``report`` of each change worth a line. Once the watch is in place it catches up
        (``caught_up`` is given what that did), so nothing written meanwhile is missed."""
        import watchfiles

        behind = True

        def wanted(change: watchfiles.Change, path: str) -> bool:
            return change != watchfiles.Change.deleted and is_candidate(Path(path).name)

        for batch in watchfiles.watch(
            *self.folders,
            watch_filter=wanted,
            debounce=debounce_ms,
            stop_event=stop,
            rust_timeout=TICK_MS,
            yield_on_timeout=True,
        ):
            if behind:  # the watch is in place once it yields (a change, or a first tick)
                behind = False
                done = self.catch_up()
                if caught_up is not None:
                    caught_up(done)
            for change in [*self.changed(Path(p) for _, p in batch), *self.due()]:
                if change.changed:
                    report(change)
