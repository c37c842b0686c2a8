"""Slash commands of the chat REPL: parsing, completion and dispatch, without a terminal.

A line that starts with ``/name`` is a command, not a message (``/usr/bin is
slow`` is a message: a command name is followed by a space or nothing). The
commands follow the reference CLIs (``shared/seeds/000``, ``001``, ``003``):
``/help``, ``/sessions``, ``/session ID``, ``/new``, ``/delete [ID]``,
``/rename TITLE``, ``/export FILE``, ``/history [N]``, ``/context``,
``/tokens``, ``/summarize`` (``/compact``), ``/memory [QUERY]``, ``/fork``,
``/rewind [N]`` and ``/quit`` (``/exit``).

Commands act on a ``ChatHost`` (the REPL's state: agent, store, the attached
session and its lock) and print to its console, so tests drive them with an
in-memory console and no prompt. A command's failure is one red line and the
REPL goes on; only ``/quit`` ends it.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol, TypeVar

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from rich.console import Console
from rich.table import Table
from rich.text import Text

from threadline.agent import Agent
from threadline.cli.compact_cmd import render_result
from threadline.cli.render import (
    page_footer,
    render_messages,
    session_details,
    sessions_table,
    shorten,
)
from threadline.cli.sessions import DEFAULT_HISTORY, EXPORT_NAME, write_atomically
from threadline.context.builder import ContextReport
from threadline.errors import ThreadlineError, UsageError
from threadline.interop.export import to_json, to_markdown
from threadline.report.context import session_context
from threadline.report.text import fmt_pct
from threadline.store.checkpoints import numbered_checkpoints
from threadline.store.checks import DEFAULT_PAGE_SIZE, check_title
from threadline.store.protocol import Session, Store

COMMAND_RE = re.compile(r"^/(?P<name>[A-Za-z][\w-]*)(?:\s+(?P<args>.*))?$", re.DOTALL)
JSON_SUFFIX = ".json"
"""``/export FILE.json`` writes the re-importable JSON; any other name gets Markdown."""
MAX_HISTORY = 1000
"""``/history N`` shows at most this many messages."""
SUGGESTIONS_CUTOFF = 0.6
REWOUND_CHARS = 120
"""Characters of the undone request ``/rewind`` shows."""


class Outcome(Enum):
    """What the REPL does after a command."""

    CONTINUE = "continue"
    QUIT = "quit"


class ChatHost(Protocol):
    """The REPL state commands act on (``threadline.cli.chat.ChatController``)."""

    agent: Agent
    console: Console
    show_tokens: bool
    pending_title: str | None
    """A ``/rename`` before the first message: the title the lazy session gets."""

    @property
    def store(self) -> Store: ...

    @property
    def session(self) -> Session | None: ...

    def switch_to(self, id_or_prefix: str) -> Session:
        """Attach (lock) another session, then let go of the current one."""
        ...

    def detach(self) -> Session | None:
        """Let go of the current session (release its lock); the next message starts a new one."""
        ...

    def confirm(self, question: str) -> bool:
        """Ask the user a yes/no question; False unless they answer yes."""
        ...

    def fork(self, at: int | None = None) -> Session:
        """Fork the current session at seq ``at`` (default: its end) and continue in the fork."""
        ...

    def remember_settings(self) -> None:
        """Store the chat's setup (``/tokens``) on the current session, for resuming."""
        ...


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    name: str
    """Lower-cased, without the slash."""
    args: str
    """The rest of the line, stripped."""


Handler = Callable[[ChatHost, str], Outcome | None]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    usage: str
    """``/name ARGS``: the name is its first word, so it is written once."""
    help: str
    handler: Handler
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.usage.split()[0].removeprefix("/")


def parse_command(text: str) -> ParsedCommand | None:
    """The command on this line, or None when the line is a message."""
    match = COMMAND_RE.match(text.strip())
    if match is None:
        return None
    return ParsedCommand(match["name"].lower(), (match["args"] or "").strip())


_REGISTERED: list[CommandSpec] = []
_H = TypeVar("_H", bound=Handler)


def command(usage: str, help: str, *aliases: str) -> Callable[[_H], _H]:
    """Registers the handler below as ``usage`` (with ``help`` and ``aliases``), so each
    command is declared once, where it is written; ``/help`` lists them in that order."""

    def register(handler: _H) -> _H:
        _REGISTERED.append(CommandSpec(usage, help, handler, aliases))
        return handler

    return register


