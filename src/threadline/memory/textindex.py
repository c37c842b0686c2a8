"""A small incremental BM25 index, for the backends without a full-text engine.

The in-memory and JSONL memories keep their records in process; this scores
them the way FTS5 and PostgreSQL's ranking do for the others: BM25 over stemmed
terms (``rules.terms``), documents added and replaced one at a time.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

from threadline.memory.rules import stem, terms

K1 = 1.2
B = 0.75

DocKey = tuple[str, str]


class TextIndex:
    """BM25 over ``(kind, id)`` documents, each in one scope."""

    def __init__(self) -> None:
        self._docs: dict[DocKey, tuple[str, Counter[str], int]] = {}
        self._postings: defaultdict[str, set[DocKey]] = defaultdict(set)
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._docs)

    def put(self, kind: str, rid: str, scope: str, text: str) -> None:
        self.put_counts(kind, rid, scope, Counter(terms(text)))

    def put_counts(self, kind: str, rid: str, scope: str, counts: Counter[str]) -> None:
        """``put`` of a text already counted into terms (the index does not change ``counts``)."""
        key = (kind, rid)
        self.remove(kind, rid)
        if not counts:
            return
        length = sum(counts.values())
        self._docs[key] = (scope, counts, length)
        self._total_length += length
        for term in counts:
            self._postings[term].add(key)

    def remove(self, kind: str, rid: str) -> None:
        old = self._docs.pop((kind, rid), None)
        if old is None:
            return
        self._total_length -= old[2]
        for term in old[1]:
            posting = self._postings[term]
            posting.discard((kind, rid))
            if not posting:
                del self._postings[term]

    def search(
        self, words: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        """The best ``limit`` documents for query words (stemmed here)."""
        return self.search_terms([stem(w) for w in words], scopes, limit)

    def search_terms(
        self, query: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str, float]]:
        """The best ``limit`` documents for index terms (``rules.terms``), best first."""
        if not self._docs:
            return []
        wanted = set(scopes)
        n = len(self._docs)
        average = self._total_length / n
        scores: defaultdict[DocKey, float] = defaultdict(float)
        for term in dict.fromkeys(query):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for key in posting:
                scope, counts, length = self._docs[key]
                if scope not in wanted:
                    continue
                tf = counts[term]
                scores[key] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        best = sorted(scores.items(), key=lambda kv: -kv[1])[:limit]
        return [(kind, rid, score) for (kind, rid), score in best]
