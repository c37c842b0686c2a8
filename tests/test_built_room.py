"""Key Decisions keeps room for what the agent reported it built (``reports.reserved``).

Run E of issue 31: the person's rules about premoves and check filled Key Decisions'
share, so the game as built (3 s / 10 s cooldowns, king capture ends the game) never
reached the window. The Built lines now follow the person's lines the share shows,
in room of their own; a Built line a later request changed is left out.
"""

from __future__ import annotations

from threadline.compaction.reconcile import reconcile
from threadline.compaction.snapshot import Snapshot, SummaryResult, parse
from threadline.compaction.trail import Trail
from threadline.messages import Message

RULES = [
    "User: If a piece pre-moved to an empty square that becomes occupied, it takes instead",
    "User: When a king is under check, that player can still move their other pieces.",
    "User: Change the rule such that the game is lost when the king is captured.",
    "User: 2: If a piece is pre-moved, setting another pre-moves overrides the previous one",
    "User: If a piece is ready (no cooldown), then it moves instantly.",
    "User: Use images for the pieces, and take them from lichess or similar",
    "User: Make the cooldown circle start at the top and shrink clockwise",
    "User: Let's break down app.js into multiple files.",
]
BUILT = [
    "Built (#50): Gameplay remains king-capture-only; you can move any off-cooldown piece",
    "Built (#40): Cooldowns: all pieces start with a 3s cooldown; each move applies a 10s "
    "cooldown to the moved piece",
    "Built (#30): `export.py`: writes both the session file and the history file",
]


def _reconciled(asked_later: str) -> list[str]:
    snapshot = Snapshot()
    for i, text in enumerate([*RULES, *BUILT]):
        snapshot.add("key_decisions", text, 1.0 - i * 0.05)
    for i in range(12):
        snapshot.add("current_state", f"Step {i} of the board work stands as it was left", 1.0)
    text = snapshot.render(2_000)
    messages = [Message.user(f"request {i}") for i in range(60)]
    messages.append(Message.user(asked_later))
    trail = Trail().extend(messages)
    result = reconcile(SummaryResult(text, parse(text)), trail, max_words=220)
    return [b.text for b in parse(result.text).key_decisions]


def test_built_lines_follow_the_persons_shown_rules_in_room_of_their_own() -> None:
    shown = _reconciled("Thanks, carry on.")
    assert shown[0] == RULES[0]  # the person's first
    assert any("3s cooldown" in line for line in shown)
    assert any("king-capture-only" in line for line in shown)
    first_built = next(i for i, t in enumerate(shown) if t.startswith("Built"))
    assert all(t.startswith("User") for t in shown[:first_built])


def test_a_built_line_a_later_request_changed_is_left_out() -> None:
    shown = _reconciled("Make export.py write only the history file.")
    assert not any("`export.py`" in line for line in shown)
