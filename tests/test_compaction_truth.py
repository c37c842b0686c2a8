"""Snapshots state what the history shows (invariant 11), through import and compaction.

The shape of the commonest long run: a Claude Code session that already holds one of
Claude's own compactions, imported with ``threadline sessions import`` and compacted
with ``threadline compact``. The new snapshot must name the files edited before the
imported compaction (the imported summary names none), list deleted files as deleted,
not bring back tasks closed since, keep Important Values ranked and capped, keep Key
Decisions free of narration, and say something concrete as the next step. A second
compaction carries the trail in the checkpoint's metadata instead of reading the
covered range again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from threadline import ContextPolicy, Session, build_context, open_store
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import parse
from threadline.compaction.trail import TRAIL_KEY, Trail
from threadline.compaction.values import VALUE_LABELS, bullet_value, is_artefact
from threadline.interop.sync import Source, Syncer
from threadline.store.protocol import Store

CWD = "/home/dev/shop"
SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\nAnalysis:\nThe user asked for the cart work.\n\n"
    "Summary:\n1. Primary Request and Intent:\n   Work on bead shop-7q2.\n\n"
    "7. Pending Tasks:\n   - shop-7q2.4: OPEN, add the coupon field\n"
    "   - shop-7q2.5: OPEN, write the checkout docs\n\n"
    "8. Current Work:\n   - shop-7q2.3: IN PROGRESS, totals fixed but NOT committed\n\n"
    "9. Optional Next Step:\n   Commit shop-7q2.3 and continue with shop-7q2.4.\n"
    "Please continue the conversation from where we left it off without asking the user any "
    "further questions. Continue with the last task that you were asked to work on."
)


@pytest.fixture
def store(sqlite_store: Store) -> Store:
    """The SQLite store, by the name ``test_ledger``, ``test_progress`` and
    ``test_verdicts`` import it under."""
    return sqlite_store


class ClaudeLog:
    """Writes a Claude Code session JSONL record by record."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.n = 0

    def _rec(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        uid = f"00000000-0000-4000-8000-{self.n:012d}"
        rec = {
            "type": kind,
            "uuid": uid,
            "parentUuid": self.parent,
            "sessionId": "5e551011-0000-4000-8000-000000000001",
            "cwd": CWD,
            "timestamp": f"2026-01-01T00:{self.n // 60:02d}:{self.n % 60:02d}Z",
            **fields,
        }
        self.lines.append(rec)
        self.parent = uid
        return rec

    def user(self, text: str, **extra: Any) -> None:
        self._rec("user", message={"role": "user", "content": text}, **extra)

    def _assistant(self, block: dict[str, Any]) -> None:
        message = {"id": f"msg_{self.n:04d}", "role": "assistant", "model": "claude-opus-4-6"}
        self._rec("assistant", message={**message, "content": [block]})

    @classmethod
    def asking(cls, request: str) -> ClaudeLog:
        """A log that opens with the person's request."""
        log = cls()
        log.user(request)
        return log

    def bd(self, args: str, result: str) -> None:
        """A beads command the agent ran through ``Bash``."""
        self.call("Bash", {"command": f"bd {args}"}, result)

    def call(
        self, name: str, args: dict[str, Any], result: str = "ok", error: bool = False
    ) -> None:
        call_id = f"toolu_{self.n:04d}"
        self._assistant({"type": "tool_use", "id": call_id, "name": name, "input": args})
        block = {"type": "tool_result", "tool_use_id": call_id, "content": result}
        if error:
            block["is_error"] = True
        self._rec("user", message={"role": "user", "content": [block]})

    def say(self, text: str) -> None:
        self._assistant({"type": "text", "text": text})

    def edit(self, why: str, path: str) -> None:
        """The agent saying what it does, then editing ``path`` under the session's directory."""
        self.say(why)
        self.call("Edit", {"file_path": f"{CWD}/{path}", "old_string": "a", "new_string": "b"})

    def compact(self, summary: str) -> None:
        boundary = self._rec(
            "system",
            subtype="compact_boundary",
            compactMetadata={"trigger": "auto", "preTokens": 160_000},
            logicalParentUuid=self.parent,
        )
        boundary["parentUuid"] = None
        self.user(summary, isCompactSummary=True)

    def write(self, path: Path) -> Path:
        path.write_text("\n".join(json.dumps(r) for r in self.lines) + "\n", encoding="utf-8")
        return path


def long_run() -> ClaudeLog:
    """Files edited and deleted before Claude's compaction, tasks closed after it."""
    log = ClaudeLog()
    log.user("Work on bead shop-7q2: the cart totals, the coupon field and the checkout docs.")
    for i in range(4):
        log.say(f"Now let me fix the cart step {i} since the totals are off:")
        log.call(
            "Edit",
            {"file_path": f"{CWD}/lib/cart/step{i}.ex", "old_string": "a", "new_string": "b"},
        )
    log.call(
        "Write", {"file_path": f"{CWD}/lib/cart/totals.ex", "content": "defmodule Totals do end"}
    )
    log.call("Bash", {"command": "rm lib/cart/legacy.ex && git rm -q test/legacy_test.exs"})
    log.call(
        "Bash",
        {"command": "mix test"},
        "Exit code 2\n** (CompileError) lib/cart/step1.ex:4: undefined function total/1",
        error=True,
    )
    log.call(
        "TodoWrite",
        {
            "todos": [
                {"content": "Fix the totals", "status": "in_progress", "activeForm": "Fixing"},
                {
                    "content": "Remove the legacy cart",
                    "status": "pending",
                    "activeForm": "Removing",
                },
            ]
        },
    )
    log.compact(SUMMARY)
    # after Claude's compaction: the work goes on and finishes items the summary lists
    log.call(
        "Edit",
        {"file_path": f"{CWD}/lib/cart/step1.ex", "old_string": "total", "new_string": "sum"},
    )
    log.call("Bash", {"command": "mix test"}, "Finished in 0.4 seconds\n31 tests, 0 failures")
    log.call(
        "Bash",
        {"command": "git commit -am 'fix: cart totals (shop-7q2.3)'"},
        "[main 4c1d2e9] fix: cart totals (shop-7q2.3)",
    )
    log.call("Bash", {"command": "bd close shop-7q2.3 --reason done"}, "Closed shop-7q2.3")
    log.call(
        "TodoWrite",
        {
            "todos": [
                {"content": "Fix the totals", "status": "completed", "activeForm": "Fixing"},
                {
                    "content": "Remove the legacy cart",
                    "status": "completed",
                    "activeForm": "Removing",
                },
                {
                    "content": "Add the coupon field",
                    "status": "in_progress",
                    "activeForm": "Adding",
                },
            ]
        },
    )
    log.call(
        "Edit", {"file_path": f"{CWD}/lib/cart/coupon.ex", "old_string": "a", "new_string": "b"}
    )
    log.call("Bash", {"command": "bd close shop-7q2.4"}, "Closed shop-7q2.4")
    for i in range(8):  # enough later work for a kept tail after the cut
        log.call("Read", {"file_path": f"{CWD}/docs/page{i}.md"}, "# page\n" * 40)
    log.user("Now the checkout docs, please.")
    log.say("I'll write them in docs/checkout.md.")
    return log


def imported(store: Store, path: Path, checkpoints: int = 1) -> Session:
    """The session synced from the Claude Code log at ``path``, which held ``checkpoints``
    compactions or more."""
    (result,) = Syncer(store).sync_source(Source(path))
    assert result.session_id is not None and result.checkpoints_added >= checkpoints, result
    return store.get_session(result.session_id)


SMALL_TAIL = 600
"""Tokens a test compaction keeps verbatim: the cut lands after the imported compaction."""


def compacted(session: Session, **policy: Any) -> str:
    policy.setdefault("preserve_max_tokens", SMALL_TAIL)
    result = Compactor(ExtractiveSummarizer(), policy=ContextPolicy(**policy)).compact(
        session, force=True, keep_recent=4, keep_turns=0
    )
    assert result.compacted, result
    session.refresh()
    checkpoint = session.latest_checkpoint()
    assert checkpoint is not None
    return checkpoint.summary


def section(text: str, name: str) -> list[str]:
    return [b.text for b in getattr(parse(text), name)]


def test_files_edited_before_an_imported_compaction_are_named(
    sqlite_store: Store, tmp_path: Path
) -> None:
    session = imported(sqlite_store, long_run().write(tmp_path / "run.jsonl"))
    files = section(compacted(session), "files_modified")
    text = "\n".join(files)
    for i in range(4):
        assert f"`lib/cart/step{i}.ex`" in text  # edited before Claude's compaction
    assert "`lib/cart/totals.ex`" in text and "`lib/cart/coupon.ex`" in text
    deleted = [f for f in files if "legacy" in f]
    assert deleted and all(f.startswith("Deleted:") or ": deleted" in f for f in deleted)
    assert "`lib/cart/legacy.ex`" in text and "`test/legacy_test.exs`" in text
    assert CWD not in text  # relative to the working directory, each once
    assert sum(text.count(f"`lib/cart/step{i}.ex`") for i in range(4)) == 4


def test_tasks_closed_since_are_not_brought_back(sqlite_store: Store, tmp_path: Path) -> None:
    session = imported(sqlite_store, long_run().write(tmp_path / "run.jsonl"))
    text = compacted(session)
    tasks = section(text, "pending_tasks")
    state = section(text, "current_state")
    claims = [line for line in tasks + state if re.search(r"shop-7q2\.[34]\b", line)]
    assert not [c for c in claims if re.search(r"(?i)open|in progress|not committed|next", c)]
    docs = [t for t in tasks if "shop-7q2.5" in t]
    assert docs and all(re.search(r"\(as of #\d+\)$", t) for t in docs)  # dated, still open
    assert not any(t.startswith(("Fix the totals", "Remove the legacy")) for t in tasks)
    assert not any("Please continue the conversation" in line for line in tasks + state)
    assert not any(re.match(r"Next step: (continue from|deal with)", s) for s in state)


def test_values_are_labelled_capped_and_clean(sqlite_store: Store, tmp_path: Path) -> None:
    log = long_run()
    noise = (
        "_build/dev/lib/shop/ebin/Elixir.Shop.Cart.beam\n--type=feature\x1b[0m\n-f\n<td></td>\n"
        + "\n".join(f"req {i:04d}: 7f3a{i:04d}-1b2c-4d5e-8f90-1234567890ab" for i in range(60))
        + "\n"
        + "\n".join(f"https://ci.example.com/runs/{i}" for i in range(60))
    )
    log.call("Bash", {"command": "cat build.log"}, noise)
    for i in range(40):
        log.say(f"See https://docs.example.com/page/{i} and `config_{i}=on`.")
    session = imported(sqlite_store, log.write(tmp_path / "run.jsonl"))
    values = section(compacted(session, summary_max_values=12), "important_values")
    assert 0 < len(values) <= 12
    labels = {name.lower() for name in VALUE_LABELS.values()} | {"failed command"}
    for bullet in values:
        label, value = bullet_value(bullet)
        assert label is not None and label.lower() in labels, bullet
        assert "\x1b" not in value and not re.fullmatch(r"--?\w[\w-]*(=\S*)?", value), bullet
        assert "<td>" not in value and not is_artefact(value), bullet
        assert not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f-]{27}", value), bullet  # a UUID said once


