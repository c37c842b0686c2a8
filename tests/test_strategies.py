"""Pluggable strategies: analyzer -> executor, memo persistence, append-only refusal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conformance.backends import BACKENDS, clean_store
from threadline import Message, Session, ToolCall, UsageError, build_context, open_store
from threadline.context.strategies import (
    MAX_LENGTH_SETTING,
    PAGE_SIZE,
    SIMPLE_CUT,
    ExecutorResult,
    FullContext,
    StrategyRegistry,
    default_registry,
    text_length,
)
from threadline.store.protocol import Store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every backend: the memo is each store's own per-session document."""
    yield from clean_store(request.param, tmp_path)


def make_session(store: Store, n: int) -> Session:
    s = store.create_session(model="gpt-4o")
    s.append(
        [Message.user(f"q{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(n)]
    )
    return s


def keep_last_six(
    full: FullContext, window: list[Message], memo: dict[str, Any], settings: Any
) -> ExecutorResult:
    memo["runs"] = memo.get("runs", 0) + 1
    return None, list(window[-6:]), memo


def over_six(
    full: FullContext, window: list[Message], memo: dict[str, Any], settings: Any
) -> str | None:
    return "keep_last_six" if len(window) > 6 else None


def test_seed_example_flow_and_memo_persists(store: Store) -> None:
    s = make_session(store, 10)
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(over_six)
    reg.register_executor("keep_last_six", keep_last_six)
    run = reg.run(s, s.messages())
    assert run.strategy == "keep_last_six"
    assert [m.text for m in run.messages] == [
        f"{'q' if i % 2 == 0 else 'a'}{i}" for i in range(4, 10)
    ]
    assert s.get_memo() == {"runs": 1}
    reg.run(s, s.messages())
    assert store.get_session(s.id).get_memo() == {"runs": 2}  # stored, not held in memory
    assert len(s.messages()) == 10  # the window changed; the history did not


def test_no_strategy_leaves_everything_alone(store: Store) -> None:
    s = make_session(store, 4)
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(over_six)
    reg.register_executor("keep_last_six", keep_last_six)
    msgs = s.messages()
    run = reg.run(s, msgs)
    assert run.strategy is None and run.messages == msgs and run.memo is None
    assert s.get_memo() == {}


def test_analyzers_run_in_order_first_name_wins(store: Store) -> None:
    s = make_session(store, 8)
    order: list[str] = []
    reg = StrategyRegistry(defaults=False)

    def first(*a: Any) -> None:
        order.append("first")
        return None

    def second(*a: Any) -> str:
        order.append("second")
        return "noop"

    def third(*a: Any) -> str:
        order.append("third")
        return "never"

    for fn in (first, second, third):
        reg.register_analyzer(fn)
    reg.register_executor("noop", lambda *a: (None, None, None))
    assert reg.run(s, s.messages()).strategy == "noop"
    assert order == ["first", "second"]


def test_unknown_strategy_name_is_a_clear_error(store: Store) -> None:
    s = make_session(store, 2)
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(lambda *a: "missing")
    with pytest.raises(UsageError, match="no executor is registered under that name"):
        reg.run(s, s.messages())


def test_executor_may_append_to_the_full_context(store: Store) -> None:
    s = make_session(store, 700)
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(lambda *a: "note")
    seen: list[FullContext] = []

    def note(full: FullContext, window: list[Message], memo: Any, settings: Any) -> ExecutorResult:
        seen.append(full)
        assert full[-1].text == "a699" and full[0].text == "q0"
        appended = full.with_appended([Message.user("[note] limits applied", synthetic=True)])
        return appended, None, None

    reg.register_executor("note", note)
    run = reg.run(s, s.messages()[-5:])
    assert [m.seq for m in run.appended] == [701]
    assert s.refresh().last_seq == 701 and s.messages()[-1].text == "[note] limits applied"
    # appending with ``with_appended`` never read the whole history: two pages at most
    assert seen[0].messages_read <= 2 * PAGE_SIZE


def test_plain_list_append_is_checked_and_accepted(store: Store) -> None:
    s = make_session(store, 6)
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(lambda *a: "copy")
    reg.register_executor(
        "copy", lambda full, w, m, st: ([*full, Message.assistant("extra")], None, None)
    )
    run = reg.run(s, s.messages())
    assert [m.text for m in run.appended] == ["extra"]
    assert s.refresh().last_seq == 7


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda full: list(full)[1:], id="drop-first"),
        pytest.param(lambda full: list(full)[:-1], id="drop-last"),
        pytest.param(
            lambda full: [full[0].model_copy(update={"content": "rewritten"}), *list(full)[1:]],
            id="rewrite",
        ),
        pytest.param(lambda full: [full[1], full[0], *list(full)[2:]], id="reorder"),
        pytest.param(lambda full: [*list(full), full[0]], id="re-append-stored"),
    ],
)
def test_executor_that_changes_history_is_refused(store: Store, mutate: Any) -> None:
    s = make_session(store, 6)
    before = [m.model_dump() for m in s.messages()]
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(lambda *a: "evil")
    reg.register_executor("evil", lambda full, w, m, st: (mutate(full), None, {"x": 1}))
    with pytest.raises(UsageError, match=r"append-only|already stored"):
        reg.run(s, s.messages())
    assert [m.model_dump() for m in s.messages()] == before
    assert s.get_memo() == {}  # nothing was applied


