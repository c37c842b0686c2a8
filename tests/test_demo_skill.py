"""The demo loads a skill: ``threadline demo`` says so, the session holds the skill's result
(protected, never pruned), a compaction names it, and ``threadline context`` on the demo
session shows the system prompt section by section."""

from __future__ import annotations

from typer.testing import CliRunner

from threadline import open_store
from threadline.agent.skills import SKILL_TOOL
from threadline.cli.app import app
from threadline.demo.run import run_demo
from threadline.demo.skill_step import DEMO_SKILL, demo_skills
from threadline.messages import PROTECTED_RESULT_KEY, SKILL_KEY


def test_the_demo_run_loads_its_skill_and_compaction_keeps_its_name() -> None:
    store = open_store("memory://")
    result = run_demo(store, turns=40)
    assert result.skills_loaded == [DEMO_SKILL]
    session = store.get_session(result.session_id)
    loaded = [m for m in session.messages() if m.role == "tool" and m.name == SKILL_TOOL]
    assert len(loaded) == 1
    skill = demo_skills().get(DEMO_SKILL)
    assert skill is not None and loaded[0].text.startswith(skill.body)
    assert loaded[0].metadata[SKILL_KEY] == DEMO_SKILL
    assert loaded[0].metadata[PROTECTED_RESULT_KEY] is True
    checkpoints = session.checkpoints()
    assert checkpoints and checkpoints[0].covers_up_to > (loaded[0].seq or 0)
    assert f"Skills in use: `{DEMO_SKILL}`" in checkpoints[0].summary


def test_demo_output_shows_the_skill_and_context_shows_the_prompt_sections(
    sqlite_url: str,
) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["--store", sqlite_url, "demo", "--turns", "30"])
    assert done.exit_code == 0, (done.stdout, done.stderr)
    out = done.stdout
    assert f"Skills: the agent loaded {DEMO_SKILL} with the skill tool" in out
    assert "Skill hints" in out and f"1 entry: {DEMO_SKILL}" in out  # the restart's report
    store = open_store(sqlite_url)
    try:
        (info,) = store.list_sessions(top_level=True).items  # the reviewer's is a child
    finally:
        store.close()
    shown = runner.invoke(app, ["--store", sqlite_url, "context", info.id[:8]])
    assert shown.exit_code == 0, (shown.stdout, shown.stderr)
    report = shown.stdout
    rows = ["Agent instructions", "Skill hints", "Working directory", "Runtime context"]
    at = [report.index(f"  {row} ") for row in rows]
    assert at == sorted(at), report
    assert "You are demo-coder" in report and f"1 entry: {DEMO_SKILL}" in report
