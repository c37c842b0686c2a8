"""The ``threadline`` command: a thin face over the library (Typer + Rich).

Commands parse arguments, call the library, render, and let
``cli.errors.ErrorMappingGroup`` map failures to one stderr line and an exit
code. Each command module has a ``register(root)`` function; to add a
command, write a module with one and list it in ``COMMAND_MODULES`` below.

Global option: ``--store URL`` (default ``$THREADLINE_STORE``, else
``sqlite://<user data dir>/threadline.db``). Anywhere an ID is taken, a unique
prefix of 4 or more characters works too.

Exit codes
----------
====  ==============================================================
0     success
1     generic or unexpected error (traceback with THREADLINE_DEBUG=1);
      also a declined confirmation
2     usage: bad arguments or options, an invalid id (``/``, ``..``,
      NUL), an ambiguous id prefix, a bad config, a malformed import
      file (the message names the line)
3     session not found
4     session locked by another live process (or compaction running)
5     context overflow: even the protected messages do not fit
6     not supported by this store backend (e.g. search)
7     model provider error
8     store error: cannot open or write, no store at the URL (commands
      that only read never create one), not a threadline database, schema
      from a newer threadline, corrupt record, a damaged store (see
      ``threadline doctor``); ``doctor`` exits 8 when it finds damage
130   interrupted (Ctrl-C)
====  ==============================================================

Errors are printed as one line: ``threadline: error: <message>``. Library
warnings are printed as ``threadline: warning: <message>``.

JSON output (``--json``), stable
--------------------------------
``sessions list --json``::

    {"total": N, "offset": K, "limit": L, "items": [SessionInfo, ...]}

where ``SessionInfo`` is ``{"id", "agent", "model", "title", "created_at",
"updated_at", "message_count", "total_tokens", "last_seq", "metadata"}``
(times RFC 3339 UTC).

``sessions show ID --json``::

    {"session": SessionInfo, "checkpoints": [Checkpoint, ...],
     "lock": LockHolder | null, "scratchpad": [name, ...]}

with ``Checkpoint`` = ``{"id", "session_id", "covers_up_to", "summary",
"created_at", "metadata"}`` and ``LockHolder`` = ``{"pid", "host",
"started_at", "renewed_at", "lease_seconds"}``.

``sessions history ID --json``::

    {"session_id": ID, "items": [Message, ...]}     # oldest first

``sessions search QUERY --json``::

    {"query": QUERY, "items": [{"session_id", "seq", "role", "snippet", "agent"}, ...]}

``sessions export ID --format json`` writes the interchange document of
``threadline.interop.export`` (``{"format": "threadline.session",
"version": 1, "session": {...}, "messages": [...], "checkpoints": [...]}``),
which ``sessions import`` reads back.

``context ID --json``::

    {"messages": [OpenAI chat message, ...], "report": ContextReport}

``doctor --json`` (see ``threadline.store.doctor``)::

    {"store": URL, "ok": bool, "sessions": [{"session_id", "status", "readable",
     "messages_read", "message_count", "checkpoints", "problems"}, ...],
     "findings": [{"severity", "kind", "message", "session_id"}, ...],
     "salvage": null | {"destination", "sessions": [...], "left_behind": [...]}}

``sessions import PATH... --json`` (a sync: see ``threadline.interop.sync``)::

    {"counts": {"new": N, "updated": N, "unchanged": N, "failed": N, "skipped": N},
     "messages_added": N, "repairs": {KIND: N, ...},
     "sources": [{"source", "run", "format", "status", "source_id", "session_id",
                  "title", "messages_added", "checkpoints_added", "repairs",
                  "error"}, ...]}

Without ``--json``, ``sessions import`` prints on stdout the id of each session
it created, updated or found unchanged, one per line (only the summary line on
stderr when several sources meet a terminal); it exits with the first failure's
code. ``sessions export`` prints the path it wrote (nothing extra with ``-o -``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Annotated

import typer

from threadline import __version__
from threadline.cli import (
    chat,
    cleanup_cmd,
    compact_cmd,
    context_cmd,
    copy_cmd,
    demo,
    doctor_cmd,
    serve_cmd,
    sessions,
)
from threadline.cli.errors import ErrorMappingGroup
from threadline.cli.state import CliState
from threadline.store import STORE_ENV, default_store_url
from threadline.tokens import tokenizer_mode

COMMAND_MODULES: tuple[ModuleType, ...] = (
    chat,
    sessions,
    context_cmd,
    compact_cmd,
    demo,
    cleanup_cmd,
    copy_cmd,
    doctor_cmd,
    serve_cmd,
)
"""Each has ``register(root: typer.Typer)``; add new command modules here."""

app = typer.Typer(
    name="threadline",
    cls=ErrorMappingGroup,
    help="Durable LLM-agent sessions, and context windows that fit.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"threadline {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help=f"Store URL (sqlite:///path.db, memory://, ...). Default: ${STORE_ENV} "
            "or the user data directory.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """threadline: durable LLM-agent sessions, and context windows that fit."""
    tokenizer_mode()  # a bad $THREADLINE_TOKENIZER is refused by every command, not some
    state = CliState(store_url=store if store is not None else default_store_url())
    ctx.obj = state
    ctx.call_on_close(state.close)


for _module in COMMAND_MODULES:
    _module.register(app)


def main() -> None:
    """Console-script entry point (``threadline``)."""
    app(prog_name="threadline")


if __name__ == "__main__":  # pragma: no cover
    main()
