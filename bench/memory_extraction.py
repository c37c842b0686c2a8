"""Extraction on LoCoMo: how many of the dataset's own annotated observations the facts cover.

Each LoCoMo sample is ingested as one agent's sessions in a temporary SQLite store
(one threadline session per LoCoMo session, each turn a message named after its
speaker with its ``dia_id`` in the metadata, as ``bench/memory_locomo.py`` does),
then memory is built from the stored sessions with ``build_memory`` (the library
call behind ``threadline memory build``). LoCoMo annotates, per speaker and
session, ``observation`` facts, each with the turn(s) it comes from. An
observation is *covered* when a stored fact has one of its evidence turns in its
provenance and shares at least half of the observation's content words (lower-case
words of 3+ letters, common stop words removed, each cut to its first six letters).

Printed per conversation and overall: observation coverage, facts, facts per turn,
the share of facts that cover no observation (noise), and the ceiling (the raw
evidence turns taken as facts, each with its speaker's name, as a fact names its
subject).

    python bench/memory_extraction.py --data PATH [--json] [--limit N] [--skip N]
        [--extractor offline|hybrid] [--model SPEC --base-url URL]
    python bench/memory_extraction.py --data PATH --ingest-only STORE_URL

``--ingest-only`` stores the conversations as sessions (agent ``locomo-<id>``) in
``STORE_URL`` and extracts nothing, for ``threadline memory build`` to work on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from memory_locomo import DEFAULT_DATA, json_or_table, sessions_of, turn_text
from threadline import Message, open_store
from threadline.memory import ExtractiveExtractor, Extractor, HybridExtractor, open_memory
from threadline.memory.build import build_memory
from threadline.memory.rules import STOPWORDS
from threadline.store.protocol import Store

WORD_RE = re.compile(r"[^\W\d_]{3,}")
PREFIX = 6
_DIA_RE = re.compile(r"D\d+:\d+")


def content_words(text: str) -> set[str]:
    """Lower-case words of 3+ letters, stop words out, each cut to its first six letters."""
    return {w[:PREFIX] for w in WORD_RE.findall(text.lower()) if w not in STOPWORDS}


def covers(fact_words: set[str], observation_words: set[str]) -> bool:
    return 2 * len(fact_words & observation_words) >= len(observation_words)


@dataclass
class Observation:
    speaker: str
    text: str
    evidence: list[str]
    words: set[str]


def observations_of(sample: dict[str, Any]) -> list[Observation]:
    out = []
    for per_session in (sample.get("observation") or {}).values():
        for speaker, items in per_session.items():
            for item in items:
                text, evidence = item[0], item[1]
                ids = _DIA_RE.findall(json.dumps(evidence))
                out.append(Observation(speaker, str(text), ids, content_words(str(text))))
    return out


@dataclass
class Score:
    name: str
    turns: int = 0
    observations: int = 0
    covered: int = 0
    ceiling: int = 0
    facts: int = 0
    noise: int = 0
    seconds: float = 0.0


def agent_of(sample: dict[str, Any]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"locomo-{sample.get('sample_id', 'sample')}")


def ingest(sample: dict[str, Any], store: Store) -> dict[tuple[str, int], str]:
    """Store a sample's sessions; returns ``(session id, seq) -> dia_id``."""
    conv = sample["conversation"]
    agent = agent_of(sample)
    first_speaker = conv["speaker_a"]
    dia_of: dict[tuple[str, int], str] = {}
    for _, date, turns in sessions_of(conv):
        session = store.create_session(agent=agent, title=f"{agent} {date:%Y-%m-%d}")
        messages = [
            Message(
                role="user" if turn["speaker"] == first_speaker else "assistant",
                content=turn_text(turn),
                name=turn["speaker"],
                metadata={"dia_id": turn["dia_id"]},
                created_at=date + timedelta(seconds=i),
            )
            for i, turn in enumerate(turns)
        ]
        for m in session.append(messages):
            assert m.seq is not None
            dia_of[(session.id, m.seq)] = m.metadata["dia_id"]
    return dia_of


