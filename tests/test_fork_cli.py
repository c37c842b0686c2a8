"""``threadline sessions fork``, lineage in ``list --tree`` and ``show``, deleting a parent,
and what a fork becomes when it leaves its store (export/import, copy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from threadline import Message, open_store
from threadline.cli.app import app
from threadline.store.copy import copy_sessions
from threadline.store.fork import MATERIALIZED_KEY, fork_session

runner = CliRunner()
MODEL = "openai/gpt-4o"


def run(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--store", url, *args])


def seeded(url: str, turns: int = 3) -> str:
    with open_store(url) as store:
        session = store.create_session(model=MODEL, title="the parent")
        for i in range(turns):
            session.append([Message.user(f"question {i}"), Message.assistant(f"answer {i}")])
        return session.id


def test_fork_prints_the_id_and_shares_the_history(sqlite_url: str) -> None:
    parent = seeded(sqlite_url)
    result = run(sqlite_url, "sessions", "fork", parent[:8], "--at", "4", "--title", "retry")
    assert result.exit_code == 0, result.output
    child = result.stdout.strip()
    assert f"forked {parent} at seq 4: {child}" in result.stderr
    history = run(sqlite_url, "sessions", "history", child, "--json")
    items = json.loads(history.stdout)["items"]
    assert [m["content"] for m in items] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
    ]
    shown = json.loads(run(sqlite_url, "sessions", "show", child, "--json").stdout)
    assert shown["fork"] == {"parent": parent, "seq": 4}
    assert shown["session"]["title"] == "retry"
    parent_shown = json.loads(run(sqlite_url, "sessions", "show", parent, "--json").stdout)
    assert parent_shown["forks"] == [child] and parent_shown["fork"] is None


def test_fork_json_and_bad_seq(sqlite_url: str) -> None:
    parent = seeded(sqlite_url, turns=1)
    result = run(sqlite_url, "sessions", "fork", parent, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fork"] == {"parent": parent, "seq": 2}
    bad = run(sqlite_url, "sessions", "fork", parent, "--at", "9")
    assert bad.exit_code == 2
    assert "cannot fork" in bad.stderr and "seqs 1-2" in bad.stderr


def test_fork_at_0_is_refused_and_makes_nothing(sqlite_url: str) -> None:
    parent = seeded(sqlite_url, turns=1)
    empty = run(sqlite_url, "sessions", "fork", parent, "--at", "0")
    assert empty.exit_code == 2, empty.output
    assert empty.stdout == "" and empty.stderr.count("\n") == 1
    assert "--at 0 would fork before the first message" in empty.stderr
    with open_store(sqlite_url) as store:
        assert [i.id for i in store.list_sessions().items] == [parent]


def test_list_tree_and_show_lineage(sqlite_url: str) -> None:
    parent = seeded(sqlite_url)
    with open_store(sqlite_url) as store:
        child = fork_session(store.get_session(parent), at=2, title="child")
        grandchild = fork_session(child, title="grandchild")
        child.add_checkpoint(covers_up_to=2, summary="first turn")
    tree = run(sqlite_url, "sessions", "list", "--tree")
    assert tree.exit_code == 0, tree.output
    lines = tree.stdout.splitlines()
    at = {sid: next(i for i, line in enumerate(lines) if sid in line) for sid in (parent, child.id)}
    assert at[parent] < at[child.id]
    assert lines[at[child.id]].index(child.id) > lines[at[parent]].index(parent)  # indented
    assert "at seq 2" in lines[at[child.id]]
    assert any(grandchild.id in line for line in lines)
    shown = run(sqlite_url, "sessions", "show", grandchild.id)
    assert f"Forked: fork of {child.id} at seq 2" in shown.stdout
    assert "#1 covers 1-2" in shown.stdout and f"from {child.id}" in shown.stdout


def test_deleting_a_parent_asks_for_force(sqlite_url: str) -> None:
    parent = seeded(sqlite_url, turns=1)
    with open_store(sqlite_url) as store:
        child = fork_session(store.get_session(parent)).id
    refused = run(sqlite_url, "sessions", "delete", parent)
    assert refused.exit_code == 2
    assert (
        "has 1 fork" in refused.stderr and child in refused.stderr and "--force" in refused.stderr
    )
    assert run(sqlite_url, "sessions", "show", parent).exit_code == 0
    both = run(sqlite_url, "sessions", "delete", parent, "--force")
    assert both.exit_code == 0, both.output
    assert "deleted 2 sessions" in both.stdout
    assert run(sqlite_url, "sessions", "show", child).exit_code == 3


def test_export_of_a_fork_imports_as_a_plain_session(sqlite_url: str, tmp_path: Path) -> None:
    parent = seeded(sqlite_url, turns=2)
    with open_store(sqlite_url) as store:
        child = fork_session(store.get_session(parent), at=2)
        child.append(Message.user("only in the fork"))
    out = tmp_path / "fork.json"
    assert (
        run(sqlite_url, "sessions", "export", child.id, "-f", "json", "-o", str(out)).exit_code == 0
    )
    other = f"sqlite://{tmp_path / 'other.db'}"
    imported = run(other, "sessions", "import", str(out))
    assert imported.exit_code == 0, imported.output
    with open_store(other) as store:
        session = store.get_session(imported.stdout.strip())
        assert session.fork is None
        assert session.info.metadata[MATERIALIZED_KEY] == {"session": parent, "seq": 2}
        assert [m.text for m in session.messages()] == [
            "question 0",
            "answer 0",
            "only in the fork",
        ]


def test_copy_materializes_a_fork(sqlite_url: str, tmp_path: Path) -> None:
    parent = seeded(sqlite_url, turns=2)
    with open_store(sqlite_url) as src, open_store(f"jsonl://{tmp_path / 'dst'}") as dst:
        p = src.get_session(parent)
        p.add_checkpoint(covers_up_to=2, summary="turn one")
        child = fork_session(p, at=3)
        child.append(Message.assistant("fork reply"))
        report = copy_sessions(src, dst, session_ids=[child.id])
        assert report.ok, report.failed
        copied = dst.get_session(child.id)
        assert copied.fork is None
        assert [m.text for m in copied.messages()] == [m.text for m in child.messages()]
        assert [c.summary for c in copied.checkpoints()] == ["turn one"]
        assert copied.total_tokens == child.refresh().total_tokens
        again = copy_sessions(src, dst, session_ids=[child.id])
        assert again.ok and again.appended == 0


def test_cleanup_keeps_a_parent_whose_forks_stay(sqlite_url: str) -> None:
    """A cleanup never deletes the history a fork it keeps reads from."""
    from datetime import timedelta

    from threadline.store.retention import plan_cleanup

    day = timedelta(days=1)
    parent = seeded(sqlite_url, turns=1)
    with open_store(sqlite_url) as store:
        child = fork_session(store.get_session(parent))
        child.append(Message.user("still in use"))
        old, new = store.session_info(parent).updated_at, child.refresh().info.updated_at
        assert old < new
        both = plan_cleanup(store, older_than=day, max_storage_bytes=None, now=new + 2 * day)
        assert {v.info.id for v in both.victims} == {parent, child.id}  # they go together
        cut = old + (new - old) / 2  # the parent is older than the cut, its fork is not
        kept = plan_cleanup(store, older_than=day, max_storage_bytes=None, now=cut + day)
        assert kept.victims == []
        (skipped,) = kept.skipped_locked
        assert skipped.info.id == parent and child.id in skipped.why


def test_a_fork_of_a_fork_tells_one_story_in_every_command(sqlite_url: str, tmp_path: Path) -> None:
    """Issue 32 as a user met it: F1 = fork S --at 40, F2 = fork F1 --at 20. ``show``
    said 20 messages while ``history``, ``export`` and ``copy`` read 40; and ``export``
    says how many messages it wrote, not how many the session stores (a retraction's
    record and what it retracted are stored, not written)."""
    parent = seeded(sqlite_url, turns=25)  # 50 messages
    f1 = run(sqlite_url, "sessions", "fork", parent, "--at", "40").stdout.strip()
    f2 = run(sqlite_url, "sessions", "fork", f1, "--at", "20").stdout.strip()
    with open_store(sqlite_url) as store:
        store.get_session(f2).retract([20])  # seq 21, a record: 19 messages in view
    want = [f"{kind} {i}" for i in range(10) for kind in ("question", "answer")][:19]

    shown = json.loads(run(sqlite_url, "sessions", "show", f2, "--json").stdout)
    assert shown["session"]["visible_count"] == 19
    history = run(sqlite_url, "sessions", "history", f2, "-n", "100", "--json")
    assert [m["content"] for m in json.loads(history.stdout)["items"]] == want
    out = tmp_path / "f2.json"
    exported = run(sqlite_url, "sessions", "export", f2, "-f", "json", "-o", str(out))
    assert exported.exit_code == 0, exported.output
    assert "(19 messages)" in exported.stderr
    assert [m["content"] for m in json.loads(out.read_text())["messages"]] == want
    to = f"sqlite://{tmp_path / 'to.db'}"
    copied = run(sqlite_url, "sessions", "copy", "--to", to, "--session", f2)
    assert copied.exit_code == 0, copied.output
    with open_store(to) as store:
        assert [m.text for m in store.get_session(f2).messages()] == want
