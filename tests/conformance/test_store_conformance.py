"""The Store protocol, checked the same way on every backend.

Each test runs once per backend (see ``conftest.py``). Tests go through the
store's methods and through the ``Session`` handle, because callers use both.
What a backend does not do is declared in ``backends.py`` and nowhere else.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conformance.backends import SEARCH_UNSUPPORTED
from tests.processes import zombie
from threadline import (
    AmbiguousSessionId,
    FilePart,
    ImagePart,
    InvalidMessage,
    InvalidSessionId,
    Message,
    NotSupported,
    Session,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    Store,
    TextPart,
    ToolCall,
    Usage,
    UsageError,
)
from threadline.messages import utcnow
from threadline.store.checks import MAX_PAGE_SIZE
from threadline.store.encoding import prepare_messages, primary_tokens
from threadline.store.locks import LockHolder, pid_alive, this_host

TICK = 0.002
"""Pause between steps whose order must show in timestamps (microsecond resolution)."""


def tick() -> None:
    time.sleep(TICK)


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def seqs(messages: list[Message]) -> list[int | None]:
    return [m.seq for m in messages]


def fill(session: Session, n: int, prefix: str = "message") -> list[Message]:
    return session.append([Message.user(f"{prefix} {i}") for i in range(1, n + 1)])


def other_live_holder() -> LockHolder:
    """A holder on this host whose process is alive and is not us."""
    return LockHolder(pid=os.getppid(), host=this_host())


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not pid_alive(proc.pid)
    return proc.pid


# -- sessions ------------------------------------------------------------------------


def test_create_assigns_uuid4_ids_and_defaults(store: Store) -> None:
    session = store.create_session()
    assert uuid.UUID(session.id).version == 4
    assert session.agent == "default"
    assert (session.model, session.title) == (None, None)
    assert (session.message_count, session.total_tokens, session.last_seq) == (0, 0, 0)
    assert session.info.created_at.tzinfo is not None
    assert store.create_session().id != session.id


def test_create_with_caller_id_and_fields(store: Store) -> None:
    meta = {"project": "x", "nested": {"n": [1, 2]}, "unicode": "naïve 🦊"}
    session = store.create_session(
        id="My.session_1-x", agent="coder", model="gpt-4o", title="  Refactor  ", metadata=meta
    )
    info = store.session_info("My.session_1-x")
    assert session.id == info.id == "My.session_1-x"
    assert (info.agent, info.model, info.title) == ("coder", "gpt-4o", "Refactor")
    assert info.metadata == meta
    assert info.updated_at >= info.created_at
    assert store.get_session("My.session_1-x").info == info


@pytest.mark.parametrize(
    "bad",
    [
        *("a/b", "a\\b", "..", "a..b", "../etc", "x\x00y", "x" * 129, "", ".hidden", "-dash"),
        *("sp ace", "coder\n", "coder\r\n", "\ncoder", "x" * 2**20),
    ],
    ids=repr,
)
def test_create_refuses_bad_ids(store: Store, bad: str) -> None:
    with pytest.raises(InvalidSessionId):
        store.create_session(id=bad)
    with pytest.raises(InvalidSessionId):
        store.create_session(agent=bad)
    assert store.list_sessions().total == 0


@pytest.mark.parametrize(
    "bad",
    ["../../../../escaped", "/abs/escaped", "id\n", "x" * 129, "x" * 2**20, "", "a b", "x\x1b[2J"],
    ids=["relative", "absolute", "newline", "129", "1MiB", "empty", "space", "escape"],
)
def test_append_refuses_bad_message_ids(store: Store, bad: str) -> None:
    session = store.create_session()
    with pytest.raises(InvalidMessage, match="message id"):
        session.append([Message.user("fine"), Message.user("hostile", id=bad)])
    assert store.count_messages(session.id) == 0


def test_append_refuses_what_could_not_be_read_back(store: Store) -> None:
    """Duplicate call ids in one message, NaN, and nesting past the reader's limit."""
    session = store.create_session()
    twice = [ToolCall(id="c1", name="a"), ToolCall(id="c1", name="b")]
    deep: Any = 1
    for _ in range(150):
        deep = {"d": deep}
    bad = [
        (Message.assistant("", tool_calls=twice), "appears twice"),
        (
            Message.assistant(
                "", tool_calls=[ToolCall(id="c", name="f", arguments={"x": float("nan")})]
            ),
            "nan",
        ),
        (Message.user("x", metadata={"m": [float("inf")]}), "inf"),
        (Message.user("x", metadata=deep), "levels deep"),
    ]
    for message, why in bad:
        with pytest.raises(InvalidMessage, match=why):
            session.append(message)
    assert store.count_messages(session.id) == 0


