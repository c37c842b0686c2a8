"""The ``threadline`` command's table of commands: which modules define each one.

Its own module, below both ``cli/app.py`` (the entry point) and ``cli/root.py`` (the
Typer app, which reads the table), so neither imports the other back.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, ...]] = {
    "chat": ("threadline.cli.chat",),
    "sessions": ("threadline.cli.sessions",),
    "context": ("threadline.cli.context_cmd",),
    "compact": ("threadline.cli.compact_cmd",),
    "memory": ("threadline.cli.memory_cmd",),
    "demo": ("threadline.cli.demo",),
    "cleanup": ("threadline.cli.cleanup_cmd",),
    "doctor": ("threadline.cli.doctor_cmd",),
    "serve": ("threadline.cli.serve_cmd",),
    "mcp": ("threadline.cli.mcp_cmd",),
}
"""Top-level command -> the modules whose ``register(root)`` define it and its
subcommands, in ``--help`` order; add new commands here. A group's subcommands are
built only when one runs (``cli/root.py``)."""

SUMMARIES: dict[str, str] = {
    "chat": "Chat with an agent; sessions are created at the first message and kept in the store.",
    "sessions": "List, inspect, rename, delete, search, export and import sessions.",
    "context": "Build the context window for a session and report what it holds.",
    "compact": "Compact a session now: summarize older messages into a checkpoint "
    "(history is kept).",
    "memory": "Long-term memory across sessions: facts, entities, search.",
    "demo": "Run a long simulated coding-agent session offline through the real engine.",
    "cleanup": "Delete old sessions, or the oldest ones beyond a size cap; never a locked one.",
    "doctor": "Check the store: every session readable, storage intact, no stale locks.",
    "serve": "Serve sessions and agent turns over HTTP (tRPC-style /trpc and REST /v1).",
    "mcp": "Serve sessions, search and memory to other agents over MCP (read-only by default).",
}
"""Each command's line in ``threadline --help``, so listing the commands imports none of
them (the agent stack, the server). A command missing here is imported to list it;
``tests/test_cli_startup.py`` checks each line against the command's own help."""

SUBCOMMANDS: dict[str, dict[str, str]] = {
    "sessions": {"copy": "threadline.cli.copy_cmd", "sync": "threadline.cli.sync_cmd"},
}
"""Subcommands a module adds to another command's group (its ``register`` adds them),
by group: the module is imported only when such a subcommand runs or is listed."""
