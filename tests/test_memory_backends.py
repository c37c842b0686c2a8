"""Backend details behind the conformance suite: files, crashes, read-only stores, versions."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest

from threadline import open_store
from threadline.errors import SchemaTooNew, StoreUnavailable, UsageError
from threadline.memory import Entity, Extraction, Fact, open_memory
from threadline.memory.jsonl import DIRECTORY, FILENAME
from threadline.store.checks import CorruptRecordWarning

SCOPE = "agent:a"


def test_jsonl_handles_see_each_others_writes_and_survive_a_torn_tail(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'j'}"
    one, two = open_memory(open_store(url)), open_memory(open_store(url))
    first = one.write_fact(SCOPE, "Ana lives in Lisbon", subject="Ana")
    assert [f.id for f in two.list_facts(SCOPE)] == [first.id]
    path = tmp_path / "j" / DIRECTORY / FILENAME
    with open(path, "ab") as f:
        f.write(b'{"rows": [{"kind": "fact", "id": "torn')  # a writer killed mid-line
    assert [f.id for f in two.list_facts(SCOPE)] == [first.id]
    second = two.write_fact(SCOPE, "Bo likes jazz", subject="Bo")
    fresh = open_memory(open_store(url))
    assert {f.id for f in fresh.list_facts(SCOPE)} == {first.id, second.id}
    assert b"torn" not in path.read_bytes()


def test_jsonl_skips_an_unreadable_line_with_a_warning(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'j'}"
    memory = open_memory(open_store(url))
    memory.write_fact(SCOPE, "Ana lives in Lisbon", subject="Ana")
    path = tmp_path / "j" / DIRECTORY / FILENAME
    with open(path, "ab") as f:
        f.write(b"not json at all\n")
    with pytest.warns(CorruptRecordWarning, match="skipped an unreadable memory record"):
        memory.write_fact(SCOPE, "Bo likes jazz", subject="Bo")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        facts = open_memory(open_store(url)).list_facts(SCOPE)
    assert len(facts) == 2
    assert any(issubclass(w.category, CorruptRecordWarning) for w in caught)


def test_sqlite_memory_in_a_read_only_store(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    open_store(url).close()  # a store with sessions only: no memory tables yet
    ro = open_memory(open_store(url + "?mode=ro"))
    assert ro.search("anything", scopes=[SCOPE]) == []
    assert ro.list_facts(SCOPE) == []
    with pytest.raises(StoreUnavailable, match="read-only"):
        ro.write_fact(SCOPE, "Ana lives in Lisbon")
    writer = open_memory(open_store(url))
    writer.write_fact(SCOPE, "Ana lives in Lisbon", subject="Ana")
    assert len(open_memory(open_store(url + "?mode=ro")).list_facts(SCOPE)) == 1


def test_sqlite_memory_tables_from_a_newer_threadline_are_refused(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    open_memory(open_store(url)).close()
    con = sqlite3.connect(tmp_path / "s.db")
    con.execute("UPDATE memory_meta SET value = '99' WHERE key = 'version'")
    con.commit()
    con.close()
    with pytest.raises(SchemaTooNew, match="upgrade threadline"):
        open_memory(open_store(url))


@pytest.mark.parametrize("url", ["memory://", "sqlite", "jsonl"])
def test_a_bad_extraction_stores_nothing(url: str, tmp_path: Path) -> None:
    if url == "sqlite":
        url = f"sqlite://{tmp_path / 's.db'}"
    elif url == "jsonl":
        url = f"jsonl://{tmp_path / 'j'}"
    memory = open_memory(open_store(url))
    bad = Extraction(
        entities=[Entity(scope=SCOPE, name="Ana", kind="person")],
        facts=[
            Fact(scope=SCOPE, subject="Ana", statement="Ana lives in Lisbon"),
            Fact(scope=SCOPE, subject="Ana", statement="x" * 10_000),
        ],
    )
    with pytest.raises(UsageError):
        memory.store_extraction(SCOPE, bad)
    assert memory.list_facts(SCOPE) == [] and memory.list_entities(SCOPE) == []
    assert memory.export()["entities"] == []
