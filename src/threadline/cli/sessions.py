"""``threadline sessions ...``: list, show, history, rename, fork, delete, search, export, import.

Each command parses its arguments, calls the store or the interop library, and
renders; ids may be unique prefixes of 4+ characters because every lookup goes
through ``store.resolve_id``. Another module adds a sub-command with
``@app.command()`` on this module's ``app`` (or its own Typer via ``add_typer``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.text import Text

from threadline.cli.errors import exit_code_for, exit_interrupted
from threadline.cli.errors import report as report_error
from threadline.cli.params import IdArg, JsonOpt, OnlyAgentOpt
from threadline.cli.render import (
    echo,
    fmt_time,
    is_terminal,
    make_console,
    page_footer,
    plural,
    print_json,
    printable,
    render_messages,
    search_table,
    session_details,
    sessions_table,
    shorten,
)
from threadline.cli.state import confirm_delete, store_of
from threadline.errors import ThreadlineError, UsageError
from threadline.store import retraction, sqlite_files
from threadline.store.checkpoints import numbered_checkpoints
from threadline.store.checks import DEFAULT_PAGE_SIZE, MAX_INT, MAX_PAGE_SIZE
from threadline.store.protocol import Session, Store
from threadline.store.search_query import parse_when
from threadline.store.session_info import SessionInfo

if TYPE_CHECKING:  # the importers load only for ``sessions import``
    from threadline.interop.sync import Source, SyncReport, SyncResult
    from threadline.report.lineage import Node

SHOWN_CHILDREN = 10
"""Sessions listed under one that ``sessions show`` names (the rest are counted)."""
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
    markdown = "markdown"
    json = "json"
    html = "html"
    openai_jsonl = "openai-jsonl"
    anthropic_json = "anthropic-json"
    supyagent = "supyagent"


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    agent: OnlyAgentOpt = None,
    limit: Annotated[
        int,
        typer.Option("-n", "--limit", min=1, max=MAX_PAGE_SIZE, help="Sessions per page."),
    ] = DEFAULT_PAGE_SIZE,
    offset: Annotated[
        int, typer.Option("--offset", min=0, max=MAX_INT, help="Skip this many.")
    ] = 0,
    as_json: JsonOpt = False,
    every: Annotated[
        bool,
        typer.Option("--all", help="Also the sessions listed under each one, indented below it."),
    ] = False,
    tree: Annotated[
        bool,
        typer.Option("--tree", help="The same as a tree: forks and subagents under their parent."),
    ] = False,
) -> None:
    """Top-level sessions, most recently updated first (an imported conversation by its
    own dates), each with a count of the sessions listed under it: its subagents,
    compaction summaries and forks. --all or --tree shows those nested below it."""
    from threadline.report.lineage import forest

    store = store_of(ctx, create=False)
    page = store.list_sessions(agent=agent, limit=limit, offset=offset, top_level=True)
    nodes = forest(store, page.items, nested=every or tree)
    everyone = [node for top in nodes for node, _ in top.walk()]
    shown = in_view(store, [node.info for node in everyone])
    if as_json:
        listing = page.to_dict()
        listing["items"] = [_listed(node, shown, nested=every or tree) for node in nodes]
        print_json(listing)
        return
    for node in everyone:
        node.info = shown[node.info.id]
    page = page.replace(items=[n.info for n in nodes])
    console = make_console()
    if page.items:
        if tree:
            from threadline.cli.lineage import lineage_tree

            console.print(lineage_tree(store, nodes))
        else:
            rows = [(n, depth) for top in nodes for n, depth in top.walk()]
            console.print(
                sessions_table(
                    store,
                    page.replace(items=[n.info for n, _ in rows]),
                    width=console.width,
                    children=(
                        {n.info.id: n.child_count for n, _ in rows}
                        if any(n.child_count for n, _ in rows)
                        else None  # no column while no listed session has any
                    ),
                    depths={n.info.id: depth for n, depth in rows},
                )
            )
    console.print(page_footer(page))


def _listed(node: Node, shown: dict[str, SessionInfo], *, nested: bool) -> dict[str, Any]:
    """A listed session in ``--json``: its record, the messages in view (``shown``), how
    many sessions are listed under it, and (``--all``/``--tree``) those, nested alike."""
    item = node.info.to_dict()
    item["visible_count"] = shown[node.info.id].message_count
    item["child_count"] = node.child_count
    if nested:
        item["children"] = [_listed(child, shown, nested=True) for child in node.children]
    return item


def in_view(store: Store, infos: list[SessionInfo]) -> dict[str, SessionInfo]:
    """Each of ``infos`` by id, counting the messages in view: retracted ones and the
    retraction records left out, as the window, history and exports show them
    (``--json`` gives the stored ``message_count`` and this as ``visible_count``). The
    memos the counts need are read in one batch (``Store.get_memos``)."""
    visible = retraction.visible_counts([Session(store, i) for i in infos], store.get_memos)
    return {
        i.id: i if visible[i.id] == i.message_count else i.replace(message_count=visible[i.id])
        for i in infos
    }


@app.command("show")
def show(ctx: typer.Context, session_id: IdArg, as_json: JsonOpt = False) -> None:
    """A session's details, lineage, checkpoints, lock holder and scratchpad entries.

    Checkpoints are numbered within the session (#1 is its first, a fork's inherited
    ones included); ``--json`` also gives each one's store id.
    """
    from threadline.report.lineage import children, fork_ids, fork_note, relation

    store = store_of(ctx, create=False)
    session = store.get_session(session_id)
    info, sid = session.info, session.id
    checkpoints = session.checkpoints()
    holder = store.lock_holder(sid)
    pad = store.scratchpad_list(sid)
    fork, forks = session.fork, fork_ids(store, sid)
    under = children(store, sid)
    visible = retraction.visible_count(session)
    if as_json:
        print_json(
            {
                "session": {**info.to_dict(), "visible_count": visible},
                "fork": {"parent": fork.parent, "seq": fork.seq} if fork else None,
                "forks": forks,
                "children": [
                    {"id": kid.id, "title": kid.title, "relation": relation(kid)} for kid in under
                ],
                "checkpoints": numbered_checkpoints(checkpoints),
                "lock": holder.to_dict() if holder else None,
                "scratchpad": [e.name for e in pad],
            }
        )
        return
    console = make_console()
    console.print(session_details(info.replace(message_count=visible)))
    if visible != info.message_count:
        hidden = info.message_count - visible
        console.print(Text(f"Stored: {info.message_count:,} ({hidden:,} retracted or records)"))
    console.print()
    if fork is not None:
        console.print(Text(f"Forked: {fork_note(info)}"))
    elif info.parent_id is not None:
        console.print(Text(f"Listed under: {_named(store, info.parent_id)} ({relation(info)})"))
    if forks:
        console.print(Text(f"Forks: {', '.join(forks)}"))
    others = [kid for kid in under if kid.id not in forks]
    if others:
        console.print(Text(f"Listed under it: {len(others):,}"))
        for kid in others[:SHOWN_CHILDREN]:
            line = f"  {kid.id} · {relation(kid)} · {shorten(kid.title or '-', 60)}"
            console.print(Text(line))
        if len(others) > SHOWN_CHILDREN:
            console.print(
                Text(f"  ... {len(others) - SHOWN_CHILDREN:,} more (sessions list --all)")
            )
    lock = f"held by {holder}" + (" (stale)" if holder.is_stale() else "") if holder else "free"
    console.print(Text(f"Lock: {lock}"))
    console.print(Text(f"Checkpoints: {len(checkpoints)}"))
    for n, c in enumerate(checkpoints, start=1):
        first = shorten(c.summary, 80)
        inherited = f" · from {c.session_id}" if c.session_id != sid else ""
        console.print(
            Text(
                f"  #{n} covers 1-{c.covers_up_to} · {fmt_time(c.created_at)}{inherited} · {first}"
            )
        )
    names = ", ".join(e.name for e in pad) if pad else "-"
    console.print(Text(f"Scratchpad: {names}"))


def _named(store: Store, session_id: str) -> str:
    """``ID · title`` of a session, or the bare id when it cannot be read."""
    try:
        title = store.session_info(session_id).title
    except ThreadlineError:
        return session_id
    return f"{session_id} · {shorten(title, 60)}" if title else session_id


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
    store = store_of(ctx, create=False)
    session = store.get_session(session_id)
    sid = session.id
    messages = list(reversed(session.tail(count)))
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


@app.command("fork")
def fork(
    ctx: typer.Context,
    session_id: IdArg,
    at: Annotated[
        int | None,
        typer.Option(
            "--at",
            metavar="SEQ",
            min=0,
            max=MAX_INT,
            help="Share the history up to this seq (default: all of it).",
        ),
    ] = None,
    title: Annotated[
        str | None, typer.Option("--title", "-t", help="Title of the fork (default: the parent's).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a new session from a session's history; prints the fork's id.

    The fork shares the parent's messages up to SEQ by reference (nothing is copied)
    and continues with its own; the parent is unchanged. Resume it with
    ``threadline chat -s ID``.
    """
    from threadline.store.fork import fork_session

    if at == 0:
        raise UsageError(
            "--at 0 would fork before the first message and share nothing: give a seq of 1 "
            "or more (a new session starts with threadline chat --new)"
        )
    store = store_of(ctx)
    child = fork_session(store.get_session(session_id), at=at, title=title)
    assert child.fork is not None
    if as_json:
        print_json(
            {
                "session": child.info.to_dict(),
                "fork": {"parent": child.fork.parent, "seq": child.fork.seq},
            }
        )
        return
    typer.echo(child.id)
    echo(f"forked {child.fork.parent} at seq {child.fork.seq:,}: {child.id}", err=True)


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
        bool,
        typer.Option(
            "--force",
            help="Delete even sessions another process is attached to, and forks with the "
            "session they share history with.",
        ),
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
        from threadline.store.fork import deletion_order

        resolved = list(dict.fromkeys(store.resolve_id(i) for i in ids))  # all or nothing
        deleted = store.delete_sessions(deletion_order(store, resolved, force=force), force=force)
        typer.echo(f"deleted {deleted} session{'s' if deleted != 1 else ''}")
        return
    total = store.list_sessions(agent=agent, limit=1).total
    scope = f" of agent {agent!r}" if agent else ""
    if total == 0:
        typer.echo(f"no sessions{scope} to delete")
        return
    if not yes:
        confirm_delete(
            f"Delete all {total} sessions{scope}?",
            f"refusing to delete all {total} sessions{scope} without confirmation: "
            "stdin is not a terminal; pass --yes",
        )
    deleted = store.delete_all(agent=agent, force=force)
    typer.echo(f"deleted {deleted} session{'s' if deleted != 1 else ''}")


