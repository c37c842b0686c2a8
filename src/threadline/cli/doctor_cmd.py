"""``threadline doctor [--json] [--salvage URL]``: is the store intact, and what can be read.

A thin face over ``store.doctor``: opens the store without creating it, reads every
session, prints the sessions that are damaged or unreadable (and why) and what the
backend's own checks found, and exits 8 when anything loses or risks data (0 when
only harmless leftovers such as stale locks were found). ``--salvage URL`` then
copies every readable session into the new, empty store at ``URL``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from threadline.cli.cleanup_cmd import progress_bar
from threadline.cli.copy_cmd import redact
from threadline.cli.errors import EXIT_STORE
from threadline.cli.render import make_console, plural, print_json, shorten
from threadline.cli.state import get_state
from threadline.errors import StoreDamaged, ThreadlineError, UsageError
from threadline.store import Store, open_store
from threadline.store.doctor import DoctorReport, SalvageReport, Severity, check_store, salvage

PROBLEM_CHARS = 200
"""A session's first problem is shown up to this many characters."""
_STYLES = {
    "unreadable": "bold red",
    "damaged": "yellow",
    Severity.DAMAGE: "bold red",
    Severity.WARNING: "yellow",
    Severity.NOTE: "dim",
}


def doctor(
    ctx: typer.Context,
    salvage_url: Annotated[
        str | None,
        typer.Option(
            "--salvage",
            metavar="URL",
            help="Copy every readable session into the new, empty store at URL.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead.")] = False,
) -> None:
    """Check the store: every session readable, storage intact, no stale locks.

    Exits 8 when it finds damage (unreadable sessions, skipped records, a failed
    integrity check), 0 otherwise; with --salvage, after copying what it can.
    """
    state = get_state(ctx)
    if salvage_url is not None and salvage_url == state.store_url:
        raise UsageError("--salvage needs the URL of a new store, not the store being checked")
    try:
        store = state.store(create=False)
    except StoreDamaged as exc:
        raise StoreDamaged(
            f"{exc.problem}; the store cannot even be opened, so there is nothing threadline "
            "can check or salvage in it"
        ) from exc
    with progress_bar("Checking", _count(store), show=not as_json) as bar:
        task = bar.task_ids[0]
        report = check_store(store, progress=lambda done, _: bar.update(task, completed=done))
    _check_workers(store, report)
    if salvage_url is not None:
        destination = open_store(salvage_url)
        try:
            salvage(store, report, destination)
        finally:
            destination.close()
    if as_json:
        print_json(report.to_json())
    else:
        _print_report(report)
    if report.damaged:
        raise typer.Exit(EXIT_STORE)


def _check_workers(store: Store, report: DoctorReport) -> None:
    """What servers sharing a PostgreSQL or Redis store leave in it: the event streams
    they keep in its engine (``server.event_hubs``) and cancel requests whose turn is
    over (``server.turn_signals``); no other store loads the server."""
    if not store.url.partition("://")[0].lower().startswith(("postgres", "redis")):
        return
    try:
        from threadline.server.event_hubs import event_findings
        from threadline.server.turn_signals import left_behind
    except ImportError:  # the server's extra is not installed: no server left anything
        return
    try:
        found = event_findings(store)
    except Exception as exc:  # they are not the store's data: say so, lose nothing
        report.add(Severity.NOTE, "events", f"could not read the event streams: {exc}")
    else:
        for warning, text in found:
            report.add(Severity.WARNING if warning else Severity.NOTE, "events", text)
    readable = [s.session_id for s in report.sessions if s.readable]
    try:
        stale = left_behind(store, readable)
    except ThreadlineError as exc:
        report.add(Severity.NOTE, "stale-cancel", f"could not read cancel requests: {exc}")
        return
    for sid, turn in stale:
        text = f"cancel request for turn {turn} left behind; that turn is over (harmless)"
        report.add(Severity.WARNING, "stale-cancel", text, sid)


def _count(store: Store) -> int:
    """Sessions for the progress bar; a store too damaged to count them still gets checked."""
    try:
        return store.list_sessions(limit=1).total
    except ThreadlineError:
        return 0


def _print_report(report: DoctorReport) -> None:
    console = make_console()
    console.print(Text(f"store {redact(report.store)}"), soft_wrap=True)
    bad = [s for s in report.sessions if s.damaged]
    counts = {status: sum(s.status == status for s in report.sessions) for status in _ORDER}
    summary = ", ".join(f"{n:,} {status}" for status, n in counts.items() if n)
    console.print(Text(f"{plural(len(report.sessions), 'session')} checked: {summary or 'none'}"))
    if bad:
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("Session", no_wrap=True)
        table.add_column("Status", no_wrap=True)
        table.add_column("Read", no_wrap=True, justify="right")
        table.add_column("Why")
        for s in bad:
            total = "?" if s.message_count is None else f"{s.message_count:,}"
            table.add_row(
                Text(s.session_id),
                Text(s.status, style=_STYLES[s.status]),
                f"{s.messages_read:,}/{total}",
                Text(shorten(s.problems[0], PROBLEM_CHARS) if s.problems else ""),
            )
        console.print(table)
    for f in report.findings:
        where = f"{f.session_id}: " if f.session_id else ""
        line = Text(f"{f.severity.value}: {f.kind}: ", style=_STYLES[f.severity])
        line.append(where + f.message)
        console.print(line, soft_wrap=True)
    if report.salvage is not None:
        _print_salvage(report.salvage)
    if report.damaged:
        unreadable = len(report.unreadable)
        verdict = f"damage found: {plural(len(bad), 'session')} damaged"
        if unreadable:
            verdict += f", {unreadable:,} of them unreadable"
        if report.salvage is None:
            verdict += "; copy what is readable with `threadline doctor --salvage NEW_URL`"
        console.print(Text(verdict, style="bold red"), soft_wrap=True)
    else:
        console.print(Text("no damage found", style="green"))


_ORDER = ("ok", "damaged", "unreadable")


def _print_salvage(result: SalvageReport) -> None:
    console = make_console()
    ok = [s for s in result.sessions if s.status == "salvaged"]
    console.print(
        Text(f"salvage to {redact(result.destination)}: {plural(len(ok), 'session')} copied whole"),
        soft_wrap=True,
    )
    for s in result.sessions:
        if s.status != "salvaged":
            line = f"  {s.session_id}: {s.status}, {plural(s.messages, 'message')} copied"
            console.print(Text(line + (f" ({s.error})" if s.error else "")), soft_wrap=True)
    for sid in result.left_behind:
        console.print(Text(f"  {sid}: left behind (unreadable)", style="red"), soft_wrap=True)


def register(root: typer.Typer) -> None:
    root.command("doctor")(doctor)
