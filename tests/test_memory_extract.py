"""The extractive extractor, time expressions and slots: what is found in plain text."""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.memory import ExtractiveExtractor, is_signal
from threadline.memory.extract import find_entities, sentences, third_person
from threadline.memory.rules import derive_slot, name_key, terms
from threadline.memory.timeexpr import date_labels, find_windows, parse_query
from threadline.messages import Message

NOW = datetime(2023, 7, 15, 12, 0, tzinfo=UTC)


def kinds(text: str) -> dict[str, str]:
    return dict(find_entities(text))


def test_entities_of_every_kind() -> None:
    found = kinds(
        "My friend Joana moved to Lisbon. The bug is in src/app/main.py, ticket PROJ-142, "
        "see #4821. We use docker and pytest for project Atlas at Acme Corp."
    )
    assert found["Joana"] == "person"
    assert found["Lisbon"] == "place"
    assert found["src/app/main.py"] == "path"
    assert found["PROJ-142"] == "id" and found["#4821"] == "id"
    assert found["docker"] == "tool" and found["pytest"] == "tool"
    assert found["Atlas"] == "project"
    assert found["Acme Corp"] == "organization"


def test_greetings_and_sentence_openers_are_not_names() -> None:
    found = kinds("Hey Caroline! Thanks for asking. Sure, that sounds great.")
    assert "Caroline" in found
    assert not {"Hey", "Thanks", "Sure", "Hey Caroline"} & set(found)


def test_preferences_decisions_and_statements_become_facts_with_provenance() -> None:
    messages = [
        Message.user(
            "I prefer vim over emacs. I always run tests before pushing.", name="Ana", seq=4
        ),
        Message.assistant("OK, noted.", seq=5),
        Message.user("We decided to go with PostgreSQL. I live in Porto now.", name="Ana", seq=6),
    ]
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s1")
    facts = {f.statement: f for f in out.facts}
    prefers = facts["Ana prefers vim over emacs. Ana always runs tests before pushing."]
    assert (prefers.kind, prefers.subject, prefers.slot) == (
        "preference",
        "Ana",
        "prefers over emacs",
    )
    lives = facts["Ana and others decided to go with PostgreSQL. Ana lives in Porto now."]
    assert lives.kind == "decision"
    assert (lives.subject, lives.slot, lives.object) == ("Ana", "lives in", "Porto")
    assert all(f.sources[0].session_id == "s1" for f in out.facts)
    assert {f.seq for f in out.facts} == {4, 6}
    assert [e.seq for e in out.episodes] == [4, 6]  # "OK, noted." is too short to keep
    assert "Ana" in {e.name for e in out.entities}


def test_tool_results_and_summaries_are_not_extracted() -> None:
    messages = [
        Message.tool("I prefer nothing; this is tool output", tool_call_id="c1", seq=1),
        Message.user("I prefer tabs over spaces", summary=True, seq=2),
    ]
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    assert out.facts == [] and out.episodes == []


def test_signals_are_cheap_and_selective() -> None:
    assert is_signal(Message.user("I prefer dark mode"))
    assert is_signal(Message.user("we decided to ship on Friday"))
    assert is_signal(Message.user("the failing build is 3f2a9c1d4e5b6a7c"))
    assert not is_signal(Message.user("thanks, looks good"))
    assert not is_signal(Message.tool("I prefer x", tool_call_id="c"))


def test_third_person() -> None:
    assert third_person("I'm moving my desk to Porto", "Ana") == "Ana is moving Ana's desk to Porto"
    assert third_person("I prefer tea and I always watch films", "Ana") == (
        "Ana prefers tea and Ana always watches films"
    )
    assert third_person("I went home, I don't drive and I study", "Bo") == (
        "Bo went home, Bo doesn't drive and Bo studies"
    )
    assert third_person("I have a dog", "the user") == "The user has a dog"


