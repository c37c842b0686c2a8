"""``threadline chat``: talk to an agent; every turn goes through the store, builder and compactor.

The behaviour follows the reference agent shell (``shared/seeds/003``): a
session is created lazily, at the first message, and its id is printed to
stderr then and again on exit; ``-c`` resumes the most recently updated
session (of AGENT, when given) and ``--session ID`` (or a prefix) a given one,
with the agent and model that session was using unless AGENT or ``--model``
say otherwise (``cli/resume.py``). While
attached, the session's lock is held (a second attach fails with exit 4
naming the holder; a lock whose process died is taken over by the store),
its lease renewed in the background so a chat left open for hours stays
locked. The lock is released on every way out, exceptions included.

Before anything else the model is resolved (and a keyless local server is
probed), so a missing key or a stopped server gets a setup hint and exit 7
instead of a REPL that fails at the first message.

Interactive use is a prompt_toolkit prompt (history file in the user data
dir, slash-command completion) with replies streamed as Rich Markdown;
``--message TEXT``, or a stdin that is not a terminal, answers once and exits
with only the reply on stdout, for scripts. The REPL loop takes its line reader
as an argument (``run_repl``), so tests drive it with prompt_toolkit's pipe input.

Ctrl-C during a reply keeps what was streamed: it is shown once and stored as
the reply, marked ``interrupted`` in its metadata, so the history stays a valid
conversation (the next request never carries two user messages in a row). A new
session is titled after its first turn (``cli/titles.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit

import platformdirs
import typer
from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from threadline.agent import Agent, AgentConfig, TurnResult
from threadline.catalog import lookup
from threadline.cli.errors import EXIT_MODEL, PROGRAM, one_line
from threadline.cli.render import compact_call, echo, make_console, shorten
from threadline.cli.resume import resume_target
from threadline.cli.slash import Outcome, SlashCompleter, dispatch, parse_command, tokens_line
from threadline.cli.state import stdin_is_interactive, store_of
from threadline.cli.titles import Titler
from threadline.compaction.compactor import CompactionResult
from threadline.errors import (
    ConfigError,
    MissingCredentials,
    SessionLocked,
    ThreadlineError,
    UsageError,
)
from threadline.llm import ChatModel, parse_model, resolve_model
from threadline.messages import Message, ToolCall
from threadline.session_agent import ChatSetup, settings_metadata, setup_for
from threadline.store.checkpoints import Checkpoint
from threadline.store.encoding import encode_message
from threadline.store.locks import LockHolder
from threadline.store.protocol import Session, Store
from threadline.store.session_info import SessionInfo

logger = logging.getLogger(__name__)

APP_NAME = "threadline"
HISTORY_FILENAME = "chat_history"
"""The prompt's history file, in the user data directory (next to the default store)."""
LOCK_RENEWALS_PER_LEASE = 3
"""The attach lock is renewed this many times per lease, so one missed renewal is harmless."""
REACH_TIMEOUT = 3.0
"""Seconds to wait for a keyless local server (Ollama, vLLM, ...) to accept a connection."""
LIVE_REFRESH_PER_SECOND = 10
PROMPT_SUFFIX = "> "
ERROR_RESULT_CHARS = 160
DEFAULT_PORTS = {"http": 80, "https": 443}
INTERRUPTED_KEY = "interrupted"
"""Metadata flag of a reply cut short by Ctrl-C."""
NO_REPLY_TEXT = "(interrupted before replying)"
"""The reply stored when Ctrl-C came before any text: a request must be answered, or the
next one would follow it directly."""
YES = frozenset({"y", "yes"})


# -- the attach lock -----------------------------------------------------------------------