def test_key_decisions_hold_no_narration(sqlite_store: Store, tmp_path: Path) -> None:
    session = imported(sqlite_store, long_run().write(tmp_path / "run.jsonl"))
    decisions = section(compacted(session), "key_decisions")
    assert not [d for d in decisions if re.match(r"(?i)(now )?let me|i'll|i will", d)]


def test_the_next_step_is_concrete(sqlite_store: Store, tmp_path: Path) -> None:
    log = long_run()
    log.call(
        "Bash",
        {"command": "mix docs"},
        "Exit code 1\n** (Mix) Could not find docs/checkout.md",
        error=True,
    )
    for i in range(8):
        log.call("Read", {"file_path": f"{CWD}/lib/more{i}.ex"}, "x\n" * 30)
    session = imported(sqlite_store, log.write(tmp_path / "run.jsonl"))
    state = section(compacted(session), "current_state")
    steps = [s for s in state if s.startswith("Next step:")]
    assert all(
        not re.match(r"Next step: (continue from|deal with|wait for the next)", s) for s in steps
    )
    assert any(s.startswith("Latest request (user") and "checkout docs" in s for s in state)


def test_a_second_compaction_carries_the_trail_instead_of_reading_again(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = long_run()
    session = imported(sqlite_store, log.write(tmp_path / "run.jsonl"))
    compacted(session)
    first = session.latest_checkpoint()
    assert first is not None
    trail = Trail.from_metadata(first.metadata[TRAIL_KEY])
    assert trail is not None and trail.through == first.covers_up_to
    # more work, then a second compaction: it reads only what the first did not cover
    for i in range(12):
        log.call(
            "Edit",
            {"file_path": f"{CWD}/docs/checkout{i}.md", "old_string": "a", "new_string": "b"},
        )
    log.user("Thanks, wrap it up.")
    path = log.write(tmp_path / "run.jsonl")
    (again,) = Syncer(sqlite_store).sync_source(Source(path))
    session = sqlite_store.get_session(again.session_id or "")
    reads: list[int] = []
    original = type(session).read_messages

    def spy(self: Session, *args: Any, **kwargs: Any) -> Any:
        reads.append(kwargs.get("after_seq", args[0] if args else 0))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(session), "read_messages", spy)
    text = compacted(session)
    assert reads and min(reads) >= first.covers_up_to
    files = "\n".join(section(text, "files_modified"))
    assert "`lib/cart/step0.ex`" in files and "`docs/checkout0.md`" in files


