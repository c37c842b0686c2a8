"""bench/wal_frames.py: the WAL frames a commit adds, named by the table or index they hold."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench


def test_every_frame_of_a_commit_is_counted_and_named(tmp_path: Path) -> None:
    bench = load_bench("wal_frames")
    db = tmp_path / "t.db"
    with closing(sqlite3.connect(db, isolation_level=None)) as con:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA wal_autocheckpoint = 0")
        con.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("INSERT INTO t VALUES ('a', 'x')")
        pages = bench.wal_pages(db)
        names = bench.owners(db)
    assert sorted(names[p] for p in pages) == ["sqlite_autoindex_t_1", "t"]


def test_a_chat_turn_of_the_threadline_saver_is_counted_by_owner(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    from threadline.integrations.langgraph import ThreadlineSaver

    bench = load_bench("wal_frames")
    db = tmp_path / "threadline.db"
    with ThreadlineSaver(f"sqlite://{db}") as saver:
        counts = bench.frames_by_owner(saver, db, 2)
        assert counts.total() == len(bench.wal_pages(db))
    assert counts["sessions"] > 0 and counts["scratchpad"] > 0
