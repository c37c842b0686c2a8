"""``threadline cleanup``: delete sessions by age or by total size, never a locked one.

The rules come from the options (``--older-than 90d``, ``--max-storage 50MB``)
or, with neither, from the ``[session]`` table of the settings file
(``retention_days``, ``max_storage_bytes``); with no rule anywhere, nothing is
deleted. The command plans first (``store.retention.plan_cleanup``), shows
what it would delete and free, asks (unless ``--yes``; it refuses to guess when
stdin is not a terminal), then applies the plan. ``--dry-run`` stops after
showing. Large stores get a progress bar on stderr while sizes are measured
and sessions deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from threadline.cli.params import OnlyAgentOpt
from threadline.cli.render import fmt_time, make_console, plural
from threadline.cli.state import confirm_delete, store_of
from threadline.config import config_path, load_settings
from threadline.store import Store
from threadline.store.retention import (
    CleanupPlan,
    CleanupResult,
    Skipped,
    Victim,
    apply_cleanup,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
    plan_cleanup,
)

LARGE_STORE = 50
"""More sessions than this to measure or delete get a progress bar."""


def bar_console() -> Console:
    """Where progress bars go: stderr, so stdout keeps only the result."""
    return make_console(stderr=True)


@contextmanager
def progress_bar(description: str, total: int, *, show: bool) -> Iterator[Progress]:
    """A Rich bar on stderr (shown only on a terminal, and only when ``show``)."""
    console = bar_console()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not (show and console.is_terminal),
    )
    progress.add_task(description, total=total)
    with progress:
        yield progress


def victims_table(victims: list[Victim]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("Agent", no_wrap=True)
    table.add_column("Updated", no_wrap=True)
    table.add_column("Size", no_wrap=True, justify="right")
    table.add_column("Reason", no_wrap=True)
    for v in victims:
        table.add_row(
            Text(v.info.id),
            Text(v.info.agent),
            fmt_time(v.info.updated_at),
            format_size(v.bytes),
            v.reason.value,
        )
    return table


def _rules_line(older_than: timedelta | None, max_bytes: int | None) -> str:
    parts = []
    if older_than is not None:
        parts.append(f"not updated for {format_duration(older_than)}")
    if max_bytes is not None:
        parts.append(f"over {format_size(max_bytes)} in all (oldest first)")
    return "rules: delete sessions " + " and ".join(parts)


def _print_skipped(console: Console, skipped: list[Skipped], *, verb: str) -> None:
    for s in skipped:
        console.print(Text(f"{verb} {s.info.id}: {s.why}"), style="yellow", soft_wrap=True)


def register(root: typer.Typer) -> None:
    root.command("cleanup")(cleanup)


def cleanup(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Delete sessions not updated for this long: 90d, 12h, 30m (minutes), 2w.",
            show_default=False,
        ),
    ] = None,
    max_storage: Annotated[
        str | None,
        typer.Option(
            "--max-storage",
            metavar="SIZE",
            help="Delete the least recently updated sessions until all messages fit: "
            "50MB, 10MiB, 500KB or bytes.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be deleted; delete nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    agent: OnlyAgentOpt = None,
) -> None:
    r"""Delete old sessions, or the oldest ones beyond a size cap; never a locked one.

    With neither --older-than nor --max-storage, uses retention_days and
    max_storage_bytes from the \[session] table of the settings file.
    """
    age = parse_duration(older_than) if older_than is not None else None
    cap = parse_size(max_storage) if max_storage is not None else None
    console = make_console()
    if age is None and cap is None:
        settings = load_settings()
        age, cap = settings.session.older_than, settings.session.max_storage_bytes
        if age is None and cap is None:
            console.print(
                Text(
                    "no retention rules: give --older-than or --max-storage, or set "
                    f"retention_days / max_storage_bytes under [session] in {config_path()}"
                ),
                soft_wrap=True,
            )
            return
        console.print(Text(f"using the settings in {settings.source}"), style="dim", soft_wrap=True)
    console.print(Text(_rules_line(age, cap)), style="dim", soft_wrap=True)

    store = store_of(ctx)
    plan = _plan(store, age, cap, agent)
    _show_plan(console, plan)
    if plan.empty:
        return
    summary = f"{plural(len(plan.victims), 'session')} ({format_size(plan.freed_bytes)})"
    if dry_run:
        console.print(f"dry run: would delete {summary}; nothing deleted", soft_wrap=True)
        return
    if not yes:
        confirm_delete(
            f"Delete {summary}?",
            f"refusing to delete {summary} without confirmation: "
            "stdin is not a terminal; pass --yes (or --dry-run to look first)",
        )
    result = _apply(store, plan)
    _print_skipped(console, result.skipped, verb="kept")
    console.print(
        f"deleted {plural(len(result.deleted), 'session')}, "
        f"freed {format_size(result.freed_bytes)}",
        soft_wrap=True,
    )


def _plan(store: Store, age: timedelta | None, cap: int | None, agent: str | None) -> CleanupPlan:
    # measuring sessions' sizes is the slow part; a bar when there are many
    count = store.list_sessions(agent=agent, limit=1).total
    with progress_bar("Measuring sessions", count, show=count > LARGE_STORE) as bar:

        def advance(done: int, total: int) -> None:
            bar.update(bar.task_ids[0], completed=done, total=total)

        return plan_cleanup(
            store, older_than=age, max_storage_bytes=cap, agent=agent, progress=advance
        )


def _show_plan(console: Console, plan: CleanupPlan) -> None:
    if plan.victims:
        console.print(victims_table(plan.victims))
    _print_skipped(console, plan.skipped_locked, verb="skipping")
    if plan.total_bytes is not None:
        console.print(
            Text(
                f"in all: {plural(plan.sessions_seen, 'session')}, "
                f"{format_size(plan.total_bytes)}; "
                f"{format_size(plan.total_bytes - plan.freed_bytes)} would remain"
            ),
            style="dim",
            soft_wrap=True,
        )
    if plan.empty:
        console.print("nothing to delete", soft_wrap=True)


def _apply(store: Store, plan: CleanupPlan) -> CleanupResult:
    count = len(plan.victims)
    with progress_bar("Deleting sessions", count, show=count > LARGE_STORE) as bar:
        return apply_cleanup(store, plan, progress=lambda _v: bar.advance(bar.task_ids[0]))
