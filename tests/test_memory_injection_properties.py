"""Memory injection keeps the prompt-cache prefix: properties of ``build_context(memories=)``.

Memories change every turn; what comes before them must not. The builder reserves
``memory_share`` of the budget whatever the memories hold and places the block right
before the latest request, so (a) the window without its memory block is exactly the
window built with no memories, (b) the system prompt and the summary stay byte-identical
turn to turn, and the part of the last window before its memory block is where the next
window starts unless the next build re-trimmed, (c) the budget holds and the block stays
inside its share, and (d) the block never splits a tool unit.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.strategies import WORDS, history
from tests.windows import check_units
from threadline import ContextOverflow, ContextPolicy, Message, build_context, open_store
from threadline.context.builder import MEMORY_HEADER, MEMORY_METADATA_KEY, ContextWindow
from threadline.store.encoding import prepare_messages
from threadline.store.protocol import Session

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SYSTEM = "You are a careful agent with a long memory."

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
memory_lists = st.lists(st.lists(words, min_size=0, max_size=12), min_size=2, max_size=8)


def _session(msgs: list[Message]) -> Session:
    store = open_store("memory://")
    s = store.create_session(agent="prop", model="gpt-4o")
    if msgs:
        store.append_messages(s.id, prepare_messages(s.model, msgs))
    return s.refresh()


def _is_block(m: Message) -> bool:
    return MEMORY_METADATA_KEY in m.metadata


def _shape(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.text, m.id if m.seq is not None else "") for m in messages]


def _before_block(w: ContextWindow) -> list[Message]:
    at = next((i for i, m in enumerate(w.messages) if _is_block(m)), len(w.messages))
    return w.messages[:at]


def _build(s: Session, policy: ContextPolicy, memories: list[str], share: float) -> ContextWindow:
    return build_context(
        s, system_prompt=SYSTEM, policy=policy, memories=memories, memory_share=share
    )


@given(
    first=history(min_units=2, max_units=20),
    turns=st.lists(history(min_units=1, max_units=3), min_size=2, max_size=8),
    memories=memory_lists,
    limit=st.integers(1_500, 12_000),
    share=st.floats(0.02, 0.3),
    placement=st.sampled_from(["system", "checkpoint_pair"]),
    checkpoint_at=st.one_of(st.none(), st.integers(1, 10)),
    request=words,
)
@SETTINGS
def test_memories_never_move_the_prefix(
    first: list[Message],
    turns: list[list[Message]],
    memories: list[list[str]],
    limit: int,
    share: float,
    placement: str,
    checkpoint_at: int | None,
    request: str,
) -> None:
    policy = ContextPolicy(
        context_limit=limit,
        response_reserve=200,
        min_recent_messages=2,
        pruning=False,
        summary_placement=placement,
    )
    s = _session(first)
    if checkpoint_at is not None and checkpoint_at <= s.last_seq:
        s.add_checkpoint(
            covers_up_to=checkpoint_at,
            summary="## Current State\n- the task: " + request + "\n- next: run the tests",
        )
    plain = s.store.get_session(s.id)  # a second handle: same history, no memories
    previous: ContextWindow | None = None
    for i, turn in enumerate(turns):
        s.append([Message.user(f"{request} (turn {i})"), *turn])
        mems = memories[i % len(memories)]
        try:
            w = _build(s, policy, mems, share)
            bare = _build(plain, policy, [], share)
        except ContextOverflow:
            return
        # (c) the budget holds, and the block stays inside its share
        assert w.tokens <= limit - policy.response_reserve
        section = {x.name: x for x in w.report.sections}
        room = w.report.memory_reserve
        priming = section["reply_priming"].tokens
        assert room == int((w.report.budget + room - priming) * share) or (
            room == 0 and any("memories left out" in n for n in w.report.notes)
        )
        assert section["memory"].tokens <= room
        blocks = [m for m in w.messages if _is_block(m)]
        assert len(blocks) == (1 if w.report.memories else 0)
        assert len(w.report.memories) <= len(mems)
        event(f"memory block: {bool(blocks)}, checkpoint: {w.report.checkpoint_id is not None}")
        if blocks:
            assert blocks[0].role == "user" and blocks[0].text.startswith(MEMORY_HEADER)
            assert all(line in blocks[0].text for line in w.report.memories)
        # (d) tool units whole, with the block among the history messages
        check_units([m for m in w.messages if not m.summary and m.role != "system"])
        # (a) without its block, the window is the one built with no memories at all
        assert _shape([m for m in w.messages if not _is_block(m)]) == _shape(bare.messages)
        assert w.report.first_seq == bare.report.first_seq
        # the block sits right before the unit holding the latest request, never earlier
        if blocks:
            at = w.messages.index(blocks[0])
            assert all(not m.summary and m.role != "system" for m in w.messages[at:])
        # (b) the system prompt and the summary stay byte-identical; the next window
        # starts with everything the last one had before its memories, unless it re-trimmed
        assert w.messages[0].role == "system" and w.messages[0].text == SYSTEM
        if previous is not None:
            if w.report.checkpoint_id == previous.report.checkpoint_id:
                assert _shape([m for m in w.messages if m.summary]) == _shape(
                    [m for m in previous.messages if m.summary]
                )
            event(f"prefix changed: {w.report.prefix_changed}")
            if w.report.prefix_changed is False and not w.report.truncations:
                before = _before_block(previous)
                assert _shape(w.messages[: len(before)]) == _shape(before)
        previous = w


def test_memory_block_sits_before_the_latest_request_and_is_counted() -> None:
    s = _session([Message.user("I live in Lyon."), Message.assistant("Noted.")])
    s.append([Message.user("Which city do I live in?")])
    w = build_context(
        s,
        system_prompt=SYSTEM,
        policy=ContextPolicy(context_limit=8_000),
        memories=["The user lives in Lyon (session 1234abcd #1, 2025-05-01)", "  "],
    )
    assert w.messages[-2].role == "user" and w.messages[-2].text.startswith(MEMORY_HEADER)
    assert w.messages[-1].text == "Which city do I live in?"
    assert w.report.memories == ["The user lives in Lyon (session 1234abcd #1, 2025-05-01)"]
    section = next(x for x in w.report.sections if x.name == "memory")
    assert section.tokens > 0 and section.messages == 1 and "1 memory;" in section.detail
    assert w.tokens == sum(x.tokens for x in w.report.sections)


def test_memory_off_reserves_nothing_and_reports_off() -> None:
    s = _session([Message.user("hello"), Message.assistant("hi")])
    policy = ContextPolicy(context_limit=8_000)
    off = build_context(s, policy=policy)
    empty = build_context(s.store.get_session(s.id), policy=policy, memories=[])
    assert [x.tokens for x in off.report.sections] == [x.tokens for x in empty.report.sections]
    assert next(x for x in off.report.sections if x.name == "memory").detail == "off"
    assert "0 memories" in next(x for x in empty.report.sections if x.name == "memory").detail


def test_memories_that_do_not_fit_their_share_are_left_out_best_first_kept() -> None:
    s = _session([Message.user("what do you know about me?")])
    lines = [f"fact number {i} " + "detail " * 30 for i in range(10)]
    w = build_context(
        s,
        policy=ContextPolicy(context_limit=3_000, response_reserve=0),
        memories=lines,
        memory_share=0.1,
    )
    assert 0 < len(w.report.memories) < len(lines)
    assert w.report.memories == [" ".join(x.split()) for x in lines[: len(w.report.memories)]]
    assert "did not fit" in next(x for x in w.report.sections if x.name == "memory").detail


def test_protected_messages_take_the_memory_share_before_overflowing() -> None:
    s = _session([Message.user("word " * 700)])
    policy = ContextPolicy(context_limit=1_000, response_reserve=100, emergency_truncation=False)
    w = build_context(s, policy=policy, memories=["a fact"], memory_share=0.3)
    assert w.report.memories == []
    assert any("memories left out" in n for n in w.report.notes)
    assert w.tokens <= 900