@app.command("search")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to find; see the syntax above.")],
    agent: OnlyAgentOpt = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Only sessions of this model.")
    ] = None,
    role: Annotated[
        str | None,
        typer.Option("--role", help="Only messages of this role: system, user, assistant, tool."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="DATE", help="Messages from this time on (ISO 8601)."),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", metavar="DATE", help="Messages before this time (ISO 8601)."),
    ] = None,
    limit: Annotated[
        int, typer.Option("-n", "--limit", min=1, max=MAX_PAGE_SIZE, help="Most hits to show.")
    ] = DEFAULT_PAGE_SIZE,
    offset: Annotated[
        int, typer.Option("--offset", min=0, help="Skip this many hits (for the next page).")
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Full-text search over what sessions said, tool calls' arguments included.

    Syntax: words are ANDed; "exact phrase"; prefix*; a OR b; NOT word or -word.

    Case-insensitive. Punctuation separates words (foo.bar is "foo bar").
    CJK text matches by character: any part of a word is found.
    Hits come newest first; --offset and --limit page through them.
    """
    page = store_of(ctx, create=False).search(
        query,
        agent=agent,
        model=model,
        role=role,
        since=parse_when(since, "--since"),
        until=parse_when(until, "--until"),
        limit=limit,
        offset=offset,
    )
    if as_json:
        print_json(
            {
                "query": query,
                "total": page.total,
                "total_exact": page.exact,
                "offset": page.offset,
                "items": [h.to_dict() for h in page],
            }
        )
        return
    console = make_console()
    if page:
        console.print(search_table(page, width=console.width))
        first = page.offset + 1
        shown = f"{first}-{page.offset + len(page)}" if len(page) > 1 else f"{first}"
        console.print(f"{shown} of {page.total_text()} hits", style="dim")
    else:
        console.print(f"0 of {page.total_text()} hits", style="dim")
    if not page.exact:
        console.print(
            "the search stopped at its time limit: these are the newest hits found by then",
            style="dim",
        )


@app.command("export")
def export(
    ctx: typer.Context,
    session_id: IdArg,
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            "-f",
            help="md/markdown or html (for people); json (lossless), openai-jsonl, "
            "anthropic-json or supyagent (re-importable).",
        ),
    ] = ExportFormat.md,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", metavar="FILE|-", help="Default: session-<id>.<ext> (<id>.jsonl)."
        ),
    ] = None,
) -> None:
    """Write a session for people (Markdown, a self-contained HTML page) or for tools
    (threadline JSON, OpenAI JSONL, an Anthropic request body, supyagent JSONL with
    its _summary.json)."""
    store = store_of(ctx, create=False)
    session = store.get_session(session_id)
    info = session.info.to_dict()
    from threadline.interop.export import EXPORT_SUFFIXES, render_export
    from threadline.interop.supyagent import summary_path

    checkpoints = numbered_checkpoints(session.checkpoints())
    written = list(session.iter_messages())  # what the view shows: the count said below
    text, summary = render_export(fmt.value, info, written, checkpoints)
    if output == STDOUT_PATH:
        # Markdown may reach a terminal: control characters escaped (JSON escapes its own);
        # a file (-o FILE) keeps the exact text
        markdown = fmt in (ExportFormat.md, ExportFormat.markdown)
        typer.echo(printable(text) if markdown else text, nl=False)
        if summary is not None:
            echo("the checkpoint summary (_summary.json) is written only with -o FILE", err=True)
        return
    if output:
        path = Path(output)
    elif fmt is ExportFormat.supyagent:
        path = Path(f"{session.id}.jsonl")  # supyagent's own layout: <id>.jsonl
    else:
        path = Path(f"session-{session.id}{EXPORT_SUFFIXES[fmt.value]}")
    write_atomically(path, text)
    if summary is not None:
        write_atomically(summary_path(path), summary)
        typer.echo(str(summary_path(path)), err=True)
    typer.echo(f"wrote {path} ({len(written)} messages)", err=True)
    typer.echo(str(path))


def _brought_along(result: SyncResult, paths: list[str]) -> bool:
    """A Claude Code subagent file a named session file brought along: imported and
    listed under its session, but stdout names only what was asked for (one file, one id)."""
    source = Path(result.source)
    if source.parent.name != "subagents":
        return False
    folder = source.parent.parent.resolve()  # ``<session>/``, beside ``<session>.jsonl``
    named = {Path(p).resolve() for p in paths if p != "-"}
    return source.resolve() not in named and any(p.with_suffix("") == folder for p in named)


@app.command("import")
def import_(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH...",
            help="Files, directories (searched recursively) or - for standard input.",
        ),
    ],
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Agent name for new sessions.")
    ] = None,
    title: Annotated[
        str | None, typer.Option("--title", "-t", help="Title for new sessions.")
    ] = None,
    run: Annotated[
        int | None,
        typer.Option(
            "--run", min=1, max=MAX_INT, help="Only conversation N (from 1) of each file."
        ),
    ] = None,
    new_version: Annotated[
        bool,
        typer.Option(
            "--new-version",
            help="A source whose imported part changed since (a record edited or gone) "
            "becomes a new session; the earlier one stays, no longer synced.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import sessions, or bring earlier imports up to date; prints their ids.

    Reads threadline JSON exports, OpenAI chat JSON / JSONL, Anthropic Messages
    JSON, transcripts of Claude Code (point it at ~/.claude/projects), Codex,
    SWE-agent, OpenHands (V1 conversation directories too), Gemini CLI, Aider,
    OpenCode exports, Pi / Oh My Pi, Entire's compact transcripts and supyagent
    (.supyagent/sessions), and the SQLite session databases of agsh and the OpenAI
    Agents SDK; a file of several conversations (or a database of several sessions)
    gives one session each. Importing a source again changes nothing; a transcript
    that has grown gets only its new messages; one whose imported part changed is
    refused (--new-version imports it as a new session). Native compactions become
    checkpoints. --title names one conversation; --agent names new sessions only.
    """
    from threadline.interop.sync import Syncer, SyncInterrupted, SyncStatus, find_sources

    sources = find_sources(paths)
    if title is not None and len(sources) > 1:
        raise UsageError(
            f"--title names one conversation, but {len(sources)} sources were given; import "
            "them without it, then `threadline sessions rename ID TITLE`"
        )
    store = store_of(ctx)
    syncer = Syncer(
        store,
        agent=agent,
        title=title,
        run=run,
        stdin=getattr(sys.stdin, "buffer", None),
        new_version=new_version,
    )
    try:
        with _import_progress(
            len(sources), show=not as_json and is_terminal(sys.stderr)
        ) as advance:
            report = syncer.sync(sources, progress=advance)
    except SyncInterrupted as stopped:
        _interrupted_import(stopped.report, len(sources))
    results, failures = report.results, report.failures
    if agent is not None:
        _warn_kept_agents(store, report, agent)
    if results and all(r.status is SyncStatus.SKIPPED for r in results) and not as_json:
        raise UsageError(_import_summary(report))
    named = [r for r in results if not _brought_along(r, paths)]
    single = len(named) == 1
    if as_json:
        print_json(report.to_json())
    elif single and (own := [f for f in failures if not _brought_along(f, paths)]):
        if own[0].exception is not None:  # the file named failed: its error is the answer
            raise own[0].exception
        raise UsageError(own[0].error or "failed")
    else:
        for failed in failures:
            report_error(failed.exception or UsageError(failed.error or "failed"))
        if single or not is_terminal(sys.stdout):
            for r in named:
                if r.session_id is not None:
                    typer.echo(r.session_id)
        echo(_import_summary(report), err=True, one_line=True)
    if failures:
        first = failures[0].exception
        raise typer.Exit(exit_code_for(first) if first is not None else 1)


def _interrupted_import(report: SyncReport, total: int) -> NoReturn:
    """Ctrl-C mid-import: the sessions the sources done so far became are kept; print
    their ids (on stdout, as a finished import does) and say so, then exit 130."""
    kept = [r for r in report.results if r.session_id is not None]
    for r in kept:
        typer.echo(r.session_id)
    done = len({r.source for r in report.results})
    summary = _import_summary(report) if report.results else "nothing imported"
    exit_interrupted(
        f"after {done} of {plural(total, 'source')} ({summary}); "
        f"{plural(len(kept), 'session')} listed above {'is' if len(kept) == 1 else 'are'} kept"
    )


@contextlib.contextmanager
def _import_progress(
    total: int, *, show: bool
) -> Iterator[Callable[[Source, list[SyncResult]], None] | None]:
    """A progress bar on a terminal's stderr while sources are imported."""
    if not show or total < 2:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=make_console(stderr=True), transient=True) as bar:
        task = bar.add_task("importing", total=total)

        def advance(source: Source, results: list[SyncResult]) -> None:
            bar.update(task, advance=1, description=shorten(Path(source.name).name, 40))

        yield advance


