"""Retraction: append-only removal from the view, the same through every face."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance.backends import clean_store
from threadline import Message, Store, open_store
from threadline.context.builder import build_context
from threadline.context.policy import ContextPolicy
from threadline.errors import UsageError
from threadline.interop.export import to_json
from threadline.store import retraction
from threadline.store.protocol import Session
from threadline.store.retraction import (
    MEMO_KEY,
    Retractions,
    merge_ranges,
    rebuild_index,
    record_ranges,
)

Op = tuple[str, int]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("pop"), st.integers(1, 3)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0)),
    ),
    max_size=25,
)


def apply(session: Session, model: list[str], op: Op, counter: list[int]) -> None:
    """Apply ``op`` to the session and to a plain list that models its view."""
    kind, n = op
    if kind == "append":
        texts = [f"m{counter[0] + i}" for i in range(n)]
        counter[0] += n
        session.append([Message.user(t) for t in texts])
        model.extend(texts)
    elif kind == "pop":
        for _ in range(n):
            newest = session.tail(1)
            if not newest:
                assert not model
                break
            assert newest[0].seq is not None
            session.retract([newest[0].seq])
            model.pop()
    elif kind == "clear":
        session.retract_all()
        model.clear()
    elif model:  # a checkpoint over all but the newest visible message
        visible = session.messages()
        if len(visible) > 1 and visible[-2].seq is not None:
            latest = session.latest_checkpoint()
            if latest is None or latest.covers_up_to < visible[-2].seq:
                summary = "## Current State\n- " + " ".join(m.text for m in visible[:-1])
                session.add_checkpoint(covers_up_to=visible[-2].seq, summary=summary)


def check_view(session: Session, model: list[str]) -> None:
    assert [m.text for m in session.messages()] == model
    for n in (1, 2, 5):
        assert [m.text for m in session.tail(n)] == model[::-1][:n]
    paged, before = [], None  # newest first, two at a time, as the builder pages
    while True:
        page = session.tail(2, before_seq=before)
        paged.extend(m.text for m in page)
        if len(page) < 2:
            break
        before = page[-1].seq
    assert paged == model[::-1]
    forward = [m.text for m in session.iter_messages(batch=3)]
    assert forward == model
    for strategy in ("greedy", "stable"):  # stable holds an older checkpoint when it can
        policy = ContextPolicy(trim_strategy=strategy)  # type: ignore[arg-type]
        window = build_context(session, model="gpt-4o", policy=policy)
        shown = [m.text for m in window.messages if not m.summary]
        assert shown == model[len(model) - len(shown) :]
        assert window.report.dropped_messages == 0
        summary = " ".join(m.text for m in window.messages if m.summary)
        for word in summary.replace("\n", " ").split():
            if word.startswith("m") and word[1:].isdigit():
                assert word in model, f"{word} was retracted but its summary shows"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_interleavings_match_a_list(operations: list[Op]) -> None:
    store = open_store("memory://")
    session = store.create_session(model="gpt-4o")
    model: list[str] = []
    counter = [0]
    audit: list[str] = []
    for op in operations:
        apply(session, model, op, counter)
        check_view(session, model)
        history = [m.id for m in session.messages(include_retracted=True)]
        assert history[: len(audit)] == audit  # the history only grows
        audit = history


@pytest.fixture(params=["sqlite", "postgres", "jsonl", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


def test_every_backend_agrees(store: Store) -> None:
    session = store.create_session(model="gpt-4o")
    model: list[str] = []
    counter = [0]
    script: list[Op] = [
        ("append", 4), ("checkpoint", 0), ("pop", 2), ("append", 3), ("clear", 0),
        ("append", 2), ("checkpoint", 0), ("append", 1), ("pop", 1), ("append", 2),
    ]  # fmt: skip
    for op in script:
        apply(session, model, op, counter)
        check_view(session, model)
    fresh = store.get_session(session.id)  # another handle, reading the memo index
    check_view(fresh, model)


def test_a_pop_under_the_checkpoint_retires_its_summary() -> None:
    session = open_store("memory://").create_session(model="gpt-4o")
    session.append([Message.user(f"m{i}") for i in range(6)])
    first = session.add_checkpoint(covers_up_to=5, summary="## Current State\n- m0 to m4")
    build_context(session, model="gpt-4o")  # a stable window now holds this checkpoint
    for seq in (6, 5):
        session.retract([seq])
    latest = session.latest_checkpoint()
    assert latest is not None and latest.id != first.id and latest.summary == ""
    assert not session.shows_checkpoint(first)
    window = build_context(session, model="gpt-4o")
    assert "m0 to m4" not in " ".join(m.text for m in window.messages)


def test_records_are_the_truth_and_the_index_rebuilds() -> None:
    session = open_store("memory://").create_session(model="gpt-4o")
    session.append([Message.user(f"m{i}") for i in range(5)])
    session.retract([5])
    session.retract([2, 3])
    session.append(Message.user("m5"))
    before = [m.text for m in session.messages()]
    assert before == ["m0", "m3", "m5"]
    records = [m for m in session.messages(include_retracted=True) if record_ranges(m)]
    assert [record_ranges(m) for m in records] == [[(5, 5)], [(2, 3)]]
    memo = session.get_memo()
    del memo[MEMO_KEY]
    session.store.set_memo(session.id, memo)  # the index lost (a crash, a hand edit)
    assert len(session.messages(include_retracted=True)) == 8
    # a read that meets the unindexed records hides them and writes the index back
    assert [m.text for m in session.messages()] == before
    assert MEMO_KEY in session.get_memo()
    session.store.set_memo(session.id, memo)
    rebuild_index(session)
    assert session.get_memo()[MEMO_KEY] == session.store.get_memo(session.id)[MEMO_KEY]
    assert [m.text for m in session.messages()] == before


def test_export_shows_the_view_and_the_audit_shows_all() -> None:
    session = open_store("memory://").create_session(model="gpt-4o")
    session.append([Message.user("keep"), Message.user("secret")])
    session.retract([2])
    exported = to_json(session.info.to_dict(), session.iter_messages(), [])
    assert "keep" in exported and "secret" not in exported
    assert "secret" in " ".join(m.text for m in session.messages(include_retracted=True))


def test_bad_retractions_are_refused_and_change_nothing() -> None:
    session = open_store("memory://").create_session()
    session.append([Message.user("a"), Message.user("b")])
    for bad in ([], [0], [3], [1.5], ["1"]):
        with pytest.raises(UsageError):
            session.retract(bad)  # type: ignore[arg-type]
    assert [m.text for m in session.messages()] == ["a", "b"]
    assert session.last_seq == 2
    assert session.retract_all() is not None
    assert session.retract_all() is None  # nothing left in view: nothing appended
    assert session.last_seq == 3


@given(st.lists(st.tuples(st.integers(1, 60), st.integers(0, 5)), max_size=12), st.integers(0, 70))
def test_index_answers_like_a_set(spans: list[tuple[int, int]], probe: int) -> None:
    records, seq = [], 100
    for lo, width in spans:
        seq += 1
        records.append((seq, tuple(merge_ranges([(lo, lo + width)]))))
    index = Retractions(tuple(records))
    hidden = {s for r, ranges in records for lo, hi in ranges for s in range(lo, hi + 1)}
    hidden |= {r for r, _ in records}
    assert index.hides(probe) == (probe in hidden)
    assert index.hidden_between(probe, 200) == len({h for h in hidden if probe < h <= 200})
    below = index.below(probe + 1)
    assert (
        all(s in hidden for s in range(below, probe + 1)) and (below - 1) not in hidden
    ) or below == probe + 1
    assert Retractions.from_memo({MEMO_KEY: index.to_memo()}) == index


def test_a_fork_inherits_retractions_up_to_its_fork_point() -> None:
    fork_session = pytest.importorskip("threadline.store.fork").fork_session
    parent = open_store("memory://").create_session(model="gpt-4o")
    parent.append([Message.user(f"m{i}") for i in range(5)])
    parent.retract([5])
    child = fork_session(parent)
    parent.retract([4])  # after the fork: the child still shows m3
    assert [m.text for m in parent.messages()] == ["m0", "m1", "m2"]
    assert [m.text for m in child.messages()] == ["m0", "m1", "m2", "m3"]
    child.append(Message.user("c0"))
    child.retract_all()
    child.append(Message.user("c1"))
    assert [m.text for m in child.messages()] == ["c1"]
    assert [m.text for m in child.tail(5)] == ["c1"]
    assert [m.text for m in parent.messages()] == ["m0", "m1", "m2"]


def test_the_cli_history_and_export_show_the_view(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from threadline.cli.app import app

    url = f"sqlite://{tmp_path / 'cli.db'}"
    store = open_store(url)
    session = store.create_session(id="cli-view", model="gpt-4o")
    session.append([Message.user("visible words"), Message.user("retracted words")])
    session.retract([2])
    store.close()
    runner = CliRunner()
    shown = runner.invoke(app, ["--store", url, "sessions", "history", "cli-view"])
    assert shown.exit_code == 0, shown.output
    assert "visible words" in shown.stdout and "retracted words" not in shown.stdout
    out = tmp_path / "export.json"
    exported = runner.invoke(
        app, ["--store", url, "sessions", "export", "cli-view", "--format", "json", "-o", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    text = out.read_text()
    assert "visible words" in text and "retracted words" not in text


def test_the_cli_counts_and_search_show_the_view(tmp_path: Path) -> None:
    """``sessions list`` / ``show`` count the messages in view (``--json`` gives the stored
    count too) and ``sessions search`` finds neither retracted messages nor records."""
    import json

    from typer.testing import CliRunner

    from threadline.cli.app import app

    url = f"sqlite://{tmp_path / 'cli.db'}"
    store = open_store(url)
    session = store.create_session(id="cli-count", model="gpt-4o")
    session.append([Message.user(f"kept {i}") for i in range(3)] + [Message.user("gone words")])
    session.retract([4])  # the record is seq 5
    store.close()
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, ["--store", url, *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    listing = json.loads(run("sessions", "list", "--json"))["items"][0]
    assert (listing["message_count"], listing["visible_count"]) == (5, 3)
    shown = json.loads(run("sessions", "show", "cli-count", "--json"))["session"]
    assert (shown["message_count"], shown["visible_count"]) == (5, 3)
    table = run("sessions", "list")
    assert " 3 " in table and " 5 " not in table
    details = run("sessions", "show", "cli-count")
    assert "Stored: 5 (2 retracted or records)" in details
    found = json.loads(run("sessions", "search", "gone", "--json"))
    assert found["items"] == [] and found["total"] == 0
    assert json.loads(run("sessions", "search", "retracted", "--json"))["total"] == 0
    assert json.loads(run("sessions", "search", "kept", "--json"))["total"] == 3


@given(spans=st.lists(st.tuples(st.integers(1, 12), st.integers(0, 3)), max_size=4))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_search_and_counts_agree_with_the_view(spans: list[tuple[int, int]]) -> None:
    """Whatever is retracted, search finds exactly the messages the view shows, and the
    count of the view is their number (the SQL rule and ``Retractions.hides`` agree)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for url in ("memory://", f"sqlite://{tmp}/prop.db"):
            check_search_and_count(open_store(url), spans)


