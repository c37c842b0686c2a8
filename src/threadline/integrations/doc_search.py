"""Ranks the documents of a memory face by a query, as threadline's memory search does.

The scores are memory's own lexical ones (``memory.textindex``: BM25 over the
folded, stemmed terms of ``memory.rules``), computed over the documents a search
reads. One thing is added for text without spaces between words: Chinese,
Japanese and Korean runs are indexed as overlapping character pairs, and a run
of one script inside another (``私はPythonを``) as its own word, so a query for
``太郎`` or ``Python`` finds them while ``thon`` still finds nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from threadline.memory.rules import query_terms, terms
from threadline.memory.textindex import TextIndex

COUNTED_TEXTS = 8192
"""Documents whose counted terms a process keeps between searches."""
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul jamo
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul compatibility jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # halfwidth Katakana
    (0x20000, 0x2FFFF),  # CJK extensions B-F
)


_UNSPACED_RUN = re.compile(
    "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _CJK_RANGES) + "]+"
)
"""A run of characters of scripts written without spaces between words."""


def _pairs(run: re.Match[str]) -> str:
    chars = run.group()
    return " " + " ".join(chars[i : i + 2] for i in range(max(1, len(chars) - 1))) + " "


def searchable(text: str) -> str:
    """``text`` with each Chinese, Japanese or Korean run as its overlapping character
    pairs, set apart from the words around it (what the index and the query read)."""
    return _UNSPACED_RUN.sub(_pairs, unicodedata.normalize("NFC", text))


@lru_cache(maxsize=COUNTED_TEXTS)
def _counted(text: str) -> Counter[str]:
    """The index terms of a document's text, counted once for every search that reads
    it unchanged (a search reads all of a face's documents; few change between two)."""
    return Counter(terms(searchable(text)))


def scores(query: str, texts: Sequence[str | None]) -> list[float | None]:
    """The score of each text for ``query``: 0 when it shares no term, None for a
    document that is not indexed (``texts[i] is None``)."""
    out: list[float | None] = [None if t is None else 0.0 for t in texts]
    wanted = query_terms(searchable(query))
    if not wanted:
        return out
    index = TextIndex()
    for i, text in enumerate(texts):
        if text is not None:
            index.put_counts("doc", str(i), "all", _counted(text))
    for _, rid, score in index.search_terms(wanted, ["all"], len(index)):
        out[int(rid)] = score
    return out


def best_first(found: Sequence[float | None]) -> list[int]:
    """Indexes of ``found`` by score, best first; equal scores keep their order and
    documents without a score come last."""
    return sorted(range(len(found)), key=lambda i: (found[i] is None, -(found[i] or 0.0), i))