def test_huge_numbers_mean_everything_and_other_types_are_refused(store: Store) -> None:
    """Past 64 bits SQLite overflowed and PostgreSQL refused; now every backend agrees."""
    session = store.create_session()
    stored = fill(session, 3)
    assert store.tail(session.id, 10**30, before_seq=10**30) == stored[::-1]
    assert store.read_messages(session.id, after_seq=-(10**30), limit=10**30) == stored
    assert store.read_messages(session.id, after_seq=10**30) == []
    page = store.list_sessions(offset=10**30)
    assert page.items == [] and page.total == 1
    for bad in ("5", 2.0, None):
        with pytest.raises(UsageError, match="limit must be an integer"):
            store.tail(session.id, bad)  # type: ignore[arg-type]


def test_session_fields_scratchpad_and_checkpoints_are_checked(store: Store) -> None:
    """A number where text goes once left a JSONL file unreadable; NaN was stored as NaN
    by some backends and refused by PostgreSQL. Now every backend refuses both, first."""
    session = store.create_session(id="keep-0001")
    fill(session, 2)
    before = (store.session_info(session.id), store.scratchpad_list(session.id))
    calls: list[Callable[[], object]] = [
        lambda: store.create_session(model=5),  # type: ignore[arg-type]
        lambda: store.create_session(metadata={"x": float("nan")}),
        lambda: store.update_session(session.id, model=5),  # type: ignore[arg-type]
        lambda: store.update_session(session.id, metadata=[1]),  # type: ignore[arg-type]
        lambda: store.scratchpad_write(session.id, "n", 123),  # type: ignore[arg-type]
        lambda: store.add_checkpoint(session.id, covers_up_to=1, summary=5),  # type: ignore[arg-type]
        lambda: store.add_checkpoint(
            session.id, covers_up_to=1, summary="s", metadata={"x": float("inf")}
        ),
    ]
    for call in calls:
        with pytest.raises(UsageError):
            call()
    assert (store.session_info(session.id), store.scratchpad_list(session.id)) == before
    assert store.list_sessions().total == 1 and store.list_checkpoints(session.id) == []


def test_create_accepts_longest_id(store: Store) -> None:
    longest = "x" * 128
    assert store.create_session(id=longest, agent="a" * 128).id == longest


def test_create_refuses_non_string_id(store: Store) -> None:
    with pytest.raises(InvalidSessionId):
        store.create_session(id=123)  # type: ignore[arg-type]


def test_duplicate_id_raises_session_exists(store: Store) -> None:
    store.create_session(id="dup-1", agent="a")
    with pytest.raises(SessionExists):
        store.create_session(id="dup-1", agent="a")
    with pytest.raises(SessionExists):
        store.create_session(id="dup-1", agent="b")  # ids are unique across agents
    assert store.list_sessions().total == 1


def test_resolve_id_by_prefix(store: Store) -> None:
    one = store.create_session(id="abcd1234-one").id
    two = store.create_session(id="abcd5678-two").id
    store.create_session(id="zz")
    assert store.resolve_id(one) == one
    assert store.resolve_id("abcd1") == one
    assert store.get_session("abcd5").id == two
    with pytest.raises(AmbiguousSessionId) as info:
        store.resolve_id("abcd")
    assert set(info.value.candidates) == {one, two}
    with pytest.raises(SessionNotFound):
        store.resolve_id("abc")  # shorter than the minimum prefix
    assert store.resolve_id("zz") == "zz"  # an exact id is fine however short
    with pytest.raises(SessionNotFound):
        store.resolve_id("nope-nothing")
    with pytest.raises(InvalidSessionId):
        store.resolve_id("../abcd")


def test_resolve_prefix_treats_underscore_literally(store: Store) -> None:
    store.create_session(id="ab_cdef")
    store.create_session(id="abXcdef")
    assert store.resolve_id("ab_c") == "ab_cdef"


def test_list_newest_updated_first(store: Store) -> None:
    a = store.create_session(title="a")
    tick()
    b = store.create_session(title="b")
    tick()
    c = store.create_session(title="c")
    tick()
    assert [s.id for s in store.list_sessions()] == [c.id, b.id, a.id]
    a.append(Message.user("bump"))
    tick()
    assert [s.id for s in store.list_sessions()] == [a.id, c.id, b.id]
    b.rename("renamed")
    page = store.list_sessions()
    assert [s.id for s in page] == [b.id, a.id, c.id]
    assert page.items[1].message_count == 1
    stamps = [s.updated_at for s in page]
    assert stamps == sorted(stamps, reverse=True)


def test_list_agent_filter(store: Store) -> None:
    mine = {store.create_session(agent="alice").id for _ in range(3)}
    theirs = {store.create_session(agent="bob").id for _ in range(2)}
    alice = store.list_sessions(agent="alice")
    assert alice.total == 3
    assert {s.id for s in alice} == mine
    assert all(s.agent == "alice" for s in alice)
    assert {s.id for s in store.list_sessions(agent="bob")} == theirs
    assert store.list_sessions(agent="carol").total == 0
    assert store.list_sessions().total == 5
    with pytest.raises(InvalidSessionId):
        store.list_sessions(agent="../x")