# -- shared rendering ------------------------------------------------------------------


def tokens_line(report: ContextReport, *, factor: float = 1.0, window: int | None = None) -> str:
    """``tokens: 45,000 msgs + 12,450 tools | context: 57,450 / 200,000 (28%)``.

    The report counts in threadline's estimate; ``factor`` (the model's
    calibration, provider tokens per estimated token) turns that into what the
    provider counts, and ``window`` is the model's real window. Without them a
    calibrated report would show its scaled-down build limit, an odd number.
    """
    tools = math.ceil(sum(s.tokens for s in report.sections if s.name == "tools") * factor)
    total = math.ceil(report.total_tokens * factor)
    limit = window if window is not None else report.limit
    return (
        f"tokens: {total - tools:,} msgs + {tools:,} tools | context: "
        f"{total:,} / {limit:,} ({fmt_pct(total, limit)})"
    )


def _need_session(host: ChatHost, what: str) -> Session:
    session = host.session
    if session is None:
        raise UsageError(
            f"no session yet to {what}: the session is created at your first message "
            "(or attach one with /session ID)"
        )
    return session


def _note(host: ChatHost, text: str) -> None:
    """A one-line notice; never wrapped, so ids and paths stay whole for copy and paste."""
    host.console.print(Text(text, style="dim"), soft_wrap=True)


# -- the commands ------------------------------------------------------------------------


@command("/help", "List the commands.")
def cmd_help(host: ChatHost, args: str) -> None:
    table = Table(box=None, pad_edge=False, show_header=False, padding=(0, 2))
    table.add_column(no_wrap=True, style="bold")
    table.add_column()
    for spec in COMMANDS:
        names = spec.usage
        if spec.aliases:
            names += " (" + ", ".join(f"/{a}" for a in spec.aliases) + ")"
        table.add_row(names, spec.help)
    host.console.print(table)
    _note(host, "Anything else is sent to the model. Ctrl-D quits; Ctrl-C cancels a reply.")


@command("/sessions", "This agent's sessions, newest first.")
def cmd_sessions(host: ChatHost, args: str) -> None:
    agent = host.agent.config.name
    page = host.store.list_sessions(agent=agent, limit=DEFAULT_PAGE_SIZE)
    if page.items:
        host.console.print(sessions_table(host.store, page, width=host.console.width))
    host.console.print(page_footer(page))
    current = host.session
    _note(host, f"agent {agent} · current: {current.id if current else 'none yet'}")


@command("/session [ID]", "Switch to a session (id or prefix); without ID, show the current one.")
def cmd_session(host: ChatHost, args: str) -> None:
    if not args:
        session = _need_session(host, "show")
        host.console.print(session_details(session.refresh().info))
        return
    current = host.session
    if current is not None and host.store.resolve_id(args) == current.id:
        _note(host, f"already in session {current.id}")
        return
    session = host.switch_to(args)
    _note(host, f"switched to session {session.id} ({session.message_count:,} messages)")


@command("/new [TITLE]", "Start a new session at the next message.")
def cmd_new(host: ChatHost, args: str) -> None:
    left = host.detach()
    host.pending_title = args or None
    where = f"left session {left.id}; " if left is not None else ""
    _note(host, f"{where}a new session starts with your next message")


@command("/delete [ID]", "Delete a session (default: the current one, after asking).")
def cmd_delete(host: ChatHost, args: str) -> None:
    """``/delete [ID]``: without an id, the current session, after asking. A session with
    forks is refused (``sessions delete --force`` deletes it with them)."""
    from threadline.store.fork import deletion_order

    current = host.session
    target = host.store.resolve_id(args) if args else _need_session(host, "delete").id
    deletion_order(host.store, [target], force=False)  # refuses a parent before asking
    if not args and not host.confirm(f"Delete the current session {target}?"):
        _note(host, "nothing deleted")
        return
    if current is not None and target == current.id:
        host.detach()  # our own lock would refuse the delete
    host.store.delete_session(target)
    _note(host, f"deleted session {target}")
    if current is not None and target == current.id:
        _note(host, "a new session starts with your next message")