def test_reserved_memo_keys_survive_an_executor(store: Store) -> None:
    s = make_session(store, 3)
    s.set_memo({"threadline.compaction": {"token": "t"}, "mine": 1})
    reg = StrategyRegistry(defaults=False)
    reg.register_analyzer(lambda *a: "wipe")
    reg.register_executor(
        "wipe", lambda full, w, m, st: (None, None, {"threadline.compaction": None, "other": 2})
    )
    run = reg.run(s, s.messages())
    assert s.get_memo() == {"threadline.compaction": {"token": "t"}, "other": 2}
    assert run.memo == s.get_memo()


def test_simple_cut_default_keeps_newest_whole_units_under_max_length(store: Store) -> None:
    s = store.create_session(model="gpt-4o")
    calls = [ToolCall(id="c1", name="grep", arguments={"q": "x" * 50})]
    s.append(
        [
            Message.user("u" * 100),
            Message.assistant("", tool_calls=calls),
            Message.tool("r" * 100, tool_call_id="c1", name="grep"),
            Message.user("v" * 40),
            Message.assistant("w" * 40),
        ]
    )
    reg = default_registry()
    w = build_context(s, system_prompt="system prompt")
    run = reg.run(s, w, {MAX_LENGTH_SETTING: 300})
    assert run.strategy == SIMPLE_CUT
    roles = [m.role for m in run.messages]
    assert roles[0] == "system"
    # the tool chain (calls + result ~ 170 chars) fits with the last two; the first user does not
    assert roles[1:] == ["assistant", "tool", "user", "assistant"]
    assert text_length(run.messages) <= 300
    assert run.window is not None and run.window.messages == run.messages
    assert run.window.tokens < w.tokens
    assert any("simple_cut" in n for n in run.window.report.notes)
    # under the limit: the analyzer names nothing
    assert reg.run(s, w, {MAX_LENGTH_SETTING: 10_000}).strategy is None
    # without the setting: nothing either
    assert reg.run(s, w).strategy is None


def test_simple_cut_never_splits_a_chain_and_keeps_the_newest_unit(store: Store) -> None:
    s = store.create_session(model="gpt-4o")
    calls = [ToolCall(id=f"c{k}", name="grep") for k in range(3)]
    s.append(
        [
            Message.user("go"),
            Message.assistant("", tool_calls=calls),
            *[Message.tool("r" * 500, tool_call_id=c.id, name="grep") for c in calls],
        ]
    )
    run = default_registry().run(s, s.messages(), {MAX_LENGTH_SETTING: 100})
    assert [m.role for m in run.messages] == ["assistant", "tool", "tool", "tool"]


def test_full_context_is_lazy(store: Store) -> None:
    s = make_session(store, 3 * PAGE_SIZE + 10)
    full = FullContext(s)
    assert len(full) == 3 * PAGE_SIZE + 10 and full.messages_read == 0
    assert full[-1].seq == 3 * PAGE_SIZE + 10
    assert [m.seq for m in full[-3:]] == [3 * PAGE_SIZE + 8, 3 * PAGE_SIZE + 9, 3 * PAGE_SIZE + 10]
    assert full.messages_read == 10  # only the last, short page
    assert full[5].seq == 6
    assert full.messages_read == 10 + PAGE_SIZE
    with pytest.raises(IndexError):
        full[len(full)]
    s.append(Message.user("later"))
    assert len(full) == 3 * PAGE_SIZE + 10  # fixed when made
    assert sum(1 for _ in full) == 3 * PAGE_SIZE + 10


def test_plus_operator_appends_lazily(store: Store) -> None:
    s = make_session(store, 4)
    full = FullContext(s)
    both = full + [Message.user("x")]  # noqa: RUF005 - the lazy form is the point
    assert len(both) == 5 and both[-1].text == "x" and both[0].text == "q0"
    assert full.messages_read == 4  # one short page: the first and only


_INDEXES = st.integers(-12, 12)
_SLICES = st.builds(
    slice, st.none() | _INDEXES, st.none() | _INDEXES, st.none() | st.sampled_from([-2, -1, 1, 3])
)


@given(stored=st.integers(1, 5), extra=st.integers(0, 3), index=_INDEXES | _SLICES)
def test_lazy_contexts_index_like_a_list(stored: int, extra: int, index: int | slice) -> None:
    """FullContext and FullContext + extra answer any index or slice as the same list."""
    store = open_store("memory://")
    full = FullContext(make_session(store, stored))
    both = full + [Message.user(f"x{i}") for i in range(extra)]
    for lazy in (full, both):
        texts = [m.text for m in lazy]
        try:
            expected: Any = texts[index]
        except IndexError:
            with pytest.raises(IndexError, match="index out of range"):
                lazy[index]
            continue
        got = lazy[index]
        assert (
            [m.text for m in got] if isinstance(got, list) else got.text  # type: ignore[union-attr]
        ) == expected