def test_list_pagination_and_totals(store: Store) -> None:
    created = []
    for i in range(7):
        created.append(store.create_session(title=f"s{i}").id)
        tick()
    newest_first = created[::-1]
    pages = [store.list_sessions(limit=3, offset=off) for off in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert all(p.total == 7 and p.limit == 3 for p in pages)
    assert [p.offset for p in pages] == [0, 3, 6]
    assert [s.id for p in pages for s in p] == newest_first
    beyond = store.list_sessions(limit=3, offset=10)
    assert (len(beyond), beyond.total) == (0, 7)
    assert len(store.list_sessions(limit=1)) == 1
    assert len(store.list_sessions(limit=MAX_PAGE_SIZE)) == 7


@pytest.mark.parametrize("limit", [0, -1, MAX_PAGE_SIZE + 1])
def test_list_page_size_out_of_range(store: Store, limit: int) -> None:
    with pytest.raises(UsageError):
        store.list_sessions(limit=limit)


def test_list_negative_offset(store: Store) -> None:
    with pytest.raises(UsageError):
        store.list_sessions(offset=-1)


def test_rename(store: Store) -> None:
    session = store.create_session(title="old")
    before = session.info.updated_at
    tick()
    session.rename("  new title ")
    assert session.title == "new title"
    info = store.session_info(session.id)
    assert info.title == "new title"
    assert info.updated_at > before
    assert store.rename_session(session.id, None).title is None
    assert store.rename_session(session.id, "   ").title is None
    with pytest.raises(UsageError):
        store.rename_session(session.id, "bad\x00title")
    with pytest.raises(UsageError):
        store.rename_session(session.id, "x" * 501)
    assert store.session_info(session.id).title is None


def test_update_session(store: Store) -> None:
    session = store.create_session(model="gpt-4o", metadata={"a": 1, "b": {"c": 2}})
    info = store.update_session(session.id, model="claude-sonnet-4", metadata={"b": 3, "d": [4]})
    assert info.model == "claude-sonnet-4"
    assert info.metadata == {"a": 1, "b": 3, "d": [4]}
    info = store.update_session(session.id, metadata={"e": None})
    assert info.model == "claude-sonnet-4"  # None leaves the model alone
    assert info.metadata == {"a": 1, "b": 3, "d": [4], "e": None}
    assert store.session_info(session.id) == info


def test_delete_one(store: Store) -> None:
    keep = store.create_session()
    gone = store.create_session()
    gone.delete()
    with pytest.raises(SessionNotFound):
        store.session_info(gone.id)
    with pytest.raises(SessionNotFound):
        store.get_session(gone.id)
    with pytest.raises(SessionNotFound):
        store.delete_session(gone.id)
    assert [s.id for s in store.list_sessions()] == [keep.id]


def test_delete_many(store: Store) -> None:
    ids = [store.create_session().id for _ in range(4)]
    assert store.delete_sessions([ids[0], ids[2], "never-existed"]) == 2
    assert {s.id for s in store.list_sessions()} == {ids[1], ids[3]}
    assert store.delete_sessions([]) == 0


def test_delete_all_and_per_agent(store: Store) -> None:
    for _ in range(3):
        store.create_session(agent="alice")
    bob = store.create_session(agent="bob")
    assert store.delete_all(agent="alice") == 3
    assert [s.id for s in store.list_sessions()] == [bob.id]
    assert store.delete_all(agent="nobody") == 0
    assert store.delete_all() == 1
    assert store.list_sessions().total == 0


def test_delete_cascades(store: Store) -> None:
    """A session re-created under a deleted one's id starts empty in every respect."""
    session = store.create_session(id="cascade-me", agent="a", title="t")
    fill(session, 3)
    session.add_checkpoint(covers_up_to=2, summary="old summary")
    session.scratchpad_write("plan", "old plan")
    session.set_memo({"old": True})
    store.acquire_lock(session.id)
    store.delete_session(session.id, force=True)
    fresh = store.create_session(id="cascade-me", agent="b")
    assert (fresh.agent, fresh.title, fresh.message_count, fresh.last_seq) == ("b", None, 0, 0)
    assert fresh.messages() == []
    assert fresh.tail(10) == []
    assert fresh.checkpoints() == []
    assert fresh.latest_checkpoint() is None
    assert fresh.scratchpad_list() == []
    assert fresh.get_memo() == {}
    assert store.lock_holder(fresh.id) is None
    assert seqs(fill(fresh, 2)) == [1, 2]


# -- messages ------------------------------------------------------------------------


def test_append_assigns_consecutive_seqs(store: Store) -> None:
    session = store.create_session()
    assert seqs(session.append(Message.user("one"))) == [1]
    assert seqs(session.append([Message.assistant("two"), Message.user("three")])) == [2, 3]
    assert seqs(fill(session, 5)) == [4, 5, 6, 7, 8]
    assert seqs(session.messages()) == list(range(1, 9))
    assert session.last_seq == 8


def test_append_empty_batch_is_a_usage_error(store: Store) -> None:
    session = store.create_session()
    with pytest.raises(UsageError):
        session.append([])


def test_append_is_all_or_nothing_on_a_bad_message(store: Store) -> None:
    session = store.create_session()
    fill(session, 2)
    good = prepare_messages(None, [Message.user("fine"), Message.user("also fine")])
    bad = Message.user("lone surrogate \ud800 here")  # cannot be stored as UTF-8
    with pytest.raises(InvalidMessage):
        store.append_messages(session.id, [*good, bad])
    with pytest.raises(InvalidMessage):
        session.append([Message.user("fine"), bad])
    assert store.count_messages(session.id) == 2
    assert texts(session.messages()) == ["message 1", "message 2"]
    assert seqs(session.append(Message.user("next"))) == [3]


def test_append_is_all_or_nothing_on_a_stored_id(store: Store) -> None:
    session = store.create_session()
    first = fill(session, 2)
    batch = [Message.user("new"), first[1].model_copy(update={"seq": None})]
    with pytest.raises(InvalidMessage):
        session.append(batch)
    assert store.count_messages(session.id) == 2
    assert seqs(session.append(Message.user("after"))) == [3]


def test_append_refuses_the_same_id_twice_in_a_batch(store: Store) -> None:
    session = store.create_session()
    m = Message.user("twice")
    with pytest.raises(InvalidMessage):
        session.append([m, m])
    with pytest.raises(InvalidMessage):
        store.append_messages(session.id, prepare_messages(None, [m]) * 2)
    assert store.count_messages(session.id) == 0


def test_append_retry_is_idempotent(store: Store) -> None:
    session = store.create_session()
    fill(session, 1)
    batch = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    first = session.append(batch)
    tokens = session.total_tokens
    again = session.append(batch)
    assert seqs(again) == seqs(first) == [2, 3, 4]
    assert again == first
    assert store.count_messages(session.id) == 4
    assert session.total_tokens == tokens
    single = Message.user("single")
    assert session.append(single) == session.append(single)
    assert store.count_messages(session.id) == 5


def test_append_partial_retry_is_refused(store: Store) -> None:
    session = store.create_session()
    stored = session.append([Message.user("a"), Message.user("b")])
    with pytest.raises(InvalidMessage):
        session.append([stored[0].model_copy(update={"seq": None}), Message.user("new")])
    assert store.count_messages(session.id) == 2


def test_append_id_from_another_batch_is_refused(store: Store) -> None:
    session = store.create_session()
    early = session.append([Message.user("a"), Message.user("b")])
    fill(session, 2)
    reused = early[1].model_copy(update={"seq": None})
    with pytest.raises(InvalidMessage):
        session.append([Message.user("new"), reused])
    with pytest.raises(InvalidMessage):
        session.append([Message.user("new"), Message.user("newer"), reused])
    assert store.count_messages(session.id) == 4


def test_same_message_id_in_two_sessions(store: Store) -> None:
    """Message ids are unique per session, not per store."""
    m = Message.user("shared id")
    a = store.create_session()
    b = store.create_session()
    assert seqs(a.append(m)) == [1]
    assert seqs(b.append([Message.user("first"), m])) == [1, 2]


def test_tail_newest_first(store: Store) -> None:
    session = store.create_session()
    fill(session, 10)
    assert texts(session.tail(3)) == ["message 10", "message 9", "message 8"]
    assert seqs(session.tail(3, before_seq=5)) == [4, 3, 2]
    assert seqs(session.tail(10, before_seq=3)) == [2, 1]
    assert seqs(session.tail(100)) == list(range(10, 0, -1))
    assert session.tail(5, before_seq=1) == []
    assert session.tail(0) == []
    assert seqs(session.tail(2, before_seq=1000)) == [10, 9]
    assert store.create_session().tail(5) == []


def test_tail_pages_back_through_history(store: Store) -> None:
    session = store.create_session()
    fill(session, 23)
    seen: list[int | None] = []
    before: int | None = None
    while page := session.tail(5, before_seq=before):
        seen.extend(seqs(page))
        before = page[-1].seq
    assert seen == list(range(23, 0, -1))


def test_read_messages_after_seq_and_limit(store: Store) -> None:
    session = store.create_session()
    fill(session, 10)
    assert seqs(store.read_messages(session.id)) == list(range(1, 11))
    assert seqs(store.read_messages(session.id, after_seq=7)) == [8, 9, 10]
    assert seqs(store.read_messages(session.id, after_seq=2, limit=3)) == [3, 4, 5]
    assert seqs(store.read_messages(session.id, limit=1)) == [1]
    assert store.read_messages(session.id, after_seq=10) == []
    assert store.read_messages(session.id, after_seq=50) == []
    assert seqs(session.messages(after_seq=9)) == [10]
    assert texts(list(session.iter_messages(batch=3))) == [f"message {i}" for i in range(1, 11)]


def test_counts_and_total_tokens(store: Store) -> None:
    session = store.create_session(model="gpt-4o")
    stored = session.append([Message.user("hello there"), Message.assistant("general kenobi")])
    stored += session.append(Message.user("a somewhat longer message " * 20))
    assert all(primary_tokens(m) > 0 for m in stored)
    family = session.tokenizer_family
    assert all(next(iter(m.token_counts)) == family for m in stored)
    info = store.session_info(session.id)
    assert info.message_count == info.last_seq == store.count_messages(session.id) == 3
    assert info.total_tokens == sum(primary_tokens(m) for m in stored)
    assert session.count() == 3
    assert session.total_tokens == info.total_tokens


def _rich_messages() -> list[Message]:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()
    call = ToolCall(
        id="call_1",
        name="read_file",
        arguments={"path": "src/app.py", "opts": {"n": [1, 2.5, None, True], "s": "é"}},
    )
    raw = ToolCall(id="call_2", name="shell", raw_arguments="not json {")
    return [
        Message.system("You are terse."),
        Message.user(
            [
                TextPart(text='look:\nline two "quoted" \\ back\ttab \u2028 sep'),
                ImagePart(url="https://example.com/a.png", detail="low"),
                ImagePart(data=png, media_type="image/png", width=2, height=3, detail="high"),
                FilePart(
                    uri="file:///tmp/x.txt", name="x.txt", media_type="text/plain", data="eA=="
                ),
            ],
            name="alice",
            metadata={"files": ["a", "b"], "nested": {"k": [1, {"z": None}]}, "emoji": "🦊"},
            created_at=datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
        ),
        Message.assistant(
            "calling two tools",
            tool_calls=[call, raw],
            model="gpt-4o",
            usage=Usage(input_tokens=10, output_tokens=5, cached_tokens=3, cache_write_tokens=1),
            created_at=datetime(2025, 1, 15, 10, 30, tzinfo=timezone(timedelta(hours=5))),
        ),
        Message.tool("file contents", tool_call_id="call_1", name="read_file"),
        Message.tool("exit 1", tool_call_id="call_2", name="shell", synthetic=True),
        Message.assistant("a summary", summary=True, synthetic=True, token_counts={"other": 99}),
    ]


def test_message_round_trip_every_field(store: Store) -> None:
    session = store.create_session(model="gpt-4o")
    originals = _rich_messages()
    stored = session.append(originals)
    assert seqs(stored) == list(range(1, len(originals) + 1))
    for direct in (store.read_messages(session.id), session.tail(100)[::-1]):
        assert direct == stored
    for original, back in zip(originals, store.read_messages(session.id), strict=True):
        assert back.model_dump(exclude={"seq", "token_counts"}) == original.model_dump(
            exclude={"seq", "token_counts"}
        )
        assert back.created_at == original.created_at
    assert stored[-1].token_counts["other"] == 99
    assert session.tokenizer_family in stored[-1].token_counts


def test_message_round_trip_control_characters(store: Store) -> None:
    session = store.create_session()
    nasty = "nul\x00 bell\x07 esc\x1b del\x7f crlf\r\n end"
    stored = session.append(Message.user(nasty, metadata={"raw": nasty, nasty: 1}))
    (back,) = store.read_messages(session.id)
    assert back == stored[0]
    assert back.text == nasty


def test_large_message_round_trip(store: Store) -> None:
    session = store.create_session()
    big = "".join(f"line {i} of a long tool output\n" for i in range(9000))  # about 270 KB
    call = ToolCall(id="c1", name="cat")
    stored = session.append(
        [Message.assistant("reading", tool_calls=[call]), Message.tool(big, tool_call_id="c1")]
    )
    assert store.read_messages(session.id) == stored
    assert session.tail(1)[0].text == big


# -- checkpoints -----------------------------------------------------------------------


def test_checkpoint_bounds(store: Store) -> None:
    session = store.create_session()
    with pytest.raises(UsageError):
        session.add_checkpoint(covers_up_to=1, summary="nothing to cover yet")
    assert session.add_checkpoint(covers_up_to=0, summary="empty").covers_up_to == 0
    fill(session, 4)
    with pytest.raises(UsageError):
        session.add_checkpoint(covers_up_to=5, summary="past the end")
    with pytest.raises(UsageError):
        session.add_checkpoint(covers_up_to=-1, summary="negative")
    assert session.add_checkpoint(covers_up_to=4, summary="all").covers_up_to == 4
    assert len(session.checkpoints()) == 2


def test_checkpoint_latest_and_order(store: Store) -> None:
    session = store.create_session()
    assert session.latest_checkpoint() is None
    assert session.checkpoints() == []
    fill(session, 6)
    first = session.add_checkpoint(covers_up_to=3, summary="first", metadata={"words": 1})
    second = session.add_checkpoint(covers_up_to=6, summary="second")
    third = session.add_checkpoint(covers_up_to=5, summary="third, covering less")
    assert first.id < second.id < third.id
    assert first.session_id == session.id
    latest = session.latest_checkpoint()
    assert latest is not None
    assert (latest.id, latest.summary, latest.covers_up_to) == (third.id, third.summary, 5)
    listed = session.checkpoints()
    assert [c.summary for c in listed] == ["first", "second", "third, covering less"]
    assert listed[0].metadata == {"words": 1}
    assert listed[0].created_at <= listed[1].created_at <= listed[2].created_at
    other = store.create_session()
    assert other.latest_checkpoint() is None  # per session
    assert store.count_messages(session.id) == 6  # a checkpoint is not history


# -- scratchpad and memo -------------------------------------------------------------


def test_scratchpad_write_read_overwrite(store: Store) -> None:
    session = store.create_session()
    assert session.scratchpad_read("plan") is None
    first = session.scratchpad_write("plan", "step 1")
    assert (first.name, first.content) == ("plan", "step 1")
    assert first.created_at <= first.updated_at
    tick()
    second = session.scratchpad_write("plan", "step 1\nstep 2 ✓")
    assert second.content == "step 1\nstep 2 ✓"
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    read = session.scratchpad_read("plan")
    assert read is not None and read.content == "step 1\nstep 2 ✓"
    assert read.created_at == first.created_at


def test_scratchpad_list_and_delete(store: Store) -> None:
    session = store.create_session()
    for name in ["zeta", "alpha", "mid"]:
        session.scratchpad_write(name, f"content of {name}")
    assert [e.name for e in session.scratchpad_list()] == ["alpha", "mid", "zeta"]
    assert store.scratchpad_delete(session.id, "mid") is True
    assert store.scratchpad_delete(session.id, "mid") is False
    assert session.scratchpad_read("mid") is None
    assert [e.name for e in session.scratchpad_list()] == ["alpha", "zeta"]
    assert store.create_session().scratchpad_list() == []  # per session


PREFIX_NAMES = ["a", "a/", "a/1", "a/2", "a0", "ab", "a\U0010ffff", "b", "x*[?]\\", "ü/1", "ü0"]


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("", sorted(PREFIX_NAMES)),
        ("a/", ["a/", "a/1", "a/2"]),
        ("a", ["a", "a/", "a/1", "a/2", "a0", "ab", "a\U0010ffff"]),
        ("a\U0010ffff", ["a\U0010ffff"]),
        ("x*", ["x*[?]\\"]),
        ("x*[?]\\", ["x*[?]\\"]),
        ("x?", []),
        ("ü", ["ü/1", "ü0"]),
        ("c", []),
    ],
)
def test_scratchpad_list_by_prefix(store: Store, prefix: str, expected: list[str]) -> None:
    """Only the names that start with the prefix, in name order; glob and LIKE
    characters are plain text, and the highest character bounds nothing wrongly."""
    session = store.create_session()
    for name in PREFIX_NAMES:
        session.scratchpad_write(name, f"content of {name}")
    found = session.scratchpad_list(prefix=prefix)
    assert [e.name for e in found] == expected
    assert all(e.content == f"content of {e.name}" for e in found)
    with pytest.raises(UsageError):
        session.scratchpad_list(prefix="bad\x00")
    with pytest.raises(SessionNotFound):
        store.scratchpad_list("no-such-session", prefix=prefix)


