"""The system prompt of a recorded session says where the session ran (issue 31.5).

An imported Claude Code or Codex session records its own ``cwd``, git branch and
dates; the window built for it must not state the machine's directory and today's
date as if they were the session's (DESIGN invariant 11). The process's own lines
stay, labelled as the process's.
"""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.agent.prompt import PROCESS_NOTE, join_sections, prompt_sections

NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
FACTS = {
    "format": "claude-code",
    "cwd": "/home/USER/projects/spotter-worktrees/spotter-dov",
    "git_branch": "spotter-dov",
    "source_updated_at": "2026-02-12T20:29:03+00:00",
}


def test_a_recorded_session_is_placed_where_it_ran() -> None:
    text = join_sections(prompt_sections("You help.", now=NOW, cwd="/work", session=FACTS))
    assert (
        "The session ran in /home/USER/projects/spotter-worktrees/spotter-dov on git branch "
        "spotter-dov; its latest record is from 2026-02-12 (as its own records say)." in text
    )
    assert "This process runs in /work." in text
    assert "# Working directory\n/work" not in text  # never the session's directory
    assert f"Current date{PROCESS_NOTE}: 2026-12-07" in text


def test_a_session_that_records_no_directory_keeps_the_process_lines_as_they_were() -> None:
    for facts in (None, {}, {"format": "openai", "cwd": "  "}):
        text = join_sections(prompt_sections("You help.", now=NOW, cwd="/work", session=facts))
        assert "# Working directory\n/work" in text
        assert "Current date: 2026-12-07" in text and PROCESS_NOTE not in text


def test_the_prompt_stays_byte_identical_for_one_session_within_a_day() -> None:
    """The cached prefix (invariant 7): the session's facts do not move."""
    first = join_sections(prompt_sections("You help.", now=NOW, cwd="/work", session=FACTS))
    later = NOW.replace(hour=18)
    again = join_sections(prompt_sections("You help.", now=later, cwd="/work", session=dict(FACTS)))
    assert first == again


def test_a_session_that_records_only_its_day_says_that_day() -> None:
    """An import with timed records but no directory (an OpenHands event log) still says
    when it ran, and that its directory is not recorded; the process's lines are marked."""
    facts = {"format": "openhands", "source_updated_at": "2026-02-18T09:00:00+00:00"}
    text = join_sections(prompt_sections("You help.", now=NOW, cwd="/work", session=facts))
    assert "its latest record is from 2026-02-18 (as its own records say)." in text
    assert "The session ran in" not in text and "This process runs in /work." in text
    assert f"Current date{PROCESS_NOTE}: 2026-12-07" in text


def test_an_import_without_a_recorded_directory_takes_its_messages_first() -> None:
    """A SWE-agent trajectory names its directory on its messages only: the session's is
    the first of them, so the system prompt can say where it ran."""
    from tests.conftest import TRANSCRIPTS, require_shared
    from threadline.interop.importers import import_file

    require_shared(TRANSCRIPTS)
    imported = import_file(TRANSCRIPTS / "swe-agent/gpt4-swe-agent__test-repo-i1.traj")
    said = [c for m in imported.messages if isinstance(c := m.metadata.get("cwd"), str) and c]
    assert said and imported.metadata["cwd"] == said[0]
    text = join_sections(
        prompt_sections("You help.", now=NOW, cwd="/work", session=imported.metadata)
    )
    assert f"The session ran in {said[0]}" in text
