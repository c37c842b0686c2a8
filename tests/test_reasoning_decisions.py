"""What of the agent's thinking may become a decision (issue 31, decisions with their why).

Claude Code keeps a turn's thinking in a ``thinking`` record beside its ``tool_use``
record; OpenCode, OpenHands and Pi keep ``reasoning`` parts; Gemini CLI keeps
``thoughts``. A choice weighed there is not always what the agent then did: two
judges found "I'll implement it as specified rather than defer it" stated as a
decision before a write that deferred it. Only a fix announced in thinking and made
by an edit counts; a fault relayed, then a command run instead, waits for an edit
only until the agent speaks again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, store
from tests.test_decision_evidence import decisions, thought_then_call
from tests.test_ledger import filler, imported_plain
from threadline.compaction.decisions import agent_strength
from threadline.compaction.reasoning import reasoning_text
from threadline.messages import Message
from threadline.store.protocol import Store

__all__ = ["store"]

DELIBERATION = (
    "The cleanest approach is to have `render_message` return structured maps, then strip "
    "them back to strings for the old callers. Actually, that approach feels fragile since "
    "changes to the enriched behavior could silently break the public API. I think it's "
    "cleaner to keep the old functions separate and accept some duplication rather than "
    "risk tight coupling between them."
)
EDIT = {"file_path": f"{CWD}/lib/renderer.ex", "old_string": "a", "new_string": "b"}


def decided_after(
    store: Store,
    where: Path,
    thinking: str,
    call: tuple[str, dict[str, object]],
    then: Callable[[ClaudeLog], None] = lambda log: None,
) -> str:
    """Key Decisions of a run: a request, one thought and the call after it, ``then`` what
    else the agent did, then a new request and later reads."""
    log = ClaudeLog.asking("Add the enriched render path.")
    thought_then_call(log, thinking, *call)
    then(log)
    log.user("Now look at the docs.")
    filler(log)
    return decisions(compacted(imported_plain(store, log, where)))


RELAYED = "The credo warning at line 280 is about `length/1` being expensive."
TEST_EDIT = {"file_path": f"{CWD}/test/renderer_test.exs", "old_string": "a", "new_string": "b"}


def test_a_choice_weighed_in_thinking_is_no_decision(store: Store, tmp_path: Path) -> None:
    said = decided_after(store, tmp_path, DELIBERATION, ("Edit", EDIT))
    assert "functions separate" not in said
    assert "structured maps" not in said


def test_a_relayed_fault_then_a_test_run_is_fixed_by_no_later_edit(
    store: Store, tmp_path: Path
) -> None:
    """Run B: the agent relays a credo warning already fixed, runs the tests, talks, and
    later creates a stylesheet: that file did not fix the warning."""

    def talks_then_writes(log: ClaudeLog) -> None:
        log.say("That line is already fixed; the tests pass.")
        log.call("Write", {"file_path": f"{CWD}/priv/static/app.css", "content": "body {}"})

    run = ("Bash", {"command": "mix test test/renderer_test.exs"})
    said = decided_after(store, tmp_path, RELAYED, run, talks_then_writes)
    assert "length/1" not in said


def test_a_relayed_fault_then_its_edit_is_a_fix(store: Store, tmp_path: Path) -> None:
    said = decided_after(store, tmp_path, RELAYED, ("Edit", TEST_EDIT))
    assert "Edited `test/renderer_test.exs` to fix `length/1` being expensive (credo)" in said


def test_a_relayed_fault_then_a_test_run_then_its_edit_is_a_fix(
    store: Store, tmp_path: Path
) -> None:
    def edits(log: ClaudeLog) -> None:
        log.call("Edit", TEST_EDIT)

    run = ("Bash", {"command": "mix credo"})
    said = decided_after(store, tmp_path, RELAYED, run, edits)
    assert "Edited `test/renderer_test.exs` to fix `length/1` being expensive (credo)" in said


def test_a_description_in_the_reasoning_is_not_a_choice() -> None:
    found = "Instead of maintaining a `syncedSessions` set, it processes all sessions every time."
    assert agent_strength(found) == (0.0, False)
    assert agent_strength("Option 3 seems cleanest because:") == (0.0, False)
    chose = "The right approach is to track the last synced id, then send only the delta."
    assert agent_strength(chose) == (1.0, True)
    for described in ("That is simpler to read.", "It would be best to ask you first."):
        assert agent_strength(described) == (0.0, False), described


def test_every_importer_s_shape_of_thinking_is_read() -> None:
    shapes = [
        [{"type": "thinking", "thinking": "Anthropic words.", "signature": "s"}],
        [{"type": "reasoning", "text": "OpenCode words."}],
        [{"subject": "Plan", "description": "Gemini words.", "timestamp": "t"}],
        "Plain words.",
    ]
    for shape, expected in zip(shapes, ["Anthropic", "OpenCode", "Gemini", "Plain"], strict=True):
        m = Message.assistant("ok", metadata={"thinking": shape})
        assert reasoning_text(m).startswith(expected)
