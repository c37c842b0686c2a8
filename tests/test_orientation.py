"""After every compaction of a long run, the first model call is re-oriented: the session's
own facts (working directory, git branch, the date of its latest message), the current todo
list, the scratchpad index and the skills loaded are in the summary message (seen in what
the fake OpenAI server received); the process now running describes itself only in its
system prompt. For imported Claude Code and Codex runs the facts are the run's, read from
the raw file by this test's own rules."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeOpenAI
from threadline import open_store
from threadline.agent import Agent, AgentConfig, Calibrator, ToolRegistry
from threadline.agent.config import CONFIG_DIR_ENV
from threadline.agent.skills import PROJECT_SKILLS_DIR, SKILL_TOOL
from threadline.compaction.compactor import Compactor
from threadline.compaction.llm import make_summarizer
from threadline.compaction.orientation import ORIENTATION_HEADER, build_orientation
from threadline.compaction.trail import build_trail
from threadline.compaction.triggers import WRITTEN_AT_KEY
from threadline.context.builder import SUMMARY_HEADER, build_context
from threadline.context.policy import ContextPolicy
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.messages import Message, ToolCall

TURNS = 24


def day(when: datetime) -> str:
    """A time as the orientation states it: in UTC, to the minute, with the weekday."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC (%A)")


SUMMARY_START = SUMMARY_HEADER.split("(")[0]


def todo_list(turn: int) -> list[dict[str, str]]:
    """The list as the agent writes it at ``turn``: one item done per turn."""
    return [
        {"content": f"step {i}", "status": "completed" if i < turn else "in_progress"}
        for i in range(turn, turn + 3)
    ]


def test_orientation_is_in_the_first_call_after_every_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "orient-project"
    skill = workdir / PROJECT_SKILLS_DIR / "house-style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: house-style\ndescription: The house style.\n---\nWrite tersely.\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(workdir)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "config"))
    tools = ToolRegistry()

    @tools.tool()
    def todo_write(todos: list[Any]) -> str:
        """Replace the todo list."""
        return "Todos have been modified successfully"

    @tools.tool()
    def run_tests(target: str) -> str:
        """Run the tests."""
        return f"{target}: " + "".join(f"test_{j} PASSED\n" for j in range(120))

    config = AgentConfig.model_validate(
        {
            "name": "orienter",
            "model": "openai/gpt-4o",
            "system_prompt": "You are a careful agent.",
            "summarizer": "extractive",
            "tools": ["scratchpad_write", "scratchpad_read", "scratchpad_list"],
            "context": {
                "context_limit": 9_000,
                "response_reserve": 1_000,
                "max_messages_before_summary": 14,
                "min_recent_messages": 4,
                "preserve_user_turns": 1,
                "preserve_fill": False,
            },
        }
    )
    store = open_store("memory://")
    compacted_before: list[int] = []
    """The number of requests the server had received when each compaction finished: the
    next request is the first model call after it."""
    with FakeOpenAI() as srv:
        model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url, max_retries=0)
        agent = Agent(
            config,
            store=store,
            model=model,
            tools=tools,
            calibrator=Calibrator(),
            on_event=lambda name, _: (
                compacted_before.append(srv.request_count) if name == "compacted" else None
            ),
        )
        session = agent.new_session()
        for turn in range(TURNS):
            if turn == 1:
                srv.reply_tool_call(SKILL_TOOL, {"name": "house-style"})
            srv.reply_tool_call(
                "scratchpad_write", {"name": f"note-{turn}", "content": f"finding {turn} " * 5}
            )
            srv.reply_tool_call("todo_write", {"todos": todo_list(turn)})
            srv.reply_tool_call("run_tests", {"target": f"suite{turn}"})
            srv.reply_text(f"turn {turn} done")
            agent.run_turn(session, f"do turn {turn}")
        model.close()
        requests = [r.json() for r in srv.requests]
    assert srv.pending == 0
    firsts = [n for n in compacted_before if n < len(requests)]
    assert len(firsts) >= 3, f"only {len(compacted_before)} compactions"
    checkpoints = session.checkpoints()
    assert len(checkpoints) == len(compacted_before)
    system = requests[0]["messages"][0]["content"]
    runtime = system[system.index("# Runtime context") :]
    by_cut = {c.covers_up_to: c for c in checkpoints}
    shown: set[int] = set()
    for index in firsts:
        messages = requests[index]["messages"]
        summary = next(m["content"] for m in messages if m["content"].startswith(SUMMARY_START))
        # a stable window may still show an earlier checkpoint (it adopts the newest at its
        # next re-trim); whichever it shows carries the orientation written with it
        found = re.search(r"messages up to #(\d+)\)", summary)
        assert found is not None
        checkpoint = by_cut[int(found.group(1))]
        shown.add(checkpoint.id)
        orientation = summary[summary.index(ORIENTATION_HEADER) :]
        # the process describes itself in the system prompt, not in the orientation
        assert runtime not in orientation and "# Working directory" not in orientation
        stored = session.messages()
        newest = next(m for m in stored if m.seq == checkpoint.metadata[WRITTEN_AT_KEY])
        assert f"- Latest message: {day(newest.created_at)}" in orientation
        # the todo list and the scratchpad as they were when the checkpoint was written
        upto = [m for m in stored if (m.seq or 0) <= checkpoint.covers_up_to]
        written = _arguments(stored, checkpoint.metadata[WRITTEN_AT_KEY], "todo_write", "todos")
        for item in written[-1]:
            status = item["status"].replace("_", " ")
            assert f"- [{status}] {item['content']}" in orientation
        notes = _arguments(stored, checkpoint.metadata[WRITTEN_AT_KEY], "scratchpad_write", "name")
        for name in notes:
            assert f"- {name} (" in orientation
        assert "Skills loaded" in orientation and "- house-style" in orientation
        assert upto  # the checkpoint covers something
        # the snapshot itself names the skill in use
        assert "Skills in use: `house-style`" in summary
    assert len(shown) >= 3  # three different checkpoints were seen, each oriented


