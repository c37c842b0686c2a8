"""What a section's guaranteed share will show (``snapshot.shown_by_share``) is what
``render`` shows, whatever the sections after it hold: a requirement left out of Current
State because a Key Decisions bullet says it is never left out for a bullet not shown."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.compaction.progress import Segment
from threadline.compaction.reconcile import SHARES
from threadline.compaction.snapshot import (
    SECTION_NAMES,
    SKELETON_WORDS,
    SectionName,
    Snapshot,
    parse,
    shown_by_share,
)
from threadline.compaction.standing import requirement_lines

WORDS = [
    "board",
    "king",
    "cooldown",
    "piece",
    "square",
    "move",
    "rule",
    "game",
    "captured",
    "highlight",
]


def _text(n: int, tag: int) -> str:
    return f"b{tag} " + " ".join(WORDS[(tag + k) % len(WORDS)] for k in range(n))


bullets = st.lists(st.tuples(st.integers(1, 40), st.floats(0.0, 4.0)), max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries({name: bullets for name in SECTION_NAMES}),
    st.lists(st.tuples(st.sampled_from(SECTION_NAMES), st.integers(1, 40), st.floats(0, 9))),
    st.integers(SKELETON_WORDS, 700),
)
def test_what_a_share_guarantees_is_shown_whatever_follows(
    sections: dict[SectionName, list[tuple[int, float]]],
    later: list[tuple[SectionName, int, float]],
    max_words: int,
) -> None:
    snapshot = Snapshot()
    tag = 0
    for name, items in sections.items():
        for n, score in items:
            tag += 1
            snapshot.add(name, _text(n, tag), score)
    for name in SECTION_NAMES:
        sure = shown_by_share(snapshot, name, max_words, SHARES)
        grown = snapshot.model_copy(deep=True)
        after = SECTION_NAMES[SECTION_NAMES.index(name) + 1 :]
        for other, n, score in later:
            if other in after:
                tag += 1
                grown.add(other, _text(n, tag), score)
        shown = [b.text for b in getattr(parse(grown.render(max_words, shares=SHARES)), name)]
        assert set(sure) <= set(shown), name


def test_a_requirement_is_kept_when_its_decision_is_crowded_out() -> None:
    """Run E: Files Modified spent its share first, Key Decisions' share of what was left
    held two of three "User:" decisions; the third request's requirement must stand."""
    snapshot = Snapshot()
    for i in range(10):
        path = f"`src/part{i}.js`: edited ×{i + 2}; e.g. `renderAll`, `bindControls`, `init`"
        snapshot.add("files_modified", path, 3.0 - i * 0.01)
    decisions = [
        "User: If a piece pre-moved to an empty square that becomes occupied, it takes instead",
        "User: When a king is under check, that player can still move their other pieces.",
        "User: Change the rule such that the game is lost when the king is captured.",
    ]
    for i, text in enumerate(decisions):
        snapshot.add("key_decisions", text, 2.0 - i * 0.2)
    for i in range(30):  # a busy Current State outranks the decisions after their share
        snapshot.add("current_state", _text(16, 100 + i), 3.0)
    max_words = 479
    shown = [b.text for b in parse(snapshot.render(max_words, shares=SHARES)).key_decisions]
    sure = shown_by_share(snapshot, "key_decisions", max_words, SHARES)
    assert decisions[2] not in shown and sure == shown  # the case: the third is crowded out
    asked = [
        Segment("", "The cooldown should start at the top, not the left", "request", 413),
        Segment("", decisions[2].removeprefix("User: "), "request", 425),
    ]
    lines = requirement_lines(asked, budget=100, skip=set(), said=sure)
    assert any("(#425)" in line for line in lines)