def test_scratchpad_names_are_not_paths(store: Store) -> None:
    session = store.create_session()
    names = ["../../etc/passwd", "a/b", "with space", "ünïcode", ".", "x" * 256]
    for name in names:
        session.scratchpad_write(name, name)
    assert sorted(e.name for e in session.scratchpad_list()) == sorted(names)
    for name in names:
        entry = session.scratchpad_read(name)
        assert entry is not None and entry.content == name


@pytest.mark.parametrize("name", ["", "nul\x00", "x" * 257], ids=["empty", "nul", "long"])
def test_scratchpad_refuses_bad_names(store: Store, name: str) -> None:
    session = store.create_session()
    with pytest.raises(UsageError):
        session.scratchpad_write(name, "x")


def test_scratchpad_survives_checkpoints(store: Store) -> None:
    session = store.create_session()
    fill(session, 3)
    session.scratchpad_write("notes", "keep me")
    session.add_checkpoint(covers_up_to=3, summary="compacted")
    fill(session, 2)
    entry = session.scratchpad_read("notes")
    assert entry is not None and entry.content == "keep me"


def test_memo(store: Store) -> None:
    session = store.create_session()
    assert session.get_memo() == {}
    memo: dict[str, Any] = {"strategy": "trim", "anchor": 17, "nested": {"l": [1, None, "é"]}}
    session.set_memo(memo)
    assert session.get_memo() == memo
    got = store.get_memo(session.id)
    got["nested"]["l"].append("mutated")
    assert store.get_memo(session.id) == memo  # callers get a copy
    session.set_memo({"replaced": True})
    assert session.get_memo() == {"replaced": True}  # set replaces, it does not merge
    assert store.create_session().get_memo() == {}


