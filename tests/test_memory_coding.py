"""Memory of a coding session (issue 37, points 2-4): what a coding agent should remember.

The user's standing constraints, conventions and the spec as it stands are facts, one
short clause each; questions, one-off commands, pasted output, prompt templates, bot
notices and a subagent's prompt are not; a revision, an undo or a "go back to" makes
the earlier instruction stop being current; the assistant's change logs are no
preference, and the fix it found for a reported error is an event."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from threadline.memory import ExtractiveExtractor, open_memory
from threadline.memory.instructions import (
    MAX_JOINED_WORDS,
    clauses,
    is_template,
    reports_error,
    revision,
)
from threadline.memory.statements import third_person
from threadline.messages import Message
from threadline.store import open_store

PR_TEMPLATE = (
    "Package the current working-tree changes into a GitHub pull request. Follow these steps "
    "in order:\n\n1. **Review the repository and changes** — run `git status`, `git diff`, "
    "and `git branch --show-current` to understand what changed. Never assume it is `main`."
    "\n\n2. **Choose a branch** — if the current branch is a non-default branch, use it as-is; "
    "do not create or switch branches.\n\n3. **Commit with a conventional commit message** — "
    "stage only the files relevant to this change.\n\n4. **Push and open a PR** — push the "
    "selected branch with `git push -u origin <branch>`.\n\nArguments:\n"
)


def _turns(*texts: str, start: int = 1) -> list[Message]:
    out = []
    for i, text in enumerate(texts, start=start):
        if text.startswith("A: "):
            out.append(Message.assistant(text[3:], seq=i))
        else:
            out.append(Message.user(text, seq=i))
    return out


def _current(*texts: str) -> list[str]:
    """The current facts after building memory from the turns, oldest turn first."""
    memory = open_memory(open_store("memory://"))
    extraction = ExtractiveExtractor(episodes=False).extract(
        _turns(*texts), scope="agent:a", session_id="s"
    )
    memory.store_extraction("agent:a", extraction)
    return [f.statement for f in sorted(memory.list_facts("agent:a"), key=lambda f: f.seq or 0)]


def test_standing_constraints_are_kept_one_clause_each() -> None:
    facts = _current(
        "it's good, but the issue is that several processes of codemie-claude can be executed "
        "from different tabs.",
        "don't produce code, design solution first",
        "great, prepare focused step by step plan with clear action items for tracking. "
        "important not to commit changes until final step. start form abstractions->claude->gemini",
        "create document in /specs folder",
        "can ultracite handle typechecking for us?",
        "count the total lines of js code",
        "try again",
    )
    assert facts == [
        "The issue is that several processes of codemie-claude can be executed from different "
        "tabs.",
        "Don't produce code, design solution first.",
        "Prepare focused step by step plan with clear action items for tracking.",
        "Important not to commit changes until final step.",
        "Start form abstractions->claude->gemini.",
        "Create document in /specs folder.",
    ]


def test_harness_text_templates_notices_and_subagent_prompts_are_no_facts() -> None:
    assert is_template(PR_TEMPLATE)
    assert is_template("# Code Review\n\nCode review completed — no changes requested.")
    messages = [
        Message.user(PR_TEMPLATE, seq=1),
        Message.user("# Code Review\n\nCode review completed — no changes requested.", seq=2),
        Message.user(
            "Always run the formatter before you commit.", seq=3, metadata={"is_meta": True}
        ),
        Message.user(
            "Very thorough exploration. Provide the FULL content of each file - don't summarize.",
            seq=4,
            metadata={"sidechain": True},
        ),
    ]
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    assert out.facts == []


def test_undo_reverts_the_last_instruction() -> None:
    assert revision("undo the last change it messed up the dark highlight") == "undo"
    facts = _current(
        "The darker highlight should still stay on as well when dragging onto a piece.",
        "undo the last change it messed up the dark highlight",
    )
    assert facts == [  # the change is taken back, not the wish: no "opposite" is said
        "Reverted at the user's request: the change for \"The darker highlight should still "
        'stay on as well when dragging onto a piece" (it messed up the dark highlight).'
    ]


def test_a_revision_supersedes_the_version_it_revises() -> None:
    facts = _current(
        "Make it so each piece has a cooldown of 10 seconds as soon as you move it.",
        "Instead of the green dot highlight for taking a piece, the square has its corners "
        "highlighted.",
        "That's almost right. But the highlight for the piece that can be taken should only have "
        "a quarter-circle in each corner.",
    )
    assert facts == [
        "Each piece has a cooldown of 10 seconds as soon as you move it.",
        "The highlight for the piece that can be taken should only have a quarter-circle in each "
        "corner.",
    ]


def test_going_back_and_restating_supersede_the_earlier_versions() -> None:
    facts = _current(
        "Make it so export_development_history.py reads from exported-session.jsonl and writes "
        "prompt_history.md.",
        "So it's a standalone script and we don't need export_codex_session.py anymore.",
        "Let's go back to the version where export_development_history.py reads from an "
        "existing exported-session.jsonl file.",
        "Each piece has a cooldown of 10 seconds as soon as you move it.",
        "Make it so each piece has a cooldown of 10 seconds as soon as you move it. For now, "
        "there is no AI and all pieces are moved by the user.",
    )
    assert sorted(facts) == [
        "Each piece has a cooldown of 10 seconds as soon as you move it.",
        "Reverted at the user's request: the change for \"It's a standalone script and we "
        "don't need export_codex_session.py anymore\".",
        "There is no AI and all pieces are moved by the user.",
        "export_development_history.py reads from an existing exported-session.jsonl file.",
    ]


def test_extracting_in_parts_continues_the_chains_of_the_earlier_part() -> None:
    turns = _turns(
        "The cooldown should start at the left of the circle.",
        "That's almost right. But the cooldown should start at the top of the circle.",
    )
    memory = open_memory(open_store("memory://"))
    extractor = ExtractiveExtractor(episodes=False)
    first = extractor.extract(turns[:1], scope="agent:a", session_id="s")
    memory.store_extraction("agent:a", first)
    known = memory.list_facts("agent:a")
    second = extractor.extract(turns[1:], scope="agent:a", session_id="s", known=known)
    memory.store_extraction("agent:a", second)
    assert [f.statement for f in memory.list_facts("agent:a")] == [
        "The cooldown should start at the top of the circle."
    ]


def test_the_fix_for_a_reported_error_is_an_event_and_change_logs_are_no_preference() -> None:
    messages = _turns(
        "I'm getting:\n\nAccess to script at 'file:///Users/p/code/rtchess/app.js' from origin "
        "'null' has been blocked by CORS policy.",
        "A: That CORS error happens because the browser blocks ES modules loaded via `file://`. "
        "Serve the folder over HTTP instead of opening the file directly.",
        "Use images for the pieces, and take them from lichess.",
        "A: I updated `app.js` so it always uses the cburnett piece images. I prefer SVG files "
        "for pieces.\n\n## Implementation Plan\n\n**New** files: `pieces.js`.",
    )
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    by_kind = {(f.kind, f.statement.split(":")[0]) for f in out.facts}
    fix = next(f for f in out.facts if f.kind == "event")
    assert fix.statement.startswith("Fix for \"Access to script at 'file:///Users/p/code")
    assert "Serve the folder over HTTP" in fix.statement
    assert all(f.seq != 4 for f in out.facts), by_kind  # the change log: no preference
    names = {e.name for e in out.entities}
    assert {"app.js", "pieces.js"} <= names
    assert not {"Implementation Plan", "New", "Implementation"} & names


def test_we_ourselves_and_a_typed_third_person_verb_are_not_garbled() -> None:
    facts = _current(
        "i think we can simplify our linting setup and use https://www.ultracite.ai/ it should "
        "also include the anti-slop oxlint plugins so we don't have to vendor them ourselves",
        "When i run the export script, i looks like the response is a followup prompt.",
    )
    joined = " ".join(facts)
    assert "so we don't have to vendor them ourselves" in joined  # a team's "we", as said
    assert "vendor them the user" not in joined
    assert third_person("so we don't have to vendor them ourselves", "Ana") == (
        "So Ana and others don't have to vendor them themselves"
    )
    assert "lookses" not in joined and "the user looks like" in joined


@given(
    st.lists(
        st.sampled_from(
            [
                "don't commit until the final step",
                "That's almost right.",
                "Make it so the board squares have an absolute size",
                "can you tell me the cost?",
                "try again",
                "I'm getting:\n\nTypeError: x is undefined\n    at foo (app.js:3)",
                "Example of the current file:\n\nPrompt #1:\nResponse: none",
                "Put the plans in /specs and never push to main on a Friday afternoon when "
                "the whole team is away at the offsite and nobody can review the change or "
                "roll it back if it breaks production",
                "",
                "\n\n",
                "ok",
                "It should also stay visible while the piece is dragged across the whole board "
                "from one corner to the other",
                "in addition - there is a timestamp",
            ]
        ),
        max_size=6,
    )
)
def test_every_clause_is_short_and_no_question(parts: list[str]) -> None:
    for clause in clauses("\n".join(parts)):
        words = re.findall(r"[^\W_]+", clause.text)
        assert 4 <= len(words) <= MAX_JOINED_WORDS  # one clause, or one and what leans on it
        assert not clause.text.rstrip().endswith("?")
        assert not clause.text.startswith(("That's almost", "Make it so", "Prompt"))


def test_a_url_is_one_entity_and_no_path() -> None:
    from threadline.memory.extract import find_code_entities

    found = dict(find_code_entities("use https://www.ultracite.ai/ and keep oxlint.config.ts"))
    assert found == {"https://www.ultracite.ai/": "thing", "oxlint.config.ts": "path"}


def test_a_clause_leaning_on_a_pronoun_joins_the_one_it_leans_on() -> None:
    facts = _current(
        "The cooldown is displayed with a circle around the piece (inside the square). At 10 "
        "seconds, it's a full circle. And it progresses like a clock by being smaller and "
        "smaller.",
        "analyze history.jsonl. /clear command present there. in addition - there is timestamp "
        "and session id",
    )
    assert facts == [
        "The cooldown is displayed with a circle around the piece (inside the square); at 10 "
        "seconds, it's a full circle; it progresses like a clock by being smaller and smaller.",
        "/clear command present in history.jsonl; there is timestamp and session id.",
    ]


def test_the_state_a_request_ends_the_users_confusion_and_a_tasks_aim_are_no_facts() -> None:
    facts = _current(
        "Make it so the size of the board squares is defined with absolute value. Currently "
        "they change based on if there are pieces on them or not.",
        "Now make it so this highlight stays on as I drag my piece onto the taken piece "
        "(currently, the green dissapears when I hover my piece onto it)",
        "not getting about finalizing all sessios, query api, etc. logic is straightforward.",
        "2. search for /clear command in ~/.claude folders - there are plenty of sessions with "
        "this command, analyze file creation date and update date and find closest files with "
        "update date, so that you can figure out when previous session endend and new one "
        "started",
    )
    assert facts == [
        "The size of the board squares is defined with absolute value.",
        "This highlight stays on as the user drags their piece onto the taken piece.",
    ]


def test_a_list_of_files_is_one_layout_fact_besides_its_items() -> None:
    found = [
        c.text
        for c in clauses(
            "Give more details about this proposal again:\n"
            "  - rules.js: Pure game logic (state shape, move generation).\n"
            "  - ai.js: Evaluation + minimax/findBestMove; imports helpers from rules.js.\n"
            "  - ui.js: All DOM rendering and wiring of the board and its controls.\n"
        )
    ]
    assert found[0] == "The files are rules.js, ai.js and ui.js."
    assert "ai.js imports helpers from rules.js." in found


def test_coding_entities_are_names_not_everyday_words_or_fence_tags() -> None:
    from threadline.memory.extract import find_code_entities

    messages = [
        Message.user(
            "For now there is no AI, but all pieces (white and black) are controlled by the "
            "user. Run export_codex_session.py first.",
            seq=1,
        ),
        Message.assistant(
            "Usage:\n```bash\npython3 export_development_history.py <id>\n```\n"
            "Formatted with `black`.",
            seq=2,
        ),
    ]
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    names = {e.name: e.kind for e in out.entities}
    assert names.get("export_codex_session.py") == "path"
    assert "export_codex_session" not in names  # the file's stem is no second entity
    assert names.get("black") == "tool"  # quoted as code: the formatter
    assert "bash" not in names
    assert dict(find_code_entities("white and black pieces; go back to Go")) == {"go": "tool"}
    assert "black" not in dict(find_code_entities("white and black pieces"))


def test_a_change_log_bullet_is_no_fix_and_coming_up_with_something_is_a_task() -> None:
    messages = _turns(
        "When i run the export script, the response is a followup prompt, not working.",
        "A: I refactored the exporter:\n- The history fallback now marks entries as user-only "
        "instead of alternating roles.\n- A warning is emitted (likely because the file is "
        "missing).",
        "comeup with approach to track this session for sso",
    )
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    assert [f.statement for f in out.facts if f.seq != 1] == []


def test_a_reply_handed_on_as_the_users_turn_is_no_fact_of_the_user() -> None:
    plan = (
        "Changes to implement a FastAPI web service for the Text-to-SQL flow, placed under "
        "backend/. Do not modify any existing files you marked as read-only. " * 4
    )
    messages = _turns(
        "Create a plan for this app. Put the webservice project inside backend folder.",
        "A: " + plan,
        plan,  # aider's architect mode: the plan goes to the editor model as the user
    )
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    assert {f.seq for f in out.facts} == {1}


def test_pasted_diffs_tracebacks_and_continued_commands_are_no_facts() -> None:
    found = [
        c.text
        for c in clauses(
            "Ensure the backend keeps the current behavior for plain paths.\n"
            "+ from dataclasses import dataclass\n"
            "@@ -1,3 +1,4 @@\n"
            '  File "C:\\temp\\backend\\app.py", line 5, in <module>\n'
            "    from .flow_nodes import run_text_to_sql\n"
            "Their example uses this command for the completion endpoint:\n"
            "curl -X POST https://openrouter.ai/api/v1/completions \\\n"
            '     -H "Authorization: Bearer <token>" \\\n'
        )
    ]
    assert found == [
        "Ensure the backend keeps the current behavior for plain paths.",
        "Their example uses this command for the completion endpoint.",
    ]


def test_a_pronoun_after_a_question_leans_on_nothing_kept() -> None:
    found = [
        c.text
        for c in clauses(
            "Keep the analysis section off to the side of the page. Why is the carousel so "
            "slow? It should scroll smoothly without any library at all.\nThis is what the "
            "output looks like, for now."
        )
    ]
    assert found == [
        "Keep the analysis section off to the side of the page.",
        "It should scroll smoothly without any library at all.",
    ]
    after_question = "can you move all of the openai logic to the client side? And have the "
    assert [c.text for c in clauses(after_question + "browser call openai directly.")] == [
        "Have the browser call openai directly."  # nothing kept to add to: it stands alone
    ]


def test_commands_to_run_a_template_and_a_failure_said_not_to_happen_are_no_reports() -> None:
    assert clauses("run this:\n\ngit log -1 --format=%B\nentire session list") == []
    keep = "track it in the same file as metrics, just extend json so old clients won't be broken"
    assert not reports_error(keep)
    assert [c.text for c in clauses(keep)] == [
        "Track it in the same file as metrics, just extend json so old clients won't be broken."
    ]
    handoff = (
        "A previous agent produced the plan below. Implement the plan.\n\n# Hardening Stack\n\n"
        "## Summary\n\nThe **failing** CI gate is fixed first.\n\n## Steps\n\n1. **Console** "
        "entrypoints.\n2. **Inputs** for the gate, fixed when tests fail.\n" * 2
    )
    messages = _turns(handoff, "A: The gate failed because the wheel was stale; rebuilt it.")
    out = ExtractiveExtractor().extract(messages, scope="agent:a", session_id="s")
    assert reports_error("The build fails on CI with a TypeError.")
    assert out.facts == []  # the template is no report of the person's: no fix event


def test_this_file_is_the_file_the_turn_named() -> None:
    said = clauses(
        "The script didn't write exported-session.jsonl. Try to make it so the script "
        "generates this file in the current working directory"
    )
    assert [c.text for c in said] == [
        "The script generates exported-session.jsonl in the current working directory."
    ]
