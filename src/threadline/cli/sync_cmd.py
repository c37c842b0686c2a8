"""``threadline sessions sync [DIR...] [--watch]``: agent session folders kept imported.

Its own module (``SUBCOMMANDS``) so that no other command loads the importers or the
file watcher. The rules of importing are ``interop/sync.py``'s, of following
``interop/watch.py``'s; this module picks the folders and prints one line per change.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from threadline.cli import sessions
from threadline.cli.errors import exit_code_for
from threadline.cli.render import echo, plural
from threadline.cli.state import store_of
from threadline.errors import UsageError
from threadline.interop.sync import Syncer, SyncReport, SyncStatus
from threadline.interop.watch import (
    AGENT_FOLDERS,
    SETTLE_SECONDS,
    Change,
    Follower,
    agent_folders,
)


def sync(
    ctx: typer.Context,
    folders: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[DIR...]",
            help="Folders to sync (searched recursively). Default: the session folders of "
            "the agents threadline reads that exist here (Claude Code, Codex, ...).",
            show_default=False,
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option("--watch", "-w", help="Keep following the folders until Ctrl-C or SIGTERM."),
    ] = False,
    settle: Annotated[
        float,
        typer.Option(
            "--settle",
            min=0.0,
            metavar="SECONDS",
            help="How long a file must be still before a line or a reply still being "
            "written is imported as it stands.",
        ),
    ] = SETTLE_SECONDS,
) -> None:
    """Import agent session folders, or bring them up to date; --watch keeps following.

    Syncing is importing (see `sessions import`): new transcripts become sessions,
    grown ones get their new messages, unchanged ones are left alone. With --watch each
    change is imported within seconds and printed as one line; a line still being
    written waits for its end, and a session's last reply for the next one (or, each,
    until the file has been still --settle seconds). Ctrl-C or SIGTERM stops watching
    (exit 0) with a summary of what was imported meanwhile.
    """
    named = [(str(f), f.expanduser()) for f in folders or []]
    for given, path in named:
        if not path.is_dir():
            raise UsageError(f"not a directory: {given}")
    found = named or [(agent, path) for agent, path in agent_folders()]
    if not found:
        looked = ", ".join(folder for _, folder in AGENT_FOLDERS)
        raise UsageError(f"no agent session folders here (looked in {looked}); name a DIR")
    for label, path in found:
        shown = f"{path}" if label == str(path) else f"{path} ({label})"
        echo(f"{'watching' if watch else 'syncing'} {shown}")
    follower = Follower(Syncer(store_of(ctx)), [path for _, path in found], settle=settle)
    report = SyncReport()

    def caught_up(changes: list[Change]) -> None:
        for change in changes:
            report.results.extend(change.results)
            _status(change)
        summary = sessions._import_summary(report) if report.results else "no sessions yet"
        echo(f"synced: {summary}", one_line=True)

    if not watch:
        caught_up(follower.catch_up(hold=False))
        failures = report.failures
        if failures and failures[0].exception is not None:
            raise typer.Exit(exit_code_for(failures[0].exception))
        return
    followed = SyncReport()

    def told(change: Change) -> None:
        followed.results.extend(change.results)
        _status(change)

    with _stopped_by_sigterm() as stop, contextlib.suppress(KeyboardInterrupt):
        follower.follow(told, caught_up=caught_up, stop=stop)
    counts = followed.counts()
    done = ", ".join(f"{counts[s.value]} {s.value}" for s in _SHOWN)
    added = plural(followed.messages_added, "message")
    echo(f"stopped: {done}; {added} added while watching", one_line=True)


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[threading.Event]:
    """An event SIGTERM sets, so a watcher run as a service (or as a background job,
    where the shell makes it ignore Ctrl-C) stops as cleanly as with Ctrl-C: between
    two imports, never inside one."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


_SHOWN = (SyncStatus.NEW, SyncStatus.UPDATED, SyncStatus.FAILED)


def _status(change: Change) -> None:
    """One line for a change worth one: a session new or grown, a failure, a wait."""
    if not change.changed:
        return
    now = time.strftime("%H:%M:%S")
    if change.waiting:
        echo(f"{now} waiting: {change.source.name} (its last line is still being written)")
    for r in change.results:
        if r.status is SyncStatus.NEW:
            line = f"new {r.session_id}: {plural(r.messages_added, 'message')} from {r.source}"
        elif r.status is SyncStatus.UPDATED:
            added = plural(r.messages_added, "new message")
            line = f"updated {r.session_id}: {added} from {r.source}"
        elif r.status is SyncStatus.FAILED:
            line = f"failed: {r.source}: {r.error}"
        else:
            continue
        held = " (its last reply waits: it may still grow)" if r.held else ""
        echo(f"{now} {line}{held}", one_line=True)


def register(root: typer.Typer) -> None:
    """Adds ``sync`` to the ``sessions`` group (``threadline sessions sync``)."""
    sessions.app.command("sync")(sync)