# -- search ----------------------------------------------------------------------------


def _search_supported(backend: str, store: Store) -> bool:
    """Backends declared without search must say so with NotSupported."""
    if backend in SEARCH_UNSUPPORTED:
        with pytest.raises(NotSupported):
            store.search("anything")
        return False
    return True


def test_search_finds_messages(backend: str, store: Store) -> None:
    a = store.create_session(agent="alice")
    b = store.create_session(agent="bob")
    a.append([Message.user("nothing here"), Message.assistant("the zebracorn runs fast")])
    b.append(Message.user("Zebracorn sighting, again"))
    if not _search_supported(backend, store):
        return
    hits = store.search("zebracorn")
    assert {(h.session_id, h.seq) for h in hits} == {(a.id, 2), (b.id, 1)}
    for hit in hits:
        assert "zebracorn" in hit.snippet.lower()
        assert hit.role in ("assistant", "user")
        assert hit.agent in (None, "alice", "bob")
    assert store.search("ZEBRACORN")  # case-insensitive
    assert store.search("absent-word-xyzzy") == []


def test_search_filters(backend: str, store: Store) -> None:
    a = store.create_session(agent="alice")
    a2 = store.create_session(agent="alice")
    b = store.create_session(agent="bob")
    for s in (a, a2, b):
        s.append(Message.user("quokka report"))
    if not _search_supported(backend, store):
        return
    assert {h.session_id for h in store.search("quokka", agent="alice")} == {a.id, a2.id}
    assert [h.session_id for h in store.search("quokka", session_id=b.id)] == [b.id]
    assert len(store.search("quokka", limit=1)) == 1
    with pytest.raises(UsageError):
        store.search("quokka", limit=0)
    with pytest.raises(UsageError):
        store.search("   ")


