"""Failures are open work until a later run of the same command, however written, passes.

Records are shaped like Claude Code's Bash results (a failing run whose ``| tail``
hid the exit status carries no ``is_error``: its output's verdict says it failed)
and Codex's ``exec_command`` output (``Process exited with code N``).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.compaction.progress import failed_case, failing_checks, verdict_ok
from threadline.compaction.reconcile import reconcile
from threadline.compaction.snapshot import Snapshot, SummaryResult, parse
from threadline.compaction.trail import build_trail, command_proper, settles
from threadline.messages import Message, ToolCall

ROOT = "/Users/dev/work/cli"

GO_FAIL = (
    "[test:integration] $ go test -tags=integration ./cmd/app/integration_test\u2026\n"
    "=== RUN   TestMidSessionCommit_FromTranscript\n"
    "    mid_session_commit_test.go:87: expected a trailer, got none\n"
    "--- PASS: TestMidSessionCommit_NoTrailer (0.68s)\n"
    "--- FAIL: TestMidSessionCommit_FromTranscript (0.68s)\n"
    "FAIL\n"
    "FAIL\texample.io/app/cmd/app/integration_test\t1.734s\n"
    "[test:integration] ERROR task failed"
)
GO_PASS = "ok  \texample.io/app/cmd/app/integration_test\t1.901s"


def session(*steps: tuple[str, str], user: str = "add the mid-session test") -> list[Message]:
    """A user request, then Bash calls ``(command, output)`` each answered."""
    out = [Message.user(user, metadata={"cwd": ROOT})]
    for i, (command, output) in enumerate(steps):
        call = ToolCall(id=f"toolu_{i:02d}", name="Bash", arguments={"command": command})
        out += [
            Message.assistant("", tool_calls=[call]),
            Message.tool(output, tool_call_id=call.id, name="Bash"),
        ]
    for i, m in enumerate(out, 1):
        m.seq = i
    return out


def pending(messages: list[Message], cut: int) -> list[str]:
    """Pending Tasks of a snapshot covering ``messages[:cut]``, the rest kept verbatim."""
    trail = build_trail(messages[:cut])
    later = trail.copy().extend(messages[cut:])
    empty = SummaryResult.counted(Snapshot().render(), Snapshot(), [], summarizer="test")
    text = reconcile(empty, trail, later=later, max_words=600).text
    return [b.text for b in parse(text).pending_tasks]


RUN = "mise run test:integration -- -run TestMidSessionCommit -v 2>&1 | tail -100"


def test_a_go_fail_verdict_is_no_pass_and_names_the_failed_test() -> None:
    assert not verdict_ok("FAIL\texample.io/app/cmd/app/integration_test\t1.734s")
    assert not verdict_ok("FAILED tests/test_a.py::test_x - AssertionError")
    assert verdict_ok(GO_PASS) and verdict_ok("59 tests, 0 failures")
    assert failed_case(GO_FAIL) == "--- FAIL: TestMidSessionCommit_FromTranscript (0.68s)"
    assert failed_case(GO_PASS) is None


def test_a_failing_check_in_the_kept_tail_is_pending_not_none() -> None:
    messages = session(("go build ./...", ""), (RUN, GO_FAIL))
    lines = pending(messages, cut=3)  # the summary ends after the build
    assert len(lines) == 1 and "TestMidSessionCommit_FromTranscript" in lines[0]
    assert "kept below" in lines[0] and "#5" in lines[0]


def test_a_failing_check_at_the_end_of_the_covered_range_is_pending() -> None:
    messages = session((RUN, GO_FAIL), ("git status --short", " M hooks.go"))
    lines = pending(messages, cut=len(messages))
    assert any("failed at #3" in line and "kept below" not in line for line in lines)


def test_a_later_pass_written_differently_settles_it() -> None:
    again = f"cd {ROOT} && timeout 120 mise run test:integration -- -v -run TestMidSessionCommit"
    messages = session((RUN, GO_FAIL), (again, GO_PASS))
    assert failing_checks(build_trail(messages).progress) == []
    assert not any("Make " in line for line in pending(messages, cut=3))


def test_a_pass_of_another_target_does_not_settle_it() -> None:
    other = "mise run test:integration -- -run TestOtherThing -v"
    messages = session((RUN, GO_FAIL), (other, GO_PASS))
    assert [c.seq for c in failing_checks(build_trail(messages).progress)] == [3]


def test_codex_exit_status_failure_settled_by_a_wrapped_rerun() -> None:
    failed = (
        "Chunk ID: 4c2cbb\nWall time: 2.1s\nProcess exited with code 1\nOutput:\n1 failed, 3 passed"
    )
    clean = "Chunk ID: 9a1f00\nWall time: 2.0s\nProcess exited with code 0\nOutput:\n4 passed"
    messages = session(
        ("pytest tests/test_a.py -x", failed),
        ("PYTHONPATH=src python -m pytest -q tests/test_a.py 2>&1 | tail -5", clean),
    )
    trail = build_trail(messages)
    assert trail.failures == [] and failing_checks(trail.progress) == []


def test_command_proper_drops_what_only_bounds_or_hosts_a_command() -> None:
    assert command_proper(["timeout", "-s", "KILL", "5m", "go", "test"]) == ["go", "test"]
    assert command_proper(["python3.12", "-m", "pytest", "-q"]) == ["pytest", "-q"]
    assert command_proper(["timeout", "60"]) == []


_WORD = st.from_regex(r"[a-z][a-z0-9_]{1,6}", fullmatch=True)
_TARGET = st.from_regex(r"(?:\./)?[a-z]{2,6}/[a-z_]{2,8}(?:\.py|/\.\.\.)", fullmatch=True)
_FLAG = st.sampled_from(["-v", "-q", "-x", "--count=1", "-race", "--no-header"])


@st.composite
def _spelling(draw: st.DrawFn, tool: list[str], target: str) -> str:
    """One way of writing a run of ``tool target``: options anywhere, wrappers, plumbing."""
    flags = draw(st.lists(_FLAG, max_size=3))
    words = [*tool, target, *flags]
    at = draw(st.integers(0, len(flags)))
    words = [*tool, *flags[:at], target, *flags[at:]]
    line = " ".join(words)
    if draw(st.booleans()):
        line = f"timeout {draw(st.integers(5, 900))} {line}"
    if draw(st.booleans()):
        line = f"{draw(_WORD).upper()}=1 {line}"
    if draw(st.booleans()):
        line = f"cd /repo/{draw(_WORD)} && {line}"
    if draw(st.booleans()):
        line += f" 2>&1 | tail -{draw(st.integers(5, 200))}"
    return line


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([["go", "test"], ["pytest"], ["cargo", "test"], ["npx", "vitest", "run"]]),
    _TARGET,
    _TARGET,
    st.data(),
)
def test_settling_ignores_spelling_but_not_the_target(
    tool: list[str], target: str, other: str, data: st.DataObject
) -> None:
    failure = data.draw(_spelling(tool, target))
    assert settles(data.draw(_spelling(tool, target)), failure)
    if other != target:
        assert not settles(data.draw(_spelling(tool, other)), failure)
