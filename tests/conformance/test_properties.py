"""Protocol-level invariants as hypothesis properties, on every backend.

For any sequence of append batches (with retries mixed in): seqs run 1..n without
gaps, reading returns messages in append order, a retried batch returns the
stored copies and adds nothing, and history is append-only (DESIGN invariant 1):
every snapshot taken earlier is a prefix of what is read later.

Each example uses a fresh session of the test's store, so the function-scoped
fixture is safe to share between examples.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Message, Store

PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)
_message = st.one_of(
    st.builds(Message.user, _text),
    st.builds(Message.assistant, _text),
    st.builds(Message.system, _text),
)
_batches = st.lists(st.lists(_message, min_size=1, max_size=5), min_size=1, max_size=8)


@PROPERTY_SETTINGS
@given(batches=_batches)
def test_seqs_are_gapless_and_order_is_append_order(
    store: Store, batches: list[list[Message]]
) -> None:
    session = store.create_session()
    expected_ids: list[str] = []
    for batch in batches:
        stored = session.append(batch)
        first = len(expected_ids) + 1
        assert [m.seq for m in stored] == list(range(first, first + len(batch)))
        assert [m.id for m in stored] == [m.id for m in batch]
        expected_ids.extend(m.id for m in batch)
    read = session.messages()
    n = len(expected_ids)
    assert [m.seq for m in read] == list(range(1, n + 1))
    assert [m.id for m in read] == expected_ids
    assert [m.text for m in read] == [m.text for b in batches for m in b]
    assert session.tail(n)[::-1] == read
    info = store.session_info(session.id)
    assert info.message_count == info.last_seq == n


@PROPERTY_SETTINGS
@given(batches=_batches, retries=st.lists(st.integers(0, 7), max_size=6))
def test_history_is_append_only_and_retries_add_nothing(
    store: Store, batches: list[list[Message]], retries: list[int]
) -> None:
    session = store.create_session()
    snapshots: list[list[Message]] = []
    results: list[list[Message]] = []
    for step, batch in enumerate(batches):
        results.append(session.append(batch))
        for r in retries:
            if r <= step:  # retry an earlier batch, as after a lost acknowledgement
                count = session.count()
                assert session.append(batches[r]) == results[r]
                assert session.count() == count
        snapshots.append(session.messages())
    final = session.messages()
    for snapshot in snapshots:
        assert final[: len(snapshot)] == snapshot
    assert [m for r in results for m in r] == final
