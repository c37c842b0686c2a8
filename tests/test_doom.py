"""Doom-loop detection: identical calls, cycles, what the warning says, once per streak."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline import Message, ToolCall, open_store
from threadline.agent.doom import (
    METADATA_KEY,
    WARNING_PREFIX,
    DoomLoopDetector,
    call_signature,
    describe_call,
    find_repetition,
)

_ids = itertools.count()


def step(name: str, **arguments: Any) -> list[Message]:
    """One assistant message calling ``name`` and its result."""
    call = ToolCall(id=f"c{next(_ids)}", name=name, arguments=arguments)
    return [
        Message.assistant(tool_calls=[call]),
        Message.tool("ok", tool_call_id=call.id, name=name),
    ]


READ = {"name": "read_file", "path": "a.py"}
TEST = {"name": "run_tests"}
EDIT = {"name": "edit", "path": "a.py", "line": 3}
GREP = {"name": "grep", "q": "TODO"}


def steps(*specs: dict[str, Any]) -> list[Message]:
    out: list[Message] = [Message.user("fix the bug")]
    for spec in specs:
        args = {k: v for k, v in spec.items() if k != "name"}
        out += step(spec["name"], **args)
    return out


detector = DoomLoopDetector()


def test_three_identical_calls_warn() -> None:
    assert detector.check(steps(READ, READ)) is None
    warning = detector.check(steps(READ, READ, READ))
    assert warning is not None
    assert warning.kind == "identical"
    assert warning.calls == 3
    assert warning.text.startswith(WARNING_PREFIX)
    assert "read_file(path=a.py)" in warning.text
    assert "3 times in a row" in warning.text


def test_argument_order_does_not_matter_but_values_do() -> None:
    msgs = [Message.user("go")]
    msgs += step("f", a=1, b=2) + step("f", b=2, a=1) + step("f", a=1, b=2)
    assert detector.check(msgs) is not None
    msgs = [Message.user("go")]
    msgs += step("f", a=1) + step("f", a=2) + step("f", a=1)
    assert detector.check(msgs) is None


def test_two_call_cycle_is_described() -> None:
    assert detector.check(steps(READ, TEST, READ, TEST, READ)) is None
    warning = detector.check(steps(READ, TEST, READ, TEST, READ, TEST))
    assert warning is not None
    assert warning.kind == "cycle"
    assert warning.repeats == 3
    assert warning.pattern == ("read_file(path=a.py)", "run_tests()")
    assert "the last 6 tool calls repeat the cycle read_file(path=a.py) -> run_tests() 3 times" in (
        warning.text.lower()
    )


def test_three_call_cycle() -> None:
    warning = detector.check(steps(GREP, READ, EDIT, GREP, READ, EDIT, GREP, READ, EDIT))
    assert warning is not None
    assert warning.kind == "cycle"
    assert warning.pattern == ("grep(q=TODO)", "read_file(path=a.py)", "edit(line=3, path=a.py)")


def test_no_false_positive_on_distinct_or_twice_repeated_work() -> None:
    assert detector.check(steps(GREP, READ, EDIT, TEST)) is None
    assert detector.check(steps(GREP, READ, EDIT, TEST, GREP, READ, EDIT, TEST)) is None
    assert detector.check(steps(READ, TEST, READ, EDIT, READ, TEST)) is None


def test_a_user_message_starts_a_new_count() -> None:
    msgs = [*steps(READ, READ), Message.user("again please"), *steps(READ)[1:]]
    assert detector.check(msgs) is None
    # a synthetic notice is not the user speaking
    msgs = [*steps(READ, READ), Message.user("[note]", synthetic=True), *steps(READ)[1:]]
    assert detector.check(msgs) is not None


def test_once_per_streak_and_again_for_a_new_streak() -> None:
    msgs = steps(READ, READ, READ)
    first = detector.check(msgs)
    assert first is not None
    notice = first.message()
    assert notice.role == "user" and notice.synthetic
    assert notice.metadata[METADATA_KEY]["key"] == first.key
    msgs.append(notice)
    assert detector.check(msgs) is None
    msgs += step("read_file", path="a.py")
    assert detector.check(msgs) is None  # the same streak, grown
    msgs += step("grep", q="x")
    msgs += step("read_file", path="a.py") * 1
    msgs += step("read_file", path="a.py") + step("read_file", path="a.py")
    again = detector.check(msgs)
    assert again is not None and again.key != first.key


def test_parallel_calls_in_one_message_count_in_order() -> None:
    calls = [ToolCall(id=f"p{i}", name="read_file", arguments={"path": "a.py"}) for i in range(3)]
    msgs = [Message.user("go"), Message.assistant(tool_calls=calls)]
    warning = detector.check(msgs)
    assert warning is not None and warning.calls == 3


def test_raw_arguments_are_compared_verbatim() -> None:
    bad = ToolCall.from_json_arguments(id="x", name="f", arguments="{oops")
    assert call_signature(bad) == "f\x00{oops"
    assert describe_call(bad) == "f({oops)"


def test_long_values_are_shortened() -> None:
    call = ToolCall(id="x", name="write", arguments={"text": "y" * 500})
    assert len(describe_call(call)) < 60


def test_thresholds_are_configurable() -> None:
    strict = DoomLoopDetector(identical_threshold=2, cycle_repeats=2)
    assert strict.check(steps(READ, READ)) is not None
    assert strict.check(steps(READ, TEST, READ, TEST)) is not None
    with pytest.raises(ValueError):
        DoomLoopDetector(identical_threshold=1)


def test_check_session_reads_the_store() -> None:
    session = open_store("memory://").create_session(agent="t")
    session.append(steps(TEST, TEST, TEST))
    warning = detector.check_session(session)
    assert warning is not None and warning.kind == "identical"


@given(st.lists(st.sampled_from("ABC"), max_size=30))
def test_every_reported_repetition_is_real(sigs: list[str]) -> None:
    """Soundness: a reported streak has its period throughout, enough repeats, and a
    cycle's pattern is not itself a shorter repetition."""
    rep = find_repetition(sigs)
    if rep is None:
        return
    streak = sigs[rep.start :]
    assert len(streak) == rep.length
    assert all(streak[i] == streak[i + rep.period] for i in range(len(streak) - rep.period))
    assert rep.repeats >= 3  # both default thresholds
    pattern = streak[: rep.period]
    assert rep.period == 1 or len(set(pattern)) > 1
    assert rep.start == 0 or sigs[rep.start - 1] != sigs[rep.start - 1 + rep.period]


@given(st.lists(st.sampled_from("ABCD"), max_size=20), st.sampled_from("ABCD"))
def test_any_run_of_three_identical_calls_is_found(prefix: list[str], tail: str) -> None:
    rep = find_repetition([*prefix, tail, tail, tail])
    assert rep is not None
    assert rep.period == 1
    assert rep.length >= 3


@given(
    st.lists(st.sampled_from("ABCDEFG"), max_size=10),
    st.lists(st.sampled_from("XYZW"), min_size=2, max_size=4, unique=True),
)
def test_any_cycle_repeated_three_times_is_found(prefix: list[str], cycle: list[str]) -> None:
    rep = find_repetition([*prefix, *cycle, *cycle, *cycle])
    assert rep is not None
    assert rep.period == len(cycle)
    assert rep.repeats >= 3
