"""``threadline memory ...``: list, search, show, add, forget, build, export and import.

Long-term memory lives beside the sessions, in the store ``--store`` names
(``threadline.memory``). Every command works on one *scope*: ``--scope`` when
given (``user:ana``, ``project:site``; a bare name is a project scope), else
the scope of ``--agent`` (its agent file's ``memory.scope``, or
``agent:NAME``; default: the built-in agent), except ``search``, which without
either searches every scope the store holds memories in. Stored text reaches the terminal
only through ``cli.render`` (control characters escaped); ``--json`` prints a
stable document instead:

``memory list --json``::  ``{"scope", "items": [Fact, ...], "entities": [Entity, ...]}``
``memory search --json``:: ``{"query", "scopes", "items": [MemoryHit, ...]}``
``memory show --json``::  ``EntityReport`` (``{"entity", "facts", "relations"}``)
``memory add --json``::   ``Fact``
``memory forget --json``:: ``{"id", "forgotten": true}``
``memory import --json``:: ``{"imported": N, "scope", "added", "kept", "replaced",
"other_scopes": {scope: N}}`` (``imported`` = added + replaced)
``memory build --json``:: ``{"sessions", "extracted_sessions", "messages", "facts",
"scopes": {scope: facts added}, "left_out_imported": [session id, ...]}``

``memory export`` writes the memory's own JSON document (``-o -``: stdout),
which ``memory import`` reads back.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from threadline.cli.params import JsonOpt
from threadline.cli.render import (
    fmt_time,
    make_console,
    plural,
    print_json,
    printable,
    shorten,
)
from threadline.cli.state import store_of
from threadline.errors import ImportFormatError, ThreadlineError, UsageError
from threadline.json_limits import TooDeep, parse_json
from threadline.store import sqlite_files
from threadline.store.checks import DEFAULT_AGENT

if TYPE_CHECKING:
    from threadline.memory import EntityReport, Fact, MemoryHit, MemoryStore
    from threadline.store import Store

STDOUT_PATH = "-"
EXPORT_NAME = "memory-{scope}.json"
DEFAULT_LIST = 50
MAX_LIST = 10_000
DEFAULT_K = 10
FLAGS = ("--scope", "--agent")
"""How a wrong scope/agent pair names the two options."""
MAX_K = 1000
MIN_PREFIX = 4
"""A fact id may be given as a unique prefix of at least this many characters."""
MAX_IMPORT_BYTES = 256 * 1024 * 1024
SHOWN_LEFT_OUT = 10
"""Imported sessions a build names when it leaves them out (the rest are counted)."""
STATEMENT_WIDTH = 90

app = typer.Typer(
    name="memory",
    help="Long-term memory across sessions: facts, entities, search.",
    no_args_is_help=True,
)

ScopeOpt = Annotated[
    str | None,
    typer.Option(
        "--scope",
        "-s",
        help="Memory scope (agent:NAME, user:NAME, project:NAME; default: --agent's).",
    ),
]
AgentOpt = Annotated[
    str | None,
    typer.Option("--agent", "-a", help="Use this agent's memory scope (default: the built-in)."),
]


class MemoryNotFound(ThreadlineError, KeyError):
    """No fact or entity by that id or name (exit 3, like a missing session)."""

    exit_code = 3

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


def resolve_scope(scope: str | None, agent: str | None) -> str:
    """``--scope`` as given, else the scope the agent writes to (``memory_scope``)."""
    from threadline.agent.memory_link import memory_scope

    return memory_scope(scope, agent, names=FLAGS)


def check_agent_known(ctx: typer.Context, agent: str | None, scope: str) -> None:
    """``--agent NAME`` must name an agent: the built-in, one with an agent file, one with
    sessions in the store, or one whose memory holds something. A typo is an error, not
    an empty list."""
    from threadline.agent.config import find_agent_file

    if agent is None or agent == DEFAULT_AGENT or find_agent_file(agent) is not None:
        return
    store = store_of(ctx)
    if store.list_sessions(agent=agent, limit=1).items:
        return
    memory = _memory(ctx)
    if memory.list_entities(scope) or memory.list_facts(scope, include_superseded=True):
        return
    raise MemoryNotFound(
        f"no agent named {agent!r}: no agent file, no sessions and no memory in {scope} "
        "(threadline sessions list shows each session's agent)"
    )


def _memory(ctx: typer.Context, *, create: bool = False) -> MemoryStore:
    from threadline.memory import open_memory

    memory = open_memory(store_of(ctx, create=create))
    ctx.call_on_close(memory.close)
    return memory


def _dump(record: Any) -> Any:
    return record.model_dump(mode="json")


def _source(session_id: str | None, seq: int | None) -> str:
    if not session_id:
        return "-"
    return f"{session_id[:8]} #{seq}" if seq is not None else session_id[:8]


def _status(fact: Fact) -> str:
    if fact.retracted:
        return "forgotten"
    if fact.superseded_by is not None:
        return "superseded"
    return "current"


def facts_table(facts: list[Fact]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
    for name in ("Id", "Subject", "Statement", "Source", "Observed", "Status"):
        table.add_column(name, no_wrap=name != "Statement")
    for f in facts:
        table.add_row(
            f.id[:8],
            shorten(f.subject or "", 24),
            shorten(f.statement, STATEMENT_WIDTH),
            _source(f.session_id, f.seq),
            fmt_time(f.observed_at),
            _status(f),
        )
    return table


def hits_table(hits: list[MemoryHit], *, scopes: bool = False) -> Table:
    """Search hits; ``scopes``: with the scope of each (a search across several)."""
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
    names = ("Score", "Kind", *(("Scope",) if scopes else ()), "Memory", "Source", "Observed")
    for name in names:
        table.add_column(
            name, no_wrap=name != "Memory", justify="right" if name == "Score" else "left"
        )
    for h in hits:
        table.add_row(
            f"{h.score:.2f}",
            h.kind,
            *((printable(h.scope or "", one_line=True),) if scopes else ()),
            shorten(h.text, STATEMENT_WIDTH),
            _source(h.session_id, h.seq),
            fmt_time(h.observed_at),
        )
    return table


def report_blocks(report: EntityReport) -> list[Any]:
    e = report.entity
    head = Text(e.name, style="bold")
    head.append(f"  {e.kind} · {e.scope}", style="dim")
    if e.aliases:
        head.append(f" · also: {', '.join(e.aliases)}", style="dim")
    blocks: list[Any] = [head]
    blocks.append(facts_table(report.facts) if report.facts else Text("no facts", style="dim"))
    if report.relations:
        lines = [f"{r.source} {r.label} {r.target}" for r in report.relations]
        blocks.append(Text("Relations:\n  " + "\n  ".join(lines)))
    return blocks


# -- the commands ------------------------------------------------------------------


@app.command("list")
def list_facts(
    ctx: typer.Context,
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Also superseded and forgotten facts.")
    ] = False,
    limit: Annotated[
        int, typer.Option("-n", "--limit", min=1, max=MAX_LIST, help="Most facts to show.")
    ] = DEFAULT_LIST,
    as_json: JsonOpt = False,
) -> None:
    """The facts of a scope, newest first, with where each was learned."""
    where = resolve_scope(scope, agent)
    check_agent_known(ctx, agent, where)
    memory = _memory(ctx)
    facts = memory.list_facts(where, include_superseded=all_)
    facts = sorted(facts, key=lambda f: f.observed_at, reverse=True)[:limit]
    entities = memory.list_entities(where)
    if as_json:
        print_json(
            {
                "scope": where,
                "items": [_dump(f) for f in facts],
                "entities": [_dump(e) for e in entities],
            }
        )
        return
    console = make_console()
    if facts:
        console.print(facts_table(facts))
    console.print(
        Text(
            f"{plural(len(facts), 'fact')} · {plural(len(entities), 'entity')} in {where}",
            style="dim",
        )
    )


@app.command("search")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for (words, names, dates).")],
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    k: Annotated[
        int, typer.Option("-k", "--limit", min=1, max=MAX_K, help="Most hits.")
    ] = DEFAULT_K,
    as_json: JsonOpt = False,
) -> None:
    """Search memories, best first: of --scope or --agent, else of every scope the store
    holds memories in (``memory build`` fills each session's agent's scope)."""
    if not query.strip():
        raise UsageError("memory search: the query is empty")
    memory = _memory(ctx)
    from threadline.agent.memory_link import search_scopes

    scopes = search_scopes(memory, scope, agent, names=FLAGS)
    if scope is not None or agent is not None:
        check_agent_known(ctx, agent, scopes[0])
    hits = memory.search(query, scopes=scopes, k=k)
    if as_json:
        print_json({"query": query, "scopes": scopes, "items": [_dump(h) for h in hits]})
        return
    console = make_console()
    if hits:
        console.print(hits_table(hits, scopes=len(scopes) > 1))
    console.print(Text(searched(len(hits), hits, scopes), style="dim"))


def searched(n: int, hits: list[MemoryHit], scopes: list[str]) -> str:
    """``3 hits in agent:coder``, or across scopes, which of them hold the hits."""
    if len(scopes) == 1:
        return f"{plural(n, 'hit')} in {scopes[0]}"
    held = Counter(h.scope or "?" for h in hits)
    where = ", ".join(f"{s} ({c})" for s, c in sorted(held.items()))
    return f"{plural(n, 'hit')} across {len(scopes)} scopes" + (f": {where}" if where else "")


@app.command("show")
def show(
    ctx: typer.Context,
    entity: Annotated[str, typer.Argument(metavar="ENTITY", help="An entity's name or alias.")],
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Everything known about one entity: its facts (current first) and relations."""
    where = resolve_scope(scope, agent)
    check_agent_known(ctx, agent, where)
    report = _memory(ctx).recall(entity, scopes=[where])
    if report is None:
        raise MemoryNotFound(f"no entity named {entity!r} in {where}")
    if as_json:
        print_json(_dump(report))
        return
    from threadline.cli.compact_cmd import print_blocks

    print_blocks(report_blocks(report))


