"""Ranks the documents of a memory face by a query, as threadline's memory search does.

The scores are memory's own lexical ones (``memory.textindex``: BM25 over the
folded, stemmed terms of ``memory.rules``), computed over the documents a search
reads. One thing is added for text without spaces between words: Chinese,
Japanese and Korean runs are indexed as overlapping character pairs, and a run
of one script inside another (``私はPythonを``) as its own word, so a query for
``太郎`` or ``Python`` finds them while ``thon`` still finds nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from threadline.memory.rules import query_terms
from threadline.memory.textindex import TextIndex

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


def _unspaced(char: str) -> bool:
    """A character of a script written without spaces between words."""
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def searchable(text: str) -> str:
    """``text`` with each Chinese, Japanese or Korean run as its overlapping character
    pairs, set apart from the words around it (what the index and the query read)."""
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            pairs = ["".join(run[i : i + 2]) for i in range(max(1, len(run) - 1))]
            out.append(" " + " ".join(pairs) + " ")
            run.clear()

    for char in text:
        if _unspaced(char):
            run.append(char)
        else:
            flush()
            out.append(char)
    flush()
    return "".join(out)


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
            index.put("doc", str(i), "all", searchable(text))
    for _, rid, score in index.search_terms(wanted, ["all"], len(index)):
        out[int(rid)] = score
    return out


def best_first(found: Sequence[float | None]) -> list[int]:
    """Indexes of ``found`` by score, best first; equal scores keep their order and
    documents without a score come last."""
    return sorted(range(len(found)), key=lambda i: (found[i] is None, -(found[i] or 0.0), i))
