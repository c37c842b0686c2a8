"""What every command shares: the store URL from ``--store`` and the store itself.

The root callback puts a ``CliState`` on the Click context; commands reach it
with ``get_state(ctx)``. The store opens lazily, on the first command that
needs it, so ``--help`` and usage errors never touch the database, and it is
closed when the command's context ends. Commands that only read open it with
``create=False``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import typer

from threadline.errors import UsageError
from threadline.store import Store, default_store_url, open_store


@dataclass
class CliState:
    store_url: str = field(default_factory=default_store_url)
    _store: Store | None = None

    def store(self, *, create: bool = True) -> Store:
        """The store, opened on first use; ``create=False`` for commands that only read
        (nothing is created, and a read-only store can be opened)."""
        if self._store is None:
            self._store = open_store(self.store_url, create=create)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            store.close()


def get_state(ctx: typer.Context) -> CliState:
    """The state the root callback made, or a default one (a command run on its own)."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
        root.call_on_close(root.obj.close)
    return root.obj


def store_of(ctx: typer.Context, *, create: bool = True) -> Store:
    """The command's store; commands that only read pass ``create=False``, so a mistyped
    ``--store`` fails (exit 8) instead of leaving an empty store and directories."""
    return get_state(ctx).store(create=create)


def stdin_is_interactive() -> bool:
    """Whether a question can be asked; a pipe or a test runner cannot answer."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False


def confirm_delete(question: str, refusal: str) -> None:
    """Ask ``question`` before a delete; without a terminal to ask on, refuse with
    ``refusal`` (a pipe cannot say yes), and on a no exit 1 with nothing deleted."""
    if not stdin_is_interactive():
        raise UsageError(refusal)
    if not typer.confirm(question, default=False):
        typer.echo("nothing deleted", err=True)
        raise typer.Exit(1)
