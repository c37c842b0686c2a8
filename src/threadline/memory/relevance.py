"""Whether a memory bears on a request, on an absolute scale.

Search scores are relative (the best candidate of any query scores high), so they
cannot say "nothing here helps". Injection asks instead how much of the request a
memory speaks to: the share of the request's distinct terms it contains, and at
least two of them when the request is a sentence of ``SENTENCE_TERMS`` or more (one
shared word, "build" or "fix", is how an unrelated project's notes used to get in).
"""

from __future__ import annotations

from threadline.memory.rules import query_terms, terms

MIN_SHARED_TERMS = 2
SENTENCE_TERMS = 6


def relevance(request: str, text: str) -> float:
    """0..1: the share of ``request``'s distinct terms that ``text`` contains; 0 when a
    request of ``SENTENCE_TERMS`` terms or more shares fewer than ``MIN_SHARED_TERMS``."""
    wanted = query_terms(request)
    if not wanted:
        return 0.0
    have = set(terms(text))
    shared = sum(1 for t in wanted if t in have)
    if len(wanted) >= SENTENCE_TERMS and shared < MIN_SHARED_TERMS:
        return 0.0
    return shared / len(wanted)
