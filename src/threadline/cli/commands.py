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

SUBCOMMANDS: dict[str, dict[str, str]] = {
    "sessions": {"copy": "threadline.cli.copy_cmd"},
}
"""Subcommands a module adds to another command's group (its ``register`` adds them),
by group: the module is imported only when such a subcommand runs or is listed."""
