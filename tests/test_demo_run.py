"""The offline demo: the simulated model, ``run_demo`` / ``resume_demo``, ``threadline demo``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from threadline import Message, open_store
from threadline.cli.app import app
from threadline.demo.coding_run import coding_run
from threadline.demo.run import (
    DEMO_MODEL_SPEC,
    demo_scenario_of,
    resume_demo,
    run_demo,
)
from threadline.demo.simulated import (
    SIMULATED_KEY,
    SIMULATED_MODEL_NAME,
    TURN_KEY,
    UNKNOWN_TURN_REPLY,
    SimulatedCodingModel,
    simulated_tools,
    user_message,
)
from threadline.demo.skill_step import with_skill_step
from threadline.errors import UsageError
from threadline.llm.base import ChatRequest, ChatResponse
from threadline.messages import ToolCall

TURNS = 60


def shape(m: Message) -> tuple[str, str, list[str], str | None]:
    return (m.role, m.text, [c.id for c in m.tool_calls], m.tool_call_id)


# -- the simulated model --------------------------------------------------------------


def test_simulated_model_plays_each_step_of_the_current_turn() -> None:
    turns = coding_run(3)
    model = SimulatedCodingModel(turns)
    turn = turns[1]
    history: list[Message] = [*turns[0].messages(), user_message(turns, 1)]
    expected = turn.messages()[1:]  # what the loop appends after the user message
    replies = [m for m in expected if m.role == "assistant"]
    for want in replies:
        got = model.complete(ChatRequest(messages=history)).message
        assert (got.text, got.tool_calls) == (want.text, want.tool_calls)
        assert got.model == SIMULATED_MODEL_NAME and got.metadata[SIMULATED_KEY] is True
        assert got.metadata[TURN_KEY] == 1
        assert got.usage is not None and got.usage.input_tokens
        history.append(got)
        history += [m for m in expected if m.tool_call_id in {c.id for c in got.tool_calls}]
    # a notice threadline injects (synthetic user message) does not start a new turn
    history.append(Message.user("[threadline: a notice]", synthetic=True))
    again = model.complete(ChatRequest(messages=history)).message
    assert again.text == turn.final
    # found by text too, when the metadata tag is gone (e.g. an imported history)
    by_text = model.complete(ChatRequest(messages=[Message.user(turns[2].user)])).message
    assert by_text.metadata[TURN_KEY] == 2


def test_simulated_model_streams_and_says_what_it_is() -> None:
    model = SimulatedCodingModel(coding_run(1))
    items = list(model.stream(ChatRequest(messages=[Message.user("what is the weather?")])))
    final = items[-1]
    assert isinstance(final, ChatResponse)
    assert final.message.text == UNKNOWN_TURN_REPLY and "simulated" in final.message.text
    assert "".join(str(i) for i in items[:-1]) == UNKNOWN_TURN_REPLY
    assert final.model == SIMULATED_MODEL_NAME


def test_simulated_tools_serve_planned_results_and_refuse_others() -> None:
    turns = coding_run(2)
    tools = simulated_tools(turns)
    call = turns[0].steps[0].calls[0]
    result = tools.run(call, session=open_store("memory://").create_session())
    assert result.text == turns[0].steps[0].results[0] and not result.metadata.get("is_error")
    bogus = ToolCall(id="call_nope", name="read_file", arguments={"path": "x"})
    refused = tools.run(bogus, session=open_store("memory://").create_session())
    assert refused.metadata["is_error"] and "no planned result" in refused.text


# -- the run -------------------------------------------------------------------------


def test_run_demo_drives_the_real_engine(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    statuses = []
    result = run_demo(store, turns=TURNS, seed=3, on_status=statuses.append)
    scenario = with_skill_step(coding_run(TURNS, seed=3))  # the demo loads its skill first
    expected = [m for t in scenario for m in t.messages()]

    # the store holds every message, in order, as the scenario said them
    stored = store.read_messages(result.session_id)
    assert result.stored_messages == len(stored) == len(expected)
    assert [shape(m) for m in stored] == [shape(m) for m in expected]

    # compaction and pruning happened, and the budget held throughout
    assert result.compactions >= 1 and result.checkpoints == result.compactions
    assert len(store.list_checkpoints(result.session_id)) == result.compactions
    assert result.pruned_results >= 1
    assert result.max_context_tokens <= result.budget < result.limit

    # the model is reported as simulated, everywhere
    assert result.simulated and result.model == SIMULATED_MODEL_NAME
    replies = [m for m in stored if m.role == "assistant"]
    assert all(m.model == SIMULATED_MODEL_NAME and m.metadata[SIMULATED_KEY] for m in replies)
    info = store.session_info(result.session_id)
    assert info.model == DEMO_MODEL_SPEC and "Simulated" in (info.title or "")
    assert info.metadata[SIMULATED_KEY] is True

    assert store.lock_holder(result.session_id) is None  # released at the end
    assert [s.turn for s in statuses] == list(range(1, TURNS + 1))
    assert statuses[-1].stored_messages == len(stored)
    assert statuses[-1].compactions == result.compactions

    # resuming from the store alone continues the scenario with its next turn
    session = store.get_session(result.session_id)
    assert demo_scenario_of(session) == (3, TURNS)
    resumed = resume_demo(store, result.session_id)
    following = coding_run(TURNS + 1, seed=3)[TURNS]
    assert resumed.messages_before == len(stored)
    assert resumed.checkpoint_id == store.list_checkpoints(result.session_id)[-1].id
    added = store.read_messages(result.session_id, after_seq=len(stored))
    assert [shape(m) for m in added] == [shape(m) for m in following.messages()]
    assert resumed.turn.reply.text == following.final
    assert store.lock_holder(result.session_id) is None
    store.close()


def test_resume_refuses_a_session_that_is_not_a_demo() -> None:
    store = open_store("memory://")
    other = store.create_session(agent="x")
    with pytest.raises(UsageError, match="not a demo session"):
        resume_demo(store, other.id)
    with pytest.raises(UsageError, match="at least one turn"):
        run_demo(store, turns=0)


# -- the command ------------------------------------------------------------------------


def test_demo_command_runs_restarts_and_exports(sqlite_url: str, tmp_path: Path) -> None:
    export = tmp_path / "demo.md"
    result = CliRunner().invoke(
        app, ["--store", sqlite_url, "demo", "--turns", "40", "--export", str(export)]
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    assert "The model is SIMULATED" in out and SIMULATED_MODEL_NAME in out
    assert "turn 40/40" in out and "Done: 40 turns" in out
    store = open_store(sqlite_url)
    try:
        (info,) = store.list_sessions(top_level=True).items
        # the fresh process ran one more turn: its pid differs, and the store grew
        assert f"reopened session {info.id}" in out
        assert "[pid " in out and f"[pid {os.getpid()}]" not in out
        delegation = 4  # request, task call, the subagent's answer, the closing reply
        expected = sum(len(t.messages()) for t in with_skill_step(coding_run(41))) + delegation
        assert info.message_count == expected
        assert store.lock_holder(info.id) is None
        # the subagent ran in a child session of the demo session, and its answer came back
        (child,) = store.list_sessions(parent=info.id).items
        assert child.agent == "reviewer" and child.message_count == 4
        assert f"task -> reviewer: child session {child.id} created" in out
        answer = store.get_session(child.id).messages()[-1].text
        assert "InvalidOperation appears in" in answer
        assert f"answer returned as the tool result: {answer}"[:60] in out
        assert "Subagents:" in out and "1 child session, 4 messages" in out
    finally:
        store.close()
    assert "Context Status" in out and "Compaction Triggers" in out
    assert "$ threadline sessions list" in out and info.id in out
    assert f"Markdown export ({expected:,} messages): {export}" in out
    text = export.read_text()
    assert text.startswith("# Simulated coding run") and "simulated-coding-agent" in text


def test_demo_on_a_memory_store_skips_the_restart(tmp_path: Path) -> None:
    export = str(tmp_path / "demo.md")
    result = CliRunner().invoke(
        app, ["--store", "memory://", "demo", "--turns", "3", "--export", export]
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "skipped: memory:// lives only in this process" in result.stdout


def test_the_next_commands_run_as_the_demo_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make demo`` runs ``.venv/bin/threadline``: the hints name that path and how to
    put ``threadline`` on PATH; run from PATH they say just ``threadline``."""
    from threadline.cli import demo as demo_cmd

    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "threadline"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (bin_dir / "activate").write_text("# activate\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr("sys.argv", [".venv/bin/threadline", "demo"])
    assert demo_cmd.command_word() == (
        ".venv/bin/threadline",
        "(or run `. .venv/bin/activate` to put threadline on PATH in this shell)",
    )
    result = CliRunner().invoke(
        app, ["--store", "memory://", "demo", "--turns", "2", "--export", str(tmp_path / "d.md")]
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Next: .venv/bin/threadline sessions history " in result.stdout
    assert "Next: threadline " not in result.stdout
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert demo_cmd.command_word() == ("threadline", None)
    monkeypatch.setattr("sys.argv", ["/usr/lib/python3/threadline/cli/app.py"])
    assert demo_cmd.command_word() == ("threadline", None)  # python -m threadline.cli.app