@command("/rename TITLE", "Set the current session's title.")
def cmd_rename(host: ChatHost, args: str) -> None:
    title = check_title(args)
    if title is None:
        raise UsageError("usage: /rename TITLE")
    session = host.session
    if session is None:
        host.pending_title = title
        _note(host, f"the new session will be titled {title!r}")
        return
    session.rename(title)
    _note(host, f"renamed session {session.id}: {title}")


@command("/export [FILE]", "Write the session as Markdown (FILE.json: re-importable JSON).")
def cmd_export(host: ChatHost, args: str) -> None:
    session = _need_session(host, "export").refresh()
    path = Path(args).expanduser() if args else Path(EXPORT_NAME.format(id=session.id, ext="md"))
    if path.is_dir():
        raise UsageError(f"/export: {path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"/export: directory {path.parent} does not exist")
    info = session.info.to_dict()
    if path.suffix.lower() == JSON_SUFFIX:
        checkpoints = numbered_checkpoints(session.checkpoints())
        text = to_json(info, session.iter_messages(), checkpoints) + "\n"
    else:
        text = to_markdown(info, session.iter_messages())
    write_atomically(path, text)
    _note(host, f"wrote {path} ({session.message_count:,} messages)")


@command("/history [N]", "Show the last N messages (default 10).")
def cmd_history(host: ChatHost, args: str) -> None:
    count = DEFAULT_HISTORY
    if args:
        try:
            count = int(args)
        except ValueError:
            raise UsageError(f"usage: /history [N] (N a number, got {args!r})") from None
        if not 1 <= count <= MAX_HISTORY:
            raise UsageError(f"/history N: N must be between 1 and {MAX_HISTORY}")
    session = _need_session(host, "show the history of")
    messages = list(reversed(session.tail(count)))
    if not messages:
        _note(host, "no messages")
        return
    host.console.print(render_messages(messages))


@command("/context", "What the next model call gets, and how close compaction is.")
def cmd_context(host: ChatHost, args: str) -> None:
    session = _need_session(host, "report on").refresh()
    blocks = session_context(session, host.agent).blocks
    for i, block in enumerate(blocks):
        if i:
            host.console.print()
        host.console.print(block)


MEMORY_LISTED = 20
"""``/memory`` without a query lists this many of the newest facts."""


@command(
    "/memory [--json] [QUERY]",
    "Search this agent's long-term memory; without QUERY, its newest facts.",
)
def cmd_memory(host: ChatHost, args: str) -> None:
    """``/memory [--json] [QUERY]``: search this agent's memory, or list its newest facts."""
    from threadline.cli.memory_cmd import facts_table, hits_table

    memory = host.agent.memory
    if memory is None:
        raise UsageError(
            f"memory is off for agent {host.agent.config.name}: set memory.enabled: true "
            "in its agent file"
        )
    words = args.split()
    as_json = "--json" in words
    query = " ".join(w for w in words if w != "--json")
    if query:
        hits = memory.memory.search(query, scopes=memory.scopes, k=MEMORY_LISTED)
        if as_json:
            items = [h.model_dump(mode="json") for h in hits]
            _json(host, {"query": query, "scopes": memory.scopes, "items": items})
        else:
            if hits:
                host.console.print(hits_table(hits))
            _note(host, f"{len(hits)} hit{'s' if len(hits) != 1 else ''} in {memory.scope}")
        return
    facts = memory.memory.list_facts(memory.scope)
    facts = sorted(facts, key=lambda f: f.observed_at, reverse=True)[:MEMORY_LISTED]
    if as_json:
        _json(host, {"scope": memory.scope, "items": [f.model_dump(mode="json") for f in facts]})
        return
    if facts:
        host.console.print(facts_table(facts))
    _note(host, f"newest {len(facts)} facts in {memory.scope}; /memory QUERY searches them")


def _json(host: ChatHost, data: object) -> None:
    host.console.print(Text(json.dumps(data, ensure_ascii=False, indent=2)), soft_wrap=True)


@command("/tokens", "Toggle the per-turn token usage line.")
def cmd_tokens(host: ChatHost, args: str) -> None:
    host.show_tokens = not host.show_tokens
    host.remember_settings()
    _note(host, f"per-turn token line {'on' if host.show_tokens else 'off'}")


@command("/fork", "Go on in a new session sharing this one's history.")
def cmd_fork(host: ChatHost, args: str) -> None:
    """``/fork``: go on in a new session that shares all of this one's history."""
    if args:
        raise UsageError("usage: /fork (to fork further back, use /rewind N)")
    original = _need_session(host, "fork").id
    child = host.fork()
    assert child.fork is not None
    _note(
        host,
        f"forked session {original} at seq {child.fork.seq:,}: now in {child.id} "
        f"(/session {original} goes back)",
    )


@command("/rewind [N]", "Go back before the N-th last request (default 1), in a new session.")
def cmd_rewind(host: ChatHost, args: str) -> None:
    """``/rewind [N]``: fork just before the N-th last request and go on there."""
    from threadline.requests import request_text
    from threadline.store.fork import user_turn_seq

    back = 1
    if args:
        try:
            back = int(args)
        except ValueError:
            raise UsageError(f"usage: /rewind [N] (N a number of requests, got {args!r})") from None
    session = _need_session(host, "rewind")
    seq = user_turn_seq(session, back)
    undone = session.read_messages(after_seq=seq, limit=1)
    original = session.id
    child = host.fork(seq)
    asked = request_text(undone[0]) if undone else None
    turns = f"{back} request{'s' if back != 1 else ''}"
    _note(host, f"rewound {turns}: now in {child.id} (/session {original} goes back)")
    if asked:
        _note(host, f"undone: {shorten(asked, REWOUND_CHARS)}")


@command(
    "/summarize [FOCUS]",
    "Compact now: summarize older messages into a checkpoint (FOCUS: what to keep most of).",
    "compact",
)
def cmd_summarize(host: ChatHost, args: str) -> None:
    """``/compact [focus]``: the rest of the line tells the summarizer what to keep most of."""
    session = _need_session(host, "summarize")
    result = host.agent.compact(session, force=True, focus=args.strip() or None)
    for i, block in enumerate(render_result(result)):
        if i:
            host.console.print()
        host.console.print(block)


@command("/quit", "Leave (Ctrl-D too); prints the session id.", "exit")
def cmd_quit(host: ChatHost, args: str) -> Outcome:
    return Outcome.QUIT


COMMANDS: tuple[CommandSpec, ...] = tuple(_REGISTERED)
"""Every command, in the order ``/help`` lists them (the order they are written in)."""

_BY_NAME: dict[str, CommandSpec] = {
    name: spec for spec in COMMANDS for name in (spec.name, *spec.aliases)
}


def command_names() -> list[str]:
    """Every name and alias, without the slash."""
    return list(_BY_NAME)


def find_command(name: str) -> CommandSpec | None:
    return _BY_NAME.get(name.lower())


def unknown_hint(name: str) -> str:
    close = difflib.get_close_matches(name, command_names(), n=1, cutoff=SUGGESTIONS_CUTOFF)
    guess = f"; did you mean /{close[0]}?" if close else ""
    return f"unknown command /{name}{guess} (/help lists the commands)"


def dispatch(host: ChatHost, command: ParsedCommand) -> Outcome:
    """Run one command; failures become one line on the console."""
    spec = find_command(command.name)
    if spec is None:
        host.console.print(Text(unknown_hint(command.name), style="yellow"))
        return Outcome.CONTINUE
    try:
        outcome = spec.handler(host, command.args)
    except ThreadlineError as exc:
        message = " ".join(str(exc).split())
        host.console.print(Text(f"/{spec.name}: {message}", style="red"), soft_wrap=True)
        return Outcome.CONTINUE
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        host.console.print(
            Text(f"/{spec.name}: {exc.strerror or exc}{where}", style="red"), soft_wrap=True
        )
        return Outcome.CONTINUE
    return outcome or Outcome.CONTINUE


# -- completion ---------------------------------------------------------------------------


class SlashCompleter(Completer):
    """Completes ``/name`` at the start of the line, with each command's help as meta."""

    def __init__(self, commands: Sequence[CommandSpec] = COMMANDS) -> None:
        self.commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        before = document.text_before_cursor
        if not before.startswith("/") or any(c.isspace() for c in before):
            return
        typed = before[1:].lower()
        for spec in self.commands:
            for name in (spec.name, *spec.aliases):
                if name.startswith(typed):
                    yield Completion(
                        f"/{name}",
                        start_position=-len(before),
                        display=spec.usage if name == spec.name else f"/{name}",
                        display_meta=spec.help,
                    )
