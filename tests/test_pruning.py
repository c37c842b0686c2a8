"""Tool-result pruning in the view: the seed's eligibility, placeholders, protection, stickiness."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import ContextPolicy, Message, ToolCall, build_context, open_store
from threadline.store.protocol import Session
from threadline.tokens import counter_for

BIG = 60_000  # characters per tool result: over the seed's 50,000 eligibility line


def _body(i: int, size: int) -> str:
    lines = "".join(f"{i}:{j} value={j * 7919 % 10007} status=ok\n" for j in range(size // 30))
    return f"HEAD-{i} first line of result {i}\n{lines}TAIL-{i}"


def _session(results: int, size: int = BIG, tool: str = "read_file", prose: int = 0) -> Session:
    """``results`` turns, each reading one file of ``size`` characters; ``prose`` characters
    of user text per turn that no pruning may touch."""
    s = open_store("memory://").create_session(model="gpt-4o")
    for i in range(results):
        call = ToolCall(id=f"c{i}", name=tool, arguments={"path": f"f{i}.py"})
        words = " ".join(f"word{j % 97}" for j in range(prose // 7))
        s.append(
            [
                Message.user(f"read file {i} {words}".strip()),
                Message.assistant("", tool_calls=[call]),
                Message.tool(_body(i, size), tool_call_id=call.id, name=tool),
                Message.assistant(f"read {i}"),
            ]
        )
    return s


def _exact_total(s: Session) -> int:
    """The history's exact size: windows here are sized against it (a session's
    ``total_tokens`` for gpt-4o adds the estimates appends store, which err high)."""
    counter = counter_for("gpt-4o")
    return sum(counter.count_message(m) for m in s.messages())


def _results(w_messages: list[Message]) -> dict[str, str]:
    return {m.tool_call_id or "": m.text for m in w_messages if m.role == "tool"}


def test_results_under_50000_characters_are_never_pruned() -> None:
    s = _session(30, size=20_000)  # 600k characters in all, but no single result is eligible
    policy = ContextPolicy(context_limit=int(_exact_total(s) / 0.9), response_reserve=1000)
    w = build_context(s, policy=policy)
    assert w.report.pruned == []
    stored = {m.tool_call_id: m.text for m in s.messages() if m.role == "tool"}
    for call_id, text in _results(w.messages).items():
        assert text == stored[call_id]


def test_a_short_confirmation_keeps_its_path_beside_big_results() -> None:
    s = _session(6)
    call = ToolCall(id="w1", name="Write", arguments={"file_path": "/repo/app/new.py"})
    s.append(
        [
            Message.user("create it"),
            Message.assistant("", tool_calls=[call]),
            Message.tool("File created successfully at: /repo/app/new.py", tool_call_id="w1"),
        ]
    )
    for i in range(4):
        s.append([Message.user(f"q{i}"), Message.assistant(f"a{i}")])
    policy = ContextPolicy(context_limit=int(_exact_total(s) / 0.9), response_reserve=1000)
    w = build_context(s, policy=policy)
    assert w.report.pruned
    assert _results(w.messages)["w1"] == "File created successfully at: /repo/app/new.py"


def test_soft_trim_keeps_first_and_last_1500_characters() -> None:
    s = _session(8)
    # the history fills 40% of the window: past the soft line, under the hard one
    policy = ContextPolicy(context_limit=int(_exact_total(s) / 0.4), response_reserve=1000)
    w = build_context(s, policy=policy)
    results = _results(w.messages)
    soft = [p for p in w.report.pruned if p["action"] == "soft"]
    assert soft, w.report
    stored = next(m.text for m in s.messages() if m.tool_call_id == "c0")
    trimmed = results["c0"]
    assert trimmed.startswith(stored[:1500]) and trimmed.endswith(stored[-1500:])
    assert "characters of this tool result truncated" in trimmed
    assert len(trimmed) < 3_100
    # results answering the last 3 assistant messages ("read 7", call 7, "read 6") stay whole
    assert results["c7"].endswith("TAIL-7") and len(results["c7"]) == len(_body(7, BIG))
    assert len(results["c6"]) < 3_100
    assert all(len(m.text) == len(_body(0, BIG)) for m in s.messages() if m.role == "tool")


def test_hard_clear_placeholder_names_tool_first_line_and_exact_size() -> None:
    s = _session(12, prose=120_000)  # soft trims alone cannot bring it under half the window
    limit = int(_exact_total(s) / 0.9)
    w = build_context(s, policy=ContextPolicy(context_limit=limit, response_reserve=1000))
    hard = [p for p in w.report.pruned if p["action"] == "hard"]
    assert hard
    stored = {m.seq: m for m in s.messages()}
    by_seq = {m.seq: m for m in w.messages if m.seq is not None}
    for p in hard:
        original = stored[p["seq"]]
        text = by_seq[p["seq"]].text
        assert p["chars_before"] == len(original.text)
        assert f"{len(original.text):,} characters" in text
        assert "of read_file" in text
        assert original.text.splitlines()[0] in text
        assert f"stays stored as message #{p['seq']}" in text


def test_hard_after_soft_reports_the_stored_size() -> None:
    """A result soft-trimmed in one build and cleared in a later one: the size is the stored one."""
    s = _session(8)
    policy = ContextPolicy(context_limit=int(_exact_total(s) / 0.4), response_reserve=1000)
    first = build_context(s, policy=policy)
    soft = {p["seq"] for p in first.report.pruned if p["action"] == "soft"}
    assert soft
    for i in range(8, 14):
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"f{i}.py"})
        s.append(
            [
                Message.user(f"read file {i}"),
                Message.assistant("", tool_calls=[call]),
                Message.tool(_body(i, BIG), tool_call_id=call.id, name="read_file"),
                Message.assistant(f"read {i}"),
            ]
        )
    w = build_context(s, policy=policy)
    stored = {m.seq: len(m.text) for m in s.messages()}
    for p in w.report.pruned:
        assert p["chars_before"] == stored[p["seq"]]
        if p["action"] == "hard":
            text = next(m.text for m in w.messages if m.seq == p["seq"])
            assert f"{stored[p['seq']]:,} characters" in text


def test_protected_tools_are_never_pruned() -> None:
    s = _session(8, tool="skill")
    limit = int(_exact_total(s) / 0.4)
    w = build_context(s, policy=ContextPolicy(context_limit=limit, protected_tools=("skill",)))
    assert w.report.pruned == []


def test_aggressive_mode_lowers_the_eligibility_line() -> None:
    s = _session(6, size=6_000)  # each result under 50k: not eligible normally
    policy = ContextPolicy(context_limit=int(_exact_total(s) / 0.25))
    assert build_context(s, policy=policy).report.pruned == []
    assert build_context(s, policy=policy, aggressive=True).report.pruned != []


def test_decisions_are_sticky_across_turns() -> None:
    s = _session(10)
    policy = ContextPolicy(context_limit=int(_exact_total(s) / 0.6), response_reserve=1000)
    first = build_context(s, policy=policy)
    pruned_first = {p["seq"]: p["action"] for p in first.report.pruned}
    assert pruned_first
    for i in range(5):
        s.append([Message.user(f"short question {i}"), Message.assistant("short answer")])
        w = build_context(s, policy=policy)
        now = {p["seq"]: p["action"] for p in w.report.pruned}
        for seq, action in pruned_first.items():
            if any(m.seq == seq for m in w.messages):
                assert now.get(seq) == action, "a pruning decision flipped back"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(
        st.sampled_from([124, 3_000, 21_156, 49_999, 50_000, 80_000]), min_size=1, max_size=14
    ),
    fill=st.floats(min_value=0.2, max_value=1.5),
    aggressive=st.booleans(),
)
def test_property_only_eligible_results_are_pruned_and_sizes_are_exact(
    sizes: list[int], fill: float, aggressive: bool
) -> None:
    """Whatever the sizes and the pressure: a result under the line is sent as stored, and
    every pruned result reports its exact stored size."""
    s = open_store("memory://").create_session(model="gpt-4o")
    for i, size in enumerate(sizes):
        call = ToolCall(id=f"c{i}", name="bash", arguments={"command": f"cat log{i}"})
        body = ("x" * 79 + "\n") * (size // 80) + "y" * (size % 80)
        s.append(
            [
                Message.user(f"q{i}"),
                Message.assistant("", tool_calls=[call]),
                Message.tool(body, tool_call_id=call.id, name="bash"),
                Message.assistant(f"a{i}"),
            ]
        )
    limit = max(2_000, int(_exact_total(s) / fill))
    policy = ContextPolicy(context_limit=limit, response_reserve=min(4_096, limit // 4))
    line = policy.prune_aggressive_min_chars if aggressive else policy.prune_min_chars
    try:
        w = build_context(s, policy=policy, aggressive=aggressive)
    except Exception:  # an overflow of protected messages is not this test's subject
        return
    stored = {m.seq: m.text for m in s.messages()}
    for p in w.report.pruned:
        assert p["chars_before"] == len(stored[p["seq"]]) >= line
    truncated = {t["seq"] for t in w.report.truncations}  # emergency truncation, not pruning
    for m in w.messages:
        if m.role == "tool" and m.seq not in truncated and m.seq is not None:
            if len(stored[m.seq]) >= line:
                continue
            assert m.text == stored[m.seq]
