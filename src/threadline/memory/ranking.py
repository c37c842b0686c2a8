"""How ``memory_search`` ranks: lexical match, then entity links, graph neighbours, time.

1. The backend's text index (FTS5, tsvector or BM25 in process) gives candidates
   among facts, entities and remembered turns (episodes), scored 0..1.
2. Entities named in the query (by name or alias) lift records linked to them;
   their recent mentions join the candidates, and entities related to them in
   the graph lift theirs a little.
3. A time expression ("in 2022", "last May", "before the move") lifts records
   observed in, or about, that window; recency breaks near-ties.
4. A fact lifts the turn it came from, and a strong turn lifts the turns next to
   it in its session (answers often span a question and its reply).
5. Records from one turn collapse into one hit, shown as the best of them, with
   every source turn they stand for.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from threadline.errors import UsageError
from threadline.memory.base import MAX_QUERY_CHARS, Entity, Episode, Fact, MemoryHit, Source
from threadline.memory.records import Records, Where
from threadline.memory.rules import STOPWORDS, name_key, terms, words
from threadline.memory.timeexpr import Window, label_window, parse_query


class MemoryView(Protocol):
    """What ranking reads from a ``memory.core.Memory`` (named here, so ranking
    sits below the core that calls it instead of importing it back)."""

    records: Records

    def find_entities(self, names: Sequence[str], scopes: Sequence[str]) -> list[Entity]: ...


MAX_K = 100
CANDIDATES = 120
"""Lexical candidates read per search (before boosts); enough to re-rank, cheap to load.
Most statement turns have a fact beside their episode, so one turn may take two."""
ENTITY_MENTIONS = 8
"""Recent turns of each entity named in the query that join the candidates."""
NEIGHBOUR_SEEDS = 8
"""The best turns whose session neighbours are lifted."""
W_ENTITY = 0.3
W_GRAPH = 0.1
W_TIME = 0.4
W_RECENCY = 0.05
W_FACT = 0.5
W_NEIGHBOUR = 0.4
"""A strong turn lifts the turns beside it by this share of its score: an answer often
spans a question and its reply (LoCoMo dev recall@10 0.682 at 0.25, 0.691 at 0.4)."""
SUPERSEDED_FACTOR = 0.6
RECENCY_DAYS = 180.0
HIT_TEXT_CHARS = 400


@dataclass(slots=True)
class Candidate:
    kind: str
    record: Fact | Entity | Episode
    lexical: float = 0.0
    score: float = 0.0
    lift: float = 0.0
    """What other candidates added (facts to their turn, turns to their neighbours)."""
    links: set[str] = field(default_factory=set)

    @property
    def anchor(self) -> str:
        r = self.record
        if isinstance(r, Episode):
            return f"{r.session_id}:{r.seq}"
        if isinstance(r, Fact) and r.session_id is not None:
            return f"{r.session_id}:{r.seq}"
        return f"{self.kind}:{r.id}"

    @property
    def total(self) -> float:
        return self.score + self.lift


def _load(kind: str, body: dict[str, Any]) -> Fact | Entity | Episode:
    if kind == "fact":
        return Fact.model_validate(body)
    if kind == "entity":
        return Entity.model_validate(body)
    return Episode.model_validate(body)


def _links(c: Candidate) -> set[str]:
    r = c.record
    if isinstance(r, Episode):
        names = [*r.entities, *([r.speaker] if r.speaker else [])]
    elif isinstance(r, Fact):
        names = [n for n in (r.subject, r.object) if n]
    else:
        names = [r.name, *r.aliases]
    return {name_key(n) for n in names}


def _when(c: Candidate) -> datetime | None:
    r = c.record
    if isinstance(r, Fact | Episode):
        return r.observed_at
    return r.last_seen


def _in_window(c: Candidate, window: Window) -> bool:
    when = _when(c)
    if when is not None and window.contains(when):
        return True
    if isinstance(c.record, Episode):
        for label in c.record.dates:
            span = label_window(label)
            if span is not None and window.overlaps(*span):
                return True
    return False


def _ngrams(tokens: Sequence[str], n: int = 3) -> list[str]:
    return [
        " ".join(tokens[i : i + j]) for j in range(1, n + 1) for i in range(len(tokens) - j + 1)
    ]


def _pivot_window(
    memory: MemoryView, pivot: str, direction: str, scopes: Sequence[str]
) -> Window | None:
    """ "before the move": bounded by when the best-matching fact or turn was said."""
    found = memory.records.lexical([w for w in words(pivot) if w not in STOPWORDS], scopes, 5)
    for kind, rid, _ in found:
        if kind not in ("fact", "episode"):
            continue
        for body in memory.records.get(kind, [rid]):
            record = _load(kind, body)
            if isinstance(record, Fact | Episode):
                t = record.observed_at
                return Window(None, t, pivot) if direction == "before" else Window(t, None, pivot)
    return None


def check_query(query: object, k: object) -> tuple[str, int]:
    if not isinstance(query, str) or not query.strip():
        raise UsageError("a memory search needs a non-empty query")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"a memory search query is limited to {MAX_QUERY_CHARS} characters")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise UsageError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    return query, k


def search(
    memory: MemoryView, query: str, *, scopes: Sequence[str], k: int, now: datetime
) -> list[MemoryHit]:
    query, k = check_query(query, k)
    records = memory.records
    tokens = words(query)
    found = records.lexical([w for w in tokens if w not in STOPWORDS], scopes, CANDIDATES)
    top = max((s for _, _, s in found), default=0.0) or 1.0
    cands: dict[tuple[str, str], Candidate] = {}
    by_kind: defaultdict[str, dict[str, float]] = defaultdict(dict)
    for kind, rid, score in found:
        by_kind[kind][rid] = score / top
    for kind, scores in by_kind.items():
        for body in records.get(kind, list(scores)):
            rec = _load(kind, body)
            cands[(kind, rec.id)] = Candidate(kind, rec, lexical=scores[rec.id])

    # entities named in the query, their recent turns, and their graph neighbours
    named = [e for e in memory.find_entities(_ngrams(tokens), scopes) if name_key(e.name)]
    named_keys = {name_key(n) for e in named for n in (e.name, *e.aliases)}
    mention_keys: list[str] = []
    for e in named:
        cands.setdefault(("entity", e.id), Candidate("entity", e))
        if e.mentions <= ENTITY_MENTIONS * 4:  # a rare name points somewhere; a common one does not
            mention_keys += [f"{s.session_id}:{s.seq}" for s in e.sources[-ENTITY_MENTIONS:]]
    neighbour_keys: set[str] = set()
    if named_keys:
        for rel in records.find("relation", Where(scopes=scopes, keys=sorted(named_keys))):
            neighbour_keys.add(name_key(rel["target"]))
        for rel in records.find("relation", Where(scopes=scopes, key2=sorted(named_keys))):
            neighbour_keys.add(name_key(rel["source"]))
    _add_episodes(memory, cands, mention_keys, scopes)

    tq = parse_query(query, now)
    window = tq.window
    if window is None and tq.pivot and tq.direction:
        window = _pivot_window(memory, tq.pivot, tq.direction, scopes)

    qterms = set(terms(query))
    for c in cands.values():
        c.links = _links(c)
        s = c.lexical
        if isinstance(c.record, Entity):
            # an entity answers a query that is about it, not every question naming it
            own = set(terms(" ".join([c.record.name, *c.record.aliases])))
            s = max(s, 0.5) * len(own & qterms) / max(1, len(qterms))
        elif named_keys:
            s += W_ENTITY * len(c.links & named_keys) / len(named_keys)
        if neighbour_keys and c.links & neighbour_keys:
            s += W_GRAPH
        if window is not None and _in_window(c, window):
            s += W_TIME
        when = _when(c)
        if when is not None:
            age = max(0.0, (now - when).total_seconds() / 86400)
            s += W_RECENCY * math.exp(-age / RECENCY_DAYS)
        if isinstance(c.record, Fact):
            s *= c.record.confidence
            if c.record.retracted:
                s = 0.0
            elif not c.record.current and window is None:
                s *= SUPERSEDED_FACTOR
        c.score = s

    # facts lift their turns; the best turns lift their neighbours
    fact_turns = [
        (c, f"{src.session_id}:{src.seq}")
        for c in cands.values()
        if isinstance(c.record, Fact)
        for src in c.record.sources
    ]
    _add_episodes(memory, cands, [key for _, key in fact_turns], scopes)
    turns = {c.anchor: c for c in cands.values() if isinstance(c.record, Episode)}
    for fc, key in fact_turns:
        if key in turns:
            turns[key].lift = max(turns[key].lift, W_FACT * fc.score)
    seeds = sorted(turns.values(), key=lambda c: -c.total)[:NEIGHBOUR_SEEDS]
    near: dict[str, float] = {}
    for c in seeds:
        ep = c.record
        assert isinstance(ep, Episode)
        for seq in (ep.seq - 1, ep.seq + 1):
            key = f"{ep.session_id}:{seq}"
            near[key] = max(near.get(key, 0.0), W_NEIGHBOUR * c.score)
    _add_episodes(memory, cands, list(near), scopes)
    for c in cands.values():
        if isinstance(c.record, Episode) and c.anchor in near:
            c.lift = max(c.lift, near[c.anchor])

    return _collapse(cands.values(), k)


def _add_episodes(
    memory: MemoryView,
    cands: dict[tuple[str, str], Candidate],
    keys: Sequence[str],
    scopes: Sequence[str],
) -> None:
    have = {c.anchor for c in cands.values() if c.kind == "episode"}
    missing = sorted(set(keys) - have)
    if not missing:
        return
    for body in memory.records.find("episode", Where(scopes=scopes, keys=missing)):
        ep = Episode.model_validate(body)
        cands.setdefault(("episode", ep.id), Candidate("episode", ep))


def _collapse(cands: Iterable[Candidate], k: int) -> list[MemoryHit]:
    groups: defaultdict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        if c.total > 0:
            groups[c.anchor].append(c)
    ranked = sorted(groups.values(), key=lambda g: -max(c.total for c in g))[:k]
    hits = []
    for group in ranked:
        best = max(group, key=lambda c: c.total + (0.05 if c.kind == "fact" else 0.0))
        sources: list[Source] = []
        for c in sorted(group, key=lambda c: -c.total):
            for s in _sources(c):
                if s not in sources:
                    sources.append(s)
        hits.append(_hit(best, max(c.total for c in group), sources))
    return hits


def _sources(c: Candidate) -> list[Source]:
    r = c.record
    if isinstance(r, Episode):
        return [Source(session_id=r.session_id, seq=r.seq)]
    if isinstance(r, Fact):
        return list(r.sources)
    return list(r.sources[-1:])


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HIT_TEXT_CHARS else text[: HIT_TEXT_CHARS - 1] + "…"


def _hit(c: Candidate, score: float, sources: list[Source]) -> MemoryHit:
    r = c.record
    first = sources[0] if sources else None
    if isinstance(r, Fact):
        text = r.statement if r.current else f"{r.statement} (no longer current)"
        when: datetime | None = r.observed_at
    elif isinstance(r, Episode):
        day = r.observed_at.date().isoformat()
        text = f"[{day}] {r.speaker + ': ' if r.speaker else ''}{r.text}"
        when = r.observed_at
    else:
        aka = f"; also {', '.join(r.aliases)}" if r.aliases else ""
        text = f"{r.name} ({r.kind}{aka}; mentioned {r.mentions} times)"
        when = r.last_seen
    return MemoryHit(
        kind=c.kind,
        id=r.id,
        text=_clip(text),
        score=round(score, 6),
        scope=r.scope,
        session_id=first.session_id if first else None,
        seq=first.seq if first else None,
        observed_at=when,
        sources=sources,
    )