def test_facts_keep_grammar_when_said_in_the_first_person() -> None:
    text = "I prefer PostgreSQL for new services, and I always use pytest for tests."
    out = ExtractiveExtractor().extract(
        [Message.user(text, seq=1)], scope="agent:a", session_id="s"
    )
    (fact,) = out.facts
    assert fact.statement == (
        "The user prefers PostgreSQL for new services, and the user always uses pytest for tests."
    )
    assert fact.subject == "user"


def test_sentences_do_not_split_inside_names_domains_versions_or_paths() -> None:
    text = (
        "We decided to deploy Orbit on Fly.io in the Frankfurt region. I upgraded to "
        "Python 3.12.1, e.g. for speed, and the config is in ~/.config/orbit/app.toml now!\n"
        "Dr. Smith agreed."
    )
    assert sentences(text) == [
        "We decided to deploy Orbit on Fly.io in the Frankfurt region.",
        "I upgraded to Python 3.12.1, e.g. for speed, and the config is in "
        "~/.config/orbit/app.toml now!",
        "Dr. Smith agreed.",
    ]
    out = ExtractiveExtractor().extract(
        [Message.user(text.splitlines()[0], seq=1)], scope="agent:a", session_id="s"
    )
    # a coding user's "we" is their team, kept as said (issue 37: no "the user and others")
    assert out.facts[0].statement.startswith("We decided to deploy Orbit on Fly.io in the")
    assert "Fly.io" in {e.name for e in out.entities}


def test_assistant_acknowledgements_are_no_signal_fact_or_entity() -> None:
    for reply in ("Noted. I'll remember that.", "Got it.", "OK, I will keep that in mind."):
        ack = Message.assistant(reply, seq=2)
        assert not is_signal(ack)
        out = ExtractiveExtractor().extract([ack], scope="agent:a", session_id="s")
        assert (out.entities, out.facts, out.episodes) == ([], [], [])
    assert is_signal(Message.assistant("Noted. We decided to ship on Friday.", seq=2))
    assert is_signal(Message.user("Remember that the staging database is orbit-db."))


def test_a_fact_about_a_named_person_has_that_person_as_subject() -> None:
    from threadline.memory import open_memory
    from threadline.store import open_store

    said = Message.user(
        "Priya Raman owns the invoices module, and we never page Priya on weekends.", seq=1
    )
    out = ExtractiveExtractor().extract([said], scope="agent:a", session_id="s")
    (fact,) = out.facts
    assert fact.subject == "Priya Raman"
    written = "Priya Raman owns the invoices module, and we never page Priya on weekends."
    assert fact.statement == written
    memory = open_memory(open_store("memory://"))
    memory.store_extraction("agent:a", out)
    report = memory.recall("Priya Raman", scopes=["agent:a"])
    assert report is not None and [f.statement for f in report.facts] == [written]


def test_slots_only_for_single_valued_things() -> None:
    assert derive_slot("Ana lives in Lisbon") == "lives in"
    assert derive_slot("Ana moved to Porto") == "lives in"
    assert derive_slot("Ana works at Acme") == "works at"
    assert derive_slot("Ana's favorite editor is vim") == "favorite editor"
    assert derive_slot("Ana likes tea") is None


def test_terms_and_keys() -> None:
    assert terms("The paintings were painted") == ["paint", "paint"]
    assert name_key("  Ana's  ") == "ana"
    assert name_key("São Paulo") == "sao paulo"


def test_time_windows() -> None:
    (w,) = find_windows("in 2022", NOW)
    assert (w.start, w.end) == (datetime(2022, 1, 1, tzinfo=UTC), datetime(2023, 1, 1, tzinfo=UTC))
    (w,) = find_windows("last May", NOW)
    assert w.start == datetime(2023, 5, 1, tzinfo=UTC)
    (w,) = find_windows("last September", NOW)
    assert w.start == datetime(2022, 9, 1, tzinfo=UTC)
    (w,) = find_windows("on 8 May, 2023", NOW)
    assert (w.start, w.end) == (datetime(2023, 5, 8, tzinfo=UTC), datetime(2023, 5, 9, tzinfo=UTC))
    (w,) = find_windows("yesterday", NOW)
    assert w.start == datetime(2023, 7, 14, tzinfo=UTC)
    (w,) = find_windows("three weeks ago", NOW)
    assert w.contains(datetime(2023, 6, 24, tzinfo=UTC))
    assert find_windows("nothing about time", NOW) == []