def score_sample(
    sample: dict[str, Any], workdir: Path, extractor: Extractor, show: list[str] | None = None
) -> Score:
    agent = agent_of(sample)
    store = open_store(f"sqlite://{workdir}/{agent}.db?synchronous=normal")
    memory = open_memory(store)
    started = time.perf_counter()
    dia_of = ingest(sample, store)
    build_memory(store, memory, agent=agent, extractor=extractor)
    score = Score(str(sample.get("sample_id", agent)), turns=len(dia_of))
    score.seconds = time.perf_counter() - started
    facts = memory.list_facts(f"agent:{agent}", include_superseded=True)
    text_of = {dia: "" for dia in dia_of.values()}
    for turn in (t for _, _, turns in sessions_of(sample["conversation"]) for t in turns):
        text_of[turn["dia_id"]] = f"{turn['speaker']} {turn_text(turn)}"
    by_turn: dict[str, list[set[str]]] = {}
    fact_words = []
    for f in facts:
        words = content_words(f.statement)
        fact_words.append((f, words))
        for s in f.sources:
            if (s.session_id, s.seq) in dia_of:
                by_turn.setdefault(dia_of[(s.session_id, s.seq)], []).append(words)
    used: set[str] = set()
    for obs in observations_of(sample):
        score.observations += 1
        if any(covers(content_words(text_of.get(d, "")), obs.words) for d in obs.evidence):
            score.ceiling += 1
        hit = False
        for f, words in fact_words:
            turns = {dia_of.get((s.session_id, s.seq)) for s in f.sources}
            if turns & set(obs.evidence) and covers(words, obs.words):
                used.add(f.id)
                hit = True
        score.covered += hit
    score.facts = len(facts)
    score.noise = sum(f.id not in used for f in facts)
    if show is not None:
        show += [
            f"{'+' if f.id in used else '-'} {dia_of.get((f.session_id or '', f.seq or 0))} "
            f"{f.statement}"
            for f in facts
        ]
    memory.close()
    store.close()
    return score


def figures(scores: list[Score]) -> dict[str, Any]:
    observations = sum(s.observations for s in scores)
    facts = sum(s.facts for s in scores)
    turns = sum(s.turns for s in scores)
    return {
        "observation_coverage": sum(s.covered for s in scores) / observations
        if observations
        else 0,
        "facts": facts,
        "noise_share": sum(s.noise for s in scores) / facts if facts else 0.0,
        "observations": observations,
        "covered": sum(s.covered for s in scores),
        "ceiling": sum(s.ceiling for s in scores) / observations if observations else 0.0,
        "turns": turns,
        "facts_per_turn": facts / turns if turns else 0.0,
        "seconds": round(sum(s.seconds for s in scores), 3),
    }


def make_extractor(args: argparse.Namespace) -> Extractor:
    if args.extractor == "offline":
        return ExtractiveExtractor()
    from threadline.llm.registry import resolve_model

    overrides: dict[str, Any] = {"max_retries": 0}
    if args.base_url:  # a local server (the tests' fake) needs no real key
        overrides["base_url"] = args.base_url
        overrides["api_key"] = os.environ.get("OPENAI_API_KEY") or "local"
    return HybridExtractor(resolve_model(args.model, **overrides))


FIGURES = ("turns", "observations", "coverage", "facts", "per turn", "noise", "ceil")
"""The columns of the table after the sample's name."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo-shaped JSON file")
    parser.add_argument("--json", action="store_true", help="print one JSON object of figures")
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N samples")
    parser.add_argument("--extractor", choices=("offline", "hybrid"), default="offline")
    parser.add_argument("--model", default="openai:gpt-4o-mini", help="the hybrid's model")
    parser.add_argument("--base-url", default=None, help="the model server's URL (hybrid)")
    parser.add_argument("--show-facts", type=Path, default=None, help="write every fact here")
    parser.add_argument(
        "--ingest-only", metavar="STORE_URL", default=None, help="store sessions, extract nothing"
    )
    args = parser.parse_args(argv)
    path: Path = args.data
    if not path.is_file():
        print(f"no LoCoMo data at {path}: pass --data PATH", file=sys.stderr)
        return 2
    samples = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(samples, list):
        print(f"{path} is not a JSON list of LoCoMo samples", file=sys.stderr)
        return 2
    samples = samples[args.skip :][: args.limit]
    if args.ingest_only:
        store = open_store(args.ingest_only)
        turns = sum(len(ingest(s, store)) for s in samples)
        store.close()
        print(f"stored {len(samples)} conversations ({turns} turns) in {args.ingest_only}")
        return 0
    extractor = make_extractor(args)
    show: list[str] | None = [] if args.show_facts else None
    with tempfile.TemporaryDirectory(prefix="threadline-extraction-") as tmp:
        scores = [score_sample(s, Path(tmp), extractor, show) for s in samples]
    if args.show_facts and show is not None:
        args.show_facts.write_text("\n".join(show) + "\n", encoding="utf-8")
    overall = figures(scores)
    if isinstance(extractor, HybridExtractor):
        overall["model_requests"] = extractor.llm.requests
        overall["model_failures"] = extractor.failures
    title = f"LoCoMo observation coverage ({path.name}, {args.extractor})"
    table = json_or_table(overall, args.json, title, FIGURES)
    if table is None:
        return 0
    for s in [*scores, None]:
        f = figures([s]) if s is not None else overall
        table.add_row(
            s.name if s is not None else "overall",
            str(f["turns"]),
            str(f["observations"]),
            f"{f['observation_coverage']:.3f}",
            str(f["facts"]),
            f"{f['facts_per_turn']:.2f}",
            f"{f['noise_share']:.3f}",
            f"{f['ceiling']:.3f}",
            style="bold" if s is None else None,
        )
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
