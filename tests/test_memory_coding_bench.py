"""``bench/memory_coding.py``: its hand list cites real transcript lines, and an item is
held only by a fact that says every keyword (an outdated one must not be said)."""

from __future__ import annotations

import json

from tests.bench_scripts import load_bench
from tests.conftest import TRANSCRIPTS, require_shared

bench = load_bench("memory_coding")


def test_every_hand_listed_item_cites_the_line_it_comes_from() -> None:
    require_shared(TRANSCRIPTS)
    data = json.loads(bench.DEFAULT_ITEMS.read_text())
    assert len(data["transcripts"]) == 2
    for entry in data["transcripts"]:
        lines = (TRANSCRIPTS / entry["path"]).read_text().splitlines()
        assert sum(item["current"] for item in entry["items"]) >= 10
        for item in entry["items"]:
            assert item["quote"] in lines[item["source_line"] - 1], item["item"]
            assert item["keywords"], item["item"]


def test_an_item_is_held_only_when_every_keyword_is_said() -> None:
    items = [
        {"item": "plans in /specs", "keywords": ["specs", "plans"], "current": True},
        {"item": "no commit until the end", "keywords": ["commit", "final"], "current": True},
        {"item": "play the computer", "keywords": ["computer"], "current": False},
    ]
    held, outdated, missed = bench.tally(
        ["Put the plans in /specs.", "Don't commit yet.", "There is no AI."], items
    )
    assert (held, outdated, missed) == (1, 0, ["no commit until the end"])
    assert bench.tally(["You play against the computer."], items)[1] == 1
