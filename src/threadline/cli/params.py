"""Command parameters several commands take, each declared once so their help reads alike."""

from __future__ import annotations

from typing import Annotated

import typer

IdArg = Annotated[str, typer.Argument(metavar="ID", help="Session id or a unique prefix (4+).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (stable shape) instead.")]
OnlyAgentOpt = Annotated[
    str | None, typer.Option("--agent", "-a", help="Only this agent's sessions.")
]
