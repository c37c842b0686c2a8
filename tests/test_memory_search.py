"""How memory_search ranks: lexical match lifted by entities, time, facts and neighbours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from threadline import Message, open_store
from threadline.memory import ExtractiveExtractor, open_memory
from threadline.memory.core import Memory

SCOPE = "agent:ana"


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.fixture
def memory() -> Memory:
    return open_memory(open_store("memory://"))


def remember(memory: Memory, when: datetime, turns: list[tuple[str, str]]) -> str:
    """One conversation said on ``when``, extracted; returns its session id."""
    store = open_store("memory://")
    s = store.create_session(agent="ana")
    stored = s.append(
        [
            Message.user(t, name=who) if who == "Ana" else Message.assistant(t, name=who)
            for who, t in turns
        ]
    )
    memory.store_extraction(
        SCOPE, ExtractiveExtractor().extract(stored, scope=SCOPE, session_id=s.id, observed_at=when)
    )
    return s.id


def test_time_expressions_lift_what_happened_then(memory: Memory) -> None:
    old = remember(memory, day(2022, 5, 3), [("Ana", "We went hiking in the Alps this weekend.")])
    new = remember(memory, day(2023, 8, 9), [("Ana", "We went hiking near Porto this weekend.")])
    hits = memory.search("hiking in 2022", scopes=[SCOPE], now=day(2023, 9, 1))
    assert (hits[0].session_id, hits[0].seq) == (old, 1)
    hits = memory.search("hiking last August", scopes=[SCOPE], now=day(2024, 1, 1))
    assert (hits[0].session_id, hits[0].seq) == (new, 1)


def test_dates_mentioned_in_a_turn_count_too(memory: Memory) -> None:
    remember(memory, day(2023, 1, 10), [("Ana", "I painted a lake sunrise back in 2019.")])
    other = remember(memory, day(2019, 6, 1), [("Ana", "I painted a portrait today.")])
    hits = memory.search("what did Ana paint in 2019", scopes=[SCOPE], now=day(2023, 2, 1))
    assert {h.session_id for h in hits[:2]} >= {other}
    assert "sunrise" in hits[0].text or "sunrise" in hits[1].text


def test_before_the_move_resolves_the_pivot_event(memory: Memory) -> None:
    early = remember(
        memory, day(2021, 3, 1), [("Ana", "My favourite cafe is Luna on Rua Augusta.")]
    )
    remember(
        memory, day(2022, 1, 5), [("Ana", "I moved to Porto last month, the move was exhausting.")]
    )
    remember(memory, day(2022, 6, 1), [("Ana", "My favourite cafe is Majestic downtown.")])
    hits = memory.search("favourite cafe before the move", scopes=[SCOPE], now=day(2023, 1, 1))
    assert hits[0].session_id == early


def test_entity_aliases_and_mentions_reach_turns_without_the_words(memory: Memory) -> None:
    memory.write_fact(SCOPE, "Jo is Joana's nickname", subject="Joana")
    sid = remember(
        memory, day(2023, 3, 3), [("Ana", "My friend Joana got a new job at Acme Corp.")]
    )
    memory.store_extraction(SCOPE, _alias("Joana", "Jo"))
    hits = memory.search("news about Jo", scopes=[SCOPE], now=day(2023, 4, 1))
    assert any((h.session_id, h.seq) == (sid, 1) for h in hits)


def _alias(name: str, alias: str):  # type: ignore[no-untyped-def]
    from threadline.memory import Entity, Extraction

    return Extraction(entities=[Entity(scope=SCOPE, name=name, kind="person", aliases=[alias])])


def test_a_question_pulls_in_its_answer_next_to_it(memory: Memory) -> None:
    sid = remember(
        memory,
        day(2023, 5, 1),
        [
            ("Ana", "What instrument did you pick up during the winter?"),
            ("Bo", "The cello! I practise every evening now."),
            ("Ana", "Unrelated: the weather is grim."),
        ],
    )
    hits = memory.search("which instrument did Bo pick up in winter", scopes=[SCOPE], k=3)
    assert {(h.session_id, h.seq) for h in hits[:2]} == {(sid, 1), (sid, 2)}


def test_superseded_facts_rank_below_current_ones_and_say_so(memory: Memory) -> None:
    memory.write_fact(SCOPE, "Ana lives in Lisbon", subject="Ana", observed_at=day(2020, 1, 1))
    memory.write_fact(SCOPE, "Ana lives in Porto", subject="Ana", observed_at=day(2022, 1, 1))
    hits = [h for h in memory.search("where does Ana live", scopes=[SCOPE]) if h.kind == "fact"]
    assert hits[0].text == "Ana lives in Porto"
    assert hits[1].text == "Ana lives in Lisbon (no longer current)"


def test_one_hit_per_turn_with_every_source(memory: Memory) -> None:
    sid = remember(
        memory, day(2023, 5, 1), [("Ana", "I always run pytest before I push to GitHub.")]
    )
    hits = memory.search("pytest before push", scopes=[SCOPE], k=10)
    turns = [(h.session_id, h.seq) for h in hits if h.kind != "entity"]
    assert turns.count((sid, 1)) == 1
    assert all(
        h.sources and (h.sources[0].session_id, h.sources[0].seq) == (h.session_id, h.seq)
        for h in hits
    )
    assert hits[0].observed_at is not None and hits[0].observed_at - day(2023, 5, 1) < timedelta(
        days=1
    )
