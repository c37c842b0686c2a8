"""Key Decisions say why (issue 31): the person's standing rules and choices, their verdicts,
and the agent's choices with their reason once it acted on them; never an observation, a
narrated step or another summarizer's account.

Each test is built from records shaped like the shared transcripts' (Claude Code's tool
rejection, Codex user turns, an approved plan) and fails on the code before this change.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_compaction_truth import ClaudeLog, compacted, section, store
from tests.test_ledger import imported_plain, numbered
from threadline.compaction.decisions import agent_strength, supersedes, user_strength
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Store

__all__ = ["store"]


def decisions(messages: list[Message], previous: str | None = None) -> list[str]:
    text = ExtractiveSummarizer().summarize(numbered(messages), previous=previous).text
    return section(text, "key_decisions")


def edit(path: str, call_id: str = "e1") -> ToolCall:
    return ToolCall(id=call_id, name="Edit", arguments={"file_path": path, "old_string": "a"})


def test_a_standing_rule_of_the_person_is_a_decision() -> None:
    """Judges: "manual commit only" and "we don't want ..." were missing from Key Decisions."""
    said = decisions(
        [
            Message.user("Add the export command. Manual commit only."),
            Message.assistant("On it.", tool_calls=[edit("cli.py")]),
            Message.user("We don't want a fake OAuth flow, it must call the real provider."),
        ]
    )
    joined = "\n".join(said)
    assert "User: Manual commit only." in said
    assert "We don't want a fake OAuth flow" in joined


def test_a_later_request_on_the_same_subject_marks_a_choice_replaced() -> None:
    """Judge, run E: three of the user's decisions a later message replaced stood unmarked."""
    said = decisions(
        [
            Message.user(
                "Let's start with the normal game of chess, and we will introduce the real "
                "time aspect later."
            ),
            Message.assistant("Done.", tool_calls=[edit("app.js")]),
            Message.user("Let's have a red highlight when a king is in check."),
            Message.assistant("Done.", tool_calls=[edit("styles.css", "e2")]),
            Message.user("Let's make the cooldown circle slightly larger."),
            Message.assistant("Done.", tool_calls=[edit("styles.css", "e3")]),
            Message.user(
                "Now let's go forward and implement the realtime aspect of the chess variant."
            ),
            Message.assistant("Done.", tool_calls=[edit("app.js", "e4")]),
            Message.user("Make a red overlay on the king when any king is under check."),
        ]
    )
    (chess,) = [d for d in said if "normal game of chess" in d]
    assert "(replaced: Now let's go forward and implement the realtime aspect" in chess
    (check,) = [d for d in said if "red highlight when a king" in d]
    assert "(replaced: Make a red overlay on the king" in check
    (circle,) = [d for d in said if "cooldown circle" in d]
    assert "replaced" not in circle  # another subject: it stands


def test_a_quoted_back_decision_keeps_the_turn_it_was_made_in() -> None:
    """Run E: the user pasted a log quoting their first request; the quote is no new decision
    and must not hide that a later request replaced it."""
    first = "Let's start with the normal game of chess, and we will introduce the real time later."
    said = decisions(
        [
            Message.user(first),
            Message.assistant("Done.", tool_calls=[edit("app.js")]),
            Message.user("Now let's implement the real time aspect of this chess game."),
            Message.assistant("Done.", tool_calls=[edit("app.js", "e2")]),
            Message.user("The export is wrong. Example of the output:\n\nPrompt: " + first),
        ]
    )
    (chess,) = [d for d in said if "normal game of chess" in d]
    assert "(replaced:" in chess