class LockKeeper:
    """Renews an attach lock's lease in a daemon thread until stopped, then releases it.

    The store's lock goes stale when its holder's pid is dead on this host or
    when its lease (``LockHolder.lease_seconds``) passes without a renewal; the
    second rule is what protects a session held from another machine, so a
    chat left idle must keep renewing.
    """

    def __init__(
        self,
        store: Store,
        session_id: str,
        holder: LockHolder,
        *,
        interval: float | None = None,
        on_lost: Callable[[SessionLocked], None] | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.holder = holder
        self.interval = (
            interval if interval is not None else holder.lease_seconds / LOCK_RENEWALS_PER_LEASE
        )
        self.on_lost = on_lost
        self.lost: SessionLocked | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"threadline-lock-{session_id[:8]}", daemon=True
        )

    def start(self) -> LockKeeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.holder = self.store.acquire_lock(self.session_id, self.holder)
            except SessionLocked as exc:  # our lease ran out and someone else took over
                self.lost = exc
                if self.on_lost is not None:
                    self.on_lost(exc)
                return
            except ThreadlineError as exc:  # a busy or unreachable store: try again next time
                logger.warning("could not renew the lock of %s: %s", self.session_id, exc)

    def stop(self) -> None:
        """Stop renewing and release the lock (when it is still ours)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.lost is not None:
            return
        try:
            self.store.release_lock(self.session_id, self.holder)
        except ThreadlineError as exc:
            logger.warning("could not release the lock of %s: %s", self.session_id, exc)


# -- rendering a turn ---------------------------------------------------------------------


QuietState = tuple[int, list[Any]] | None
"""A terminal's descriptor and its settings before ``quiet_terminal``; None: untouched."""


def quiet_terminal() -> QuietState:
    """Stop the terminal echoing what is typed (``^C`` included) while a reply streams.

    The live view redraws its block by moving the cursor up as many lines as it drew; a
    ``^C`` the terminal echoes moves the cursor on, so the redraw after Ctrl-C landed a
    line low and the start of the partial reply showed twice. Returns what
    ``restore_terminal`` puts back (None when stdin is not a terminal)."""
    try:
        import termios

        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return None
        before = termios.tcgetattr(fd)
        quiet = list(before)
        quiet[3] &= ~(termios.ECHO | getattr(termios, "ECHOCTL", 0))
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
    except (ImportError, OSError, ValueError, AttributeError):  # no termios, no real stdin
        return None
    return fd, before


def restore_terminal(state: QuietState) -> None:
    if state is None:
        return
    import termios

    with contextlib.suppress(OSError, termios.error):  # the terminal went away
        termios.tcsetattr(state[0], termios.TCSANOW, state[1])


