"""What an append promises besides storing (issue 12's bulk path): counters without a
read back, copies that keep what pydantic's copy keeps, bad text refused by name, and a
search index that never holds an append or a close hostage."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, PrivateAttr
from pydantic_core import TzInfo

from threadline import Message, ToolCall
from threadline.errors import InvalidMessage
from threadline.messages import FilePart, ImagePart, TextPart, Usage
from threadline.store import sqlite as sqlite_store
from threadline.store.checks import format_ts, parse_ts
from threadline.store.encoding import encode_message, prepare_messages, stored_times
from threadline.store.sqlite import SQLiteStore


@pytest.fixture(autouse=True)
def _estimated_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_TOKENIZER", "estimate")


def test_counters_follow_appends_without_reading_the_store(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        session = store.create_session(model="gpt-4o")
        first = session.append([Message.user("one"), Message.assistant("two")])
        again = session.append(Message.user("three"))
        stored = store.session_info(session.id)
    # the store is closed: the handle answers from what its appends returned
    assert (
        (session.last_seq, session.message_count)
        == (3, 3)
        == (
            stored.last_seq,
            stored.message_count,
        )
    )
    assert (
        session.total_tokens
        == stored.total_tokens
        == sum(next(iter(m.token_counts.values())) for m in first + again)
    )
    assert session.info.updated_at >= stored.created_at
    assert "messages=3" in repr(session)


def test_a_batch_stored_before_is_not_counted_twice(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = store.create_session()
    batch = [Message.user("a"), Message.user("b")]
    session.append(batch)
    session.append(batch)  # the same ids: the stored copies come back, nothing is added
    assert session.message_count == store.session_info(session.id).message_count == 2
    store.delete_session(session.id)
    assert "messages=2" in repr(session)  # no read: a deleted session still prints


class Tagged(Message):
    model_config = ConfigDict(extra="allow")
    _note: str = PrivateAttr(default="")


def test_a_subclass_keeps_its_extra_and_private_attributes() -> None:
    m = Tagged.model_validate({"role": "user", "content": "hi", "source": "web"})
    m._note = "kept"
    [copy] = prepare_messages(None, [m])
    assert isinstance(copy, Tagged) and copy is not m
    assert copy.__pydantic_extra__ == {"source": "web"} and copy._note == "kept"


def test_tool_arguments_that_are_not_utf8_are_refused_by_name(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = store.create_session(model="gpt-4o")
    call = ToolCall(id="c1", name="write", arguments={"text": "lone \ud800 surrogate"})
    with pytest.raises(InvalidMessage, match="not valid UTF-8"):
        session.append(Message.assistant("", tool_calls=[call]))
    assert session.count() == 0


def test_an_append_past_the_backlog_limit_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that never searches or closes still bounds what a read-only handle
    indexes at each search."""
    monkeypatch.setattr(sqlite_store, "MAX_INDEX_BACKLOG", 10)
    store = SQLiteStore(tmp_path / "s.db")
    session = store.create_session()
    session.append([Message.user(f"early {i}") for i in range(10)])
    assert store.index_backlog() == 10  # at the limit, not past it
    session.append(Message.user("one more"))
    assert store.index_backlog() == 0
    assert store.search("early").total == 10


def test_close_does_not_wait_for_a_busy_store(tmp_path: Path) -> None:
    """Another connection holds the write lock: close leaves the catch-up to the next
    search instead of waiting out the busy timeout (a minute by default)."""
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    session = store.create_session()
    session.append([Message.user(f"waiting {i}") for i in range(5)])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(timeout=30)
    finished = not closer.is_alive()
    blocker.execute("ROLLBACK")
    blocker.close()
    closer.join()
    assert finished
    reopened = SQLiteStore(path)
    assert reopened.index_backlog() == 5  # left for the next search, which finds them
    assert reopened.search("waiting").total == 5


@settings(max_examples=300, deadline=None)
@given(
    when=st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), TzInfo(0)]),
    )
    | st.datetimes(min_value=datetime(1, 1, 2), timezones=st.just(UTC)).map(
        lambda d: d.replace(microsecond=0)
    )
)
def test_stored_times_are_format_ts(when: datetime) -> None:
    """The rows' time text, taken from pydantic-core's JSON where that is already the
    stored form, is ``format_ts`` to the character: any offset, no microseconds, any
    year."""
    m = Message.user("x").model_copy(update={"created_at": when})
    (text,) = stored_times([m])
    assert text == format_ts(when)
    assert len(text) == 27 and text.endswith("Z")
    assert parse_ts(text) == when


