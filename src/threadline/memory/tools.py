"""The agent's memory tools: ``memory_search``, ``memory_recall`` and ``memory_write``.

Each result carries its provenance (session id and seq) so the model, and a
person reading the transcript, can see where a memory came from. A bad argument
becomes a ``ToolError`` the model can act on; the turn goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from threadline.errors import UsageError
from threadline.memory.base import MemoryHit, MemoryStore, check_scope, check_scopes
from threadline.store.protocol import Session
from threadline.tooling import Tool, ToolError, make_tool

DEFAULT_K = 10
HIT_FIELDS = {"kind", "id", "text", "session_id", "seq", "observed_at"}
"""What a tool result shows of a hit (not its score or every source: tokens the model
would pay for without use)."""


def hit_json(hit: MemoryHit) -> dict[str, Any]:
    return hit.model_dump(mode="json", include=HIT_FIELDS)


def memory_tools(
    memory: MemoryStore,
    *,
    scopes: Sequence[str],
    default_scope: str,
    session: Callable[[], Session | None],
) -> list[Tool]:
    """The three memory tools over ``memory``, searching ``scopes`` and writing to
    ``default_scope``; ``session`` gives the current session for provenance."""
    read_scopes = check_scopes(list(scopes))
    write_scope = check_scope(default_scope)
    if write_scope not in read_scopes:
        read_scopes.insert(0, write_scope)

    def memory_search(query: str, k: int = DEFAULT_K) -> list[dict[str, Any]]:
        """Search long-term memory (facts, people, places, projects, earlier conversations).

        Each result names the session and seq it came from."""
        try:
            hits = memory.search(query, scopes=read_scopes, k=k)
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        return [hit_json(h) for h in hits]

    def memory_recall(entity: str) -> dict[str, Any]:
        """Everything memory knows about one entity (a person, place, project, tool...)."""
        try:
            report = memory.recall(entity, scopes=read_scopes)
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        if report is None:
            raise ToolError(f"nothing is remembered about {entity!r}; try memory_search")
        return {
            "entity": {
                "name": report.entity.name,
                "kind": report.entity.kind,
                "aliases": report.entity.aliases,
            },
            "facts": [
                {
                    "id": f.id,
                    "statement": f.statement,
                    "current": f.current,
                    "observed_at": f.observed_at.isoformat(),
                    "session_id": f.session_id,
                    "seq": f.seq,
                }
                for f in report.facts
            ],
            "relations": [
                {"source": r.source, "label": r.label, "target": r.target} for r in report.relations
            ],
        }

    def memory_write(statement: str, subject: str | None = None) -> str:
        """Remember one fact for later sessions (a newer fact about the same thing replaces it).

        ``subject`` is who or what the fact is about, e.g. a person's or project's name."""
        current = session()
        sid = seq = None
        if current is not None:
            current = current.refresh()
            if current.last_seq > 0:
                sid, seq = current.id, current.last_seq
        try:
            fact = memory.write_fact(
                write_scope, statement, subject=subject, session_id=sid, seq=seq
            )
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        return f"remembered (fact {fact.id}): {fact.statement}"

    return [make_tool(f) for f in (memory_search, memory_recall, memory_write)]
