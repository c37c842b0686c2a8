"""The ``threadline`` command: a thin face over the library (Typer + Rich).

Commands parse arguments, call the library, render, and let
``cli.errors.ErrorMappingGroup`` map failures to one stderr line and an exit
code. Each command module has a ``register(root)`` function; to add a
command, write a module with one and list it in ``COMMANDS`` (``cli/commands.py``). A command's
module is imported only when that command runs (or ``--help`` lists it), so
``threadline sessions list`` never loads the chat REPL, the agent loop or the
model providers; this module itself imports nothing heavy, and ``--version``
answers before Typer is loaded (``cli/root.py`` builds the Typer app).

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
130   interrupted (Ctrl-C); ``compact`` and ``sessions import`` first say what
      was committed (the checkpoint written, the sessions imported so far)
      (``sessions sync --watch`` stops on Ctrl-C with a summary and exit 0)
====  ==============================================================

Errors are printed as one line: ``threadline: error: <message>``. Library
warnings are printed as ``threadline: warning: <message>``.

JSON output (``--json``), stable
--------------------------------
``sessions list --json``::

    {"total": N, "offset": K, "limit": L, "items": [SessionInfo, ...]}

where ``SessionInfo`` is ``{"id", "agent", "model", "title", "created_at",
"updated_at", "message_count", "total_tokens", "last_seq", "metadata", "parent_id",
"visible_count", "child_count"}`` (times RFC 3339 UTC; an imported conversation's are
its own): ``message_count`` is what the store holds, ``visible_count`` what the
session's view shows (retracted messages and retraction records left out; the table
and ``sessions show`` print this one), ``child_count`` how many sessions are listed
under it. The items are the top-level sessions (``parent_id`` null); with ``--all``
or ``--tree`` each also holds ``"children": [SessionInfo, ...]``, nested alike.

``sessions show ID --json``::

    {"session": SessionInfo, "fork": {"parent", "seq"} | null, "forks": [id, ...],
     "children": [{"id", "title", "relation"}, ...], "checkpoints": [Checkpoint, ...],
     "lock": LockHolder | null, "scratchpad": [name, ...]}

with ``Checkpoint`` = ``{"id", "session_id", "covers_up_to", "summary",
"created_at", "metadata"}`` and ``LockHolder`` = ``{"pid", "host",
"started_at", "renewed_at", "lease_seconds"}``.

``sessions history ID --json``::

    {"session_id": ID, "items": [Message, ...]}     # oldest first

``sessions search QUERY --json``::

    {"query": QUERY, "items": [{"session_id", "seq", "role", "snippet", "agent",
                                "parent_id"}, ...]}

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

import sys
from typing import TYPE_CHECKING, Any

from threadline.cli.commands import COMMANDS as COMMANDS
from threadline.cli.commands import SUBCOMMANDS as SUBCOMMANDS

if TYPE_CHECKING:
    import typer


def __getattr__(name: str) -> Any:
    """``app``: the root Typer app, built on first use (``cli/root.py``)."""
    if name == "app":
        from threadline.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point (``threadline``)."""
    if sys.argv[1:] == ["--version"]:
        from threadline import __version__

        print(f"threadline {__version__}")
        return
    from threadline.cli.root import app

    app(prog_name="threadline")


if TYPE_CHECKING:
    app: typer.Typer

if __name__ == "__main__":  # pragma: no cover
    main()
