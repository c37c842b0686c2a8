"""Copying sessions between backends: whole, resumable, verified, never merged."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.backends import cleanup_url, make_url
from threadline import Message, Store, ToolCall, open_store
from threadline.errors import SessionNotFound, UsageError
from threadline.messages import ImagePart, TextPart
from threadline.store.copy import CopyProgress, CopyStatus, copy_sessions
from threadline.store.locks import LockHolder
from threadline.store.memory import MemoryStore

OpenStore = Callable[[str], Store]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[OpenStore]:
    """Open a fresh store per backend name; everything is closed and dropped afterwards."""
    opened: list[tuple[str, str, Store]] = []

    def open_(backend: str) -> Store:
        url = make_url(backend, tmp_path / f"{backend}-{len(opened)}")
        store = open_store(url)
        opened.append((backend, url, store))
        return store

    yield open_
    for backend, url, store in opened:
        store.close()
        cleanup_url(backend, url)


def fill(store: Store, sid: str = "sess-0001", *, turns: int = 6) -> str:
    """A session using everything a copy must carry."""
    session = store.create_session(
        id=sid,
        agent="coder",
        model="gpt-4o",
        title="Fix the rounding",
        metadata={"project": "invoices", "n": 3},
    )
    for i in range(turns):
        call = ToolCall(id=f"call-{i}", name="grep", arguments={"q": f"x{i}"})
        session.append(
            [
                Message.user(f"step {i}: look at totals.py ünïcode \u2603", metadata={"i": i}),
                Message.assistant("", tool_calls=[call]),
                Message.tool(f"{i} matches\nline two", tool_call_id=call.id, name="grep"),
                Message.assistant(
                    [
                        TextPart(text=f"answer {i}"),
                        ImagePart(url="https://example.com/a.png", width=10, height=10),
                    ],
                    model="gpt-4o",
                ),
            ]
        )
    session.add_checkpoint(covers_up_to=4, summary="## State\n- first", metadata={"k": 1})
    session.add_checkpoint(covers_up_to=min(12, 4 * turns), summary="## State\n- second")
    session.scratchpad_write("plan", "- fix it\n- test it")
    session.scratchpad_write("notes", "NUL-free but \t tabbed")
    session.set_memo({"anchor": 7, "strategy": {"name": "stable"}})
    return sid


def assert_same(src: Store, dst: Store, sid: str) -> None:
    a, b = src.session_info(sid), dst.session_info(sid)
    for name in ("id", "agent", "model", "title", "metadata", "message_count", "total_tokens"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.last_seq == b.last_seq
    mine = [m.model_dump() for m in src.read_messages(sid)]
    theirs = [m.model_dump() for m in dst.read_messages(sid)]
    assert mine == theirs  # ids, seqs, times, token counts, content: everything
    key = [(c.covers_up_to, c.summary, c.metadata) for c in src.list_checkpoints(sid)]
    assert key == [(c.covers_up_to, c.summary, c.metadata) for c in dst.list_checkpoints(sid)]
    pad = [(e.name, e.content) for e in src.scratchpad_list(sid)]
    assert pad == [(e.name, e.content) for e in dst.scratchpad_list(sid)]
    assert src.get_memo(sid) == dst.get_memo(sid)
    assert dst.lock_holder(sid) is None  # released at the end


PAIRS = [
    ("memory", "sqlite"),
    ("sqlite", "jsonl"),
    ("jsonl", "memory"),
    ("sqlite", "postgres"),
    ("postgres", "redis"),
    ("redis", "jsonl"),
]


@pytest.mark.parametrize(("source", "dest"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_copy_is_whole_between_backends(stores: OpenStore, source: str, dest: str) -> None:
    src, dst = stores(source), stores(dest)
    fill(src, "sess-0001")
    fill(src, "sess-0002", turns=2)
    report = copy_sessions(src, dst, batch=5)
    assert report.ok, [s.error for s in report.sessions]
    assert sorted(s.session_id for s in report.sessions) == ["sess-0001", "sess-0002"]
    assert {s.status for s in report.sessions} == {CopyStatus.COPIED}
    for sid in ("sess-0001", "sess-0002"):
        assert_same(src, dst, sid)
    first = next(s for s in report.sessions if s.session_id == "sess-0001")
    assert (first.source_messages, first.dest_messages, first.appended) == (24, 24, 24)
    assert (first.dest_checkpoints, first.dest_scratchpad) == (2, 2)
    # a second run finds everything in place and changes nothing
    again = copy_sessions(src, dst, batch=5)
    assert {s.status for s in again.sessions} == {CopyStatus.UP_TO_DATE}
    assert again.appended == 0
    assert_same(src, dst, "sess-0001")


class Interrupt(Exception):
    """Raised from the progress callback to cut a copy short."""


@pytest.mark.parametrize("dest", ["memory", "sqlite", "jsonl", "postgres", "redis"])
def test_interrupted_copy_resumes(stores: OpenStore, dest: str) -> None:
    src, dst = stores("sqlite"), stores(dest)
    sid = fill(src, turns=10)  # 40 messages
    seen: list[CopyProgress] = []

    def stop_after_three(event: CopyProgress) -> None:
        seen.append(event)
        # the destination session is ours from its first batch on
        holder = dst.lock_holder(sid)
        assert holder is not None and holder.same_holder(LockHolder.current())
        if len(seen) == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        copy_sessions(src, dst, progress=stop_after_three, batch=7)
    assert dst.count_messages(sid) == 21  # three whole batches, nothing half
    assert dst.list_checkpoints(sid) == []  # not reached yet
    held = dst.lock_holder(sid)
    assert held is not None and held.same_holder(LockHolder.current())  # nobody attaches meanwhile

    events: list[CopyProgress] = []
    report = copy_sessions(src, dst, progress=events.append, batch=7)
    assert report.ok, report.sessions[0].error
    (result,) = report.sessions
    assert result.status is CopyStatus.RESUMED
    assert result.appended == 19
    assert_same(src, dst, sid)
    assert [e.messages_done for e in events] == [28, 35, 40, 40]
    assert events[-1].finished and events[-1].messages_total == 40


def test_resume_after_a_checkpoint_step_was_cut(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    sid = fill(src)
    copy_sessions(src, dst)
    # as if the first run stopped after one checkpoint and one scratchpad write
    second = dst.list_checkpoints(sid)[1]
    fresh = stores("sqlite")
    fresh.create_session(id=sid, agent="coder", model="gpt-4o")
    fresh.append_messages(sid, [m.model_copy(update={"seq": None}) for m in src.read_messages(sid)])
    first = dst.list_checkpoints(sid)[0]
    fresh.add_checkpoint(
        sid, covers_up_to=first.covers_up_to, summary=first.summary, metadata={"k": 1}
    )
    fresh.scratchpad_write(sid, "plan", "stale content")
    fresh.scratchpad_write(sid, "leftover", "not in the source")
    report = copy_sessions(src, fresh)
    assert report.ok, report.sessions[0].error
    assert report.sessions[0].status is CopyStatus.UP_TO_DATE
    assert_same(src, fresh, sid)
    assert fresh.list_checkpoints(sid)[1].summary == second.summary


def test_destination_that_differs_is_an_error_not_merged(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    sid = fill(src)
    fill(src, "sess-other", turns=1)
    other = dst.create_session(id=sid, agent="coder", model="gpt-4o")
    other.append([Message.user("something else entirely"), Message.assistant("yes")])
    report = copy_sessions(src, dst)
    assert not report.ok
    (bad,) = report.failed
    assert bad.session_id == sid and bad.status is CopyStatus.FAILED
    assert "differs from the source at message 1" in (bad.error or "")
    assert bad.dest_messages == 2
    assert [m.text for m in dst.read_messages(sid)] == ["something else entirely", "yes"]
    assert dst.lock_holder(sid) is None  # released: the session is as it was
    assert dst.list_checkpoints(sid) == []
    # the other session was copied all the same
    assert_same(src, dst, "sess-other")


def test_destination_longer_than_source_is_an_error(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("jsonl")
    sid = fill(src, turns=1)
    copy_sessions(src, dst)
    dst.append_messages(sid, [Message.user("only at the destination")])
    report = copy_sessions(src, dst)
    (bad,) = report.failed
    assert "more than the source's 4" in (bad.error or "")
    assert dst.count_messages(sid) == 5


def test_destination_locked_by_someone_else_is_left_alone(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    sid = fill(src, turns=1)
    copy_sessions(src, dst)
    src.append_messages(sid, [Message.user("one more")])
    other = LockHolder(pid=4242, host="elsewhere.example")  # a fresh lease on another host
    dst.acquire_lock(sid, other)
    report = copy_sessions(src, dst)
    (bad,) = report.failed
    assert "locked by pid 4242 on elsewhere.example" in (bad.error or "")
    assert dst.count_messages(sid) == 4
    held = dst.lock_holder(sid)
    assert held is not None and held.same_holder(other)


def test_destination_of_another_agent_is_an_error(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("memory")
    sid = fill(src, turns=1)
    dst.create_session(id=sid, agent="writer")
    (bad,) = copy_sessions(src, dst).failed
    assert "agent 'writer'" in (bad.error or "")
    assert dst.lock_holder(sid) is None


def test_resume_syncs_title_model_and_metadata(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    sid = fill(src, turns=1)
    copy_sessions(src, dst)
    src.rename_session(sid, "New title")
    src.update_session(sid, model="gpt-4o-mini", metadata={"n": 4, "extra": True})
    report = copy_sessions(src, dst)
    assert report.ok
    info = dst.session_info(sid)
    assert (info.title, info.model) == ("New title", "gpt-4o-mini")
    assert info.metadata == {"project": "invoices", "n": 4, "extra": True}


def test_only_the_named_sessions_by_prefix(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    fill(src, "alpha-0001", turns=1)
    fill(src, "beta-0002", turns=1)
    report = copy_sessions(src, dst, session_ids=["alph"])
    assert [s.session_id for s in report.sessions] == ["alpha-0001"]
    assert dst.list_sessions().total == 1


def test_unknown_session_fails_before_copying_anything(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    fill(src, "alpha-0001", turns=1)
    with pytest.raises(SessionNotFound):
        copy_sessions(src, dst, session_ids=["alpha-0001", "nope-9999"])
    assert dst.list_sessions().total == 0


def test_copy_refuses_the_same_store_and_bad_batches() -> None:
    store = MemoryStore()
    with pytest.raises(UsageError, match="same store"):
        copy_sessions(store, store)
    with pytest.raises(UsageError, match="batch"):
        copy_sessions(store, MemoryStore(), batch=0)


def test_empty_session_and_empty_store(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("jsonl")
    assert copy_sessions(src, dst).sessions == []
    src.create_session(id="empty-0001")
    report = copy_sessions(src, dst)
    assert report.ok and report.sessions[0].status is CopyStatus.COPIED
    assert dst.count_messages("empty-0001") == 0


def test_source_with_a_gap_is_renumbered_and_reported(stores: OpenStore, tmp_path: Path) -> None:
    """A corrupt JSONL line (a hand edit) leaves a gap in the source's seqs."""
    src, dst = stores("jsonl"), stores("sqlite")
    sid = fill(src, turns=2)  # 8 messages, checkpoints cover seqs 4 and 8
    assert sid
    files = [p for p in Path(src.url.removeprefix("jsonl://")).rglob(f"{sid}.jsonl")]
    (path,) = files
    lines = path.read_bytes().split(b"\n")
    lines[3] = b'{"torn'  # the message with seq 3 (line 1 is the session record)
    path.write_bytes(b"\n".join(lines))
    reopened = open_store(src.url)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = copy_sessions(reopened, dst)
    finally:
        reopened.close()
    (result,) = report.sessions
    assert not result.ok  # 7 of the 8 messages the source counts: not silently "done"
    assert "messages: source 8, destination 7" in (result.error or "")
    assert any("gaps" in n for n in result.notes)
    assert [m.seq for m in dst.read_messages(sid)] == list(range(1, 8))
    # the checkpoint over source seq 4 now covers destination seq 3: the same message
    assert [c.covers_up_to for c in dst.list_checkpoints(sid)] == [3, 7]


