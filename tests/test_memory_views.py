"""A short turn of advice, cheer or show-and-tell keeps the content it carries (issue 37,
the judge's missed observations), and only when the turn states nothing else."""

from __future__ import annotations

import pytest

from threadline.memory import ExtractiveExtractor
from threadline.messages import Message


def _facts(text: str, speaker: str = "Gina", addressee: str = "Jon") -> list[str]:
    turns = [
        Message.user("I opened my dance studio downtown last week.", name=addressee, seq=1),
        Message.user(text, name=speaker, seq=2),
    ]
    out = ExtractiveExtractor(episodes=False).extract(turns, scope="agent:a", session_id="s")
    return [f.statement for f in out.facts if f.seq == 2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Thanks, Jon! It was a huge jump. My advice: stay passionate, focused and resilient.",
            "Gina's advice: stay passionate, focused and resilient.",
        ),
        (
            "Got your back! Here's one of my trophies from a dance contest, nice reminder.",
            "Gina has trophies from a dance contest.",
        ),
        (
            "Thanks a bunch! It's awesome seeing my vision happen. How's the studio going?",
            "Gina enjoys seeing Gina's vision happen.",
        ),
    ],
)
def test_the_content_of_advice_or_cheer_is_kept(text: str, expected: str) -> None:
    assert _facts(text) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "Keep going, you got this!",
        "Just remember, just do it!",
        "Here's my latest one!",
        "You're awesome!",
        "Don't let anything stop you. You have potential!",
        "You're incredibly talented and passionate about dance. Keep shining!",
        "Remember that you are loved.",
    ],
)
def test_cheer_with_no_content_is_still_no_fact(text: str) -> None:
    assert _facts(text) == []


def test_a_turn_that_states_something_gets_no_extra_view() -> None:
    facts = _facts("I opened an online clothing store in May. Here's one of my mugs from Porto.")
    assert any("clothing store" in f for f in facts)
    assert not any(f.startswith("Gina has mugs") for f in facts)
