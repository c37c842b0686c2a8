"""Export then import gives the same messages, for every export format that can be read
back (threadline JSON, OpenAI JSONL, Anthropic JSON, supyagent JSONL); and what each
format cannot carry is stated here and tested.

What each format carries (beyond roles, text, tool calls with ids / names / arguments,
tool results and their order, which all four carry):

- ``json``: everything (times, models, metadata, flags, checkpoints).
- ``supyagent``: message times (``ts``), the session's model (on every assistant
  message), and the latest checkpoint (``_summary.json``); not per-message models,
  metadata or flags, nor earlier checkpoints.
- ``openai-jsonl``: no times, models, metadata or checkpoints (an import stamps its
  own time); broken tool chains are kept as written.
- ``anthropic-json``: a request body, so it follows the Messages API's rules:
  consecutive messages of one role merge into one turn, whitespace-only messages are
  dropped, system messages gather into the ``system`` parameter at the start, a
  broken chain comes back repaired as a view repairs it (an orphan result left out, a
  call without result answered "interrupted"), a conversation opening with the
  assistant gets a "(continued)" user turn; no times, models or metadata.
- ``markdown`` and ``html`` are for people and are not read back.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import WORDS, history
from threadline.interop.anthropic_format import CONTINUED_PLACEHOLDER
from threadline.interop.export import EXPORT_SUFFIXES, REIMPORTABLE, render_export
from threadline.interop.importers import import_sessions
from threadline.interop.supyagent import summary_path
from threadline.messages import INTERRUPTED_RESULT, Message, ToolCall

PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def words(min_size: int = 1) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), min_size=min_size, max_size=12).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Histories every re-importable format carries whole: an optional system prompt,
    then turns of a request, 0-2 tool steps (1-3 calls, each answered in order) and a
    reply; call ids unique in the session; arguments an object or, sometimes, raw text."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.system(draw(words())))
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        out.append(Message.user(draw(words())))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                n += 1
                if draw(st.integers(0, 4)) == 0:
                    call = ToolCall(id=f"call_{n}", name="shell", raw_arguments="ls -la {")
                else:
                    args = draw(st.dictionaries(st.sampled_from(WORDS), words(0), max_size=3))
                    call = ToolCall(id=f"call_{n}", name="grep", arguments=args)
                calls.append(call)
            out.append(Message.assistant(draw(st.sampled_from(["", "checking"])), tool_calls=calls))
            out.extend(Message.tool(draw(words()), tool_call_id=c.id, name=c.name) for c in calls)
        out.append(Message.assistant(draw(words())))
    for i, m in enumerate(out):
        m.created_at = start + timedelta(seconds=7 * i, microseconds=i)
    return out


def shape(m: Message) -> tuple[Any, ...]:
    calls = [(c.id, c.name, c.arguments, c.raw_arguments) for c in m.tool_calls]
    return (m.role, m.content, calls, m.tool_call_id, m.name if m.role == "tool" else None)


def export_and_import(  # straight from messages: a store would refuse broken chains
    fmt: str, messages: list[Message], checkpoint_at: int | None = None
) -> tuple[list[Message], list[dict[str, Any]]]:
    stored = [m.model_copy(deep=True, update={"seq": i}) for i, m in enumerate(messages, 1)]
    info = {"id": "s-1", "agent": "default", "model": "gpt-4o", "title": "t"}
    checkpoints = []
    if checkpoint_at:
        checkpoints.append({"covers_up_to": checkpoint_at, "summary": "what happened before"})
    text, companion = render_export(fmt, info, stored, checkpoints)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"exported{EXPORT_SUFFIXES[fmt]}"
        path.write_text(text, encoding="utf-8")
        if companion is not None:
            summary_path(path).write_text(companion, encoding="utf-8")
        (imported,) = import_sessions(path)
    return imported.messages, imported.checkpoints


@pytest.mark.parametrize("fmt", REIMPORTABLE)
@PROPERTY
@given(messages=conversations())
def test_export_then_import_gives_the_same_messages(fmt: str, messages: list[Message]) -> None:
    back, _ = export_and_import(fmt, messages)
    assert [shape(m) for m in back] == [shape(m) for m in messages]
    if fmt in ("json", "supyagent"):
        assert [m.created_at for m in back] == [m.created_at for m in messages]
    if fmt == "supyagent":
        assert {m.model for m in back if m.role == "assistant"} == {"gpt-4o"}


@pytest.mark.parametrize("fmt", ["json", "openai-jsonl", "supyagent"])
@PROPERTY
@given(messages=history(max_units=10, broken=True))
def test_formats_without_turn_rules_carry_any_history(fmt: str, messages: list[Message]) -> None:
    """Orphan results, unanswered calls, empty text, consecutive roles: kept as written."""
    back, _ = export_and_import(fmt, messages)
    assert [shape(m) for m in back] == [shape(m) for m in messages]


@pytest.mark.parametrize("fmt", ["json", "supyagent"])
@PROPERTY
@given(messages=conversations(), data=st.data())
def test_the_latest_checkpoint_travels(
    fmt: str, messages: list[Message], data: st.DataObject
) -> None:
    covers = data.draw(st.integers(1, len(messages)))
    _, checkpoints = export_and_import(fmt, messages, checkpoint_at=covers)
    (cp,) = checkpoints
    assert cp["covers_up_to"] == covers and cp["summary"] == "what happened before"


# -- what a format cannot carry -----------------------------------------------------------


def test_openai_jsonl_carries_no_times_models_or_checkpoints() -> None:
    messages = [Message.user("hi"), Message.assistant("hello", model="gpt-4o")]
    messages[0].created_at = datetime(2020, 1, 1, tzinfo=UTC)
    back, checkpoints = export_and_import("openai-jsonl", messages, checkpoint_at=1)
    assert back[0].created_at.year != 2020 and back[1].model is None and checkpoints == []


def test_anthropic_json_follows_the_api_rules() -> None:
    call = ToolCall(id="c1", name="ls", arguments={})
    messages = [
        Message.assistant("I start"),
        Message.system("one"),
        Message.user("a"),
        Message.user("   "),
        Message.user("b"),
        Message.assistant("", tool_calls=[call]),  # never answered
        Message.tool("lost", tool_call_id="nobody"),  # orphan
        Message.user("c"),
        Message.system("two"),
    ]
    back, _ = export_and_import("anthropic-json", messages)
    texts = [(m.role, m.text) for m in back]
    assert texts[0] == ("system", "one\n\ntwo")  # gathered at the start
    assert texts[1] == ("user", CONTINUED_PLACEHOLDER)  # the API wants a user first
    assert texts[2] == ("assistant", "I start")
    assert ("user", "a\nb") in texts  # merged turn; the blank message dropped
    result = next(m for m in back if m.role == "tool")
    assert result.tool_call_id == "c1" and result.text == INTERRUPTED_RESULT
    assert "lost" not in [m.text for m in back]
    assert all(m.model is None for m in back)


@PROPERTY
@given(messages=conversations())
def test_a_prepared_batch_is_what_model_copy_and_model_dump_would_make(
    messages: list[Message],
) -> None:
    """``prepare_messages`` copies and encodes without pydantic's generic paths: its
    copies and bodies must be exactly ``model_copy``'s and ``model_dump_json``'s, and the
    caller's messages are left as they were."""
    from threadline.store.encoding import (
        numbered,
        prepare_messages,
        primary_tokens,
        stored_bodies,
        stored_tokens,
    )

    for m in messages:
        m.metadata = {"k": [1, {"x": None}]} if len(m.text) % 2 else {}
    before = [m.model_dump_json() for m in messages]
    prepared = prepare_messages("claude-sonnet-4-5", messages)
    for m, copy, body in zip(messages, prepared, prepared.bodies, strict=True):
        expected = m.model_copy(update={"seq": None, "token_counts": copy.token_counts})
        assert copy == expected and copy is not m
        assert copy.model_fields_set == expected.model_fields_set
        assert body == expected.model_dump_json(exclude={"seq"}).encode()
        assert Message.model_validate_json(body) == expected
    assert [m.model_dump_json() for m in messages] == before
    assert stored_bodies(prepared) is prepared.bodies
    stored = numbered(prepared, 5)
    assert [m.seq for m in stored] == list(range(5, 5 + len(messages)))
    assert [m.seq for m in messages] == [None] * len(messages)  # the caller's are untouched
    for seq, (m, copy) in enumerate(zip(messages, stored, strict=True), 5):
        # numbered writes seq past pydantic's __setattr__: the copy is still model_copy's
        expected = m.model_copy(update={"seq": seq, "token_counts": copy.token_counts})
        assert copy == expected and copy.model_fields_set == expected.model_fields_set
        assert copy.model_dump_json() == expected.model_dump_json()
    assert stored_tokens(prepared) == [primary_tokens(m) for m in stored]