def _ids(store: Store, sid: str) -> list[Any]:
    return [m.id for m in store.read_messages(sid)]


def test_seqs_and_ids_match_after_many_batches(stores: OpenStore) -> None:
    src, dst = stores("memory"), stores("sqlite")
    session = src.create_session(id="long-0001", model="gpt-4o")
    for start in range(0, 1200, 300):
        session.append([Message.user(f"m{i}") for i in range(start, start + 300)])
    report = copy_sessions(src, dst, batch=500)
    assert report.ok
    assert _ids(src, "long-0001") == _ids(dst, "long-0001")
    assert [m.seq for m in dst.read_messages("long-0001")] == list(range(1, 1201))


def test_a_forks_copy_hides_what_the_fork_hides(stores: OpenStore) -> None:
    """A fork is copied as its whole view, so its memo must carry the ancestors'
    retractions up to the fork point: the copy shows what the fork shows, and a second
    copy finds nothing to change."""
    from threadline.store.fork import fork_session

    src, dst = stores("sqlite"), stores("jsonl")
    parent = src.create_session(id="parent", model="gpt-4o")
    parent.append([Message.user(f"m{i}") for i in range(5)])
    parent.retract([2])  # before the fork point: the fork inherits it
    child = fork_session(parent, id="child")
    parent.retract([4])  # after: the fork still shows m3
    child.append(Message.user("c0"))
    child.retract([7])  # its own
    child.append(Message.user("c1"))
    want = [m.text for m in child.messages()]
    assert want == ["m0", "m2", "m3", "m4", "c1"]
    report = copy_sessions(src, dst, session_ids=["child"])
    assert report.ok, [r.error for r in report.sessions]
    copied = dst.get_session("child")
    assert copied.fork is None
    assert [m.text for m in copied.messages()] == want
    assert [m.text for m in copied.tail(2)] == ["c1", "m4"]
    again = copy_sessions(src, dst, session_ids=["child"])
    assert again.ok and again.sessions[0].status is CopyStatus.UP_TO_DATE


