"""Supersession by meaning (issue 37): the same attribute of the same subject, not a word
two facts share."""

from __future__ import annotations

from threadline.memory import open_memory
from threadline.memory.rules import derive_slot
from threadline.store import open_store

SCOPE = "agent:a"


def _current(statements: list[tuple[str, str]]) -> list[str]:
    memory = open_memory(open_store("memory://"))
    for subject, statement in statements:
        memory.write_fact(SCOPE, statement, subject=subject)
    return [f.statement for f in memory.list_facts(SCOPE) if f.current]


def test_a_shared_word_supersedes_nothing() -> None:
    course = "Audrey is taking a dog training course at the shelter."
    safety = "After all safety is top priority when the dogs are outside."
    assert set(_current([("Audrey", course), ("Audrey", safety)])) == {course, safety}
    past = "Andrew hiked Mount Tam last weekend and the weather was perfect."
    planned = "Andrew plans a hike at Point Reyes next month if the weather is good."
    assert set(_current([("Andrew", past), ("Andrew", planned)])) == {past, planned}


def test_a_new_value_of_the_same_attribute_supersedes_the_old() -> None:
    assert _current([("Ana", "Ana lives in Lisbon."), ("Ana", "Ana moved to Porto.")]) == [
        "Ana moved to Porto."
    ]
    assert _current(
        [("Ana", "Ana's favorite editor is vim."), ("Ana", "Ana's favorite editor is Helix.")]
    ) == ["Ana's favorite editor is Helix."]
    assert derive_slot("Ana's editor is vim") == "editor"
    assert derive_slot("the weather was nice") is None


def test_an_attribute_inside_a_phrase_is_no_slot() -> None:
    """LoCoMo: "Losing Jon's job was tough" superseded "Losing Jon's job was a bummer";
    "desserts that work for everyone" took the slot "works at"."""
    assert derive_slot("Losing Jon's job was tough but it gave Jon a push.") is None
    assert derive_slot("A strong brand for Gina's store is something Gina works on.") is None
    assert derive_slot("Joanna makes desserts that work for everyone's diets.") is None
    assert derive_slot("Joanna will keep working at it.") is None
    assert derive_slot("Ana left Acme. Ana's job is teacher.") == "job"