class ReplyRenderer:
    """Streams reply text into a live Markdown view; tool calls and notices go between.

    Each model step's text is its own block: a tool call closes the block (its
    final Markdown stays on screen) and prints one line. Without a terminal
    nothing can be redrawn, so each block is printed once, when it closes.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._quiet: QuietState = None
        self._text = ""
        self.streamed = False

    def chunk(self, piece: str) -> None:
        if not self._text and self._live is None and self.console.is_terminal:
            self._quiet = quiet_terminal()
            self._live = Live(
                console=self.console,
                refresh_per_second=LIVE_REFRESH_PER_SECOND,
                get_renderable=lambda: Markdown(self._text),
            )
            self._live.start()
        self._text += piece
        self.streamed = True

    def close_block(self) -> None:
        if self._live is not None:
            try:
                self._live.stop()  # its last render reads the text: clear that only after
            finally:
                self._live = None
                restore_terminal(self._quiet)
                self._quiet = None
        elif self._text.strip():
            self.console.print(Markdown(self._text))
        self._text = ""

    def tool_call(self, call: ToolCall) -> None:
        self.close_block()
        line = Text("  ")
        line.append_text(compact_call(call))
        line.stylize("dim")
        self.console.print(line)

    def note(self, text: str, *, style: str = "dim") -> None:
        self.close_block()
        self.console.print(Text(text, style=style), soft_wrap=True)

    def interrupt(self) -> str:
        """Ctrl-C: close the block being streamed, shown once as it stands, and return
        its text (the part of the reply that was cut short)."""
        partial = self._text
        self.close_block()
        return partial

    def finish(self, reply: Message | None) -> None:
        """Close the last block; print the reply when nothing was streamed."""
        self.close_block()
        if reply is not None and not self.streamed and reply.text.strip():
            self.console.print(Markdown(reply.text))


# -- the REPL state -------------------------------------------------------------------------


class ChatController:
    """The chat's state: the agent, the attached session and its lock, display toggles.

    Implements ``threadline.cli.slash.ChatHost``. Session ids go to
    ``err_console`` (stderr), so stdout carries only what the user asked for.
    ``agent_for`` gives the agent to chat with on a session being attached (None:
    keep the current one), which is how ``/session ID`` resumes that session's
    model and agent.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        console: Console,
        err_console: Console,
        resume_command: str = "threadline chat",
        lock_interval: float | None = None,
        agent_for: Callable[[SessionInfo], ChatSetup | None] | None = None,
        agent_ref: str | None = None,
        titler: Titler | None = None,
    ) -> None:
        self.agent = agent
        self.console = console
        self.err_console = err_console
        self.resume_command = resume_command
        self.lock_interval = lock_interval
        self.agent_for = agent_for
        self.agent_ref = agent_ref
        """What the current agent loads from (stored on new sessions, see ``cli/resume.py``)."""
        self.titler = titler or Titler()
        self.show_tokens = False
        self.pending_title: str | None = None
        self.read_line: Callable[[str], str] | None = None
        """The REPL's line reader, for questions (``confirm``); set by ``run_repl``."""
        self._session: Session | None = None
        self._keeper: LockKeeper | None = None
        self._renderer: ReplyRenderer | None = None
        self._swapped: list[Agent] = []
        """Agents made for resumed sessions: closed when the chat ends."""
        agent.on_event = self._on_event

    @property
    def store(self) -> Store:
        return self.agent.store

    @property
    def session(self) -> Session | None:
        return self._session

    def say(self, text: str) -> None:
        """One line to stderr (ids, attach notices): never mixed into a script's stdout."""
        self.err_console.print(Text(text), highlight=False, soft_wrap=True)

    def confirm(self, question: str) -> bool:
        """Ask a yes/no question on the REPL's prompt; anything but yes (or no prompt,
        Ctrl-C, Ctrl-D) is no."""
        if self.read_line is None:
            return False
        try:
            answer = self.read_line(f"{question} [y/N] ")
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in YES

    def _lost(self, exc: SessionLocked) -> None:
        self.say(f"{PROGRAM}: warning: lost the lock of session {exc.session_id}: {exc.holder}")

    def _hold(self, session: Session, holder: LockHolder) -> None:
        self._session = session
        self._keeper = LockKeeper(
            self.store, session.id, holder, interval=self.lock_interval, on_lost=self._lost
        ).start()

    def _release(self) -> Session | None:
        session, keeper = self._session, self._keeper
        self._session, self._keeper = None, None
        if keeper is not None:
            keeper.stop()
        return session

    def _use(self, setup: ChatSetup) -> None:
        """Chat with ``setup``'s agent from now on (its model resolved now, so a missing
        key fails here and nothing changes)."""
        agent = Agent(setup.config, store=self.store, notes=setup.notes)
        try:
            agent.model  # noqa: B018 - resolve now: MissingCredentials before switching
        except BaseException:
            agent.close()
            raise
        agent.on_event = self._on_event
        self.agent, self.agent_ref = agent, setup.agent_ref
        self._swapped.append(agent)
        for note in setup.notes:
            self.say(note)

    # -- attaching

    def attach(self, id_or_prefix: str) -> Session:
        """Lock and resume a session (``SessionLocked`` when another live process has it),
        with the agent and model it was using (``agent_for``)."""
        session = self.store.get_session(id_or_prefix)
        setup = self.agent_for(session.info) if self.agent_for is not None else None
        same = setup is not None and (
            setup.config.model_spec == self.agent.model_spec
            and setup.config.name == self.agent.config.name
        )
        holder = self.store.acquire_lock(session.id, LockHolder.current())
        try:
            if setup is not None and not same:
                self._use(setup)
        except BaseException:
            self.store.release_lock(session.id, holder)
            raise
        if setup is not None and same:  # the agent already running: its notes still apply
            self.agent.notes = list(setup.notes)
            for note in setup.notes:
                self.say(note)
        left = self._release()
        if left is not None:
            self.say(f"left session {left.id}")
        self._hold(session, holder)
        self.say(
            f"session {session.id} resumed ({session.message_count:,} messages, "
            f"{self.agent.config.name} on {self.agent.model_spec})"
        )
        return session

    def switch_to(self, id_or_prefix: str) -> Session:
        return self.attach(id_or_prefix)

    def detach(self) -> Session | None:
        left = self._release()
        if left is not None:
            self.say(f"left session {left.id}")
        return left

    def settings(self) -> dict[str, Any]:
        """The session metadata that lets a resumed chat restore this setup."""
        return settings_metadata(self.agent_ref, show_tokens=self.show_tokens)

    def remember_settings(self) -> None:
        """Store the current setup on the attached session (after a toggle)."""
        if self._session is not None:
            self.store.update_session(self._session.id, metadata=self.settings())

    def ensure_session(self) -> Session:
        """The attached session, created (and locked) now if there is none yet."""
        if self._session is None:
            holder = LockHolder.current()
            session = self.agent.new_session(
                title=self.pending_title, lock=holder, metadata=self.settings()
            )
            self.pending_title = None
            self._hold(session, holder)
            self.say(f"session {session.id} created")
        assert self._session is not None
        return self._session

    def fork(self, at: int | None = None) -> Session:
        """Fork the attached session (at seq ``at``, default its end) and continue in the
        fork; the original is left as it was."""
        from threadline.store.fork import fork_session

        current = self._session
        if current is None:
            raise UsageError("no session yet to fork: the session is created at your first message")
        holder = LockHolder.current()
        child = fork_session(current, at=at, lock=holder, metadata=self.settings())
        self._release()
        self._hold(child, holder)
        return child

    def close(self) -> None:
        """Release the session and print its id again, as the reference shell does on exit."""
        left = self._release()
        self.titler.wait()
        self._title_failure()
        for agent in self._swapped:
            agent.close()
        self._swapped.clear()
        if left is not None:
            self.say(f"session {left.id} (resume: {self.resume_command} --session {left.id})")

    # -- talking

    def send(self, text: str, *, stream: Callable[[str], None] | None = None) -> TurnResult:
        """One turn in the attached session (created now if needed).

        After the lock was lost (our lease ran out and another process took the
        session) nothing more is appended: ``SessionLocked`` until the user
        switches with ``/new`` or ``/session``.
        """
        if self._keeper is not None and self._keeper.lost is not None:
            raise self._keeper.lost
        message = Message.user(text)
        encode_message(message)  # refused (not valid UTF-8, too large) before a session exists
        session = self.ensure_session()
        result = self.agent.run_turn(session, message, stream=stream)
        self._title(session)
        return result

    def _title(self, session: Session) -> None:
        self._title_failure()
        try:
            self.titler.title(self.store, session)
        except ThreadlineError as exc:  # a title is a nicety: the turn went through
            logger.warning("could not title session %s: %s", session.id, exc)

    def _title_failure(self) -> None:
        failure = self.titler.failure()
        if failure is not None:
            self.say(f"the title model gave no title ({failure}); titles stay the first request")

    def keep_interrupted(self, partial: str) -> Message | None:
        """After Ctrl-C: store the reply as far as it came, marked interrupted, when the
        history would otherwise end in an unanswered request (or lose shown text).
        Returns what was stored."""
        session = self._session
        if session is None:
            return None
        last = session.tail(1)
        if not last:
            return None
        text = partial.strip()
        if last[0].role == "assistant" and (not text or last[0].text.strip() == text):
            return None  # the reply got stored after all, or nothing was shown
        if last[0].role != "user" and not text:
            return None  # a tool step was cut short: the view repairs that chain
        reply = Message.assistant(
            text or NO_REPLY_TEXT,
            model=self.agent.model_spec,
            metadata={INTERRUPTED_KEY: True},
        )
        return session.append(reply)[0]

    def converse(self, text: str) -> TurnResult | None:
        """One interactive turn: stream it, show tool calls and notices; never raises for
        a model or store failure (it is shown and the REPL goes on)."""
        renderer = ReplyRenderer(self.console)
        self._renderer = renderer
        try:
            result = self.send(text, stream=renderer.chunk)
        except KeyboardInterrupt:
            partial = renderer.interrupt()
            self._renderer = None
            try:
                kept = self.keep_interrupted(partial)
            except ThreadlineError as exc:
                renderer.note(f"interrupted; the partial reply was not kept: {exc}", style="red")
                return None
            renderer.note(
                "interrupted: the partial reply was kept"
                if kept is not None and partial.strip()
                else "interrupted"
            )
            return None
        except ThreadlineError as exc:
            renderer.note(f"error: {one_line(str(exc))}", style="red")
            return None
        finally:
            self._renderer = None
        renderer.finish(result.reply)
        if self.show_tokens:
            agent = self.agent
            line = tokens_line(
                result.context_report,
                factor=agent.calibrator.factor(agent.model_spec),
                window=agent.policy.context_limit or lookup(agent.model_spec).context_window,
            )
            self.console.print(Text(line, style="dim"))
        return result

    def _checkpoint_number(self, checkpoint: Checkpoint) -> int | None:
        """The checkpoint's number within the attached session (#1 its first)."""
        from threadline.report.context import checkpoint_number

        session = self._session
        if session is None:
            return None
        return checkpoint_number(session.checkpoints(), checkpoint.id, checkpoint.session_id)

    def _on_event(self, name: str, payload: dict[str, Any]) -> None:
        renderer = self._renderer
        if renderer is None:
            return
        if name == "tool_started":
            renderer.tool_call(payload["call"])
        elif name == "tool_finished" and payload.get("is_error"):
            result: Message = payload["result"]
            renderer.note(f"    {shorten(result.text, ERROR_RESULT_CHARS)}", style="red")
        elif name == "doom_loop":
            renderer.note(f"loop detected: {payload['warning'].text}", style="yellow")
        elif name == "step_limit":
            renderer.note(
                f"step limit reached after {payload['steps']} model calls", style="yellow"
            )
        elif name == "compacted":
            compaction: CompactionResult = payload["result"]
            cp = compaction.checkpoint
            number = self._checkpoint_number(cp) if cp is not None else None
            renderer.note(
                f"compacted: messages {compaction.covers_from}-{compaction.covers_up_to} "
                f"summarized" + (f" into checkpoint #{number}" if number is not None else "")
            )