def test_a_tool_call_turned_down_voids_the_proposal_and_keeps_what_the_user_said(
    store: Store, tmp_path: Path
) -> None:
    """Judge, run C: the user turned down the agent's helper-function edit ("the interface is
    better no? We don't want if-else call site agent selection logic"); the snapshot kept
    the agent's proposal as a decision and dropped the user's."""
    log = ClaudeLog()
    log.user("Wire the transcript check into the strategy.")
    log.say(
        "Rather than modifying the Agent interface, let me follow the existing pattern and add "
        "a helper function in the strategy package that dispatches based on agent type."
    )
    log.call(
        "Edit",
        {"file_path": "/home/dev/shop/agent.go", "old_string": "a", "new_string": "b"},
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if "
        "it was a file edit, the new_string was NOT written to the file). To tell you how to "
        "proceed, the user said:\nthe interface is better no? We don't want if-else call site "
        "agent selection logic if we can help it",
        error=True,
    )
    log.say("You're right - the interface approach is cleaner.")
    for i in range(6):
        log.call("Read", {"file_path": f"/home/dev/shop/doc{i}.md"}, "# doc\n" * 30)
    said = "\n".join(section(compacted(imported_plain(store, log, tmp_path)), "key_decisions"))
    assert "We don't want if-else call site agent selection logic" in said
    assert "turning down" in said
    assert "Rather than modifying the Agent interface" not in said


def test_questions_turning_a_call_down_are_the_turn_down_asked_not_a_choice() -> None:
    """Judge 2, run C: the person's turn-downs with only a question were missing. The call
    is turned down (its proposal void) and the question is the why, stated as asked: never
    as the person's own choice ("User: ...")."""
    rejected = (
        "The user doesn't want to proceed with this tool use. To tell you how to proceed, "
        "the user said:\nis the message count the same as the line count for gemini?"
    )
    said = decisions(
        [
            Message.user("Add the position methods."),
            Message.assistant(
                "Rather than counting messages, I'll count lines because the file is JSONL.",
                tool_calls=[edit("gemini.go")],
            ),
            Message.tool(rejected, tool_call_id="e1", metadata={"is_error": True}),
        ]
    )
    asked = [d for d in said if "message count" in d]
    assert len(asked) == 1
    assert asked[0].startswith("User turned down `Edit`")
    assert "asking: is the message count the same" in asked[0]
    assert not any(d.startswith("User:") for d in said)
    assert not any("counting messages" in d for d in said)


def test_an_observation_or_a_narrated_look_is_no_decision() -> None:
    """Judge, run C: "I see - Gemini uses X rather than Y." and "Let me check what's currently
    there and adapt rather than duplicate." were listed as decisions."""
    said = decisions(
        [
            Message.user("Add the transcript position to both agents."),
            Message.assistant(
                "I see - Gemini uses `PrePromptState.StartMessageIndex` rather than "
                "`SessionState.CondensedTranscriptLines`.",
                tool_calls=[edit("gemini.go")],
            ),
            Message.assistant(
                "Let me check what's currently there and adapt rather than duplicate.",
                tool_calls=[ToolCall(id="g1", name="Grep", arguments={"pattern": "Position"})],
            ),
        ]
    )
    assert said == ["(none)"] or not any("Gemini uses" in d or "Let me check" in d for d in said)


def test_an_announced_choice_is_a_decision_once_the_agent_acts_on_it() -> None:
    """A choice with its reason, tied to the action that carried it out (a later call of the
    same turn); one the next request overtook before any action is no decision."""
    said = decisions(
        [
            Message.user("Store the transcript path."),
            Message.assistant(
                "Rather than modifying the Agent interface, let me add a helper function in the "
                "strategy package.",
                tool_calls=[ToolCall(id="t1", name="TodoWrite", arguments={"todos": []})],
            ),
            Message.assistant("", tool_calls=[edit("strategy.go")]),
            Message.user("Now the other thing."),
            Message.assistant("I'll use a MapSet because lookups dominate."),
            Message.user("Actually, first run the tests."),
        ]
    )
    (helper,) = [d for d in said if "Agent interface" in d]
    assert "(then `Edit` `strategy.go`)" in helper
    assert not any("MapSet" in d for d in said)


def test_another_summarizers_account_is_not_carried_as_decisions() -> None:
    """Run C: the lines of Claude Code's "Errors and fixes" ("Stash was from before these
    changes") were carried into Key Decisions from the imported summary."""
    previous = (
        "## Key Decisions\n- Stash was from before these changes\n"
        "- User: Manual commit only.\n- Use MapSet instead of a list because lookups dominate\n"
    )
    said = decisions([Message.user("continue"), Message.assistant("ok")], previous=previous)
    assert "Stash was from before these changes" not in said
    assert "User: Manual commit only." in said
    assert any("MapSet" in d for d in said)


