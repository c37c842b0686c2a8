"""Tool-result pruning in the view: thresholds, protection, stickiness."""

from __future__ import annotations

from threadline import ContextPolicy, Message, ToolCall, build_context, open_store
from threadline.store.base import Session

BIG = 20_000  # characters per tool result


def _session(results: int, size: int = BIG, tool: str = "read_file") -> Session:
    s = open_store("memory://").create_session(model="gpt-4o")
    for i in range(results):
        call = ToolCall(id=f"c{i}", name=tool, arguments={"path": f"f{i}.py"})
        lines = "".join(f"{i}:{j} value={j * 7919 % 10007} status=ok\n" for j in range(size // 30))
        body = f"HEAD-{i}\n{lines}TAIL-{i}"
        s.append(
            [
                Message.user(f"read file {i}"),
                Message.assistant("", tool_calls=[call]),
                Message.tool(body, tool_call_id=call.id, name=tool),
                Message.assistant(f"read {i}"),
            ]
        )
    return s


def _results(w_messages: list[Message]) -> dict[str, str]:
    return {m.tool_call_id or "": m.text for m in w_messages if m.role == "tool"}


def test_no_pruning_below_the_prunable_minimum() -> None:
    s = _session(2)  # 40k characters < 50k
    w = build_context(s, policy=ContextPolicy(context_limit=100_000))
    assert w.report.pruned == []


def test_soft_trim_keeps_head_and_tail_and_spares_recent_turns() -> None:
    s = _session(8)
    # the history fills 40% of the window: past the soft line, under the hard one
    policy = ContextPolicy(context_limit=int(s.total_tokens / 0.4), response_reserve=1000)
    w = build_context(s, policy=policy)
    results = _results(w.messages)
    soft = [p for p in w.report.pruned if p["action"] == "soft"]
    assert soft, w.report
    trimmed = results["c0"]
    assert trimmed.startswith("HEAD-0") and trimmed.endswith("TAIL-0")
    assert "characters of this tool result truncated" in trimmed
    assert len(trimmed) < 3_200
    # results answering the last 3 assistant messages ("read 7", call 7, "read 6") stay whole
    assert results["c7"].endswith("TAIL-7") and len(results["c7"]) > BIG * 0.8
    assert len(results["c6"]) < 3_200
    # the store still has everything
    assert all(len(m.text) > BIG * 0.8 for m in s.messages() if m.role == "tool")


def test_hard_clear_when_past_half_the_window() -> None:
    s = _session(30, size=4_500)  # soft trim barely helps: 4.5k -> 3k
    limit = int(s.total_tokens / 0.9)
    policy = ContextPolicy(context_limit=limit, response_reserve=1000)
    w = build_context(s, policy=policy)
    actions = {p["action"] for p in w.report.pruned}
    assert "hard" in actions
    assert w.tokens <= 0.5 * limit or not any(
        m.role == "tool" and m.seq is not None and m.seq < s.last_seq - 12 and len(m.text) > 400
        for m in w.messages
    )
    cleared = [t for t in _results(w.messages).values() if t.startswith("[tool result cleared")]
    assert cleared and "stays stored as message #" in cleared[0]


def test_protected_tools_are_never_pruned() -> None:
    s = _session(8, tool="skill")
    limit = int(s.total_tokens / 0.4)
    w = build_context(s, policy=ContextPolicy(context_limit=limit, protected_tools=("skill",)))
    assert w.report.pruned == []


def test_aggressive_mode_prunes_earlier() -> None:
    s = _session(6, size=6_000)  # 36k chars: under the normal 50k minimum
    policy = ContextPolicy(context_limit=int(s.total_tokens / 0.25))
    assert build_context(s, policy=policy).report.pruned == []
    assert build_context(s, policy=policy, aggressive=True).report.pruned != []


def test_decisions_are_sticky_across_turns() -> None:
    s = _session(10)
    policy = ContextPolicy(context_limit=int(s.total_tokens / 0.6), response_reserve=1000)
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
