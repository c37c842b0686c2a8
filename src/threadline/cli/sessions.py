"""``threadline sessions ...``: list, show, history, rename, delete, search, export, import.

Each command parses its arguments, calls the store or the interop library, and
renders; ids may be unique prefixes of 4+ characters because every lookup goes
through ``store.resolve_id``. Another module adds a sub-command with
``@app.command()`` on this module's ``app`` (or its own Typer via ``add_typer``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from threadline.cli.render import (
    echo,
    fmt_time,
    make_console,
    page_footer,
    print_json,
    render_messages,
    search_table,
    session_details,
    sessions_table,
    shorten,
)
from threadline.cli.state import stdin_is_interactive, store_of
from threadline.errors import ImportFormatError, ThreadlineError, UsageError
from threadline.interop.export import to_json, to_markdown
from threadline.interop.importers import import_file
from threadline.json_limits import MAX_JSON_DEPTH, nesting_too_deep
from threadline.store.base import (
    DEFAULT_AGENT,
    DEFAULT_PAGE_SIZE,
    MAX_INT,
    MAX_PAGE_SIZE,
    prepare_messages,
    validate_agent,
)

DEFAULT_HISTORY = 10
"""Messages ``sessions history`` shows, as ``/history`` does in the reference CLI."""
STDOUT_PATH = "-"
EXPORT_NAME = "session-{id}.{ext}"
"""Default export file, in the current directory (as the reference agent shell does)."""

app = typer.Typer(
    name="sessions",
    help="List, inspect, rename, delete, search, export and import sessions.",
    no_args_is_help=True,
)


class ExportFormat(StrEnum):
    md = "md"
    json = "json"


IdArg = Annotated[str, typer.Argument(metavar="ID", help="Session id or a unique prefix (4+).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (stable shape) instead.")]
AgentOpt = Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's sessions.")]


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    agent: AgentOpt = None,
    limit: Annotated[
        int,
        typer.Option("-n", "--limit", min=1, max=MAX_PAGE_SIZE, help="Sessions per page."),
    ] = DEFAULT_PAGE_SIZE,
    offset: Annotated[
        int, typer.Option("--offset", min=0, max=MAX_INT, help="Skip this many.")
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Sessions, most recently updated first."""
    store = store_of(ctx)
    page = store.list_sessions(agent=agent, limit=limit, offset=offset)
    if as_json:
        print_json(page.model_dump(mode="json"))
        return
    console = make_console()
    if page.items:
        console.print(sessions_table(store, page, width=console.width))
    console.print(page_footer(page))


@app.command("show")
def show(ctx: typer.Context, session_id: IdArg, as_json: JsonOpt = False) -> None:
    """A session's details, checkpoints, lock holder and scratchpad entries."""
    store = store_of(ctx)
    sid = store.resolve_id(session_id)
    info = store.session_info(sid)
    checkpoints = store.list_checkpoints(sid)
    holder = store.lock_holder(sid)
    pad = store.scratchpad_list(sid)
    if as_json:
        print_json(
            {
                "session": info.model_dump(mode="json"),
                "checkpoints": [c.model_dump(mode="json") for c in checkpoints],
                "lock": holder.model_dump(mode="json") if holder else None,
                "scratchpad": [e.name for e in pad],
            }
        )
        return
    console = make_console()
    console.print(session_details(info))
    console.print()
    lock = f"held by {holder}" + (" (stale)" if holder.is_stale() else "") if holder else "free"
    console.print(Text(f"Lock: {lock}"))
    console.print(Text(f"Checkpoints: {len(checkpoints)}"))
    for c in checkpoints:
        first = shorten(c.summary, 80)
        console.print(
            Text(f"  #{c.id} covers 1-{c.covers_up_to} · {fmt_time(c.created_at)} · {first}")
        )
    names = ", ".join(e.name for e in pad) if pad else "-"
    console.print(Text(f"Scratchpad: {names}"))


