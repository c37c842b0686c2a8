"""Which imported session sits under which, and what a child is: the import's side of
``SessionInfo.parent_id``.

An importer names a conversation's parent by the parent's own source id in
``metadata["parent_source_id"]`` (a Claude Code subagent names its session; a
threadline export names the session it was listed under), within the same format;
``interop/sync.py`` looks that source up among earlier imports and links the two.

A Claude Code compaction summariser (``<session>/subagents/agent-acompact-*.jsonl``)
is such a child, whose first request is the summariser's prompt ("Your task is to
create a detailed summary of the conversation so far..."): it is recognised by its
agent id and titled after its parent instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from threadline.store.session_info import CHILD_KIND_KEY as KIND_KEY
from threadline.store.session_info import COMPACTION_CHILD as COMPACTION

__all__ = [
    "COMPACTION",
    "KIND_KEY",
    "child_kind",
    "compaction_title",
    "parent_source_id",
    "unlinked_compaction_title",
    "with_exported_parent",
]

COMPACTION_AGENT_PREFIX: Final = "acompact"
"""Claude Code's agent ids of compaction summarisers (``agent-acompact-f46190.jsonl``)."""


def parent_source_id(metadata: Mapping[str, Any]) -> str | None:
    """The parent's source id an imported session names, if any."""
    parent = metadata.get("parent_source_id")
    return parent if isinstance(parent, str) and parent else None


def with_exported_parent(metadata: Mapping[str, Any], parent: object) -> dict[str, Any]:
    """An exported session's metadata naming the parent its export states, and no other.

    The metadata of an imported session holds the parent *its* source named
    (``parent_source_id``), an id of that source's store. Exported and imported again,
    that id would link the new import under whatever imports it: a session the export
    was never listed under. Only the export's ``parent_id`` (the session it was listed
    under when exported) says where the import belongs."""
    out = {k: v for k, v in metadata.items() if k != "parent_source_id"}
    if isinstance(parent, str) and parent:  # linked again when that export is imported too
        out["parent_source_id"] = parent
    return out


def child_kind(metadata: Mapping[str, Any]) -> str | None:
    """What kind of child an imported session is (``COMPACTION``), by its metadata as
    the importer and the sync left it; ``None`` for a plain one."""
    stated = metadata.get(KIND_KEY)
    if isinstance(stated, str) and stated:
        return stated
    agent = metadata.get("agent_id")
    if (
        metadata.get("source_format") == "claude-code"
        and isinstance(agent, str)
        and agent.startswith(COMPACTION_AGENT_PREFIX)
    ):
        return COMPACTION
    return None


def compaction_title(parent_title: str | None, parent_ref: str) -> str:
    """A compaction summariser's title: after its parent's title, or ``parent_ref``
    (the parent's id, or its source id while it is not imported)."""
    return f"Compaction summary of {parent_title or parent_ref}"


def unlinked_compaction_title(metadata: Mapping[str, Any]) -> str:
    """The title a compaction summariser gets while its parent is not imported: replaced
    by ``compaction_title`` once the parent is there."""
    return compaction_title(None, f"session {parent_source_id(metadata) or '(unknown)'}")
