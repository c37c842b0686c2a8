"""A reply that picks among the options the agent offered is kept in the option's words.

Shaped like the shared ``entire-cli`` Claude Code transcript: the agent lists three
numbered options and argues for the first ("Given the current architecture (CLI
imports strategy, not vice versa), option 1 (Agent interface) seems cleanest"); the
person answers "let's go with option 1". Key Decisions must say what option 1 is and
why, also when the pick lies in a span an imported compaction already covered.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_compaction_truth import ClaudeLog, compacted, imported, section
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.options import choice_line, offered, picked
from threadline.compaction.snapshot import parse
from threadline.compaction.trail import Trail
from threadline.messages import Message
from threadline.store.protocol import Store

OFFER = """I see Gemini has similar transcript handling but uses message count instead of line \
count (JSON vs JSONL).

For agent-agnostic support, we have a few options:

1. **Add to Agent interface**: `TranscriptReader` optional interface with `GetCurrentPosition` \
and `ExtractModifiedFilesSince`

2. **Dispatch by AgentType**: Store `TranscriptPath` + use existing `AgentType` in session state, \
then dispatch to the right parser in PrepareCommitMsg

3. **Wrapper in CLI package**: Create a function in the CLI package that dispatches based on \
agent type, have strategy call it via callback

Given the current architecture (CLI imports strategy, not vice versa), option 1 (Agent \
interface) seems cleanest - each agent implements its own transcript analysis.

What's your preference?"""
PICK = (
    "let's go with option 1. I also wonder if we want a GetCurrentTranscriptLineLength or "
    "something similar for our purposes"
)


def test_a_pick_by_number_resolves_to_the_option_and_the_agents_reason() -> None:
    line = choice_line(PICK, OFFER)
    assert line is not None
    assert line.startswith("User chose option 1: Add to Agent interface: `TranscriptReader`")
    assert "(agent's reason: Given the current architecture (CLI imports strategy" in line


def test_picks_by_letter_position_or_bare_number() -> None:
    lettered = "Two ways:\n\nA) Keep one file\nB) Split per agent\n\nWhich do you want?"
    assert picked("Option B", offered(lettered)) == "b"
    assert picked("the second one please", offered(OFFER)) == "2"
    assert picked("do 3", offered(OFFER)) == "3"
    assert picked("2", offered(OFFER)) == "2"
    # the agent argued for option 1: its reason is not given for another pick
    assert choice_line("do 2", OFFER) == (
        "User chose option 2: Dispatch by AgentType: Store `TranscriptPath` + use existing "
        "`AgentType` in session state, then dispatch to the right parser in PrepareCommitMsg"
    )


def test_no_pick_without_an_offer_or_with_other_numbers() -> None:
    assert choice_line(PICK, "I updated the interface and ran the tests.") is None
    assert choice_line("I have 2 questions about this", OFFER) is None
    assert choice_line("do 2 things first: rebase, then test", OFFER) is None
    assert choice_line("option 7", OFFER) is None
    questions = "1. Should a premove auto-execute?\n2. Should a new premove override?"
    assert choice_line("1: yes. 2: yes, it overrides", questions) is None


def _messages() -> list[Message]:
    return [
        Message.user("Make the checkpoint check agent-agnostic."),
        Message.assistant(OFFER),
        Message.user(PICK),
        Message.assistant("Let me pop the stash and add the interface methods."),
    ]


def test_the_extractive_snapshot_says_what_the_option_was() -> None:
    text = ExtractiveSummarizer().summarize(_messages()).text
    decisions = [b.text for b in parse(text).key_decisions]
    assert any(d.startswith("User chose option 1: Add to Agent interface") for d in decisions)
    assert not any(d.startswith("User: let's go with option 1") for d in decisions)


def test_the_trail_carries_the_pick_to_later_compactions() -> None:
    trail = Trail().extend(_messages())
    again = Trail.from_metadata(trail.to_metadata())
    assert again is not None and len(again.choices) == 1
    assert again.choices[0][1].startswith("User chose option 1: Add to Agent interface")


def test_a_pick_before_an_imported_compaction_reaches_key_decisions(
    sqlite_store: Store, tmp_path: Path
) -> None:
    log = ClaudeLog.asking("Make the checkpoint check agent-agnostic.")
    log.say(OFFER)
    log.user(PICK)
    log.edit("Let me add the interface methods.", "agent/agent.go")
    log.compact("Summary:\n1. Primary Request and Intent:\n   - Make the check agent-agnostic")
    for i in range(6):
        log.edit(f"Now let me wire the agent {i} into the interface:", f"agent/impl{i}.go")
    session = imported(sqlite_store, log.write(tmp_path / "run.jsonl"))
    decisions = section(compacted(session), "key_decisions")
    assert any(d.startswith("User chose option 1: Add to Agent interface") for d in decisions)