def check_search_and_count(store: Store, spans: list[tuple[int, int]]) -> None:
    from threadline.store.retraction import visible_count

    try:
        session = store.create_session(model="gpt-4o")
        session.append([Message.user(f"word{i} common") for i in range(12)])
        for lo, extra in spans:
            session.retract(range(lo, min(lo + extra, session.last_seq) + 1))
        view = [m.seq for m in session.messages()]
        page = store.search("common", limit=100)
        assert sorted(h.seq for h in page) == view and page.total == len(view), store.url
        assert visible_count(session.refresh()) == len(view), store.url
    finally:
        store.close()


def test_an_applications_memo_never_unretracts() -> None:
    """``Session.set_memo`` replaces the application's keys and keeps the store's own
    (``threadline.``), so writing a memo cannot bring a retracted message back."""
    store = open_store("memory://")
    session = store.create_session(model="gpt-4o")
    session.append([Message.user("my password is hunter2"), Message.assistant("ok")])
    session.retract([1])
    session.set_memo({"turns": 0})
    assert [m.text for m in session.messages()] == ["ok"]
    assert store.search("hunter2").total == 0
    assert session.get_memo()["turns"] == 0


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_record_whose_index_entry_was_lost_is_healed_by_the_next_read(
    url: str, tmp_path: Path
) -> None:
    """A process that dies between appending a record and indexing it leaves the record
    in view: the next view read that meets it hides it (and its ranges) and writes the
    index and the superseding checkpoint the retraction would have."""
    store = open_store(f"sqlite:///{tmp_path}/s.db" if url == "sqlite" else url)
    session = store.create_session(model="gpt-4o")
    session.append([Message.user("my password is hunter2"), Message.assistant("ok")])
    session.add_checkpoint(covers_up_to=2, summary="the user shared hunter2")
    session.append(retraction.record_message([(1, 1)]))  # as if the process died here
    fresh = store.get_session(session.id)
    assert [m.text for m in fresh.tail(10)] == ["ok"]
    assert retraction.MEMO_KEY in fresh.get_memo()
    assert store.search("hunter2").total == 0
    latest = fresh.latest_checkpoint()
    assert latest is not None and latest.covers_up_to == 3 and latest.summary == ""