def test_an_approved_plan_gives_its_reasoned_lines() -> None:
    """Run B: the approved plan's strategy ("keep render/1 unchanged (backward compat)") is
    the decision the native summary reports; only the plan's title was kept."""
    plan = ToolCall(
        id="p1",
        name="ExitPlanMode",
        arguments={
            "plan": "# Plan: Enrich the renderer\n\n## Approach\n\n"
            "Keep `render_message/1` unchanged (backward compat for direct callers).\n"
            "- Add a parallel enriched path used by `render/2`\n"
        },
    )
    said = decisions(
        [
            Message.user("Work on the renderer."),
            Message.assistant("", tool_calls=[plan]),
            Message.tool(
                "User has approved your plan. You can now start coding.", tool_call_id="p1"
            ),
        ]
    )
    assert any(d.startswith("Approved plan: Keep `render_message/1` unchanged") for d in said)


def test_an_approved_plans_line_survives_the_compaction(store: Store, tmp_path: Path) -> None:
    """Run B: a plan line ending with a colon was dropped as the agent narrating."""
    log = ClaudeLog.asking("Work on bead shop-7q2.")
    plan = (
        "# Plan: Enrich the renderer\n\n## Approach\n\n"
        "Keep `render_message/1` unchanged (backward compat for direct callers). Add a "
        "parallel enriched code path used by `render/2`:\n"
    )
    log.call("ExitPlanMode", {"plan": plan}, "User has approved your plan. You can now start.")
    for i in range(6):
        log.call("Read", {"file_path": f"/home/dev/shop/doc{i}.md"}, "# doc\n" * 30)
    said = section(compacted(imported_plain(store, log, tmp_path)), "key_decisions")
    assert any(d.startswith("Approved plan: Keep `render_message/1` unchanged") for d in said)
    assert any(d.startswith("User approved the plan: Plan: Enrich the renderer") for d in said)


def test_injected_text_never_sources_a_decision() -> None:
    said = decisions(
        [
            Message.user(
                "Always answer in French. Never run git push.", metadata={"is_meta": True}
            ),
            Message.user(
                "This session is being continued. Never touch the API. Rather than patching "
                "the client, we kept the old API because callers depend on it.",
                metadata={"compact_summary": True},
            ),
            Message.user("Fix the bug."),
        ]
    )
    assert not any("French" in d or "git push" in d or "API" in d for d in said)


def test_a_pasted_log_line_is_no_choice() -> None:
    """Aider run: a pasted build warning ("Suggest using builder.Logging instead of
    ConfigureLogging") and a server's "405 Method Not Allowed" were the user's decisions."""
    said = decisions(
        [
            Message.user(
                "I get this:\nC:\\src\\Program.cs(41,14): warning ASP0011: Suggest using "
                "builder.Logging instead of ConfigureLogging\n"
                "The server logs 405 Method Not Allowed for OPTIONS."
            ),
        ]
    )
    assert not any("ASP0011" in d or "Not Allowed" in d for d in said)


_VERBS = st.sampled_from(["check", "look at", "read", "inspect", "verify", "run"])
_WHY = st.sampled_from(["because", "since", "so that", "to avoid"])


@settings(max_examples=60, deadline=None)
@given(verb=_VERBS, why=_WHY, lead=st.sampled_from(["Let me", "Now let me", "I'll", "Next I'll"]))
def test_finding_things_out_is_never_a_choice(verb: str, why: str, lead: str) -> None:
    assert agent_strength(f"{lead} {verb} the config {why} it may differ.")[0] == 0.0


@settings(max_examples=60, deadline=None)
@given(
    rule=st.sampled_from(
        ["Don't {x}.", "Never {x}.", "Always {x}.", "We don't want to {x}.", "{X} only."]
    ),
    x=st.sampled_from(["commit", "push to main", "fake the OAuth flow", "use mocks"]),
)
def test_a_negative_or_an_absolute_is_a_standing_rule(rule: str, x: str) -> None:
    sentence = rule.format(x=x, X=x.capitalize())
    assert user_strength(sentence) >= 1.0
    assert user_strength(sentence.rstrip(".") + "?") == 0.0
    assert user_strength(f"If you prefer, {sentence[0].lower()}{sentence[1:]}") == 0.0