def _warn_kept_agents(store: Store, report: SyncReport, agent: str) -> None:
    """``--agent`` names new sessions only: say so when sessions imported before keep
    another agent's name."""
    from threadline.interop.sync import SyncStatus

    kept = [
        r.session_id
        for r in report.results
        if r.status in (SyncStatus.UNCHANGED, SyncStatus.UPDATED) and r.session_id is not None
    ]
    others = Counter(store.session_info(sid).agent for sid in kept)
    others.pop(agent, None)
    if others:
        names = ", ".join(sorted(others))
        n = sum(others.values())
        keep = "keeps its agent" if n == 1 else "keep their agent"
        warnings.warn(
            f"--agent {agent} names new sessions only: {plural(n, 'session')} imported "
            f"before {keep} ({names}); delete and import again to change it",
            stacklevel=2,
        )


def _import_summary(report: SyncReport) -> str:
    """One line: what a single source became, or the counts of many (files found in a
    directory that hold no conversation are files skipped, not conversations)."""
    from threadline.interop.sync import SyncStatus

    results = report.results
    extras = []
    if report.repairs:
        kinds = ", ".join(f"{n} {kind}" for kind, n in report.repairs.items())
        extras.append(f"repairs flagged: {kinds}")
    checkpoints = sum(r.checkpoints_added for r in results)
    if checkpoints:
        extras.append(f"{plural(checkpoints, 'checkpoint')} added")
    tail = f" ({'; '.join(extras)})" if extras else ""
    if len(results) == 1:
        r = results[0]
        if r.status is SyncStatus.NEW:
            return f"imported {plural(r.messages_added, 'message')} from {r.source}{tail}"
        if r.status is SyncStatus.UPDATED:
            added = plural(r.messages_added, "new message")
            return f"updated {r.session_id}: {added} from {r.source}{tail}"
        if r.status is SyncStatus.UNCHANGED:
            return f"unchanged: {r.source} is already session {r.session_id}"
    found = report.counts()
    skipped = found.pop(SyncStatus.SKIPPED.value)
    passed = (
        f"{plural(skipped, 'file')} skipped (no conversation in {'it' if skipped == 1 else 'them'})"
    )
    if skipped == len(results):
        return f"nothing to import: {passed}"
    counts = ", ".join(f"{n} {status}" for status, n in found.items() if n)
    added = plural(report.messages_added, "message")
    done = plural(len(results) - skipped, "conversation")
    more = f"; {passed}" if skipped else ""
    return f"{done}: {counts or 'nothing to do'}; {added} added{tail}{more}"


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory, so a reader never sees half.

    Errors name the file or its directory as the user gave them, never the temporary
    file (whose name means nothing to them): a missing directory is a usage error.
    """
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
        raise UsageError(f"cannot write {path}: the directory {directory} {problem}")
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    if sqlite_files.is_held(path):
        raise UsageError(f"cannot write {path}: it is an SQLite database this command has open")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(directory)) from exc
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