def run_repl(chat: ChatController, read_line: Callable[[str], str], *, prompt: str) -> None:
    """Read lines until Ctrl-D or ``/quit``: commands are dispatched, the rest is sent."""
    chat.read_line = read_line
    while True:
        try:
            line = read_line(prompt)
        except EOFError:
            return
        except KeyboardInterrupt:  # Ctrl-C at the prompt clears the line, as in a shell
            continue
        text = line.strip()
        if not text:
            continue
        command = parse_command(text)
        if command is None:
            chat.converse(text)
        elif dispatch(chat, command) is Outcome.QUIT:
            return


# -- setting up ------------------------------------------------------------------------------


def history_file() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / HISTORY_FILENAME


def prompt_history() -> History:
    """A file history in the user data dir, or one in memory when that is not writable."""
    path = history_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)  # what was typed is the user's alone
    except OSError as exc:
        logger.warning("prompt history disabled: cannot write %s: %s", path, exc)
        return InMemoryHistory()
    return FileHistory(str(path))


def prompt_reader(history: History) -> Callable[[str], str]:
    """A line reader on the current prompt_toolkit app session (a terminal, or a test's pipe)."""
    session: PromptSession[str] = PromptSession(
        history=history, completer=SlashCompleter(), complete_while_typing=True
    )
    return lambda prompt: session.prompt(prompt)