def test_before_and_after() -> None:
    q = parse_query("what did she do before 2021?", NOW)
    assert q.window is not None and q.window.start is None
    assert q.window.end == datetime(2021, 1, 1, tzinfo=UTC)
    q = parse_query("where did Ana live before the move?", NOW)
    assert (q.window, q.pivot, q.direction) == (None, "the move", "before")


def test_date_labels_resolve_relative_dates_against_the_turn() -> None:
    said = datetime(2023, 5, 8, tzinfo=UTC)
    assert date_labels("I went there yesterday", said) == ["2023-05-07"]
    assert date_labels("back in 2019 and in June 2021", said) == ["2021-06", "2019"]


def facts_of(*messages: Message) -> list[str]:
    out = ExtractiveExtractor().extract(list(messages), scope="agent:a", session_id="s")
    return [f.statement for f in out.facts]


def test_every_statement_of_a_person_becomes_a_third_person_fact() -> None:
    """The turns issue 23 found missed, written with the speaker as subject."""
    (fact,) = facts_of(
        Message.user(
            "This necklace is a gift from my grandma in my home country, Sweden. My daughter "
            "Anneliese is 7 years old. I'm keen on counseling.",
            name="Caroline",
            seq=2,
        )
    )
    assert fact == (
        "This necklace is a gift from Caroline's grandma in Caroline's home country, Sweden. "
        "Caroline's daughter Anneliese is 7 years old. Caroline is keen on counseling."
    )
    assert facts_of(Message.user("I always drink oat milk in my coffee.", seq=1)) == [
        "The user always drinks oat milk in their coffee."
    ]


def test_greetings_questions_and_acknowledgements_are_no_facts() -> None:
    for said in ("Hey Caroline! We got this!", "Thanks!", "How are the kids doing?", "Wow, cool!"):
        assert facts_of(Message.user(said, name="Melanie", seq=1)) == [], said
    # a coding user's turn: one fact per clause (issue 37: distil, do not restate)
    assert facts_of(
        Message.user("Hi, my name is Dana Whitfield. I lead the Orbit billing service.", seq=1)
    ) == ["The user's name is Dana Whitfield.", "The user leads the Orbit billing service."]


def test_pronouns_resolve_to_the_speaker_and_the_person_spoken_to() -> None:
    (fact,) = facts_of(
        Message.user("How was the trip?", name="Melanie", seq=1),
        Message.user(
            "My friends mean the world to me. They've been there through everything, I have "
            "known these friends for 4 years. You met them at the lake house last summer.",
            name="Caroline",
            seq=2,
        ),
    )
    assert fact == (
        "Caroline's friends mean the world to Caroline. They've been there through "
        "everything, Caroline has known these friends for 4 years. Melanie met them at the "
        "lake house last summer."
    )


def test_names_are_kept_whole() -> None:
    found = kinds("I moved to São Paulo, then St. Louis; J.R.R. Tolkien and Fly.io too.")
    assert {"São Paulo", "St. Louis", "J.R.R. Tolkien", "Fly.io"} <= set(found)
    assert "Paulo" not in found


def test_a_statement_about_others_says_what_not_who_said_it() -> None:
    out = ExtractiveExtractor().extract(
        [
            Message.user(
                "The new bakery on Main Street opens on Friday at eight.", name="Tom", seq=1
            )
        ],
        scope="agent:a",
        session_id="s",
    )
    (fact,) = out.facts
    assert fact.statement.startswith("The new bakery on Main Street opens")  # no "Tom said"
    assert fact.subject == "Tom"  # who said it is the fact's subject and source


def test_a_note_to_remember_is_a_fact_though_not_in_the_first_person() -> None:
    assert facts_of(Message.user("Remember that the staging database is orbit-db.", seq=1)) == [
        "Remember that the staging database is orbit-db."
    ]
    assert facts_of(Message.user("The weather was nice.", name="Tom", seq=1)) == []