@app.command("add")
def add(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="The fact, as one statement.")],
    subject: Annotated[
        str | None, typer.Option("--subject", help="The entity it is about.")
    ] = None,
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store one fact explicitly (it supersedes an older fact on the same subject and slot)."""
    if not statement.strip():
        raise UsageError("memory add: the statement is empty")
    where = resolve_scope(scope, agent)
    fact = _memory(ctx, create=True).write_fact(where, statement.strip(), subject=subject)
    if as_json:
        print_json(_dump(fact))
        return
    make_console().print(Text(f"stored fact {fact.id} in {where}"), soft_wrap=True)


def _find_fact(memory: MemoryStore, fact_id: str, scope: str) -> Fact:
    fact = memory.get_fact(fact_id)
    if fact is not None:
        return fact
    if len(fact_id) >= MIN_PREFIX:
        matches = [
            f for f in memory.list_facts(scope, include_superseded=True) if f.id.startswith(fact_id)
        ]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UsageError(f"fact id prefix {fact_id!r} matches {len(matches)} facts in {scope}")
    raise MemoryNotFound(f"no fact {fact_id!r} in {scope}")


@app.command("forget")
def forget(
    ctx: typer.Context,
    fact_id: Annotated[
        str, typer.Argument(metavar="FACT_ID", help="Fact id or a unique prefix (4+).")
    ],
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark a fact forgotten: kept for the record, never recalled again."""
    where = resolve_scope(scope, agent)
    memory = _memory(ctx, create=True)
    fact = _find_fact(memory, fact_id.strip(), where)
    if not memory.forget(fact.id):
        raise MemoryNotFound(f"no fact {fact.id!r} to forget")
    if as_json:
        print_json({"id": fact.id, "forgotten": True})
        return
    make_console().print(
        Text(f"forgot fact {fact.id}: {shorten(fact.statement, 80)}"), soft_wrap=True
    )


