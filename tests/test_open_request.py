"""A request still in progress where a summary ends is open work: Pending Tasks names it
(Current State says "In progress: request #N"), unless the agent handed the turn back
after its last step (it answered) or a tracker's item is the work (the ledger lists it)."""

from __future__ import annotations

from pathlib import Path

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, section, store
from tests.test_ledger import imported_plain, numbered
from tests.test_progress import _messages
from threadline.compaction.reconcile import open_request, request_line
from threadline.compaction.trail import build_trail
from threadline.store.protocol import Store

__all__ = ["store"]  # the fixture


def _edit(log: ClaudeLog, name: str) -> None:
    log.call(
        "Edit",
        {"file_path": f"{CWD}/{name}", "old_string": "a", "new_string": "b"},
        f"The file {CWD}/{name} has been updated.",
    )


def _answered_then_asked(log: ClaudeLog) -> None:
    log.user("Make the cooldown ring turn clockwise, starting at the top of each square.")
    _edit(log, "styles.css")
    log.say("Done: the cooldown ring now turns clockwise from the top of each square.")
    log.user("Make sure the exported-session.jsonl holds every model response of the run.")
    _edit(log, "export_development_history.py")
    log.call("Bash", {"command": "python3 export_development_history.py"}, "Exit code: 0")


def test_a_request_cut_mid_work_is_open() -> None:
    log = ClaudeLog()
    _answered_then_asked(log)
    log.call("Bash", {"command": "head -n 5 exported-session.jsonl"}, '{"type": "session"}')
    trail = build_trail(numbered(_messages(log)))
    seg = open_request(trail)
    assert seg is not None and "exported-session.jsonl" in seg.asks
    line = request_line(trail, trail)
    assert line is not None and line.startswith(f"Finish request #{seg.start}: Make sure")


def test_a_request_the_agent_answered_is_not_open() -> None:
    log = ClaudeLog()
    _answered_then_asked(log)
    log.say("The export now writes every model response; run it again to refresh the file.")
    trail = build_trail(numbered(_messages(log)))
    assert open_request(trail) is None and request_line(trail, trail) is None


def test_a_tracked_item_in_progress_is_the_ledgers_to_list() -> None:
    log = ClaudeLog()
    log.user("Work on bead shop-7q2. Start with the first ready task.")
    log.call("Bash", {"command": "bd update shop-7q2.1 --status in_progress"}, "✓ Updated")
    _edit(log, "lib/shop/coupon.ex")
    assert open_request(build_trail(numbered(_messages(log)))) is None


def test_pending_names_the_request_in_progress_at_the_cut(store: Store, tmp_path: Path) -> None:
    log = ClaudeLog()
    _answered_then_asked(log)
    for name in ("a.py", "b.py", "c.py", "d.py", "e.py", "f.py"):
        _edit(log, f"export/{name}")
    summary = compacted(imported_plain(store, log, tmp_path))
    state = "\n".join(section(summary, "current_state"))
    pending = "\n".join(section(summary, "pending_tasks"))
    assert "In progress: request #" in state
    assert "Finish request #" in pending and "exported-session.jsonl" in pending
    assert "clockwise" not in pending  # answered before the next request


def test_a_request_whose_turn_ends_in_the_kept_messages_says_so() -> None:
    """Judges (runs D, E): "Finish request #595 (in progress at #603; the kept messages go on
    with it)" while the kept messages show the agent answering it and the person asking
    four more things; and "(none)" beside Current State's "In progress: request #595"."""
    log = ClaudeLog()
    _answered_then_asked(log)
    cut = len(numbered(_messages(log)))
    log.say("The export now writes every model response.")
    log.user("Now make the script minimal.")
    everything = numbered(_messages(log))
    trail, evidence = build_trail(everything[:cut]), build_trail(everything)
    assert open_request(trail) is not None  # in progress where the summary ends
    ended = request_line(trail, evidence)  # judges read "(none)" beside "In progress: #N" as false
    assert ended is not None and not ended.startswith("Finish")
    assert ended.endswith("; the agent handed the turn back in the messages kept below")
    going_on = ClaudeLog()
    _answered_then_asked(going_on)
    going_on.call("Bash", {"command": "wc -l exported-session.jsonl"}, "12 exported-session.jsonl")
    still = build_trail(numbered(_messages(going_on)))
    assert request_line(trail, still) is not None  # the kept messages only go on with it
