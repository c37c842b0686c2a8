"""``threadline demo``'s delegation step, rendered: a subagent in a child session.

The library half is ``threadline.demo.subagent_run``; this prints what it did: the
request, the ``task`` call, the child session the runtime made under the demo
session (its agent, its messages, its tool call), and the answer the lead got back.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from threadline.cli.render import plural, shorten
from threadline.demo.run import REVIEWER
from threadline.demo.subagent_run import DELEGATION_REQUEST, run_subagent_demo
from threadline.store import Store

TEXT_SHOWN = 400


def print_subagent_demo(console: Console, store: Store, session_id: str) -> None:
    """Run the demo's delegation turn on ``session_id`` and print it."""
    console.print()
    console.print(Text("Subagent: the demo agent delegates a review", style="bold"))
    d = run_subagent_demo(store, session_id)
    console.print(Text(f"> {shorten(DELEGATION_REQUEST, TEXT_SHOWN)}", style="green"))
    child = d.child
    console.print(
        Text(
            f"  task -> {REVIEWER}: child session {child.id} created, listed under "
            f"{d.session.id[:8]} (its own agent, model, budget and step limit)",
        ),
        soft_wrap=True,
    )
    calls = [c for m in child.messages() if m.role == "assistant" for c in m.tool_calls]
    used = ", ".join(f"{c.name}({shorten(str(c.arguments), 40)})" for c in calls) or "no tools"
    console.print(
        Text(
            f"  {REVIEWER} ran in it: {plural(child.message_count, 'message')}, {used}",
            style="dim",
        ),
        soft_wrap=True,
    )
    console.print(Text(f"  answer returned as the tool result: {shorten(d.answer, TEXT_SHOWN)}"))
    console.print(Text(f"< {shorten(d.reply.text, TEXT_SHOWN)}", style="cyan"), soft_wrap=True)