def test_search_query_is_never_syntax(backend: str, store: Store) -> None:
    session = store.create_session()
    session.append(Message.user('weird "quotes" (parens) OR AND NOT * near:1 -minus'))
    if not _search_supported(backend, store):
        return
    for query in ['"quotes"', "(parens)", "OR", "near:1", "-minus", "* AND", "a'b", "\\"]:
        store.search(query)  # no error: user text never becomes query syntax
    assert store.search("parens")


def test_search_forgets_deleted_sessions(backend: str, store: Store) -> None:
    session = store.create_session()
    session.append(Message.user("ephemeral wombat"))
    session.delete()
    if not _search_supported(backend, store):
        return
    assert store.search("wombat") == []


# -- attach locks ----------------------------------------------------------------------


def test_lock_acquire(store: Store) -> None:
    session = store.create_session()
    assert store.lock_holder(session.id) is None
    held = store.acquire_lock(session.id)
    assert (held.pid, held.host) == (os.getpid(), this_host())
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(held)


def test_lock_reacquire_by_same_holder_renews(store: Store) -> None:
    session = store.create_session()
    first = store.acquire_lock(session.id)
    tick()
    second = store.acquire_lock(session.id)
    assert second.started_at == first.started_at
    assert second.renewed_at > first.renewed_at
    stored = store.lock_holder(session.id)
    assert stored is not None and stored.renewed_at >= second.renewed_at - timedelta(seconds=1)


