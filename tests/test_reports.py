"""What the agent reported it built, from its account at the end of a turn that changed code.

Shaped like the shared Codex ``rtchess`` run: the agent closes each turn with a list of
what the game now does ("all pieces start with a 3s cooldown; each move applies a 10s
cooldown"); a later report on the same code replaces an earlier one; a turn that only
wrote a design document, or one the person turned down, reports nothing built.
"""

from __future__ import annotations

from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.reports import Reports, report_lines, stale
from threadline.messages import Message, ToolCall

FIRST = """Implemented the real-time cooldown variant:

- Real-time play: both colors are user-controlled; no turn enforcement or AI.
- Cooldowns: all pieces start with a 3s cooldown; each move applies a 10s \
cooldown to the moved piece.
- Updated README to describe the real-time mode."""
SECOND = """Implemented king-capture end condition:

- `rules.js`: no check detection; game ends when a king is missing (captured)."""
THIRD = """Relaxed move legality so check status is purely visual:

- `rules.js`: `generateLegalMoves` no longer filters out moves \
that would leave the king in check."""


def test_report_lines_state_behaviour_not_housekeeping() -> None:
    lines = report_lines(FIRST)
    assert any("3s cooldown" in line for line in lines)
    assert not any("README" in line for line in lines)


def test_a_later_report_on_the_same_code_replaces_the_earlier() -> None:
    reports = Reports()
    for seq, text in ((10, FIRST), (20, SECOND), (30, THIRD)):
        reports.add(seq, text)
    said = [line for _, line in reports.latest()]
    assert said[0].startswith("Built (#30): `rules.js`: `generateLegalMoves` no longer filters")
    assert not any("no check detection" in line for line in said)  # stale since #30
    assert any(line.startswith("Built (#10): Cooldowns") for line in said)


def _patch(call_id: str, path: str) -> list[Message]:
    call = ToolCall(id=call_id, name="Write", arguments={"file_path": path, "content": "x"})
    return [
        Message.assistant("", tool_calls=[call]),
        Message.tool("ok", tool_call_id=call_id, name="Write"),
    ]


def _decisions(messages: list[Message]) -> list[str]:
    text = ExtractiveSummarizer().summarize(messages).text
    part = text.split("## Key Decisions", 1)[1].split("##", 1)[0]
    return [line[2:] for line in part.splitlines() if line.startswith("- ")]


def test_a_turn_that_changed_code_reports_what_was_built() -> None:
    messages = [
        Message.user("Make it real time with cooldowns."),
        *_patch("c1", "/app/state.js"),
        Message.assistant(FIRST),
        Message.user("Looks good."),
    ]
    assert any(d.startswith("Built (#") and "3s cooldown" in d for d in _decisions(messages))


def test_a_document_only_turn_or_a_turned_down_report_builds_nothing() -> None:
    doc = [
        Message.user("Write the design down."),
        *_patch("c1", "/app/DESIGN.md"),
        Message.assistant(FIRST),
        Message.user("Looks good."),
    ]
    assert not any(d.startswith("Built") for d in _decisions(doc))
    refused = [
        Message.user("Make it real time with cooldowns."),
        *_patch("c1", "/app/state.js"),
        Message.assistant(FIRST),
        Message.user("no, it's a bad idea, keep it turn based"),
    ]
    assert not any(d.startswith("Built") for d in _decisions(refused))


def test_a_later_request_naming_a_changed_file_voids_the_report() -> None:
    reports = Reports()
    reports.add(10, FIRST, files=["/app/export_history.py"])
    reports.add(20, SECOND, files=["/app/rules.js"])
    reports.asked("Rewrite export_history.py so it only writes the markdown file")
    said = [line for _, line in reports.latest()]
    assert not any("3s cooldown" in line for line in said)  # #10 changed export_history.py
    assert any("king is missing" in line for line in said)


def _turn(request: str, path: str) -> list[Message]:
    """The person asks, the agent changes ``path`` and reports ``FIRST``; the person moves on."""
    return [
        Message.user(request),
        *_patch("c1", path),
        Message.assistant(FIRST),
        Message.user("ok"),
    ]


def test_a_style_sheet_only_turn_builds_nothing() -> None:
    styled = _turn("Make the cooldown ring a bit larger.", "/app/styles.css")
    assert not any(d.startswith("Built") for d in _decisions(styled))
    assert any(d.startswith("Built") for d in _decisions(_turn("Add cooldowns.", "/app/ui.js")))


def test_what_it_does_comes_before_how_it_looks_one_line_a_report_first() -> None:
    looks = """Cooldown ring restyled:

- Cooldown rings now render clockwise with a smooth animation and a soft glow when ready."""
    reports = Reports()
    reports.add(10, FIRST)
    reports.add(20, looks)
    said = [line for _, line in reports.latest()]
    assert said[0].startswith("Built (#10):")  # behaviour, though older
    assert said[1].startswith("Built (#20):")  # each report's first line before the rest
    assert stale("Built (#10): `rules.js`: ends on capture", 10, [(12, "change rules.js")])
    assert not stale("Built (#10): `rules.js`: ends on capture", 10, [(8, "change rules.js")])