@app.command("export")
def export(
    ctx: typer.Context,
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    every_scope: Annotated[
        bool, typer.Option("--every-scope", help="Export every scope in the store.")
    ] = False,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="FILE|-", help="Default: memory-<scope>.json."),
    ] = None,
) -> None:
    """Write memories as JSON, which memory import reads back."""
    from threadline.cli.sessions import write_atomically

    where = None if every_scope else resolve_scope(scope, agent)
    data = _memory(ctx).export(where)
    text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    if output == STDOUT_PATH:
        typer.echo(text, nl=False)
        return
    name = (where or "all").replace(":", "-")
    path = Path(output) if output else Path(EXPORT_NAME.format(scope=name))
    write_atomically(path, text)
    typer.echo(f"wrote {path}", err=True)
    typer.echo(str(path))


def _read_head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(MAX_IMPORT_BYTES + 1)


def read_import(path: str) -> dict[str, Any]:
    """The JSON document at ``path`` (``-``: standard input), checked to be an object."""
    where = "standard input" if path == STDOUT_PATH else path
    try:
        if path == STDOUT_PATH:
            raw = sys.stdin.buffer.read(MAX_IMPORT_BYTES + 1)
        else:
            # never a plain descriptor on a database this command has open (its locks)
            raw = sqlite_files.read_unheld(Path(path), _read_head)
            if raw is None:
                raise UsageError(f"cannot read {where}: it is an SQLite database in use here")
    except OSError as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportFormatError(f"{where}: larger than {MAX_IMPORT_BYTES:,} bytes")
    try:
        data = parse_json(raw)
    except TooDeep as exc:
        raise ImportFormatError(f"{where}:{exc.line}: JSON {exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{where}: not a JSON document ({exc})") from exc
    if not isinstance(data, dict):
        raise ImportFormatError(f"{where}: expected a memory export (a JSON object)")
    return data


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(metavar="PATH|-", help="A memory export (- for stdin).")],
    scope: ScopeOpt = None,
    agent: AgentOpt = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Overwrite records of the scope already present (same id)."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Read one scope's memories from a memory export; records already present are kept
    (--replace overwrites those of the scope), records of other scopes passed over."""
    where = resolve_scope(scope, agent)
    data = read_import(path)
    report = _memory(ctx, create=True).import_(data, scope=where, replace=replace)
    if not (report.added or report.kept or report.replaced) and report.other_scopes:
        listed = ", ".join(f"{s} ({plural(n, 'record')})" for s, n in report.other_scopes.items())
        raise UsageError(
            f"{'standard input' if path == STDOUT_PATH else path} holds no records of "
            f"{where}; it holds {listed}: name the scope to import with --scope"
        )
    if as_json:
        print_json({"imported": report.written, **_dump(report)})
        return
    line = f"imported {plural(report.written, 'record')} into {where}"
    if report.kept:
        line += f"; kept {plural(report.kept, 'record')} already present"
        if not replace:
            line += " (--replace overwrites those of the scope)"
    if report.replaced:
        line += f"; {plural(report.replaced, 'record')} replaced"
    typer.echo(line)
    if report.other_scopes:
        others = ", ".join(f"{s} ({n})" for s, n in report.other_scopes.items())
        typer.echo(f"passed over records of other scopes: {others}", err=True)


@app.command("build")
def build(
    ctx: typer.Context,
    session_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="[ID...]", help="Sessions (ids or unique prefixes) to build from."),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every session in the store.")] = False,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Every session of this agent.")
    ] = None,
    include_imported: Annotated[
        bool,
        typer.Option(
            "--include-imported",
            help="Build from imported sessions too (their agent is what their file claims).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Extract memory from stored sessions, each into its agent's scope, from where the
    last extraction of it stopped: a second build adds nothing. Imported sessions are left
    out (and listed) unless --include-imported."""
    from threadline.memory import open_memory
    from threadline.memory.build import agent_sessions, build_memory

    ids = [i.strip() for i in session_ids or [] if i.strip()]
    if sum((bool(ids), every, agent is not None)) != 1:
        raise UsageError("memory build: give session ids, --agent NAME or --all (one of them)")
    store = store_of(ctx)
    memory = open_memory(store)
    ctx.call_on_close(memory.close)
    if ids:
        chosen = [store.session_info(store.resolve_id(i)) for i in ids]
    else:
        chosen = list(agent_sessions(store, agent))
        if agent is not None and not chosen:
            check_agent_known(ctx, agent, resolve_scope(None, agent))
    scopes: dict[str, str] = {}

    def scope_of(name: str) -> str:
        if name not in scopes:
            scopes[name] = resolve_scope(None, name)
        return scopes[name]

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    err = make_console(stderr=True)
    with Progress(
        TextColumn("extracting"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("messages"),
        console=err,
        disable=as_json or not err.is_terminal,
        transient=True,
    ) as bar:
        task = bar.add_task("build", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = build_memory(
            store,
            memory,
            chosen,
            scope_of=scope_of,
            progress=progress,
            include_imported=include_imported,
        )
    if as_json:
        print_json(
            {
                "sessions": report.sessions,
                "extracted_sessions": report.extracted_sessions,
                "messages": report.messages,
                "facts": report.facts,
                "scopes": report.scopes,
                "left_out_imported": report.left_out_imported,
            }
        )
        return
    line = (
        f"added {plural(report.facts, 'fact')} from {plural(report.messages, 'message')} "
        f"in {plural(report.extracted_sessions, 'session')}"
    )
    current = report.sessions - report.extracted_sessions
    if current:
        line += f"; {plural(current, 'session')} already up to date"
    typer.echo(line)
    for where, n in sorted(report.scopes.items()):
        typer.echo(f"  {where}: {plural(n, 'fact')}")
    if report.left_out_imported:
        shown = ", ".join(report.left_out_imported[:SHOWN_LEFT_OUT])
        more = len(report.left_out_imported) - SHOWN_LEFT_OUT
        typer.echo(
            f"left out {plural(len(report.left_out_imported), 'imported session')} ({shown}"
            + (f" and {more} more" if more > 0 else "")
            + "): their agent and turns are what their files claim; add --include-imported "
            "to build memory from them too"
        )


# -- the memory demo (``threadline demo --memory``) -------------------------------------


def print_memory_demo(console: Console, store: Store, store_url: str) -> None:
    """Run ``threadline.demo.memory_run`` and show it: what session one said, the facts
    saved (by extraction and by the pre-compaction flush), what session two recalled,
    and the context report with its memory section."""
    from threadline.cli.compact_cmd import print_blocks
    from threadline.demo.memory_run import (
        MEMORY_DEMO_MODEL_NAME,
        DemoTurn,
        recalled_lines,
        run_memory_demo,
    )
    from threadline.report.context import context_blocks

    def turn(t: DemoTurn) -> None:
        console.print(Text(f"> {t.user}", style="green"))
        for call, result in zip(t.tool_calls, t.tool_results, strict=False):
            console.print(Text(f"  tool {call} -> {shorten(result, 160)}", style="dim"))
        console.print(Text(t.reply))

    console.print(
        Text("threadline demo --memory: what one session learns, a later one recalls", style="bold")
    )
    console.print(
        Text(
            f"The model is SIMULATED ({MEMORY_DEMO_MODEL_NAME!r} plays scripted replies and "
            "answers from what threadline sends it); no LLM is called. Everything else is "
            f"threadline's real engine: the store ({store_url}), the memory recorder with the "
            "offline extractor, the pre-compaction flush, retrieval, and the context builder.",
            style="yellow",
        )
    )
    r = run_memory_demo(store)
    console.print()
    console.print(
        Text(f"Session one ({r.first_session.id[:8]}), memory scope {r.scope}", style="bold")
    )
    for t in r.first_turns:
        turn(t)
    console.print(
        Text(
            f"extraction during the session saved {plural(r.extracted_during_session, 'fact')}; "
            f"closing it with a compaction (messages {r.compaction.covers_from}-"
            f"{r.compaction.covers_up_to}) first flushed pending extraction: "
            f"{plural(r.flushed, 'more fact')} saved before the summary was written",
            style="dim",
        ),
        soft_wrap=True,
    )
    console.print()
    console.print(Text(f"$ threadline memory list --scope {r.scope}", style="dim"))
    console.print(facts_table(r.facts))
    console.print()
    console.print(Text(f"Session two ({r.second_session.id[:8]}), a new session", style="bold"))
    for t in r.second_turns:
        lines = recalled_lines(t)
        console.print(
            Text(
                f"recalled for this message ({plural(len(lines), 'memory', 'memories')}):",
                style="cyan",
            )
        )
        for line in lines:
            console.print(Text(f"  - {line}", style="cyan"))
        turn(t)
    console.print()
    console.print(
        Text(
            f"$ threadline context {r.second_session.id[:8]}   (the next call's window: the "
            "memory block sits before the latest message, after the cached prefix)",
            style="dim",
        )
    )
    print_blocks(context_blocks(r.window, r.second_session, r.agent.policy), console)
    r.agent.close()


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="memory")