def test_lock_held_by_another_live_process_is_refused(store: Store) -> None:
    session = store.create_session()
    other = other_live_holder()
    store.acquire_lock(session.id, other)
    with pytest.raises(SessionLocked) as info:
        store.acquire_lock(session.id)
    assert info.value.holder.pid == other.pid
    assert str(other.pid) in str(info.value)
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(other)


def test_lock_held_on_another_host_with_a_fresh_lease_is_refused(store: Store) -> None:
    session = store.create_session()
    remote = LockHolder(pid=4242, host="elsewhere.invalid")
    store.acquire_lock(session.id, remote)
    with pytest.raises(SessionLocked) as info:
        store.acquire_lock(session.id)
    assert info.value.holder.host == "elsewhere.invalid"


def test_lock_of_a_dead_process_is_taken_over(store: Store) -> None:
    session = store.create_session()
    store.acquire_lock(session.id, LockHolder(pid=dead_pid(), host=this_host()))
    mine = store.acquire_lock(session.id)
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(mine)


def test_lock_of_a_zombie_process_is_taken_over(store: Store) -> None:
    """A holder killed but not yet reaped still answers ``kill(pid, 0)``; its lease has
    not ended, and yet it can never renew: it is taken over at once."""
    session = store.create_session()
    with zombie() as pid:
        store.acquire_lock(session.id, LockHolder(pid=pid, host=this_host()))
        mine = store.acquire_lock(session.id)
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(mine)


def test_expired_lease_from_another_host_is_taken_over(store: Store) -> None:
    long_ago = utcnow() - timedelta(hours=1)
    remote = LockHolder(
        pid=4242,
        host="elsewhere.invalid",
        started_at=long_ago,
        renewed_at=long_ago,
        lease_seconds=60,
    )
    session = store.create_session(lock=remote)
    stale = store.lock_holder(session.id)
    assert stale is not None and stale.is_stale()
    mine = store.acquire_lock(session.id)
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(mine)


