"""Long-term memory retrieval on LoCoMo: evidence recall of ``memory_search`` vs BM25.

Each LoCoMo sample (a very long two-person conversation over many sessions)
is ingested as one agent's sessions in a temporary SQLite store: one threadline
session per LoCoMo session, each turn a user (first speaker) or assistant
(second speaker) message named after its speaker, with the turn's ``dia_id`` in
its metadata (so a result's provenance, session id and seq, maps back to
``dia_id`` exactly) and the session's date as the time it was said. The offline
extractive extractor then builds the memory (entities, facts, and every turn as
an episode). Questions, answers and evidence are never read before search.

For each question of categories 1-4, evidence recall@k is the share of the
question's evidence turns covered by the sources of the top k results. The
baseline ranks the same raw turn texts with ``rank_bm25`` (BM25Okapi, lower-case
word tokens) in the same run. Also printed: ingestion + extraction time and
search latency (median, p95).

    python bench/memory_locomo.py [--data PATH] [--json] [--limit N] [--backend sqlite]

``--data`` defaults to ``../shared/benchmarks/locomo/locomo_dev.json`` beside
the repository; any file of the same shape works.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from threadline import Message, open_store
from threadline.memory import ExtractiveExtractor, open_memory

DEFAULT_DATA = (
    Path(__file__).resolve().parents[1] / ".." / "shared/benchmarks/locomo/locomo_dev.json"
)
CATEGORIES = (1, 2, 3, 4)
KS = (5, 10)
_TOKEN = re.compile(r"\w+")
_DATE = re.compile(r"(\d{1,2}):(\d\d)\s*(am|pm) on (\d{1,2}) (\w+),? (\d{4})", re.I)
_MONTHS = {datetime(2000, i, 1).strftime("%B").lower(): i for i in range(1, 13)}


def parse_date(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    m = _DATE.search(text)
    if m is None:
        raise ValueError(f"unreadable session date {text!r}")
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), h, int(minute), tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    return f"{text} [shares an image: {caption}]" if caption else text


def evidence_ids(qa: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for item in qa.get("evidence", []):
        out += re.findall(r"D\d+:\d+", str(item))
    return list(dict.fromkeys(out))


def bm25_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def recall(found: list[str], evidence: list[str]) -> float:
    return len(set(found) & set(evidence)) / len(evidence)


@dataclass
class Result:
    name: str
    questions: int = 0
    memory: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    bm25: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    turns_at_10: float = 0.0
    ingest_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)


def sessions_of(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conversation.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            n = int(m.group(1))
            out.append((n, parse_date(conversation[f"session_{n}_date_time"]), turns))
    return sorted(out, key=lambda s: s[0])


STORE_URLS = {
    "sqlite": "sqlite://{dir}/{name}.db?synchronous=normal",
    "jsonl": "jsonl://{dir}/{name}",
    "memory": "memory://",
}


def run_sample(sample: dict[str, Any], workdir: Path, backend: str = "sqlite") -> Result:
    name = str(sample.get("sample_id", "sample"))
    conv = sample["conversation"]
    agent = re.sub(r"[^A-Za-z0-9_-]", "-", f"locomo-{name}")
    scope = f"agent:{agent}"
    first_speaker = conv["speaker_a"]
    result = Result(name)
    store = open_store(STORE_URLS[backend].format(dir=workdir, name=agent))
    memory = open_memory(store)
    extractor = ExtractiveExtractor()
    dia_of: dict[tuple[str, int], str] = {}
    raw_ids: list[str] = []
    raw_texts: list[str] = []
    last_date = datetime.min.replace(tzinfo=UTC)
    started = time.perf_counter()
    for _, date, turns in sessions_of(conv):
        session = store.create_session(agent=agent, title=f"{name} {date:%Y-%m-%d}")
        messages = []
        for i, turn in enumerate(turns):
            role = "user" if turn["speaker"] == first_speaker else "assistant"
            messages.append(
                Message(
                    role=role,
                    content=turn_text(turn),
                    name=turn["speaker"],
                    metadata={"dia_id": turn["dia_id"]},
                    created_at=date + timedelta(seconds=i),
                )
            )
        stored = session.append(messages)
        for m in stored:
            assert m.seq is not None
            dia_of[(session.id, m.seq)] = m.metadata["dia_id"]
            raw_ids.append(m.metadata["dia_id"])
            raw_texts.append(m.text)
        extraction = extractor.extract(stored, scope=scope, session_id=session.id, observed_at=date)
        memory.store_extraction(scope, extraction)
        last_date = max(last_date, date)
    result.ingest_seconds = time.perf_counter() - started

    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    bm25 = BM25Okapi([bm25_tokens(t) for t in raw_texts])
    now = last_date + timedelta(days=1)
    for qa in sample.get("qa", []):
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = evidence_ids(qa)
        if not evidence:
            continue
        question = str(qa["question"])
        t0 = time.perf_counter()
        hits = memory.search(question, scopes=[scope], k=max(KS), now=now)
        result.latencies.append(time.perf_counter() - t0)
        scores = bm25.get_scores(bm25_tokens(question))
        order = sorted(range(len(raw_ids)), key=lambda i: -scores[i])
        result.questions += 1
        for k in KS:
            found = [
                dia_of[(s.session_id, s.seq)]
                for h in hits[:k]
                for s in h.sources
                if (s.session_id, s.seq) in dia_of
            ]
            result.memory[k] += recall(found, evidence)
            result.bm25[k] += recall([raw_ids[i] for i in order[:k]], evidence)
            if k == 10:
                result.turns_at_10 += len(set(found))
    memory.close()
    store.close()
    return result


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def json_or_table(
    overall: dict[str, Any], as_json: bool, title: str, figures: tuple[str, ...]
) -> Table | None:
    """``overall`` printed as one JSON line (``None``), or the empty table its samples
    fill: their name left, their ``figures`` right."""
    if as_json:
        print(json.dumps(overall))
        return None
    table = Table(title=title)
    table.add_column("sample", justify="left", no_wrap=True)
    for col in figures:
        table.add_column(col, justify="right", no_wrap=True)
    return table


FIGURES = ("questions", "mem@5", "mem@10", "bm25@5", "bm25@10", "ingest s", "median ms")
"""The columns of the table after the sample's name."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo-shaped JSON file")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object of overall figures"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples")
    parser.add_argument(
        "--backend", choices=sorted(STORE_URLS), default="sqlite", help="the temporary store"
    )
    args = parser.parse_args(argv)
    path: Path = args.data
    if not path.is_file():
        print(
            f"no LoCoMo data at {path}: pass --data PATH (a JSON list of samples with "
            "'conversation' and 'qa')",
            file=sys.stderr,
        )
        return 2
    samples = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(samples, list):
        print(f"{path} is not a JSON list of LoCoMo samples", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="threadline-locomo-") as tmp:
        for sample in samples[: args.limit]:
            results.append(run_sample(sample, Path(tmp), args.backend))
    total = sum(r.questions for r in results) or 1
    latencies = [x for r in results for x in r.latencies]
    overall = {
        "recall_at_5": sum(r.memory[5] for r in results) / total,
        "recall_at_10": sum(r.memory[10] for r in results) / total,
        "bm25_recall_at_5": sum(r.bm25[5] for r in results) / total,
        "bm25_recall_at_10": sum(r.bm25[10] for r in results) / total,
        "questions": sum(r.questions for r in results),
        "ingest_seconds": round(sum(r.ingest_seconds for r in results), 3),
        "search_median_ms": round(statistics.median(latencies) * 1000, 3) if latencies else 0.0,
        "search_p95_ms": round(percentile(latencies, 0.95) * 1000, 3),
        "turns_covered_at_10": sum(r.turns_at_10 for r in results) / total,
    }
    title = f"LoCoMo evidence recall, categories 1-4 ({path.name}, {args.backend})"
    table = json_or_table(overall, args.json, title, FIGURES)
    if table is None:
        return 0
    for r in results:
        n = r.questions or 1
        table.add_row(
            r.name,
            str(r.questions),
            f"{r.memory[5] / n:.3f}",
            f"{r.memory[10] / n:.3f}",
            f"{r.bm25[5] / n:.3f}",
            f"{r.bm25[10] / n:.3f}",
            f"{r.ingest_seconds:.2f}",
            f"{statistics.median(r.latencies) * 1000:.2f}" if r.latencies else "-",
        )
    table.add_row(
        "overall",
        str(overall["questions"]),
        f"{overall['recall_at_5']:.3f}",
        f"{overall['recall_at_10']:.3f}",
        f"{overall['bm25_recall_at_5']:.3f}",
        f"{overall['bm25_recall_at_10']:.3f}",
        f"{overall['ingest_seconds']:.2f}",
        f"{overall['search_median_ms']:.2f}",
        style="bold",
    )
    console = Console()
    console.print(table)
    console.print(
        f"ingestion + extraction: {overall['ingest_seconds']:.2f} s; search latency median "
        f"{overall['search_median_ms']:.2f} ms, p95 {overall['search_p95_ms']:.2f} ms; "
        f"distinct turns covered by the top 10: {overall['turns_covered_at_10']:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
