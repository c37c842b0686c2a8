"""``threadline context ID``: build the window a model would get, and explain it.

The report (``threadline.report.context``) is the one the chat's ``/context`` and the
web page's context panel show: the window the session's agent (or ``--agent``) would
send next, with its system prompt, tool definitions, policy and, when memory is on, the
memories its next call would get. ``--model``, ``--system``, ``--tools``, ``--limit``,
``--reserve`` and ``--strategy`` replace the agent's own. Checkpoints are numbered
within the session, as ``sessions show`` numbers them.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from threadline.agent import Calibrator
from threadline.cli.compact_cmd import AgentOpt, print_blocks
from threadline.cli.params import IdArg
from threadline.cli.render import print_json
from threadline.cli.state import store_of
from threadline.errors import UsageError
from threadline.json_limits import TooDeep, parse_json
from threadline.report.context import session_context
from threadline.session_agent import session_agent
from threadline.store.checks import MAX_INT


class Strategy(StrEnum):
    stable = "stable"
    greedy = "greedy"


def read_text_file(path: Path, *, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not valid UTF-8 (byte {exc.start})") from exc


def read_tools_file(path: Path) -> list[dict[str, Any]]:
    """A JSON array of tool definitions (OpenAI ``{"type": "function", ...}`` or Anthropic)."""
    text = read_text_file(path, what="tools file")
    try:
        tools = parse_json(text)
    except TooDeep as exc:
        raise UsageError(f"tools file {path} {exc} (line {exc.line})") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"tools file {path} is not JSON: line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise UsageError(f"tools file {path} must hold a JSON array of tool definitions")
    return tools


def context_overrides(
    *, limit: int | None, reserve: int | None, strategy: Strategy | None
) -> dict[str, Any]:
    """The ``ContextPolicy`` fields the user gave, to replace the agent's."""
    fields: dict[str, Any] = {}
    if limit is not None:
        fields["context_limit"] = limit
    if reserve is not None:
        fields["response_reserve"] = reserve
    if strategy is not None:
        fields["trim_strategy"] = strategy.value
    return fields


def context(
    ctx: typer.Context,
    session_id: IdArg,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model to fit (default: the session's).")
    ] = None,
    system: Annotated[
        Path | None,
        typer.Option(
            "--system", metavar="FILE", exists=True, dir_okay=False, help="System prompt file."
        ),
    ] = None,
    tools: Annotated[
        Path | None,
        typer.Option(
            "--tools",
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="JSON array of tool definitions to count.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=MAX_INT, help="Context limit override (tokens)."),
    ] = None,
    reserve: Annotated[
        int | None,
        typer.Option("--reserve", min=0, max=MAX_INT, help="Tokens reserved for the reply."),
    ] = None,
    strategy: Annotated[
        Strategy | None, typer.Option("--strategy", help="Trim strategy (default: stable).")
    ] = None,
    agent: AgentOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print messages and report.")] = False,
) -> None:
    """Build the context window for a session and report what it holds.

    It is the window the session's agent (or ``--agent``) would send next: its system
    prompt, tools and policy, and the memories its next call would get when memory is
    on; the options replace those."""
    system_prompt = read_text_file(system, what="system prompt file") if system else None
    tool_defs = read_tools_file(tools) if tools else None
    overrides = context_overrides(limit=limit, reserve=reserve, strategy=strategy)
    session = store_of(ctx, create=False).get_session(session_id)
    with session_agent(
        session.store,
        session.info,
        agent=agent,
        model=model,
        fit_only=True,
        context=overrides,
        calibrator=Calibrator(),  # the session's own record only, as the web panel reads it
    ) as runner:
        report = session_context(session, runner, system_prompt=system_prompt, tools=tool_defs)
    if as_json:
        print_json(report.as_json())
        return
    print_blocks(report.blocks)


def register(root: typer.Typer) -> None:
    root.command("context")(context)
