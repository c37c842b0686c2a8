"""``turn_window`` (what the Pydantic AI and LangGraph hooks send before the turn in
progress), as properties: for any stored history, turn and budget, the window, the
turn, the instructions and the tools fit ``context_limit - response_reserve``
together, the window keeps every tool call with its results, and a turn that cannot
fit on its own is the only thing refused."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import history, policies, text, tool_chain
from tests.windows import check_units, raw_session
from threadline import ContextOverflow, ContextPolicy, Message
from threadline.integrations.turn_window import budget_of, turn_window
from threadline.tokens import counter_for

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODEL = "gpt-4o"
TOOLS = [{"name": "grep", "description": "Search the files.", "parameters": {"type": "object"}}]

POLICIES = policies(800, 12_000)


@st.composite
def turns(draw: st.DrawFn) -> list[Message]:
    """The turn in progress: a request, then maybe tool chains."""
    out = [Message.user(draw(text(400, min_words=1)))]
    for _ in range(draw(st.integers(0, 2))):
        out.extend(draw(tool_chain()))
    return out


@given(
    stored=history(max_units=30),
    turn=turns(),
    policy=POLICIES,
    instructions=st.one_of(st.none(), text(100, min_words=1)),
)
@SETTINGS
def test_window_and_turn_fit_together(
    stored: list[Message], turn: list[Message], policy: ContextPolicy, instructions: str | None
) -> None:
    session = raw_session(stored)
    counter = counter_for(MODEL)
    fixed = counter.count_tools(TOOLS)
    if instructions:
        fixed += counter.count_message(Message.system(instructions))
    budget = budget_of(policy, MODEL)
    turn_alone = fixed + counter.count_messages(turn)
    try:
        window = turn_window(
            session, turn, policy=policy, model=MODEL, instructions=instructions, tools=TOOLS
        )
    except ContextOverflow as refused:
        assert turn_alone > budget  # only a turn that cannot fit is refused
        assert refused.budget == budget
        return
    assert fixed + counter.count_messages([*window, *turn]) <= budget
    check_units([m for m in window if m.role != "system"])
    seqs = [m.seq for m in window if m.seq is not None]
    assert seqs == sorted(seqs)  # the session's order, its latest messages
    if seqs:
        assert seqs[-1] == session.last_seq or session.messages()[-1].role == "tool"


def test_no_session_gives_no_history_and_still_checks_the_turn() -> None:
    policy = ContextPolicy(context_limit=1000, response_reserve=100)
    assert turn_window(None, [Message.user("hi")], policy=policy, model=MODEL) == []
    try:
        turn_window(None, [Message.user("word " * 2000)], policy=policy, model=MODEL)
    except ContextOverflow as refused:
        assert refused.budget == 900 and refused.needed > 900
    else:
        raise AssertionError("a turn over the budget was not refused")