@pytest.mark.parametrize(("src_backend", "dst_backend"), [("sqlite", "jsonl"), ("jsonl", "sqlite")])
def test_copies_keep_dates_and_parents(
    stores: OpenStore, src_backend: str, dst_backend: str
) -> None:
    """Issue 22: a copy keeps each session's own dates and its parent link, copying a
    parent before a child the source lists first (it was updated later)."""
    from datetime import UTC, datetime, timedelta

    from threadline.store.encoding import dated

    feb = datetime(2025, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
    src, dst = stores(src_backend), stores(dst_backend)
    parent = src.create_session(id="parent-01", created_at=feb)
    parent.append(dated([Message.user("the task")], feb + timedelta(hours=1)))
    child = src.create_session(id="child-001", parent=parent.id, created_at=feb)
    child.append(dated([Message.user("a subagent's part")], feb + timedelta(hours=2)))
    assert [s.id for s in src.list_sessions()] == ["child-001", "parent-01"]
    report = copy_sessions(src, dst)
    assert report.ok, [s.error for s in report.sessions]
    for sid in ("parent-01", "child-001"):
        mine, theirs = src.session_info(sid), dst.session_info(sid)
        assert (theirs.created_at, theirs.updated_at, theirs.parent_id) == (
            mine.created_at,
            mine.updated_at,
            mine.parent_id,
        )
    assert dst.session_info("child-001").parent_id == "parent-01"
    assert [s.id for s in dst.list_sessions(top_level=True)] == ["parent-01"]
    only_child = stores(dst_backend)  # its parent stays behind: copied as top-level
    (copied,) = copy_sessions(src, only_child, session_ids=["child-001"]).sessions
    assert copied.ok and only_child.session_info("child-001").parent_id is None
    assert any("parent-01 is not at the destination" in note for note in copied.notes)
