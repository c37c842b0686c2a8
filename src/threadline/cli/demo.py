"""``threadline demo``: a long coding-agent session, offline, through the real engine.

What ``make demo`` runs. A simulated model (``threadline.demo.simulated``:
a deterministic playback of a scripted coding session, no LLM, no network)
drives a real ``Agent`` for ``--turns`` turns against the store (``--store``
is honoured): a live status line follows the turn, the stored messages, the
context against its small budget, the compactions and the pruned tool
results. Then the demo *restarts*: a fresh ``python -m threadline.cli.app``
process reopens the session from disk, runs one more turn and prints the
context report with the compaction-trigger bars, which shows that nothing
lived only in memory. Last come ``sessions list`` and a Markdown export. Between the
run and the restart, the demo agent delegates a review to a subagent, which works in a
child session of the demo session (``cli.demo_subagent``).

The library half is ``threadline.demo.run``; this module only renders it. The
hidden ``--resume ID`` option is the fresh process's entry point. ``--memory``
runs the long-term memory demo instead (``threadline.demo.memory_run``, rendered
by ``cli.memory_cmd.print_memory_demo``): facts one session states, recalled in
a later one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from threadline.cli.demo_subagent import print_subagent_demo
from threadline.cli.errors import PROGRAM
from threadline.cli.lineage import lineage_tree
from threadline.cli.render import make_console, page_footer, plural, shorten
from threadline.cli.sessions import write_atomically
from threadline.cli.state import get_state
from threadline.demo.run import (
    DEFAULT_SEED,
    DEFAULT_TURNS,
    DEMO_CONTEXT_LIMIT,
    SIMULATED_MODEL_NAME,
    DemoResult,
    DemoStatus,
    resume_demo,
    run_demo,
)
from threadline.errors import ModelError
from threadline.interop.export import to_markdown
from threadline.report.context import checkpoint_number, session_context
from threadline.report.lineage import forest
from threadline.store import Store
from threadline.store.checks import MAX_INT

DEMO_LIST_SIZE = 10
MAX_TURNS = 100_000
"""A demo of more turns is a typo, not a demo: it would run for hours."""
PIPED_STATUS_EVERY = 50
"""Without a terminal the status line cannot redraw: print it every this many turns."""
LIVE_REFRESH_PER_SECOND = 8
RESTART_TIMEOUT = 120.0
"""Seconds the fresh process may take for its one turn before the demo gives up."""
EXPORT_NAME = "threadline-demo-{id}.md"
"""Default export file, in the temporary directory (a demo should not litter the cwd)."""
USER_TEXT_SHOWN = 100
MODULE_ENTRY = "threadline.cli.app"
VOLATILE_SCHEMES = ("memory:",)
"""Stores that do not outlive the process: the restart step is skipped for them."""


def status_text(s: DemoStatus) -> Text:
    """The live status line: turn, stored messages, context vs budget, compactions, pruning."""
    line = Text()
    line.append(f"turn {s.turn:>{len(str(s.turns))}}/{s.turns}", style="bold")
    line.append(f" · {s.stored_messages:,} messages stored")
    line.append(f" · context {s.context_tokens:,} / {s.limit:,} tokens")
    line.append(f" · {plural(s.compactions, 'compaction')}")
    line.append(f" · {s.pruned_results:,} tool results pruned")
    line.append(f" · {s.elapsed:.1f}s", style="dim")
    return line


def _header(console: Console, store_url: str, turns: int, seed: int) -> None:
    console.print(Text("threadline demo: a long coding-agent session, offline", style="bold"))
    console.print(
        Text(
            f"The model is SIMULATED: {SIMULATED_MODEL_NAME!r} plays back a scripted coding "
            f"session ({turns} turns, seed {seed}): tool calls, large test logs, an error and "
            "its fix. No LLM is called and nothing leaves this machine. Everything else is "
            f"threadline's real engine: the store ({store_url}), the context builder with a "
            f"{DEMO_CONTEXT_LIMIT:,}-token window, tool-result pruning and extractive compaction.",
            style="yellow",
        )
    )
    console.print()


def _run_with_status(console: Console, store: Store, turns: int, seed: int) -> DemoResult:
    if console.is_terminal:
        with Live(
            Text("starting..."), console=console, refresh_per_second=LIVE_REFRESH_PER_SECOND
        ) as live:
            return run_demo(
                store, turns=turns, seed=seed, on_status=lambda s: live.update(status_text(s))
            )

    def piped(s: DemoStatus) -> None:
        if s.turn % PIPED_STATUS_EVERY == 0 or s.turn == s.turns:
            console.print(status_text(s))

    return run_demo(store, turns=turns, seed=seed, on_status=piped)


def _summary(console: Console, r: DemoResult) -> None:
    console.print()
    console.print(
        Text(
            f"Done: {r.turns:,} turns in {r.elapsed:.1f}s. All {r.stored_messages:,} messages "
            f"are stored (history is append-only); {plural(r.compactions, 'compaction')} "
            f"wrote {plural(r.checkpoints, 'checkpoint')}; {r.pruned_results:,} large tool "
            f"results were pruned in the view only; the largest context sent was "
            f"{r.max_context_tokens:,} tokens, within the {r.budget:,}-token budget "
            f"({r.limit:,} window minus the reply reserve). Every reply is marked as "
            f"coming from {r.model!r}.",
            style="bold",
        )
    )
    console.print(Text(f"session id: {r.session_id}"), soft_wrap=True)
    _skills_line(console, r)


def _skills_line(console: Console, r: DemoResult) -> None:
    """Which skills the agent loaded: its prompt lists them, the ``skill`` tool loads one,
    and pruning never shrinks what it returned."""
    if not r.skills_loaded:
        return
    names = ", ".join(dict.fromkeys(r.skills_loaded))
    console.print(
        Text(
            f"Skills: the agent loaded {names} with the skill tool (listed in its system "
            "prompt's skill hints); skill results are never pruned, and each compaction "
            "names the skills in use.",
        ),
        soft_wrap=True,
    )


def _restart(console: Console, store_url: str, session_id: str) -> None:
    """Run ``demo --resume`` in a fresh interpreter and show what it printed."""
    console.print()
    console.print(
        Text(
            f"Restart: a fresh process (python -m {MODULE_ENTRY}) reopens session "
            f"{session_id[:8]} from disk and runs one more turn.",
            style="bold",
        )
    )
    if store_url.startswith(VOLATILE_SCHEMES):
        console.print(
            Text(f"skipped: {store_url} lives only in this process; nothing to reopen", style="dim")
        )
        return
    env = dict(os.environ)
    env["COLUMNS"] = str(console.width)
    command = [
        sys.executable,
        "-m",
        MODULE_ENTRY,
        "--store",
        store_url,
        "demo",
        "--resume",
        session_id,
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=RESTART_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ModelError(
            f"the restarted demo process did not finish within {RESTART_TIMEOUT:.0f}s"
        ) from exc
    sys.stdout.write(done.stdout)
    sys.stdout.flush()
    if done.stderr:
        sys.stderr.write(done.stderr)
        sys.stderr.flush()
    if done.returncode != 0:
        console.print(Text(f"the restarted process failed (exit {done.returncode})", style="red"))
        raise typer.Exit(done.returncode)


def _resume(store: Store, session_id: str) -> None:
    """The fresh process: reopen, run one turn, print it and the context report."""
    console = make_console()
    r = resume_demo(store, session_id)
    number = checkpoint_number(r.session.checkpoints(), r.checkpoint_id)
    cp = f"checkpoint #{number}" if number is not None else "no checkpoint"
    console.print(
        Text(
            f"[pid {os.getpid()}] reopened session {r.session.id} from the store: "
            f"{r.messages_before:,} messages on disk, latest {cp}.",
        )
    )
    user = r.turn.messages_appended[0]
    console.print(Text(f"> {shorten(user.text, USER_TEXT_SHOWN)}", style="green"))
    calls = sum(len(m.tool_calls) for m in r.turn.messages_appended)
    console.print(
        Text(
            f"  ({plural(r.turn.steps, 'model call')} to {r.turn.reply.model}, "
            f"{plural(calls, 'tool call')})",
            style="dim",
        )
    )
    console.print(Markdown(r.turn.reply.text))
    console.print()
    session = r.session
    blocks = session_context(session, r.agent).blocks
    console.print(
        Text(
            f"$ threadline context {session.id[:8]}   (with the demo agent's prompt, tools and "
            f"{DEMO_CONTEXT_LIMIT:,}-token window)",
            style="dim",
        )
    )
    for i, block in enumerate(blocks):
        if i:
            console.print()
        console.print(block)


def _listing_and_export(
    console: Console, store: Store, session_id: str, export: Path | None
) -> None:
    console.print()
    console.print(Text(f"$ threadline sessions list --tree -n {DEMO_LIST_SIZE}", style="dim"))
    page = store.list_sessions(limit=DEMO_LIST_SIZE, top_level=True)
    console.print(lineage_tree(store, forest(store, page.items, nested=True)))
    console.print(page_footer(page))
    session = store.get_session(session_id)
    path = export or Path(tempfile.gettempdir()) / EXPORT_NAME.format(id=session.id[:8])
    write_atomically(path, to_markdown(session.info.to_dict(), session.iter_messages()))
    console.print()
    console.print(
        Text(f"Markdown export ({plural(session.message_count, 'message')}): {path}", style="bold"),
        soft_wrap=True,
    )
    command, on_path = command_word()
    console.print(
        Text(
            f"Next: {command} sessions history {session.id[:8]} -n 6 · "
            f"{command} context {session.id[:8]} · {command} chat --model ollama/llama3.1",
            style="dim",
        ),
        soft_wrap=True,
    )
    if on_path is not None:
        console.print(Text(on_path, style="dim"), soft_wrap=True)


def command_word(argv0: str | None = None) -> tuple[str, str | None]:
    """How to run ``threadline`` again from here, and how to put it on PATH when it is not.

    ``make demo`` runs ``.venv/bin/threadline``, which a shell does not find as
    ``threadline`` until the virtual environment is activated: then the hint names the
    path it ran from and the ``activate`` script beside it."""
    ran = Path(argv0 if argv0 is not None else sys.argv[0])
    if ran.name != PROGRAM:  # ``python -m threadline.cli.app``, a test runner
        return PROGRAM, None
    found = shutil.which(PROGRAM)
    if found is not None and Path(found).resolve() == ran.resolve():
        return PROGRAM, None
    shown = _relative(ran)
    activate = ran.parent / "activate"
    if not activate.is_file():
        return shown, f"(or add {_relative(ran.parent)} to PATH to type just {PROGRAM})"
    return shown, f"(or run `. {_relative(activate)}` to put {PROGRAM} on PATH in this shell)"


def _relative(path: Path) -> str:
    """``path`` as typed from the working directory: relative below it, else absolute."""
    try:
        inside = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return str(path.resolve())
    return str(inside) if str(inside).startswith(".") else f"./{inside}"


def demo(
    ctx: typer.Context,
    turns: Annotated[
        int, typer.Option("--turns", "-n", min=1, max=MAX_TURNS, help="Simulated turns to run.")
    ] = DEFAULT_TURNS,
    seed: Annotated[
        int, typer.Option("--seed", min=-MAX_INT, max=MAX_INT, help="Same seed, same session.")
    ] = DEFAULT_SEED,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            metavar="FILE",
            dir_okay=False,
            help="Where to write the Markdown export (default: the temporary directory).",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="ID", hidden=True, help="Continue a demo session."),
    ] = None,
    memory: Annotated[
        bool,
        typer.Option(
            "--memory", help="Show long-term memory: one session's facts recalled in a later one."
        ),
    ] = False,
) -> None:
    """Run a long simulated coding-agent session offline through the real engine."""
    state = get_state(ctx)
    store = state.store()
    if memory:
        from threadline.cli.memory_cmd import print_memory_demo

        print_memory_demo(make_console(), store, state.store_url)
        return
    if resume is not None:
        _resume(store, resume)
        return
    console = make_console()
    _header(console, state.store_url, turns, seed)
    result = _run_with_status(console, store, turns, seed)
    _summary(console, result)
    print_subagent_demo(console, store, result.session_id)
    _restart(console, state.store_url, result.session_id)
    _listing_and_export(console, store, result.session_id, export)


def register(root: typer.Typer) -> None:
    root.command("demo")(demo)
