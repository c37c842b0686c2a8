"""Turning failures into one line on stderr and a documented exit code.

The library raises ``ThreadlineError`` subclasses, each carrying its own
``exit_code``; this module is the single place where they meet the terminal.
``ErrorMappingGroup`` is the Click group class of the root Typer app: every
command runs inside its ``invoke``, so no command needs its own ``try``. Click's
own usage errors (a missing argument, an unknown option) are raised before
``invoke`` and keep Click's exit code 2.

Library warnings (an unknown model, a tokenizer fallback) are shown the same
way, as one ``threadline: warning: ...`` line each, instead of Python's
file-and-line format; a dependency's warning is never printed under threadline's
name (see ``one_line_warnings``).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TextIO

import typer
from typer._click import ClickException, Context
from typer.core import TyperGroup

from threadline.errors import ThreadlineError
from threadline.report.text import printable

EXIT_OK = 0
EXIT_ERROR = 1
"""A generic or unexpected failure."""
EXIT_USAGE = 2
"""Bad arguments, an invalid id, a bad config or a malformed import file."""
EXIT_NOT_FOUND = 3
EXIT_LOCKED = 4
EXIT_OVERFLOW = 5
EXIT_NOT_SUPPORTED = 6
EXIT_MODEL = 7
EXIT_STORE = 8
EXIT_PORT = 9
"""``serve``: the port is in use or not permitted."""
EXIT_HOST = 10
"""``serve``: the host does not resolve or is not this machine's."""
EXIT_UNKNOWN_MODEL = 11
"""A model that cannot be resolved (``serve --model``)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as shells report a SIGINT."""

DEBUG_ENV = "THREADLINE_DEBUG"
PROGRAM = "threadline"


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def one_line(text: str) -> str:
    """Join a (possibly multi-line) message so that stderr gets exactly one line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, ThreadlineError):
        return int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_ERROR


def error_message(exc: BaseException) -> str:
    """The text after ``threadline: error:``; unexpected errors name their type."""
    text = one_line(str(exc))
    if isinstance(exc, ThreadlineError):
        return text or type(exc).__name__
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    hint = "" if debug_enabled() else f" (set {DEBUG_ENV}=1 for a traceback)"
    detail = f": {text}" if text else ""
    return f"unexpected {type(exc).__name__}{detail}{hint}"


def report(exc: BaseException, *, file: TextIO | None = None) -> int:
    """Print one error line (after a traceback when debugging) and return the exit code."""
    stream = file if file is not None else sys.stderr
    if debug_enabled() and not isinstance(exc, KeyboardInterrupt):
        traceback.print_exception(exc, file=stream)
    print(
        f"{PROGRAM}: error: {printable(error_message(exc), one_line=True)}", file=stream, flush=True
    )
    return exit_code_for(exc)


_PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""Where threadline's own modules are: a warning raised from anywhere else is not its."""


def warning_source(filename: str) -> str:
    """Who a warning belongs to: ``threadline`` for its own modules, else the top-level
    package of the file it was raised in (``opentelemetry``), else the file's name."""
    path = Path(filename)
    if path.resolve().is_relative_to(_PACKAGE_DIR):
        return PROGRAM
    parts = path.parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            return Path(parts[parts.index(marker) + 1]).stem
    return path.name or filename


def exit_interrupted(committed: str) -> NoReturn:
    """Ctrl-C after part of the work was committed: say what stays, then exit 130 as an
    interrupt does (instead of a bare ``error: interrupted``)."""
    print(f"{PROGRAM}: interrupted: {printable(committed)}", file=sys.stderr, flush=True)
    raise typer.Exit(EXIT_INTERRUPTED)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    text = printable(one_line(str(message)), one_line=True)
    source = warning_source(filename)
    if source == PROGRAM:
        print(f"{PROGRAM}: warning: {text}", file=sys.stderr, flush=True)
    else:  # a dependency's: named as its own, never as threadline's
        name = printable(source, one_line=True)
        print(f"{name}: {category.__name__}: {text}", file=sys.stderr, flush=True)


@contextmanager
def one_line_warnings() -> Iterator[None]:
    """Show warnings raised inside the block as single lines: threadline's own (every
    one, once per place) as ``threadline: warning:``; a dependency's only where Python's
    own filters show them (its deprecations are for its callers' developers, not for
    the user), named by the package that raised it."""
    with warnings.catch_warnings():
        for deprecation in (DeprecationWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=deprecation)  # whoever set them on
        warnings.filterwarnings("default", module=r"threadline(\.|$)")  # checked first
        warnings.showwarning = _show_warning
        yield


class ErrorMappingGroup(TyperGroup):
    """The root command group: runs a command and maps what it raises to an exit code."""

    def invoke(self, ctx: Context) -> Any:
        try:
            with one_line_warnings():
                return super().invoke(ctx)
        except (typer.Exit, typer.Abort, ClickException):
            raise  # Click's own flow: --help, usage errors, typer.Exit
        except (Exception, KeyboardInterrupt) as exc:
            raise typer.Exit(report(exc)) from exc
