"""``threadline demo``: write a realistic sample session, then show it as a user would.

The session comes from ``threadline.demo.build_sample_session`` (a coding agent
fixing a bug: tool calls, two large test logs, a screenshot, an error and its
fix). The command then prints ``sessions list`` and the ``context`` report
for it with a deliberately small context limit, so trimming is visible.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from threadline.cli.context_cmd import print_context_report, render_context_report
from threadline.cli.render import make_console, page_footer, sessions_table
from threadline.cli.state import get_state
from threadline.context import ContextPolicy, build_context
from threadline.demo import DEMO_AGENT, DEMO_SYSTEM_PROMPT, DEMO_TOOLS, build_sample_session

DEMO_CONTEXT_LIMIT = 24_000
"""Small on purpose: the sample holds ~30k tokens, so the report shows what was dropped."""
DEMO_LIST_SIZE = 10


def demo(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="Context limit for the report (tokens).")
    ] = DEMO_CONTEXT_LIMIT,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same conversation.")] = 0,
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent name to store it under.")] = (
        DEMO_AGENT
    ),
) -> None:
    """Store a sample coding-agent session and show `sessions list` and its `context` report."""
    state = get_state(ctx)
    store = state.store()
    session = build_sample_session(store, agent=agent, seed=seed)
    console = make_console()
    console.print(
        Text(
            f"Stored a sample session of {session.message_count} messages "
            f"({session.total_tokens:,} tokens) in {state.store_url}",
            style="bold",
        )
    )
    console.print(Text(f"session id: {session.id}"))
    console.print()
    console.print(Text(f"$ threadline sessions list -n {DEMO_LIST_SIZE}", style="dim"))
    page = store.list_sessions(limit=DEMO_LIST_SIZE)
    console.print(sessions_table(store, page, width=console.width))
    console.print(page_footer(page))
    console.print()
    console.print(
        Text(
            f"$ threadline context {session.id[:8]} --limit {limit} "
            f"(with the sample agent's system prompt and {len(DEMO_TOOLS)} tool definitions)",
            style="dim",
        )
    )
    window = build_context(
        session,
        system_prompt=DEMO_SYSTEM_PROMPT,
        tools=DEMO_TOOLS,
        policy=ContextPolicy(context_limit=limit),
    )
    print_context_report(render_context_report(window, session, session.latest_checkpoint()))
    console.print()
    console.print(
        Text(
            f"Next: threadline sessions history {session.id[:8]} -n 6 · "
            f"threadline sessions export {session.id[:8]} -o -",
            style="dim",
        )
    )


def register(root: typer.Typer) -> None:
    root.command("demo")(demo)
