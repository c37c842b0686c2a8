"""``threadline sessions copy --from URL --to URL``: move sessions between backends.

A thin face over ``store.copy.copy_sessions``: opens both stores, shows a
progress bar over all messages on stderr, prints a summary table with the
verified counts per session, and exits 1 if any session failed to copy or
verify. Running the same command again resumes an interrupted copy.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.table import Table
from rich.text import Text

from threadline.cli import sessions
from threadline.cli.errors import EXIT_ERROR, PROGRAM
from threadline.cli.render import echo, make_console, plural
from threadline.cli.state import get_state
from threadline.errors import SessionNotFound, UsageError
from threadline.store import Store, open_store
from threadline.store.copy import (
    DEFAULT_BATCH,
    CopyProgress,
    CopyReport,
    CopyStatus,
    copy_sessions,
    source_session_ids,
)


def redact(url: str) -> str:
    """The URL without its password, for output."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))


def summary_table(report: CopyReport) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("Session", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Messages", no_wrap=True, justify="right")
    table.add_column("Appended", no_wrap=True, justify="right")
    table.add_column("Checkpoints", no_wrap=True, justify="right")
    table.add_column("Scratchpad", no_wrap=True, justify="right")
    styles = {CopyStatus.FAILED: "bold red", CopyStatus.UP_TO_DATE: "dim"}
    for s in report.sessions:
        table.add_row(
            Text(s.session_id),
            Text(s.status.value, style=styles.get(s.status, "green")),
            _pair(s.source_messages, s.dest_messages, s.ok),
            f"{s.appended:,}",
            _pair(s.source_checkpoints, s.dest_checkpoints, s.ok),
            _pair(s.source_scratchpad, s.dest_scratchpad, s.ok),
        )
    return table


def _pair(source: int, dest: int, ok: bool) -> str:
    if ok and source == dest:
        return f"{dest:,}"
    return f"{source:,} → {dest:,}"


def copy(
    ctx: typer.Context,
    to_url: Annotated[
        str,
        typer.Option("--to", metavar="URL", help="Destination store URL.", show_default=False),
    ],
    from_url: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="URL",
            help="Source store URL. Default: the --store in effect.",
            show_default=False,
        ),
    ] = None,
    session_ids: Annotated[
        list[str] | None,
        typer.Option(
            "--session",
            "-s",
            metavar="ID",
            help="Copy only this session (id or unique prefix); repeat for more.",
            show_default=False,
        ),
    ] = None,
    batch: Annotated[
        int, typer.Option("--batch", min=1, max=10_000, help="Messages per append.")
    ] = DEFAULT_BATCH,
) -> None:
    """Copy sessions with every message, checkpoint, scratchpad entry and memo.

    Resumable: run the same command again after an interruption and it
    continues where it stopped. Each session is verified at the end (counts of
    messages, checkpoints and scratchpad entries); exits 1 if any failed.
    """
    state = get_state(ctx)
    source_url = from_url or state.store_url
    if source_url == to_url:
        raise UsageError(f"--from and --to are the same store ({redact(to_url)})")
    # the source is only read: a mistyped --from must not leave an empty store behind
    src = state.store(create=False) if from_url is None else open_store(from_url, create=False)
    try:
        # every --session must resolve before the destination is opened (or created)
        ids = source_session_ids(src, session_ids or None)
        if not ids:
            _print_report(CopyReport(), source_url, to_url)
            return
        dst = open_store(to_url)
        try:
            report = _run(src, dst, ids, batch)
        finally:
            dst.close()
    finally:
        if from_url is not None:
            src.close()
    _print_report(report, source_url, to_url)


def _run(src: Store, dst: Store, ids: list[str], batch: int) -> CopyReport:
    from threadline.cli.cleanup_cmd import progress_bar  # loads rich.progress

    totals: dict[str, int] = {}
    for sid in ids:
        try:
            totals[sid] = src.session_info(sid).message_count
        except SessionNotFound:
            totals[sid] = 0  # deleted meanwhile; the copy reports it
    done: dict[str, int] = {}
    with progress_bar("Copying", sum(totals.values()), show=True) as bar:
        task = bar.task_ids[0]

        def advance(event: CopyProgress) -> None:
            now = totals[event.session_id] if event.finished else event.messages_done
            bar.advance(task, max(0, now - done.get(event.session_id, 0)))
            done[event.session_id] = max(now, done.get(event.session_id, 0))
            bar.update(task, description=f"Copying {event.session_id}")

        return copy_sessions(src, dst, session_ids=ids, progress=advance, batch=batch)


def _print_report(report: CopyReport, source_url: str, to_url: str) -> None:
    console = make_console()
    if not report.sessions:
        console.print(Text(f"no sessions to copy in {redact(source_url)}"), soft_wrap=True)
        return
    console.print(summary_table(report))
    for s in report.sessions:
        for note in s.notes:
            console.print(Text(f"note: {s.session_id}: {note}"), style="yellow", soft_wrap=True)
    ok = len(report.sessions) - len(report.failed)
    console.print(
        Text(
            f"{plural(ok, 'session')} copied and verified, "
            f"{plural(report.appended, 'message')} appended, "
            f"from {redact(source_url)} to {redact(to_url)}"
        ),
        soft_wrap=True,
    )
    if report.failed:
        for s in report.failed:
            echo(f"{PROGRAM}: error: {s.session_id}: {s.error}", err=True, one_line=True)
        typer.echo(
            f"{PROGRAM}: error: {len(report.failed)} of {plural(len(report.sessions), 'session')} "
            "failed to copy or verify (run again to resume an interrupted copy)",
            err=True,
        )
        raise typer.Exit(EXIT_ERROR)


def register(root: typer.Typer) -> None:
    """Adds ``copy`` to the ``sessions`` group (``threadline sessions copy``)."""
    sessions.app.command("copy")(copy)