def test_release_only_by_the_holder(store: Store) -> None:
    session = store.create_session()
    other = other_live_holder()
    store.acquire_lock(session.id, other)
    assert store.release_lock(session.id) is False  # we are not the holder
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(other)
    assert store.release_lock(session.id, other) is True
    assert store.lock_holder(session.id) is None
    assert store.release_lock(session.id, other) is False
    store.acquire_lock(session.id)  # free again
    assert store.release_lock(session.id) is True


def test_create_locked_from_the_start(store: Store) -> None:
    other = other_live_holder()
    session = store.create_session(lock=other)
    holder = store.lock_holder(session.id)
    assert holder is not None and holder.same_holder(other)
    with pytest.raises(SessionLocked):
        store.acquire_lock(session.id)


def test_delete_of_a_locked_session_needs_force(store: Store) -> None:
    session = store.create_session(agent="a")
    store.acquire_lock(session.id, other_live_holder())
    with pytest.raises(SessionLocked):
        store.delete_session(session.id)
    with pytest.raises(SessionLocked):
        store.delete_sessions([session.id])
    with pytest.raises(SessionLocked):
        store.delete_all(agent="a")
    assert store.session_info(session.id).id == session.id
    store.delete_session(session.id, force=True)
    with pytest.raises(SessionNotFound):
        store.session_info(session.id)
    locked = store.create_session(lock=other_live_holder())
    assert store.delete_all(force=True) == 1
    with pytest.raises(SessionNotFound):
        store.lock_holder(locked.id)


def test_delete_of_a_session_locked_by_a_dead_process(store: Store) -> None:
    session = store.create_session(lock=LockHolder(pid=dead_pid(), host=this_host()))
    store.delete_session(session.id)
    with pytest.raises(SessionNotFound):
        store.session_info(session.id)


def test_attached_holds_the_lock_for_the_block(store: Store) -> None:
    session = store.create_session()
    with session.attached() as attached:
        holder = store.lock_holder(session.id)
        assert holder is not None and holder.pid == os.getpid()
        with pytest.raises(SessionLocked):
            store.acquire_lock(session.id, other_live_holder())
        attached.append(Message.user("while attached"))
    assert store.lock_holder(session.id) is None
    assert session.count() == 1


# -- missing sessions --------------------------------------------------------------------

_MISSING_CALLS: dict[str, Callable[[Store, str], object]] = {
    "session_info": lambda s, i: s.session_info(i),
    "get_session": lambda s, i: s.get_session(i),
    "resolve_id": lambda s, i: s.resolve_id(i),
    "rename_session": lambda s, i: s.rename_session(i, "title"),
    "update_session": lambda s, i: s.update_session(i, model="gpt-4o", metadata={"a": 1}),
    "delete_session": lambda s, i: s.delete_session(i),
    "append_messages": lambda s, i: s.append_messages(
        i, prepare_messages(None, [Message.user("x")])
    ),
    "tail": lambda s, i: s.tail(i, 5),
    "read_messages": lambda s, i: s.read_messages(i),
    "count_messages": lambda s, i: s.count_messages(i),
    "add_checkpoint": lambda s, i: s.add_checkpoint(i, covers_up_to=0, summary="s"),
    "latest_checkpoint": lambda s, i: s.latest_checkpoint(i),
    "list_checkpoints": lambda s, i: s.list_checkpoints(i),
    "scratchpad_write": lambda s, i: s.scratchpad_write(i, "n", "c"),
    "scratchpad_read": lambda s, i: s.scratchpad_read(i, "n"),
    "scratchpad_list": lambda s, i: s.scratchpad_list(i),
    "scratchpad_delete": lambda s, i: s.scratchpad_delete(i, "n"),
    "get_memo": lambda s, i: s.get_memo(i),
    "set_memo": lambda s, i: s.set_memo(i, {"a": 1}),
    "acquire_lock": lambda s, i: s.acquire_lock(i),
    "lock_holder": lambda s, i: s.lock_holder(i),
}


def _methods_not_raising_not_found(store: Store, session_id: str) -> list[str]:
    wrong = []
    for name, call in _MISSING_CALLS.items():
        try:
            call(store, session_id)
        except SessionNotFound:
            continue
        except Exception as exc:
            wrong.append(f"{name}: {type(exc).__name__}: {exc}")
        else:
            wrong.append(f"{name}: returned normally")
    return wrong


def test_missing_session_raises_not_found_everywhere(store: Store) -> None:
    store.create_session(id="present")
    assert _methods_not_raising_not_found(store, "never-created") == []
    assert store.delete_sessions(["never-created"]) == 0
    assert store.release_lock("never-created") is False  # releasing nothing is not an error
    assert store.session_info("present").id == "present"


def test_deleted_session_raises_not_found_everywhere(store: Store) -> None:
    session = store.create_session(id="deleted-one")
    fill(session, 2)
    session.add_checkpoint(covers_up_to=1, summary="s")
    session.scratchpad_write("n", "c")
    session.delete()
    assert _methods_not_raising_not_found(store, "deleted-one") == []
    with pytest.raises(SessionNotFound):
        session.append(Message.user("late"))
    with pytest.raises(SessionNotFound):
        session.refresh()