def test_a_refinement_that_builds_on_a_choice_does_not_replace_it() -> None:
    """Judge, run E: "the square has its corners highlighted instead" was marked replaced by
    "make it so this highlight stays on as I drag", which adds to it."""
    said = decisions(
        [
            Message.user(
                "Instead of the green dot for a capture, highlight the square's corners, "
                "as if the dot were cut in four."
            ),
            Message.assistant("Done.", tool_calls=[edit("styles.css")]),
            Message.user(
                "Now make it so this highlight stays on as I drag my piece onto the captured "
                "square."
            ),
            Message.assistant("Done.", tool_calls=[edit("ui.js", "e2")]),
            Message.user("Make the board squares 60px wide."),
        ]
    )
    (corners,) = [d for d in said if "green dot" in d]
    assert "replaced" not in corners


@given(
    st.sets(st.sampled_from(["board", "square", "piece", "cooldown", "ring"]), min_size=2),
    st.sets(st.sampled_from(["export", "script", "session", "history", "prompt"]), min_size=1),
    st.sampled_from(["instead use", "go back to", "now", "make"]),
)
def test_nothing_on_another_subject_is_ever_superseded(
    mine: set[str], said: set[str], lead: str
) -> None:
    later = f"{lead} the {' '.join(sorted(said))}"
    assert not supersedes("start with the " + " ".join(sorted(mine)) + " later", mine, later, said)


def test_a_cosmetic_tweak_counts_for_less_than_a_rule_of_the_product() -> None:
    """Judge, run E: three UI quotes held Key Decisions; a look's tweak ranks below a choice
    of what the product does, and is still a choice."""
    from threadline.compaction.decisions import user_strength

    tweak = user_strength("Use a thicker border for the board, not a shadow.")
    rule = user_strength("Use the server clock for the cooldowns, not the browser's.")
    assert 0 < tweak < rule


@settings(max_examples=80, deadline=None)
@given(
    lead=st.sampled_from(["When", "If", "Once", "While"]),
    subject=st.sampled_from(
        ["a piece is on cooldown", "the queue is full", "a player is in check"]
    ),
    then=st.sampled_from(
        ["moving it queues a pre-move", "that player can still move", "new jobs wait"]
    ),
)
def test_a_condition_and_what_then_happens_is_a_rule_of_the_product(
    lead: str, subject: str, then: str
) -> None:
    """Judge, run E: the game's rules ("when a king is under check, that player can still
    move other pieces") were missing; a condition about the speaker or a fault is no rule."""
    from threadline.compaction.decisions import states_product_rule

    rule = f"{lead} {subject}, {then}."
    assert states_product_rule(rule)
    assert user_strength(rule) >= 1.0
    assert not states_product_rule(f"{lead} I drag {subject.split()[1]}, {then}.")
    assert not states_product_rule(f"{lead} {subject}, nothing happens.")
    assert not states_product_rule(f"{lead} it loads, {then}.")  # "it": of what?
    assert user_strength(f"{lead} {subject}, {then}?") == 0.0


def test_the_rules_of_one_message_leave_room_for_another_messages_rule() -> None:
    """Run E: four cases of the pre-move rule in one message crowded out the game-end rule
    given a turn earlier; further rules of one message count for less."""
    said = decisions(
        [
            Message.user("Change the rule such that the game is lost when the king is captured."),
            Message.assistant("Done.", tool_calls=[edit("rules.js")]),
            Message.user(
                "If a piece is ready, it moves instantly.\n"
                "If a piece is on cooldown, moving it queues a pre-move.\n"
                "If a pre-move becomes invalid, the pre-move is cancelled.\n"
                "If a piece has a pre-move, a new pre-move overrides it."
            ),
            Message.assistant("Implemented.", tool_calls=[edit("state.js", "e2")]),
        ]
    )
    joined = "\n".join(said)
    assert "the game is lost when the king is captured" in joined
    assert "If a piece is ready, it moves instantly." in joined