@app.command("history")
def history(
    ctx: typer.Context,
    session_id: IdArg,
    count: Annotated[
        int,
        typer.Option("-n", "--count", min=1, max=MAX_INT, help="How many of the last messages."),
    ] = DEFAULT_HISTORY,
    full: Annotated[bool, typer.Option("--full", help="Do not shorten long messages.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The last messages of a session, oldest first; tool calls shown compactly."""
    store = store_of(ctx)
    sid = store.resolve_id(session_id)
    messages = list(reversed(store.tail(sid, count)))
    if as_json:
        print_json({"session_id": sid, "items": [m.model_dump(mode="json") for m in messages]})
        return
    console = make_console()
    if not messages:
        console.print("no messages", style="dim")
        return
    console.print(render_messages(messages, full=full))


@app.command("rename")
def rename(
    ctx: typer.Context,
    session_id: IdArg,
    title: Annotated[str, typer.Argument(help="New title; an empty string clears it.")],
) -> None:
    """Set or clear a session's title."""
    store = store_of(ctx)
    info = store.rename_session(store.resolve_id(session_id), title)
    echo(f"renamed {info.id}: {info.title or '(no title)'}", one_line=True)


@app.command("delete")
def delete(
    ctx: typer.Context,
    session_ids: Annotated[
        list[str] | None, typer.Argument(metavar="ID", help="Sessions to delete (ids or prefixes).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Delete every session.")] = False,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="With --all: only this agent's.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Delete even sessions another process is attached to.")
    ] = False,
) -> None:
    """Delete sessions by id, or all of them (asks first unless --yes)."""
    ids = session_ids or []
    if all_ and ids:
        raise UsageError("give session ids or --all, not both")
    if agent is not None and not all_:
        raise UsageError("--agent only applies with --all")
    if not all_ and not ids:
        raise UsageError("nothing to delete: give one or more session ids, or --all")
    store = store_of(ctx)
    if ids:
        resolved = list(dict.fromkeys(store.resolve_id(i) for i in ids))  # all or nothing
        deleted = store.delete_sessions(resolved, force=force)
        typer.echo(f"deleted {deleted} session{'s' if deleted != 1 else ''}")
        return
    total = store.list_sessions(agent=agent, limit=1).total
    scope = f" of agent {agent!r}" if agent else ""
    if total == 0:
        typer.echo(f"no sessions{scope} to delete")
        return
    if not yes:
        if not stdin_is_interactive():
            raise UsageError(
                f"refusing to delete all {total} sessions{scope} without confirmation: "
                "stdin is not a terminal; pass --yes"
            )
        if not typer.confirm(f"Delete all {total} sessions{scope}?", default=False):
            typer.echo("nothing deleted", err=True)
            raise typer.Exit(1)
    deleted = store.delete_all(agent=agent, force=force)
    typer.echo(f"deleted {deleted} session{'s' if deleted != 1 else ''}")


@app.command("search")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to find (all must match).")],
    agent: AgentOpt = None,
    limit: Annotated[
        int, typer.Option("-n", "--limit", min=1, max=MAX_PAGE_SIZE, help="Most hits to show.")
    ] = DEFAULT_PAGE_SIZE,
    as_json: JsonOpt = False,
) -> None:
    """Full-text search over message text across sessions."""
    hits = store_of(ctx).search(query, agent=agent, limit=limit)
    if as_json:
        print_json({"query": query, "items": [h.model_dump(mode="json") for h in hits]})
        return
    console = make_console()
    if hits:
        console.print(search_table(hits, width=console.width))
    console.print(f"{len(hits)} hit{'s' if len(hits) != 1 else ''}", style="dim")


@app.command("export")
def export(
    ctx: typer.Context,
    session_id: IdArg,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="Markdown or JSON (re-importable).")
    ] = ExportFormat.md,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="FILE|-", help="Default: session-<id>.<ext>."),
    ] = None,
) -> None:
    """Write a session as Markdown (for people) or JSON (lossless, for import)."""
    store = store_of(ctx)
    session = store.get_session(session_id)
    info = session.info.model_dump(mode="json")
    if fmt is ExportFormat.json:
        checkpoints = [c.model_dump(mode="json") for c in session.checkpoints()]
        text = to_json(info, session.iter_messages(), checkpoints) + "\n"
    else:
        text = to_markdown(info, session.iter_messages())
    if output == STDOUT_PATH:
        typer.echo(text, nl=False)
        return
    path = Path(output) if output else Path(EXPORT_NAME.format(id=session.id, ext=fmt.value))
    write_atomically(path, text)
    typer.echo(f"wrote {path} ({session.message_count} messages)", err=True)
    typer.echo(str(path))


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            readable=True,
            help="JSON or JSONL of OpenAI-format messages, or a threadline JSON export.",
        ),
    ],
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Agent name.")] = None,
    title: Annotated[str | None, typer.Option("--title", "-t", help="Session title.")] = None,
) -> None:
    """Create a new session from a file, all messages in one append; prints the new id.

    A threadline JSON export brings its checkpoints along: its messages are
    numbered from 1 in both sessions, so each checkpoint covers the same seqs.
    """
    # the parser would recurse into deep nesting; a pipe cannot be read twice, so only
    # a regular file is checked here (the importer reading it is another module's)
    deep = nesting_too_deep(file.read_bytes()) if file.is_file() else None
    if deep is not None:
        raise ImportFormatError(
            f"JSON nests more than {MAX_JSON_DEPTH} levels deep", line=deep, path=str(file)
        )
    imported = import_file(file)
    if not imported.messages:
        raise ImportFormatError("no messages to import", path=str(file))
    session_agent = validate_agent(agent if agent is not None else imported.agent or DEFAULT_AGENT)
    prepared = prepare_messages(imported.model, imported.messages)  # refuse before creating
    checkpoints = [_checkpoint_args(c, len(prepared), file) for c in imported.checkpoints]
    store = store_of(ctx)
    session = store.create_session(
        agent=session_agent,
        model=imported.model,
        title=title if title is not None else imported.title,
        metadata=imported.metadata or None,
    )
    try:
        store.append_messages(session.id, prepared)
        for covers_up_to, summary, metadata in checkpoints:
            store.add_checkpoint(
                session.id, covers_up_to=covers_up_to, summary=summary, metadata=metadata
            )
    except BaseException:
        with contextlib.suppress(ThreadlineError):
            store.delete_session(session.id, force=True)  # all or nothing: no half session
        raise
    session.refresh()
    typer.echo(f"imported {session.message_count} messages from {file}", err=True)
    typer.echo(session.id)


def _checkpoint_args(
    raw: object, message_count: int, file: Path
) -> tuple[int, str, dict[str, Any] | None]:
    """An exported checkpoint's fields, checked before anything is written."""
    if not isinstance(raw, dict):
        raise ImportFormatError("a checkpoint must be an object", path=str(file))
    covers, summary, metadata = raw.get("covers_up_to"), raw.get("summary"), raw.get("metadata")
    if not isinstance(covers, int) or not 0 < covers <= message_count:
        raise ImportFormatError(
            f"checkpoint covers_up_to {covers!r} is outside the {message_count} imported messages",
            path=str(file),
        )
    if not isinstance(summary, str) or (metadata is not None and not isinstance(metadata, dict)):
        raise ImportFormatError("a checkpoint needs a text summary", path=str(file))
    return covers, summary, metadata


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory, so a reader never sees half."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="sessions")