def test_orientation_is_empty_with_nothing_to_say_and_lists_what_there_is() -> None:
    store = open_store("memory://")
    assert build_orientation(store.create_session(), build_trail([])) == ""
    session = store.create_session(metadata={"cwd": "/w", "git_branch": "fix/retry"})
    session.scratchpad_write("plan", "x" * 1234)
    call = ToolCall(id="t", name="TodoWrite", arguments={"todos": todo_list(1)})
    said = Message.assistant("", tool_calls=[call])
    said.created_at = datetime(2026, 2, 23, 13, 54, tzinfo=timezone(timedelta(hours=1)))
    text = build_orientation(session, build_trail([said]), said)
    assert text.startswith(ORIENTATION_HEADER)
    assert "- Working directory: /w" in text and "- Git branch: fix/retry" in text
    assert "- Latest message: 2026-02-23 12:54 UTC (Monday)" in text  # in UTC, by its clock
    assert "- plan (1,234 characters)" in text
    assert "- [completed] step 0" not in text and "- [in progress] step 1" in text
    # the directory the source recorded wins over a later `cd` of the agent's shell
    moved = Message.user("go on", metadata={"cwd": "/w/sub"})
    assert "- Working directory: /w" in build_orientation(session, build_trail([moved])).split("\n")
    # with none recorded, the first directory the messages report
    bare = store.create_session()
    first = Message.user("start", metadata={"cwd": "/w"})
    text = build_orientation(bare, build_trail([first, moved]))
    assert "- Working directory: /w" in text.split("\n")
    # an import whose format records no times: its messages bear the import's, no date
    aider = store.create_session(metadata={"format": "aider"})
    assert "Latest message" not in build_orientation(aider, build_trail([moved]), moved)
    dated = store.create_session(metadata={"format": "aider", "source_updated_at": "2026-02-23"})
    assert "Latest message" in build_orientation(dated, build_trail([moved]), moved)


