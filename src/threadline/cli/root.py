"""The root Typer app of ``threadline``: the global options and lazily loaded commands.

``cli/commands.py`` lists the commands (``COMMANDS``), ``cli/app.py`` is the entry point; this
module builds the app. ``LazyGroup`` knows every command's name up front and
imports a command's modules only when Click asks for that command (to run it,
or to list it in ``--help``), so each command pays only for its own imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Annotated

import typer
from typer._click import Command, Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo

from threadline.cli.commands import COMMANDS, SUBCOMMANDS, SUMMARIES
from threadline.cli.errors import ErrorMappingGroup

STORE_ENV = "THREADLINE_STORE"
"""The same name as ``threadline.store.STORE_ENV`` (not imported: ``--help`` stays light)."""

_loaded: dict[str, Command] = {}
"""Commands built so far, shared by every root group built in this process (the CLI
runner of the tests builds one per invocation; registering twice would repeat work)."""


def load_command(name: str) -> Command | None:
    """The Click command ``name``, from its modules' ``register(root)`` functions. A
    group's own subcommands are built when asked for (``LazyCommands``)."""
    if name not in _loaded:
        modules = COMMANDS.get(name)
        if modules is None:
            return None
        scratch = typer.Typer()
        for module in modules:
            importlib.import_module(module).register(scratch)
        held = {  # the group named ``name``, whose subcommands wait until asked for
            info.name: info.typer_instance
            for info in scratch.registered_groups
            if info.name == name and info.typer_instance is not None
        }
        kept = {sub: sub.registered_commands for sub in held.values()}
        try:
            for sub in kept:
                sub.registered_commands = []  # Typer would build every one of them now
            group = typer.main.get_group(scratch)
        finally:
            for sub, infos in kept.items():
                sub.registered_commands = infos
        command = group.commands.get(name)
        if command is None:
            raise RuntimeError(f"{', '.join(modules)} registered no command {name!r}")
        source = held.get(name)
        if isinstance(command, TyperGroup) and source is not None:
            command.commands = LazyCommands(
                source, dict(command.commands), SUBCOMMANDS.get(name, {}), scratch
            )
        _loaded[name] = command
    return _loaded[name]


class LazyCommands(MutableMapping[str, Command]):
    """A group's subcommands by name, each built by Typer on first access: running
    ``sessions list`` builds one command, not the group's ten (``--help``, which
    lists them all, builds them all). ``extra`` names subcommands that another module
    adds to the group (``SUBCOMMANDS``), imported only when one of them is asked for."""

    def __init__(
        self,
        source: typer.Typer,
        built: dict[str, Command],
        extra: Mapping[str, str],
        settings: typer.Typer,
    ) -> None:
        self._source, self._built, self._extra, self._settings = source, built, extra, settings

    def _infos(self) -> dict[str, CommandInfo]:
        return {
            info.name or typer.main.get_command_name(info.callback.__name__): info
            for info in self._source.registered_commands
            if info.callback is not None
        }

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            infos = self._infos()
            if name not in infos and name in self._extra:
                importlib.import_module(self._extra[name]).register(typer.Typer())
                infos = self._infos()
            if name not in infos:
                raise KeyError(name)
            self._built[name] = typer.main.get_command_from_info(
                infos[name],
                pretty_exceptions_short=self._settings.pretty_exceptions_short,
                rich_markup_mode=self._settings.rich_markup_mode,
            )
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._built, *self._infos(), *self._extra]))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class LazyGroup(ErrorMappingGroup):
    """The root group: commands listed from ``COMMANDS``, imported when asked for. Its
    ``--help`` lists them from ``SUMMARIES`` without importing any."""

    listing = False
    """True while ``--help`` is being written: commands not yet built answer with their
    line from ``SUMMARIES`` (a command that has no line there is built)."""

    def list_commands(self, ctx: Context) -> list[str]:
        return [*self.commands, *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        found = self.commands.get(cmd_name) or _loaded.get(cmd_name)
        if found is None and self.listing and cmd_name in SUMMARIES and cmd_name in COMMANDS:
            return TyperCommand(cmd_name, help=SUMMARIES[cmd_name])
        return found if found is not None else load_command(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


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
    from threadline.tokenizer_env import tokenizer_mode

    tokenizer_mode()  # a bad $THREADLINE_TOKENIZER is refused by every command, not some
    state = CliState(store_url=store if store is not None else default_store_url())
    ctx.obj = state
    ctx.call_on_close(state.close)
