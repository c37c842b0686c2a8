"""The lineage tree of ``sessions list --tree`` and the lineage lines of ``sessions show``
(what is nested and counted comes from ``threadline.report.lineage``, which the web list
shares)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from rich.tree import Tree

from threadline.cli.render import fmt_int, fmt_time, printable, session_preview, shorten
from threadline.report.lineage import Node, fork_note, relation
from threadline.store.protocol import Store

PREVIEW_CHARS = 44


def lineage_tree(store: Store, nodes: Sequence[Node]) -> Tree:
    """The nodes as a tree: each session with its preview, date and size, and what it is
    to the session it is listed under."""
    top = Tree(Text("sessions"), hide_root=True, guide_style="dim")

    def label(node: Node, *, nested: bool) -> Text:
        info = node.info
        line = Text(printable(info.id, one_line=True), style="bold")
        note = relation(info) if nested else fork_note(info)
        if note:
            line.append(f"  ({note})", style="dim")
        preview = shorten(session_preview(store, info), PREVIEW_CHARS)
        if preview:
            line.append(f"  {preview}", style="" if info.title else "dim")
        line.append(f"  {fmt_int(info.message_count)} msgs  {fmt_time(info.updated_at)}", "dim")
        hidden = node.child_count - len(node.children)
        if hidden > 0:
            line.append(f"  +{hidden:,} under it", style="dim")
        return line

    def add(branch: Tree, node: Node, *, nested: bool) -> None:
        twig = branch.add(label(node, nested=nested))
        for child in node.children:
            add(twig, child, nested=True)

    for node in nodes:
        add(top, node, nested=False)
    return top