def test_the_window_after_compact_names_the_files_of_the_shared_compacted_runs(
    tmp_path: Path,
) -> None:
    """Every shared run holding an imported compaction: >= 90% of its edited files named in a
    32k window after ``threadline compact`` (edited files read by ``bench/probes.py``'s rules)."""
    require_shared(TRANSCRIPTS)
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import probes

    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    checked = 0
    for path in sorted(TRANSCRIPTS.rglob("*.json*")):
        for result in Syncer(store).sync_source(Source(path)):
            if not result.session_id or not result.checkpoints_added:
                continue
            session = store.get_session(result.session_id)
            edited = probes.edited_files(list(session.iter_messages()))
            if not edited:
                continue
            cwds = {
                c for m in session.iter_messages() if isinstance(c := m.metadata.get("cwd"), str)
            }
            compacted(session)
            window = build_context(
                store.get_session(session.id), policy=ContextPolicy(context_limit=32_000)
            )
            text = "\n".join(probes.visible(m) for m in window.messages)
            named = sum(probes.recalled(p, text, cwds) for p in edited)
            assert named >= 0.9 * len(edited), (path.name, named, len(edited))
            checked += 1
    assert checked >= 4


def test_narration_is_no_decision_but_a_reasoned_choice_is() -> None:
    from threadline import Message

    said = [
        Message.user("Clean up the dialyzer setup."),
        Message.assistant(
            "Now let me also remove the `.dialyzerignore` file since we no longer need it:"
        ),
        Message.assistant("We'll use MapSet instead of a list because lookups dominate."),
    ]
    decisions = section(ExtractiveSummarizer().summarize(said).text, "key_decisions")
    assert not any("dialyzerignore" in d for d in decisions)
    assert any("MapSet" in d for d in decisions)
