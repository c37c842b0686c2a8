"""Sessions listed under others: what ``sessions list`` and the web list count and nest,
and what a session is to the one it is listed under.

A session names the one it is listed under (``SessionInfo.parent_id``: a fork's parent,
an imported subagent's or compaction summariser's session). ``sessions list`` pages
through the top-level sessions with a count of each one's children; ``--all`` and
``--tree`` fetch each listed session's children (and theirs) below it. Every backend
counts and lists a session's children from an index (the JSONL store by reading its
files), so a page costs the page and what is nested in it, not the whole store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from threadline.store.checks import MAX_PAGE_SIZE
from threadline.store.lineage import fork_point
from threadline.store.protocol import Store
from threadline.store.session_info import (
    CHILD_KIND_KEY,
    COMPACTION_CHILD,
    SUBAGENT_CHILD,
    SessionInfo,
)

MAX_DEPTH = 8
"""Generations nested below a listed session (deeper ones are counted, not shown)."""


def fork_note(info: SessionInfo) -> str:
    """``fork of ID at seq N``, or an empty string for a session that is no fork."""
    fork = fork_point(info)
    return "" if fork is None else f"fork of {fork.parent} at seq {fork.seq:,}"


def relation(info: SessionInfo) -> str:
    """What a session is to the one it is listed under: ``fork at seq N``, ``compaction
    summary``, ``subagent`` (an imported agent's run, or one threadline's ``task`` tool
    started), ``side branch`` (a branch of the conversation the user left, as Pi's
    ``/tree`` keeps), else ``child``; empty when it is listed under none."""
    fork = fork_point(info)
    if fork is not None:
        return f"fork at seq {fork.seq:,}"
    if info.parent_id is None:
        return ""
    kind = info.metadata.get(CHILD_KIND_KEY)
    if kind == COMPACTION_CHILD:
        return "compaction summary"
    if info.metadata.get("branch_from") is not None:
        return "side branch"
    return "subagent" if kind == SUBAGENT_CHILD or info.metadata.get("agent_id") else "child"


def child_counts(store: Store, infos: Sequence[SessionInfo]) -> dict[str, int]:
    """How many sessions are listed directly under each of ``infos``."""
    ids = [info.id for info in infos]
    counts: dict[str, int] = {}
    for start in range(0, len(ids), MAX_PAGE_SIZE):
        counts.update(store.count_children(ids[start : start + MAX_PAGE_SIZE]))
    return counts


def children(store: Store, session_id: str) -> list[SessionInfo]:
    """Every session listed directly under ``session_id``, newest updated first."""
    out: list[SessionInfo] = []
    while True:
        page = store.list_sessions(parent=session_id, limit=MAX_PAGE_SIZE, offset=len(out))
        out.extend(page.items)
        if not page.items or len(out) >= page.total:
            return out


@dataclass
class Node:
    """A listed session, how many sessions are listed under it, and those shown."""

    info: SessionInfo
    child_count: int = 0
    children: list[Node] = field(default_factory=list)

    def walk(self, depth: int = 0) -> Iterator[tuple[Node, int]]:
        """This node and every node below it, each with its depth, in listing order."""
        yield self, depth
        for child in self.children:
            yield from child.walk(depth + 1)


def forest(
    store: Store, infos: Sequence[SessionInfo], *, nested: bool, depth: int = 0
) -> list[Node]:
    """``infos`` with their child counts and, when ``nested``, their children below them
    (up to ``MAX_DEPTH`` generations; a loop in damaged data stops where it repeats)."""
    return _forest(store, infos, nested=nested, depth=depth, seen=set())


def _forest(
    store: Store, infos: Sequence[SessionInfo], *, nested: bool, depth: int, seen: set[str]
) -> list[Node]:
    counts = child_counts(store, infos)
    nodes = []
    for info in infos:
        seen.add(info.id)
        node = Node(info, counts.get(info.id, 0))
        if nested and node.child_count and depth < MAX_DEPTH:
            kids = [k for k in children(store, info.id) if k.id not in seen]
            node.children = _forest(store, kids, nested=True, depth=depth + 1, seen=seen)
        nodes.append(node)
    return nodes


@dataclass(frozen=True)
class SubagentTally:
    """The subagent runs below a session (``threadline context`` counts them)."""

    direct: int = 0
    nested: int = 0
    """Runs of subagents' own subagents, deeper down."""
    messages: int = 0
    """Messages stored in all of them (they are never in the parent's window)."""


def is_subagent(info: SessionInfo) -> bool:
    """A run threadline's ``task`` tool started (not an imported one)."""
    return info.parent_id is not None and info.metadata.get(CHILD_KIND_KEY) == SUBAGENT_CHILD


def subagent_tally(store: Store, session_id: str) -> SubagentTally:
    """How many subagent sessions ran under ``session_id`` (up to ``MAX_DEPTH`` deep) and
    how many messages they hold."""
    direct = nested = messages = 0
    level, seen = [session_id], {session_id}
    for depth in range(MAX_DEPTH):
        below: list[str] = []
        for parent in level:
            for info in children(store, parent):
                if info.id in seen or not is_subagent(info):
                    continue
                seen.add(info.id)
                below.append(info.id)
                messages += info.message_count
                if depth == 0:
                    direct += 1
                else:
                    nested += 1
        if not below:
            break
        level = below
    return SubagentTally(direct, nested, messages)


def fork_ids(store: Store, session_id: str) -> list[str]:
    """The direct forks of a session, oldest first."""
    forks = [
        info
        for info in children(store, session_id)
        if (fork := fork_point(info)) is not None and fork.parent == session_id
    ]
    return [info.id for info in sorted(forks, key=lambda i: (i.created_at, i.id))]