# -- a session's own dates and parent travel with it (issue 22) ----------------------------


@pytest.mark.parametrize("fmt", ["json", "supyagent"])
@PROPERTY
@given(
    messages=conversations(),
    created=st.datetimes(datetime(2015, 1, 1), datetime(2025, 1, 1), timezones=st.just(UTC)),
    days=st.integers(0, 400),
)
def test_a_sessions_dates_and_parent_travel(
    fmt: str, messages: list[Message], created: datetime, days: int
) -> None:
    """Exported from one store and imported into another, a session keeps its dates
    (the formats that state them: threadline JSON exactly, supyagent's meta line), and
    a threadline JSON export of a child is listed under its parent's import again."""
    from threadline.interop.sync import Syncer, find_sources
    from threadline.store import open_store
    from threadline.store.encoding import dated

    updated = created + timedelta(days=days, microseconds=days)
    src, dst = open_store("memory://"), open_store("memory://")
    parent = src.create_session(created_at=created, updated_at=updated, title="parent")
    child = src.create_session(parent=parent.id, created_at=created, title="child")
    for session in (parent, child):
        session.append(dated([m.model_copy(deep=True) for m in messages], updated))
    with tempfile.TemporaryDirectory() as tmp:
        for session in (parent, child):
            info = src.session_info(session.id)
            assert (info.created_at, info.updated_at) == (created, updated)
            text, _ = render_export(fmt, info.to_dict(), session.messages(), [])
            (Path(tmp) / f"{session.id}{EXPORT_SUFFIXES[fmt]}").write_text(text, "utf-8")
        report = Syncer(dst).sync(find_sources([tmp]))
    assert report.counts()["new"] == 2, report.to_json()
    for again in dst.list_sessions().items:
        assert (again.created_at, again.updated_at) == (created, updated)
    if fmt == "json":  # the export names the parent's id, which its import keeps as source
        back = {s.metadata["source_id"]: s for s in dst.list_sessions().items}
        assert back[child.id].parent_id == back[parent.id].id
        assert [s.id for s in dst.list_sessions(top_level=True)] == [back[parent.id].id]