def setup_hint(problem: str, config: AgentConfig) -> list[str]:
    """What to do when no model can be reached: the lines printed before exit 7."""
    return [
        f"{PROGRAM}: error: {one_line(problem)}",
        "To chat, threadline needs a model it can reach. Any one of these works:",
        "  export OPENAI_API_KEY=sk-...          then  threadline chat --model openai/gpt-4o",
        "  export ANTHROPIC_API_KEY=sk-ant-...   then  threadline chat --model "
        "anthropic/claude-sonnet-4-5",
        "  ollama serve; ollama pull llama3.1    then  threadline chat --model ollama/llama3.1",
        "  any OpenAI-compatible server: export OPENAI_BASE_URL=http://HOST:PORT/v1, then "
        "--model compatible/MODEL",
        f"Make it the default with THREADLINE_MODEL=provider/model, or `model:` in "
        f"agents/{config.name}.yaml. Without any model, `threadline demo` runs a simulated "
        "agent offline.",
    ]


def unreachable(spec: str, model: ChatModel) -> str | None:
    """Why a keyless local server cannot be used, or None (hosted APIs are not probed)."""
    provider = parse_model(spec).provider
    base_url = getattr(model, "base_url", None)
    if provider.key_required or not isinstance(base_url, str):
        return None
    parts = urlsplit(base_url)
    host = parts.hostname
    if not host:
        return None
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, DEFAULT_PORTS["http"])
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT):
            return None
    except OSError as exc:
        hint = f"; {provider.hint}" if provider.hint else ""
        return (
            f"cannot reach the {provider.name} server for model {spec!r} at {base_url} "
            f"({exc.strerror or exc}){hint}"
        )


