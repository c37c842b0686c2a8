"""How forks are shown: ``sessions list --tree`` and the lineage lines of ``sessions show``.

A fork's record names its parent and fork seq (``store/fork.py``); nothing points
from a parent to its forks, so a parent's forks are found by reading the session
list, which only these views do.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from rich.tree import Tree

from threadline.cli.render import fmt_int, printable, session_preview, shorten
from threadline.store.base import SessionInfo, Store, fork_point
from threadline.store.fork import all_sessions, children_of

PREVIEW_CHARS = 60


def fork_note(info: SessionInfo) -> str:
    """``fork of ID at seq N``, or an empty string for a root session."""
    fork = fork_point(info)
    return "" if fork is None else f"fork of {fork.parent} at seq {fork.seq:,}"


def lineage_tree(store: Store, infos: Sequence[SessionInfo]) -> Tree:
    """The listed sessions as a forest: a fork under its parent when the parent is listed
    too, else at the top with a note naming its parent. Keeps the listing's order."""
    listed = {info.id for info in infos}
    kids = children_of(infos)
    forest = Tree(Text("sessions"), hide_root=True, guide_style="dim")

    def label(info: SessionInfo, *, noted: bool) -> Text:
        line = Text(printable(info.id, one_line=True), style="bold")
        preview = shorten(session_preview(store, info), PREVIEW_CHARS)
        if preview:
            line.append(f"  {preview}", style="" if info.title else "dim")
        line.append(f"  {fmt_int(info.message_count)} msgs", style="dim")
        fork = fork_point(info)
        if fork is not None:
            where = fork_note(info) if noted else f"at seq {fork.seq:,}"
            line.append(f"  ({where})", style="dim")
        return line

    def add(node: Tree, info: SessionInfo, seen: set[str]) -> None:
        fork = fork_point(info)
        branch = node.add(label(info, noted=fork is not None and fork.parent not in listed))
        for child in kids.get(info.id, []):
            if child.id not in seen:
                seen.add(child.id)
                add(branch, child, seen)

    seen: set[str] = set()
    for info in infos:
        fork = fork_point(info)
        if (fork is None or fork.parent not in listed) and info.id not in seen:
            seen.add(info.id)
            add(forest, info, seen)
    for info in infos:  # a loop of forks (a damaged store) still shows every session
        if info.id not in seen:
            seen.add(info.id)
            add(forest, info, seen)
    return forest


def fork_ids(store: Store, session_id: str) -> list[str]:
    """The direct forks of a session, oldest first."""
    return [info.id for info in children_of(all_sessions(store)).get(session_id, [])]