def test_format_ts_is_rfc3339_utc_with_microseconds() -> None:
    assert (
        format_ts(datetime(2026, 1, 8, 20, 53, 0, 5, tzinfo=UTC)) == "2026-01-08T20:53:00.000005Z"
    )
    shifted = datetime(2026, 1, 9, 1, 23, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert format_ts(shifted) == "2026-01-08T19:53:00.000000Z"
    assert format_ts(datetime(987, 6, 5, tzinfo=UTC)) == "0987-06-05T00:00:00.000000Z"


def test_a_utf16_file_keeps_every_body(tmp_path: Path) -> None:
    """Bodies are bound as text, which SQLite converts to the file's encoding (a UTF-8 blob
    cast to text in a UTF-16 file would lose an odd last byte: a message lost at read)."""
    path = tmp_path / "u16.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA encoding = 'UTF-16le'")
    con.execute("CREATE TABLE made_first (x)")  # fixes the encoding before threadline's tables
    con.execute("DROP TABLE made_first")
    con.commit()
    con.close()
    with SQLiteStore(path) as store:
        session = store.create_session()
        session.append([Message.user("hello"), Message.user("hello!"), Message.user("é 😀")])
        assert store._con.execute("PRAGMA encoding").fetchone()[0] == "UTF-16le"
        assert [m.text for m in store.read_messages(session.id)] == ["hello", "hello!", "é 😀"]
        assert sorted(h.seq for h in store.search("hello")) == [1, 2]


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
_PARTS = st.lists(
    st.builds(TextPart, text=st.text(max_size=30))
    | st.builds(
        ImagePart,
        url=st.just("https://example.com/a.png"),
        detail=st.sampled_from([None, "auto", "low", "high"]),
        width=st.none() | st.integers(1, 4096),
        height=st.none() | st.integers(1, 4096),
    )
    | st.builds(ImagePart, data=st.just("aGVsbG8="), media_type=st.just("image/png"))
    | st.builds(
        FilePart,
        uri=st.text(min_size=1, max_size=20),
        name=st.none() | st.text(max_size=8),
        data=st.none() | st.just("aGk="),
    ),
    max_size=3,
)


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["user", "assistant", "system", "tool"]))
    fields: dict[str, object] = {
        "role": role,
        "content": draw(st.text(max_size=60) | _PARTS),
        "created_at": draw(
            st.datetimes(
                min_value=datetime(1, 1, 2),
                timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7)), TzInfo(3600)]),
            )
        ),
        "model": draw(st.none() | st.text(max_size=10)),
        "synthetic": draw(st.booleans()),
        "summary": draw(st.booleans()),
        "metadata": draw(st.dictionaries(st.text(max_size=6), _JSON, max_size=3)),
        "token_counts": draw(
            st.dictionaries(st.text(max_size=8), st.integers(0, 10**6), max_size=2)
        ),
    }
    if draw(st.booleans()):
        fields["usage"] = Usage(
            input_tokens=draw(st.none() | st.integers(0, 10**6)), output_tokens=3
        )
    if role == "tool":
        fields["tool_call_id"] = draw(st.text(min_size=1, max_size=10))
        fields["name"] = draw(st.none() | st.text(max_size=8))
    elif role == "assistant":
        fields["tool_calls"] = draw(
            st.lists(
                st.builds(
                    ToolCall,
                    id=st.text(min_size=1, max_size=8),
                    name=st.text(max_size=8),
                    arguments=st.dictionaries(st.text(max_size=6), _JSON, max_size=3),
                    raw_arguments=st.none() | st.text(max_size=10),
                ),
                max_size=2,
            )
        )
    return Message(**fields)  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(m=_messages(), seq=st.none() | st.integers(1, 10**6))
def test_a_plain_message_encodes_as_its_model_would(m: Message, seq: int | None) -> None:
    """``encode_message`` writes a plain message from its fields (pydantic-core's inferring
    encoder): byte for byte what the model's serializer writes, for every kind of field."""
    m.seq = seq
    expected = Message.__pydantic_serializer__.to_json(m, exclude={"seq"})
    assert encode_message(m) == expected
    assert Message.model_validate_json(expected).model_dump(exclude={"seq"}) == m.model_dump(
        exclude={"seq"}
    )


def test_a_subclass_encodes_through_its_model() -> None:
    m = Tagged.model_validate({"role": "user", "content": "hi", "source": "web"})
    assert b'"source":"web"' in encode_message(m)


def test_an_append_loads_no_tokenizer_data(tmp_path: Path) -> None:
    """Appends store the estimator's count for OpenAI models: tiktoken's data (0.2 s to
    load) waits for the first build, so a one-shot import never pays for it."""
    code = (
        "import sys\n"
        "from threadline import Message, open_store\n"
        f"store = open_store('sqlite:///{tmp_path}/s.db')\n"
        "s = store.create_session(model='gpt-4o')\n"
        "stored = s.append([Message.user('hello there'), Message.assistant('hi')])\n"
        "assert list(stored[0].token_counts) == ['o200k_base:estimated'], stored[0].token_counts\n"
        "assert 'tiktoken' not in sys.modules, 'tiktoken loaded'\n"
        "print('ok')\n"
    )
    env = {**os.environ, "THREADLINE_TOKENIZER": "auto"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
