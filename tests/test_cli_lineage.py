"""``sessions list`` folds sessions under their parent (issue 22, point 4): top-level
sessions with a count of what is listed under each, ``--all`` and ``--tree`` nesting
them; ``show`` names a session's parent and children; ``search`` says which parent a
hit's session is under. Sessions keep their own dates in every view (point 3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.test_cli import js, ok
from threadline import Message, open_store
from threadline.store.encoding import dated
from threadline.store.fork import fork_session

FEB = datetime(2025, 2, 3, 4, 5, 6, tzinfo=UTC)


def wide(url: str, *args: str) -> Any:
    """``ok``, on a terminal wide enough for whole ids and titles."""
    return ok(url, *args, env={"COLUMNS": "160"})


@pytest.fixture
def url(sqlite_url: str) -> str:
    """A February session ``main-0001`` with a subagent, a compaction summary (itself
    forked) and a fork under it; an older ``solo-0001`` with none; one made today."""
    store = open_store(sqlite_url)
    main = store.create_session(id="main-0001", title="Main task", created_at=FEB)
    main.append(dated([Message.user("fix the parser")], FEB + timedelta(hours=3)))
    sub = store.create_session(
        id="sub-00001", parent="main-0001", created_at=FEB, metadata={"agent_id": "a1"}
    )
    sub.append(dated([Message.user("look for zebra stripes")], FEB + timedelta(hours=1)))
    summary = store.create_session(
        id="comp-0001",
        parent="main-0001",
        title="Compaction summary of Main task",
        created_at=FEB + timedelta(hours=2),
        metadata={"child_kind": "compaction", "agent_id": "acompact-1"},
    )
    summary.append(dated([Message.user("summarise")], FEB + timedelta(hours=2)))
    fork_session(summary, id="fork-0002")
    fork_session(main, id="fork-0001", title="Main task, again")
    store.create_session(id="solo-0001", title="Older", created_at=FEB - timedelta(days=30))
    store.create_session(id="today-001", title="Today")
    store.close()
    return sqlite_url


def test_list_shows_top_level_sessions_by_their_own_dates_with_children_counted(
    url: str,
) -> None:
    out = wide(url, "sessions", "list").stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert "Children" in lines[0] and "Updated" in lines[0]
    ids = [line.split()[0] for line in lines[1:-1]]
    assert ids == ["today-001", "main-0001", "solo-0001"]  # newest first, by own dates
    main = next(line for line in lines if line.startswith("main-0001"))
    assert FEB.astimezone().strftime("%Y-%m-%d") in main and main.rstrip().endswith("3")
    assert "1-3 of 3 sessions" in out
    data = js(url, "sessions", "list")
    assert [(i["id"], i["child_count"], i["parent_id"]) for i in data["items"]] == [
        ("today-001", 0, None),
        ("main-0001", 3, None),
        ("solo-0001", 0, None),
    ]
    assert data["items"][1]["created_at"] == "2025-02-03T04:05:06Z"
    assert "children" not in data["items"][1]


def test_all_and_tree_nest_children_under_their_parent(url: str) -> None:
    out = wide(url, "sessions", "list", "--all").stdout
    ids = [line.split()[0] for line in out.splitlines()[1:-1] if line.strip()]
    assert ids[:2] == ["today-001", "main-0001"] and ids[-1] == "solo-0001"
    nested = out.splitlines()[3:7]
    assert [line.split()[:2] for line in nested] == [
        ["└", "fork-0001"],  # a fork keeps its parent's dates: the newest
        ["└", "comp-0001"],
        ["└", "fork-0002"],  # under the summary, one level deeper
        ["└", "sub-00001"],
    ]
    assert nested[2].startswith("  └ fork-0002") and nested[1].startswith("└ comp-0001")
    tree = wide(url, "sessions", "list", "--tree").stdout
    assert "main-0001" in tree and "(compaction summary)" in tree and "(subagent)" in tree
    assert "(fork at seq 1)" in tree
    assert tree.index("main-0001") < tree.index("sub-00001") < tree.index("solo-0001")
    data = js(url, "sessions", "list", "--all")
    main = data["items"][1]
    assert [c["id"] for c in main["children"]] == ["fork-0001", "comp-0001", "sub-00001"]
    comp = main["children"][1]
    assert comp["child_count"] == 1 and [c["id"] for c in comp["children"]] == ["fork-0002"]
    assert js(url, "sessions", "list", "--tree") == data


def test_show_names_parent_and_children(url: str) -> None:
    child = wide(url, "sessions", "show", "sub-00001").stdout
    assert "Listed under: main-0001 · Main task (subagent)" in child
    assert "Created" in child and FEB.astimezone().strftime("%Y-%m-%d") in child
    parent = wide(url, "sessions", "show", "main-0001").stdout
    assert "Forks: fork-0001" in parent and "Listed under it: 2" in parent
    assert "comp-0001 · compaction summary · Compaction summary of Main task" in parent
    data = js(url, "sessions", "show", "main-0001")
    assert {c["id"]: c["relation"] for c in data["children"]} == {
        "fork-0001": "fork at seq 1",
        "comp-0001": "compaction summary",
        "sub-00001": "subagent",
    }
    assert js(url, "sessions", "show", "sub-00001")["session"]["parent_id"] == "main-0001"


def test_search_says_which_parent_a_hit_is_under(url: str) -> None:
    out = wide(url, "sessions", "search", "zebra").stdout
    assert "Under" in out.splitlines()[0]
    assert "sub-00001" in out and "main-0001" in out
    (hit,) = js(url, "sessions", "search", "zebra")["items"]
    assert (hit["session_id"], hit["parent_id"]) == ("sub-00001", "main-0001")
    top = wide(url, "sessions", "search", "parser").stdout
    assert "Under" not in top  # no hit under another session: no column


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_exports_carry_the_sessions_own_dates(url: str, fmt: str) -> None:
    text = wide(url, "sessions", "export", "main-0001", "-f", fmt, "-o", "-").stdout
    assert "created at: 2025-02-03T04:05:06Z" in text
    assert "updated at: 2025-02-03T07:05:06Z" in text