def test_a_todo_list_all_done_before_a_check_that_still_fails_says_so() -> None:
    """Shaped like a shared Claude Code run: the agent marks every item completed, then the
    integration test it wrote fails. The list is dated, and said to predate that failure
    while it stands; a clean rerun of the same test takes the word away."""
    store = open_store("memory://")
    session = store.create_session()
    done = [{"content": "Write integration tests", "status": "completed"}]
    test = "mise run test:integration -- -run TestMidSessionCommit -v"

    def bash(call_id: str, output: str, *, error: bool) -> list[Message]:
        call = ToolCall(id=call_id, name="Bash", arguments={"command": test})
        meta = {"is_error": True} if error else {}
        return [
            Message.assistant("", tool_calls=[call]),
            Message.tool(output, tool_call_id=call_id, metadata=meta),
        ]

    messages = [
        Message.user("add the integration tests"),
        Message.assistant(
            "", tool_calls=[ToolCall(id="t", name="TodoWrite", arguments={"todos": done})]
        ),
        Message.tool("Todos have been modified successfully", tool_call_id="t"),
        *bash("b", "Exit code 1\n--- FAIL: TestMidSessionCommit (0.68s)\nFAIL", error=True),
    ]
    for i, m in enumerate(messages, 1):
        m.seq = i
    text = build_orientation(session, build_trail(messages))
    assert "Todo list (as last written, at #2):" in text
    assert f"[since it was written: `{test}` failed at #5, and has not passed since]" in text
    fixed = [*messages, *bash("c", "--- PASS: TestMidSessionCommit (0.41s)\nPASS\nok", error=False)]
    for i, m in enumerate(fixed, 1):
        m.seq = i
    text = build_orientation(session, build_trail(fixed))
    assert "Todo list (as last written, at #2):" in text and "has not passed" not in text


def test_an_llm_written_snapshot_keeps_the_skills_in_use_and_the_orientation(
    tmp_path: Path,
) -> None:
    """The model's snapshot says nothing of skills; the checkpoint still names them (the
    trail, not the summarizer, is the source) and carries the orientation block."""
    session = open_store("memory://").create_session(
        model="openai/gpt-4o", metadata={"cwd": "/srv/app"}
    )
    for i in range(8):
        call = ToolCall(id=f"s{i}", name=SKILL_TOOL, arguments={"name": f"skill-{i % 2}"})
        session.append(
            [
                Message.user(f"request {i}"),
                Message.assistant("", tool_calls=[call]),
                Message.tool(
                    f"instructions {i}",
                    tool_call_id=call.id,
                    name=SKILL_TOOL,
                    metadata={"skill": f"skill-{i % 2}", "protected": True},
                ),
                Message.assistant(f"done {i}"),
            ]
        )
    session.scratchpad_write("findings", "the port is 8443")
    snapshot = (
        "## Files Modified\n- (none)\n## Key Decisions\n- kept the API\n"
        "## Important Values\n- port 8443\n## Current State\n- answering requests\n"
        "## Pending Tasks\n- (none)\n"
    )
    with FakeOpenAI() as srv:
        srv.reply_text(snapshot, usage=(500, 60))
        model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url, max_retries=0)
        compactor = Compactor(
            make_summarizer("llm", model),
            policy=ContextPolicy(preserve_fill=False, min_recent_messages=2),
        )
        result = compactor.compact(session, force=True, model="openai/gpt-4o")
        model.close()
        sent = json.dumps(srv.requests[0].json())
    assert result.compacted and result.checkpoint is not None
    assert "the `skill` tool" in sent  # the summarizer was asked to keep skill names
    checkpoint = result.checkpoint
    assert checkpoint.metadata["summarizer"] == "llm"  # the model's snapshot was kept
    assert "Skills in use: `skill-0`, `skill-1`" in checkpoint.summary
    window = build_context(session, policy=ContextPolicy(preserve_fill=False))
    summary = next(m.text for m in window.messages if m.summary)
    orientation = summary[summary.index(ORIENTATION_HEADER) :]
    assert "- Working directory: /srv/app" in orientation
    assert "- findings (16 characters)" in orientation
    assert "- skill-0" in orientation and "- skill-1" in orientation


