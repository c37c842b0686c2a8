"""Many scratchpad entries at once, on every backend: a write of more rows than one
INSERT takes, and a read of more names than one compound SELECT may hold (SQLite
allows 500 terms; a LangGraph ``list`` asks for 64 checkpoints' values and writes)."""

from __future__ import annotations

from threadline.store.protocol import Store


def test_hundreds_of_names_and_prefixes_are_read_in_one_call(store: Store) -> None:
    session = store.create_session()
    entries = {f"lg/b/{i:04d}": f"value {i}" for i in range(650)}
    store.scratchpad_write_many(session.id, entries)  # several INSERTs of at most 199 rows
    names = [*entries, *(f"lg/missing/{i}" for i in range(20))]
    prefixes = [f"lg/b/{i:03d}" for i in range(60, 65)]  # 0600-0649
    got = store.scratchpad_contents(session.id, names=names, prefixes=prefixes)
    assert got == entries
    again = {name: "again" for name in list(entries)[:300]}
    store.scratchpad_write_many(session.id, again, keep_existing=True)
    assert store.scratchpad_contents(session.id, names=list(again)) == {
        name: entries[name] for name in again
    }
