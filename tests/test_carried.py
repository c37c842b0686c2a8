"""Books carried in checkpoint metadata read back to what was written, and anything that is
not a JSON object reads as an empty book."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.compaction.fixes import Fix, FixBook, Pending
from threadline.compaction.ledger import Ledger, Outcome, WorkItem

texts = st.text(max_size=12)
seqs = st.integers(min_value=0, max_value=10**6)
names = st.lists(texts, max_size=3)

fix_books = st.builds(
    lambda pending, fixes: FixBook({p.target: p for p in pending}, fixes),
    st.lists(st.builds(Pending, seqs, texts, texts, names), max_size=4),
    st.lists(st.builds(Fix, seqs, texts, texts, names, texts), max_size=4),
)


@st.composite
def ledgers(draw: st.DrawFn) -> Ledger:
    ledger = Ledger()
    for item in draw(st.lists(st.builds(WorkItem, texts, texts, texts, texts, seqs), max_size=4)):
        ledger.items[item.key] = item
    ledger.outcomes = draw(
        st.lists(st.builds(Outcome, seqs, texts, texts, names, names), max_size=3)
    )
    ledger.last_commit = draw(st.none() | st.tuples(seqs, texts.filter(bool)))
    return ledger


def _through_json(data: Any) -> Any:
    return json.loads(json.dumps(data))


@settings(max_examples=60, deadline=None)
@given(fix_books)
def test_fix_book_reads_back(book: FixBook) -> None:
    again = FixBook.from_json(_through_json(book.to_json()))
    assert again == book


@settings(max_examples=60, deadline=None)
@given(ledgers())
def test_ledger_reads_back(ledger: Ledger) -> None:
    again = Ledger.from_json(_through_json(ledger.to_json()))
    assert again.to_json() == ledger.to_json()
    assert isinstance(again, Ledger)


@settings(max_examples=40, deadline=None)
@given(st.none() | st.integers() | texts | st.lists(st.integers(), max_size=3))
def test_not_an_object_reads_as_empty(data: Any) -> None:
    assert FixBook.from_json(data) == FixBook()
    assert Ledger.from_json(data).to_json() == Ledger().to_json()