def _arguments(stored: list[Message], upto: int, tool: str, key: str) -> list[Any]:
    """``key`` of every ``tool`` call made at or before seq ``upto``, in order."""
    return [
        c.arguments[key]
        for m in stored
        if (m.seq or 0) <= upto
        for c in m.tool_calls
        if c.name == tool
    ]


# -- imported runs: the session's facts, not the process's --------------------------------

IMPORTED = (
    "claude-code/entire-cli-2compactions-b8659b3a4d.jsonl",
    "claude-code/spotter-4d5611e5/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "claude-code/codemie-session-624a4a58-compacted.jsonl",
    "codex/standard-syntax-basic-2compactions-019fc928.jsonl",
    "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl",
    "codex/codemie-rollout-2026-05-11T11-26-55-019e1625.jsonl",
)


def raw_facts(path: Path) -> tuple[str, str, datetime]:
    """(working directory, git branch, time of the latest message) as the raw file states
    them: Claude Code's ``cwd`` / ``gitBranch`` / ``timestamp`` on its user and assistant
    records; Codex's ``session_meta`` (``cwd``, ``git.branch``), ``turn_context``
    (``cwd``) and the timestamp of its last ``response_item``."""
    cwd = branch = stamp = None
    decoder = json.JSONDecoder()
    for line in path.read_text(encoding="utf-8").splitlines():
        at, line = 0, line.strip()
        while at < len(line):
            rec, at = decoder.raw_decode(line, at)
            at = len(line) - len(line[at:].lstrip())
            payload = rec.get("payload") or {}
            if rec.get("type") in ("user", "assistant"):
                cwd = cwd or rec.get("cwd")  # where it ran: a later `cd` moves the shell only
                branch = rec.get("gitBranch") or branch
                stamp = rec.get("timestamp") or stamp
            elif rec.get("type") == "session_meta":
                cwd = payload.get("cwd") or cwd
                branch = (payload.get("git") or {}).get("branch") or branch
            elif rec.get("type") == "turn_context":
                cwd = payload.get("cwd") or cwd
            elif rec.get("type") == "response_item":
                stamp = rec.get("timestamp") or stamp
    assert cwd and branch and stamp
    return cwd, branch, datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@pytest.mark.parametrize("run", IMPORTED)
def test_an_imported_runs_orientation_states_its_own_directory_branch_and_day(
    run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``threadline compact`` run from elsewhere, months later: the window's orientation
    says where and when the run worked, and nothing of the process compacting it."""
    from tests.conftest import TRANSCRIPTS, require_shared
    from tests.real_runs import import_into

    require_shared(TRANSCRIPTS)
    monkeypatch.chdir(tmp_path)
    cwd, branch, latest = raw_facts(TRANSCRIPTS / run)
    store = open_store(f"sqlite://{tmp_path / 'o.db'}")
    (session,) = [s for s in import_into(store, TRANSCRIPTS / run) if s.info.parent_id is None]
    result = Compactor(make_summarizer("extractive")).compact(
        session, force=True, keep_recent=2, keep_turns=0
    )
    assert result.compacted and result.checkpoint is not None
    window = build_context(session, policy=ContextPolicy(context_limit=64_000))
    summary = next(m.text for m in window.messages if m.summary)
    orientation = summary[summary.index(ORIENTATION_HEADER) :]
    assert f"- Working directory: {cwd}\n" in orientation
    assert f"- Git branch: {branch}\n" in orientation
    assert f"- Latest message: {day(latest)}" in orientation
    assert str(tmp_path) not in orientation and "Current date" not in orientation
