"""What a coding agent's memory keeps of real coding sessions, against a hand-made list.

``bench/memory_coding_items.json`` lists, for two long coding transcripts of
``../shared/transcripts`` (a Codex session building a real-time chess game, a
Claude Code session designing session tracking for a CLI), what a person working
with that user would remember: standing constraints and preferences, conventions,
environment facts, the spec as it stands, the fix that resolved an error. Each item
cites the transcript line it comes from and names the keywords a fact must hold to
say it; an item marked ``"current": false`` was revised or undone later in the
session, so a current fact must *not* say it.

Each transcript is imported into a temporary SQLite store (``sessions import``'s
``Syncer``) and memory is built from it (``build_memory`` with
``include_imported``: what ``threadline memory build --include-imported`` does).
An item is *held* when one current fact's index terms (``rules.terms``: folded,
stemmed) include every keyword's terms. Printed per transcript: items held,
outdated items still current, facts, words per fact, entities and how many are
paths or ids; and the same for the peer measured in the same run: every user
request kept whole as a fact (what a memory that copies the user's prompts holds).

    python bench/memory_coding.py [--items PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from tables import result_table
from threadline import open_store
from threadline.interop.sync import Syncer, find_sources
from threadline.memory import open_memory
from threadline.memory.build import build_memory
from threadline.memory.instructions import REVERTED
from threadline.memory.rules import terms
from threadline.requests import request_text

HERE = Path(__file__).resolve().parent
DEFAULT_ITEMS = HERE / "memory_coding_items.json"
TRANSCRIPTS = HERE.parents[0] / ".." / "shared" / "transcripts"


@dataclass
class Score:
    name: str
    items: int
    held: int
    outdated: int
    outdated_current: int
    facts: int
    words_per_fact: float
    entities: int
    named_entities: int
    peer_held: int
    peer_outdated_current: int
    peer_facts: int
    peer_words_per_fact: float
    missed: list[str] = field(default_factory=list)


def holds(statement_terms: set[str], keywords: list[str]) -> bool:
    return all(set(terms(k)) <= statement_terms for k in keywords)


def tally(statements: list[str], items: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    """``(current items held, outdated items still said, current items missed)``."""
    said = [set(terms(s)) for s in statements]
    held = outdated = 0
    missed: list[str] = []
    for item in items:
        found = any(holds(t, item["keywords"]) for t in said)
        if item["current"]:
            held += found
            if not found:
                missed.append(item["item"])
        else:
            outdated += found
    return held, outdated, missed


def score(entry: dict[str, Any], workdir: Path) -> Score:
    path = TRANSCRIPTS / entry["path"]
    store = open_store(f"sqlite://{workdir}/{entry['name']}.db?synchronous=normal")
    try:
        Syncer(store).sync(find_sources([str(path)]))
        memory = open_memory(store)
        build_memory(store, memory, include_imported=True)
        facts = [f for scope in memory.scopes() for f in memory.list_facts(scope)]
        entities = [e for scope in memory.scopes() for e in memory.list_entities(scope)]
        requests = [
            text
            for info in store.list_sessions(limit=100)
            for m in store.get_session(info.id).iter_messages()
            if (text := request_text(m)) is not None
        ]
    finally:
        store.close()
    items = entry["items"]
    statements = [f.statement for f in facts]
    held, _, missed = tally(statements, items)
    said = [s for s in statements if not s.startswith(REVERTED)]
    _, outdated_current, _ = tally(said, items)
    peer_held, peer_outdated, _ = tally(requests, items)
    return Score(
        name=entry["name"],
        items=sum(1 for i in items if i["current"]),
        held=held,
        outdated=sum(1 for i in items if not i["current"]),
        outdated_current=outdated_current,
        facts=len(facts),
        words_per_fact=_median_words(statements),
        entities=len(entities),
        named_entities=sum(1 for e in entities if e.kind in ("path", "id", "tool")),
        peer_held=peer_held,
        peer_outdated_current=peer_outdated,
        peer_facts=len(requests),
        peer_words_per_fact=_median_words(requests),
        missed=missed,
    )


def _median_words(texts: list[str]) -> float:
    return float(statistics.median(len(t.split()) for t in texts)) if texts else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=Path, default=DEFAULT_ITEMS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    data = json.loads(args.items.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        scores = [score(entry, Path(tmp)) for entry in data["transcripts"]]
    if args.json:
        print(json.dumps([asdict(s) for s in scores], indent=2))
        return 0
    table = result_table(
        "Coding memory: hand-listed standing items held by current facts",
        (
            "transcript",
            "items",
            "held",
            "outdated said",
            "facts",
            "words/fact",
            "entities (named)",
            "peer held",
            "peer outdated",
            "peer facts",
            "peer words",
        ),
    )
    for s in scores:
        table.add_row(
            s.name,
            str(s.items),
            str(s.held),
            f"{s.outdated_current}/{s.outdated}",
            str(s.facts),
            f"{s.words_per_fact:.0f}",
            f"{s.entities} ({s.named_entities})",
            str(s.peer_held),
            f"{s.peer_outdated_current}/{s.outdated}",
            str(s.peer_facts),
            f"{s.peer_words_per_fact:.0f}",
        )
    console = Console(width=200)
    console.print(table)
    console.print(
        "peer: every user request kept whole as a fact. held: a current fact holds every "
        "keyword of the item; outdated said: items revised or undone later that a current "
        "fact still says."
    )
    for s in scores:
        for item in s.missed:
            console.print(f"  {s.name} missed: {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
