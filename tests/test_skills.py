"""Skills: found on disk, listed in the system prompt, loaded by the ``skill`` tool over the
OpenAI wire, and never pruned while other large tool results are cleared."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeOpenAI
from threadline import Message, open_store
from threadline.agent import Agent, AgentConfig, Calibrator, RuntimeContextConfig, ToolRegistry
from threadline.agent.config import CONFIG_DIR_ENV, parse_agent
from threadline.agent.prompt import (
    MEDIA_HEADER,
    MEDIA_TEXT,
    SECTION_ORDER,
    build_system_prompt,
    join_sections,
    prompt_sections,
)
from threadline.agent.skills import (
    PROJECT_SKILLS_DIR,
    SKILL_TOOL,
    discover_skills,
    load_skill,
)
from threadline.errors import ConfigError, SkillError
from threadline.llm.openai_provider import OpenAIChatModel
from threadline.messages import (
    PROTECTED_RESULT_KEY,
    SKILL_KEY,
    ImagePart,
    TextPart,
    ToolCall,
)

BIG = 20_000
"""Characters of each large tool result: over the 10,000-character pruning line the
pruning test sets (the seed's 50,000 would need a window of 100k tokens to show it)."""


def write_skill(root: Path, folder: str, front: str, body: str) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return path


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The project's and the user's skills folders (cwd is the project)."""
    project = tmp_path / "project"
    user_config = tmp_path / "config"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(user_config))
    return project / PROJECT_SKILLS_DIR, user_config / "skills"


def big_text(tag: str, size: int = BIG) -> str:
    lines = "".join(f"{tag}:{j} value={j * 7919 % 10007} status=ok\n" for j in range(size // 30))
    return f"{tag} first line\n{lines}{tag}-END"


# -- finding and parsing ----------------------------------------------------------------


def test_project_skills_win_over_user_skills_and_are_sorted(dirs: tuple[Path, Path]) -> None:
    project, user = dirs
    write_skill(project, "zeta", "name: zeta\ndescription: Last by name.", "Z steps.")
    write_skill(project, "alpha", "name: alpha\ndescription: From the project.", "A steps.")
    write_skill(user, "alpha", "name: alpha\ndescription: From the user.", "other")
    write_skill(user, "mid", "name: mid\ndescription: Only the user has it.", "M steps.")
    found = discover_skills()
    assert found.problems == []
    assert found.hints() == [
        ("alpha", "From the project."),
        ("mid", "Only the user has it."),
        ("zeta", "Last by name."),
    ]
    assert found.skills["alpha"].body == "A steps."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no front matter at all", "must begin with YAML front matter"),
        ("---\nname: [unclosed\n---\nbody\n", "YAML syntax error"),
        ("---\ndescription: x\n---\nbody\n", "needs a 'name'"),
        ("---\nname: Bad Name\ndescription: x\n---\nbody\n", "lower-case"),
        ("---\nname: ok\n---\nbody\n", "needs a 'description'"),
        ("---\nname: ok\ndescription: x\n---\n\n", "no instructions"),
        ("---\n- a list\n---\nbody\n", "must be a mapping"),
    ],
)
def test_a_bad_skill_md_is_a_clear_error_naming_the_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    with pytest.raises(SkillError) as info:
        load_skill(folder)
    assert str(folder / "SKILL.md") in str(info.value)
    assert expected in str(info.value)


def test_a_broken_skill_is_left_out_and_reported_never_a_crash(dirs: tuple[Path, Path]) -> None:
    project, _ = dirs
    write_skill(project, "good", "name: good\ndescription: Works.", "Do it well.")
    broken = write_skill(project, "broken", "name: [oops", "body")
    (project / "notaskill").mkdir()
    store = open_store("memory://")
    agent = Agent(AgentConfig(model="openai/gpt-4o"), store=store, model=None)
    assert list(agent.skills.skills) == ["good"]
    assert any(str(broken / "SKILL.md") in p for p in agent.skill_problems)
    assert any("notaskill" in p and "not found" in p for p in agent.skill_problems)
    window = agent.build(agent.new_session())
    assert any("skill left out" in n and "broken" in n for n in window.report.notes)


def test_agent_config_names_and_paths(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    project, _ = dirs
    write_skill(project, "one", "name: one\ndescription: First.", "1")
    write_skill(project, "two", "name: two\ndescription: Second.", "2")
    elsewhere = write_skill(tmp_path / "lib", "three", "name: three\ndescription: Third.", "3")
    config = parse_agent(f"skills: [two, {elsewhere}, nosuch]\n")
    found = discover_skills(config.skills)
    assert sorted(found.skills) == ["three", "two"]
    assert found.problems and "nosuch" in found.problems[0]
    assert sorted(discover_skills(["*"]).skills) == ["one", "two"]
    with pytest.raises(ConfigError, match="listed twice"):
        parse_agent("skills: [one, one]\n")


def test_skill_files_are_read_inside_the_folder_only(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", "demo", "name: demo\ndescription: D.", "Use the template.")
    (folder / "templates").mkdir()
    (folder / "templates" / "notes.md").write_text("TEMPLATE", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("SECRET", encoding="utf-8")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    skill = load_skill(folder)
    registry = ToolRegistry([discover_skills([str(folder)]).tool()])

    def run(**arguments: Any) -> tuple[str, dict[str, Any]]:
        result = registry.run(ToolCall(id="c", name=SKILL_TOOL, arguments=arguments))
        return result.text, result.metadata

    text, meta = run(name="demo")
    assert text.startswith("Use the template.")
    assert "templates/notes.md" in text
    assert meta == {SKILL_KEY: "demo", PROTECTED_RESULT_KEY: True}
    assert run(name="demo", file="templates/notes.md")[0] == "TEMPLATE"
    assert skill.read("templates/notes.md") == "TEMPLATE"
    for escape in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "."):
        text, meta = run(name="demo", file=escape)
        assert meta.get("is_error") and "not a file inside its folder" in text, escape
    text, meta = run(name="nosuch")
    assert meta.get("is_error") and "no skill named 'nosuch'" in text


# -- the must-show: on disk -> system prompt -> skill tool -> survives pruning ------------


def test_skill_on_disk_is_in_the_prompt_loaded_by_the_tool_and_never_pruned(
    dirs: tuple[Path, Path],
) -> None:
    project, _ = dirs
    step = "Check the changelog, bump the version, tag it and push the tag. "
    body = "Follow these release steps exactly.\n" + step * (BIG // len(step) + 1) + "SKILL-END"
    write_skill(project, "release", "name: release\ndescription: How to cut a release here.", body)
    write_skill(project, "alpha", "name: alpha\ndescription: Another skill.", "Alpha steps.")
    reads = ToolRegistry()

    @reads.tool()
    def read_file(path: str) -> str:
        """Read a file."""
        return big_text(f"FILE-{path}")

    config = AgentConfig.model_validate(
        {
            "name": "releaser",
            "model": "openai/gpt-4o",
            "system_prompt": "You are a release agent.",
            "summarizer": "extractive",
            "context": {
                "context_limit": 36_000,
                "auto_summarize": False,
                "prune_min_chars": 10_000,
                "prune_soft_at": 0.05,
                "prune_hard_at": 0.10,
                "prune_hard_to": 0.08,
            },
        }
    )
    store = open_store("memory://")
    with FakeOpenAI() as srv:
        srv.reply_tool_call(SKILL_TOOL, {"name": "release"})
        for name in ("a.txt", "b.txt", "c.txt"):
            srv.reply_tool_call("read_file", {"path": name})
        srv.reply_text("released")
        for _ in range(3):
            srv.reply_text("ok")
        model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url, max_retries=0)
        agent = Agent(config, store=store, model=model, tools=reads, calibrator=Calibrator())
        session = agent.new_session()
        agent.run_turn(session, "cut the release")
        for i in range(3):
            agent.run_turn(session, f"anything else {i}?")
        model.close()
        requests = [r.json() for r in srv.requests]

    # the system prompt lists both skills, sorted, and the tool is offered
    system = requests[0]["messages"][0]["content"]
    hints = system.index("- alpha: Another skill.")
    assert hints < system.index("- release: How to cut a release here.")
    assert system.index("You are a release agent.") < hints
    assert SKILL_TOOL in [t["function"]["name"] for t in requests[0]["tools"]]
    # the tool's result is the body, stored protected and named
    stored = [m for m in session.messages() if m.role == "tool"]
    assert stored[0].name == SKILL_TOOL and stored[0].text == body
    assert stored[0].metadata[SKILL_KEY] == "release"
    # the last request: every read_file result cleared, the skill's body whole
    last = requests[-1]["messages"]
    tool_msgs = [m for m in last if m["role"] == "tool"]
    skill_msgs = [m for m in tool_msgs if m["content"] == body]
    assert len(skill_msgs) == 1
    cleared = [m for m in tool_msgs if "cleared by threadline" in m["content"]]
    assert len(cleared) == 3, [m["content"][:80] for m in tool_msgs]
    window = agent.build(session)
    actions = {(p["tool"], p["action"]) for p in window.report.pruned}
    assert actions == {("read_file", "hard")}
    assert json.dumps(requests[-1]).count("SKILL-END") == 1


# -- the assembled system prompt ----------------------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=80
).filter(str.strip)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.text(max_size=200),
    skills=st.lists(st.tuples(_names, _text), max_size=6),
    subagents=st.lists(st.tuples(_names, _text), max_size=4),
    media=st.booleans(),
    time=st.sampled_from(["date", "hour", "none"]),
    cwd=st.sampled_from(["/work/proj", "/tmp/x y", "C:\\\\repo"]),
    first=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1)),
    later_minutes=st.integers(min_value=0, max_value=59),
    shuffle=st.randoms(use_true_random=False),
)
def test_two_turns_with_the_same_config_get_a_byte_identical_system_prompt(
    base: str,
    skills: list[tuple[str, str]],
    subagents: list[tuple[str, str]],
    media: bool,
    time: str,
    cwd: str,
    first: datetime,
    later_minutes: int,
    shuffle: Any,
) -> None:
    """Same config, a later moment of the same hour, hints listed in another order (a
    directory read in another order): the same bytes, in the fixed section order."""
    tz = ZoneInfo("Europe/Berlin")
    now = first.replace(minute=0, tzinfo=tz)
    later = now.replace(minute=later_minutes, second=59)
    settings_ = RuntimeContextConfig.model_validate({"time": time})
    kwargs: dict[str, Any] = {"media": media, "cwd": cwd}
    one = build_system_prompt(
        base, settings_, skills=skills, subagents=subagents, now=now, **kwargs
    )
    reordered_skills, reordered_agents = list(skills), list(subagents)
    shuffle.shuffle(reordered_skills)
    shuffle.shuffle(reordered_agents)
    two = build_system_prompt(
        base, settings_, skills=reordered_skills, subagents=reordered_agents, now=later, **kwargs
    )
    assert one.encode() == two.encode()
    sections = prompt_sections(
        base, settings_, skills=skills, subagents=subagents, now=now, **kwargs
    )
    assert join_sections(sections) == one
    names = [s.name for s in sections]
    assert names == [n for n in SECTION_ORDER if n in names]
    assert ("skills" in names) == bool(skills) and ("subagents" in names) == bool(subagents)
    assert ("media" in names) == media and ("working_directory" in names)


def test_agent_prompt_is_stable_across_turns_and_holds_every_section(
    dirs: tuple[Path, Path],
) -> None:
    project, _ = dirs
    write_skill(project, "b-skill", "name: b-skill\ndescription: Second.", "B")
    write_skill(project, "a-skill", "name: a-skill\ndescription: First.", "A")
    store = open_store("memory://")
    moments = iter(
        [datetime(2025, 3, 3, 9, 5, tzinfo=ZoneInfo("UTC"))] * 2
        + [datetime(2025, 3, 3, 17, 40, tzinfo=ZoneInfo("UTC"))] * 10
    )
    with FakeOpenAI() as srv:
        for _ in range(3):
            srv.reply_text("fine")
        model = OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url, max_retries=0)
        agent = Agent(
            AgentConfig(model="openai/gpt-4o", system_prompt="Be exact."),
            store=store,
            model=model,
            calibrator=Calibrator(),
            now=lambda: next(moments),
            subagent_hints=[("reviewer", "Reviews a diff."), ("explorer", "Finds code.")],
        )
        session = agent.new_session()
        image = Message.user(
            [TextPart(text="what is this?"), ImagePart(url="https://example.com/a.png")]
        )
        agent.run_turn(session, "hello")
        agent.run_turn(session, "again")
        agent.run_turn(session, image)
        model.close()
        prompts = [r.json()["messages"][0]["content"] for r in srv.requests]
    assert prompts[0].encode() == prompts[1].encode()
    assert "# Media" not in prompts[1] and "# Media" in prompts[2]
    # one byte-identical prefix apart from the media section the image brought in
    assert prompts[2].replace(f"{MEDIA_HEADER}\n{MEDIA_TEXT}\n\n", "") == prompts[0]
    order = [
        prompts[2].index(h)
        for h in (
            "Be exact.",
            "# Skills",
            "- a-skill",
            "- b-skill",
            "# Subagents",
            "- explorer",
            "- reviewer",
            "# Working directory",
            "# Media",
            "# Runtime context",
        )
    ]
    assert order == sorted(order)


def test_a_resumed_session_with_an_image_gets_the_media_section_in_its_report() -> None:
    store = open_store("memory://")
    session = store.create_session(model="openai/gpt-4o")
    session.append(
        [
            Message.user([TextPart(text="see"), ImagePart(url="https://example.com/x.png")]),
            Message.assistant("a cat"),
        ]
    )
    agent = Agent(AgentConfig(model="openai/gpt-4o"), store=store, skills=discover_skills([]))
    window = agent.build(session)
    names = [s.name for s in window.report.prompt_sections]
    assert names == ["instructions", "working_directory", "media", "runtime"]
    plain = store.create_session(model="openai/gpt-4o")
    plain.append([Message.user("hi")])
    assert "media" not in [s.name for s in agent.build(plain).report.prompt_sections]
