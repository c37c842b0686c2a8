"""The root Typer app of ``threadline``: the global options and lazily loaded commands.

``cli/app.py`` lists the commands (``COMMANDS``) and is the entry point; this
module builds the app. ``LazyGroup`` knows every command's name up front and
imports a command's modules only when Click asks for that command (to run it,
or to list it in ``--help``), so each command pays only for its own imports.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer
from typer._click import Command, Context

from threadline.cli.app import COMMANDS
from threadline.cli.errors import ErrorMappingGroup

STORE_ENV = "THREADLINE_STORE"
"""The same name as ``threadline.store.STORE_ENV`` (not imported: ``--help`` stays light)."""

_loaded: dict[str, Command] = {}
"""Commands built so far, shared by every root group built in this process (the CLI
runner of the tests builds one per invocation; registering twice would repeat work)."""


def load_command(name: str) -> Command | None:
    """The Click command ``name``, from its modules' ``register(root)`` functions."""
    if name not in _loaded:
        modules = COMMANDS.get(name)
        if modules is None:
            return None
        scratch = typer.Typer()
        for module in modules:
            importlib.import_module(module).register(scratch)
        group = typer.main.get_group(scratch)
        command = group.commands.get(name)
        if command is None:
            raise RuntimeError(f"{', '.join(modules)} registered no command {name!r}")
        _loaded[name] = command
    return _loaded[name]


class LazyGroup(ErrorMappingGroup):
    """The root group: commands listed from ``COMMANDS``, imported when asked for."""

    def list_commands(self, ctx: Context) -> list[str]:
        return [*self.commands, *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        found = self.commands.get(cmd_name)
        return found if found is not None else load_command(cmd_name)


app = typer.Typer(
    name="threadline",
    cls=LazyGroup,
    help="Durable LLM-agent sessions, and context windows that fit.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from threadline import __version__

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
    from threadline.cli.state import CliState
    from threadline.store import default_store_url
    from threadline.tokens import tokenizer_mode

    tokenizer_mode()  # a bad $THREADLINE_TOKENIZER is refused by every command, not some
    state = CliState(store_url=store if store is not None else default_store_url())
    ctx.obj = state
    ctx.call_on_close(state.close)