def connect(config: AgentConfig) -> ChatModel:
    """The agent's model, ready; a missing key or a dead local server exits 7 with a hint."""
    overrides: dict[str, Any] = {}
    if config.model.base_url:
        overrides["base_url"] = config.model.base_url
    try:
        model = resolve_model(config.model_spec, **overrides)
    except MissingCredentials as exc:
        _exit_with_hint(str(exc), config)
    problem = unreachable(config.model_spec, model)
    if problem is not None:
        _close_model(model)
        _exit_with_hint(problem, config)
    return model


def _exit_with_hint(problem: str, config: AgentConfig) -> NoReturn:
    for line in setup_hint(problem, config):  # a provider's error text among them
        echo(line, err=True)
    raise typer.Exit(EXIT_MODEL)


def _close_model(model: ChatModel) -> None:
    close = getattr(model, "close", None)
    if callable(close):
        close()


def _read_stdin() -> str:
    """Stdin as UTF-8 text, decoded strictly (Python's own reading would let invalid bytes
    through as surrogates, which no store can keep)."""
    raw = getattr(sys.stdin, "buffer", None)
    try:
        data = raw.read() if raw is not None else sys.stdin.read()
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise UsageError(f"stdin is not UTF-8 text (byte {exc.start})") from exc


def chat(
    ctx: typer.Context,
    agent_name: Annotated[
        str | None,
        typer.Argument(
            metavar="AGENT",
            help="Agent name (./agents, then the user config dir) or YAML file. "
            "Default: a resumed session's agent, else the built-in agent.",
            show_default=False,
        ),
    ] = None,
    session_id: Annotated[
        str | None,
        typer.Option("--session", "-s", metavar="ID", help="Resume this session (id or prefix)."),
    ] = None,
    resume_last: Annotated[
        bool,
        typer.Option(
            "--continue",
            "-c",
            help="Resume the most recently updated session (of AGENT, when given).",
        ),
    ] = False,
    new: Annotated[bool, typer.Option("--new", help="Start a new session (the default).")] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="PROVIDER/MODEL",
            help="Override the model (default: a resumed session's, else the agent's), "
            "e.g. ollama/llama3.1.",
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option("--message", metavar="TEXT", help="Send one message, print the reply, exit."),
    ] = None,
    title_model: Annotated[
        str | None,
        typer.Option(
            "--title-model",
            metavar="PROVIDER/MODEL",
            envvar="THREADLINE_TITLE_MODEL",
            help="Also ask this model for a short title of each new session (in the "
            "background). Default: titles are the first request.",
        ),
    ] = None,
) -> None:
    """Chat with an agent; sessions are created at the first message and kept in the store.

    Inside the chat, /help lists the slash commands. With --message, or with a stdin that
    is not a terminal, one message is answered: the reply goes to stdout, session ids to
    stderr. A resumed session (-c, -s) goes on with its own agent and model unless AGENT
    or --model is given.
    """
    if sum((session_id is not None, resume_last, new)) > 1:
        raise UsageError("give at most one of --session, --continue and --new")
    resuming = session_id is not None or resume_last
    # a new chat checks its model before the store is opened (a missing key leaves no
    # empty store behind); resuming reads the session first, for its agent and model
    store = store_of(ctx) if resuming else None
    target = (
        resume_target(store, agent=agent_name, session_id=session_id, resume_last=resume_last)
        if store is not None
        else None
    )
    setup = setup_for(target, agent=agent_name, model=model)
    config = setup.config
    make_title_model = _title_model(title_model)
    chat_model = connect(config)
    try:
        store = store if store is not None else store_of(ctx)
        agent = Agent(config, store=store, model=chat_model, notes=setup.notes)
        interactive = message is None and stdin_is_interactive()
        resume = f"threadline chat {agent_name}" if agent_name else "threadline chat"
        controller = ChatController(
            agent,
            console=make_console(),
            err_console=make_console(stderr=True),
            resume_command=resume,
            agent_for=lambda info: setup_for(info, agent=agent_name, model=model),
            agent_ref=setup.agent_ref,
            titler=Titler(make_title_model),
        )
        controller.show_tokens = setup.show_tokens
        try:
            if target is None:  # attaching a session says its own notes
                for note in setup.notes:
                    controller.say(note)
            if target is not None:
                controller.attach(target.id)
            elif resume_last:
                whose = f" of agent {config.name}" if agent_name else ""
                controller.say(
                    f"no earlier session{whose}; a new one starts with the first message"
                )
            if interactive:
                controller.console.print(
                    Text(
                        f"{config.name} on {config.model_spec} · /help for commands · "
                        "Ctrl-D to quit",
                        style="dim",
                    )
                )
                run_repl(
                    controller,
                    prompt_reader(prompt_history()),
                    prompt=f"{config.name}{PROMPT_SUFFIX}",
                )
                return
            text = message if message is not None else _read_stdin()
            if not text.strip():
                raise UsageError(
                    "nothing to send: the message is empty (give --message TEXT, pipe text on "
                    "stdin, or run in a terminal to chat)"
                )
            result = controller.send(text)
            echo(result.text)
        finally:
            controller.close()
            agent.close()  # flushes the memory extraction the session left pending
    finally:
        _close_model(chat_model)


def _title_model(spec: str | None) -> Callable[[], ChatModel] | None:
    """The title model, made when first needed (in the titling thread); its spec and
    key are checked now, so an unusable ``--title-model`` is an error before the chat
    starts, not a title that silently never comes."""
    if not spec:
        return None
    try:
        parse_model(spec)
        _close_model(resolve_model(spec))  # no request: only what making it checks
    except ThreadlineError as exc:
        raise ConfigError(f"--title-model {spec!r} cannot be used: {exc}") from exc
    return lambda: resolve_model(spec)


def register(root: typer.Typer) -> None:
    root.command("chat")(chat)


__all__ = [
    "ChatController",
    "LockKeeper",
    "ReplyRenderer",
    "chat",
    "connect",
    "run_repl",
    "setup_hint",
    "unreachable",
]
