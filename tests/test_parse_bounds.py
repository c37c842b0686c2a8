"""Every parser of a user's files is bounded (issue 33, point 3).

Before: a 100 KB ``SKILL.md`` whose description nests 50,000 brackets made
``threadline context`` fail "unexpected RecursionError" and every agent in the folder
fail to start (a server answered each prompt 500), though the docs promise "a bad
SKILL.md is left out and the agent runs on"; the same for an agent file and the
settings file (``tomllib`` recurses too); ``memory import`` of deeply nested JSON
exited 1 where ``sessions import`` refuses it with 2. Now each is that file's error,
and a property feeds nested, huge and malformed text to every one of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from threadline import catalog, open_store
from threadline.agent import Agent, AgentConfig
from threadline.agent.config import CONFIG_DIR_ENV, load_agent_file, parse_agent
from threadline.agent.skills import PROJECT_SKILLS_DIR, parse_skill
from threadline.cli.app import app
from threadline.cli.memory_cmd import read_import
from threadline.config import parse_settings
from threadline.errors import ConfigError, ImportFormatError, SkillError, ThreadlineError
from threadline.yaml_limits import MAX_YAML_CHARS, MAX_YAML_DEPTH, load_yaml

DEEP = 50_000


def nested_description(depth: int = DEEP) -> str:
    """The issue's SKILL.md: 100 KB, a description of ``depth`` nested brackets."""
    return f"---\nname: deep\ndescription: {'[' * depth}{']' * depth}\n---\nThe body.\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (the cwd) with a good skill; its skills folder is returned."""
    root = tmp_path / "project"
    skills = root / PROJECT_SKILLS_DIR
    (skills / "good").mkdir(parents=True)
    (skills / "good" / "SKILL.md").write_text(
        "---\nname: good\ndescription: Works.\n---\nDo it well.\n", encoding="utf-8"
    )
    monkeypatch.chdir(root)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "config"))
    return skills


def test_a_deeply_nested_skill_md_is_left_out_with_a_note_and_the_agent_runs_on(
    project: Path,
) -> None:
    deep = project / "deep" / "SKILL.md"
    deep.parent.mkdir()
    deep.write_text(nested_description(), encoding="utf-8")
    assert deep.stat().st_size > 100_000
    agent = Agent(AgentConfig(model="openai/gpt-4o"), store=open_store("memory://"), model=None)
    assert list(agent.skills.skills) == ["good"]
    [problem] = agent.skill_problems
    assert problem.startswith(f"{deep}:3:") and "nests more than 100 levels deep" in problem
    window = agent.build(agent.new_session())
    assert any("skill left out" in n and str(deep) in n for n in window.report.notes)


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("name: x\ndescription:\n" + "- " * DEEP + "x", "nests more than 100 levels"),
        ("name: x\ndescription:\n" + "".join(" " * i + "- \n" for i in range(150)), "nests"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                for p, n in zip("abcdefgh", "bcdefghi", strict=True)
            ),
            "holds more than 100,000 values",
        ),
        ("name: x\ndescription: ok\ndate: 2024-13-45", "cannot be read"),
        ("name: {x: 1", "YAML syntax error"),
    ],
    ids=["block-sequences", "indented", "aliases", "bad-date", "unclosed"],
)
def test_hostile_front_matter_is_that_files_error(front: str, expected: str) -> None:
    with pytest.raises(SkillError, match=expected) as info:
        parse_skill(f"---\n{front}\n---\nbody\n", source="s/SKILL.md", folder=Path("s"))
    assert str(info.value).startswith("s/SKILL.md")


def test_an_agent_file_nested_too_deep_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\nsystem_prompt: " + "{a: " * DEEP + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"deep\.yaml:2:\d+: YAML nests more than 100"):
        load_agent_file(path)
    fine = "name: fine\ncontext:\n  " + "".join("x" for _ in range(1)) + ": 1\n"
    with pytest.raises(ConfigError, match="unknown field"):  # within bounds: validated
        parse_agent(fine, source="fine.yaml")


def test_yaml_within_the_limits_reads_as_before() -> None:
    nested: Any = "leaf"
    for _ in range(MAX_YAML_DEPTH - 1):
        nested = [nested]
    assert load_yaml(json.dumps(nested), source="f", error=ConfigError) == nested
    with pytest.raises(ConfigError, match="nests more than"):
        load_yaml(json.dumps([nested]), source="f", error=ConfigError)
    shared = "a: &x [1, 2]\nb: *x\nc: *x\n"  # aliases of a small value are fine
    assert load_yaml(shared, source="f", error=ConfigError) == {
        "a": [1, 2],
        "b": [1, 2],
        "c": [1, 2],
    }


def test_a_settings_file_nested_too_deep_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"config\.toml:2: TOML nests more than 100"):
        parse_settings("[session]\nx = " + "[" * DEEP + "]" * DEEP, source="config.toml")
    with pytest.raises(ConfigError, match="TOML nests more than"):
        parse_settings("x = " + "{a = " * 5000 + "1" + "}" * 5000, source="config.toml")
    brackets_in_text = "# " + "[" * 500 + "\n" + "[session]\n"  # comments do not nest
    assert parse_settings(brackets_in_text, source="c.toml").session is not None


def test_memory_import_of_deeply_nested_json_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"records": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(app, ["--store", url, "memory", "import", str(path)])
    assert result.exit_code == 2, result.output
    assert "nests more than 100 levels deep" in result.output
    assert "RecursionError" not in result.output


def test_a_catalog_file_nested_too_deep_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "catalog.json"
    path.write_text("[" * DEEP, encoding="utf-8")
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    catalog._reset_caches()
    try:
        with pytest.raises(ConfigError, match="JSON nests more than 100"):
            catalog._load_override()
    finally:
        catalog._reset_caches()


# -- the property: nested, huge and malformed text to every parser ----------------------------

YAML_PIECES = [
    "[",
    "]",
    "{",
    "}",
    "- ",
    ": ",
    "a",
    "&x ",
    "*x",
    "!!python/object ",
    "\n",
    "  ",
    "'",
    '"',
    "#",
    ",",
    "? ",
    "|",
    ">",
    "%YAML 1.1\n",
    "---\n",
    "2024-13-45",
    "!!binary ",
    "<<: ",
    "\t",
    "\\",
    "@",
    "`",
    "0x",
    ".inf",
    "~",
]
JSON_PIECES = ["[", "]", "{", "}", '"a"', ":", ",", "1e999", "NaN", "-", "\\u", '"', " ", "\n"]
TOML_PIECES = [
    "[",
    "]",
    "{",
    "}",
    "a",
    " = ",
    '"',
    "'",
    "'''",
    '"""',
    "#",
    "\n",
    ",",
    ".",
    "1979-05-27T07:32:00",
    "[[a]]",
    "[session]",
    "inf",
    "0x",
    "=",
    "\\",
]


def hostile(pieces: list[str]) -> st.SearchStrategy[str]:
    nested = st.builds(
        lambda opener, depth, tail: opener * depth + tail,
        st.sampled_from(["[", "{", "- ", "{a: ", "[{", "a = [", "x = {y = "]),
        st.integers(min_value=1, max_value=30_000),
        st.sampled_from(["", "]", "x", "}" * 3]),
    )
    huge = st.builds(
        lambda n, c: c * n, st.sampled_from([MAX_YAML_CHARS + 1, 3 << 20]), st.sampled_from("a[ \n")
    )
    malformed = st.lists(st.sampled_from(pieces), max_size=60).map("".join)
    return st.one_of(nested, huge, malformed, st.text(max_size=200))


def _skill(text: str) -> object:
    return parse_skill(f"---\n{text}\n---\nbody\n", source="SKILL.md", folder=Path("."))


def _agent(text: str) -> object:
    return parse_agent(text, source="a.yaml")


def _settings(text: str) -> object:
    return parse_settings(text, source="c.toml")


def _memory_import(text: str) -> object:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        Path(path).write_text(text, encoding="utf-8", errors="surrogatepass")
        return read_import(path)


@pytest.mark.parametrize(
    ("parse", "allowed", "pieces"),
    [
        (_skill, SkillError, YAML_PIECES),
        (_agent, ConfigError, YAML_PIECES),
        (_settings, ConfigError, TOML_PIECES),
        (_memory_import, ImportFormatError, JSON_PIECES),
    ],
    ids=["skill-front-matter", "agent-file", "settings", "memory-import"],
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_parser_of_user_files_crashes(
    parse: Callable[[str], object],
    allowed: type[ThreadlineError],
    pieces: list[str],
    data: st.DataObject,
) -> None:
    """Nested, huge or malformed: the parser's own clear error, nothing else."""
    text = data.draw(hostile(pieces))
    with contextlib.suppress(allowed):
        parse(text)


def test_a_server_started_there_answers_prompts_on_a_real_model(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's second reproduction: every prompt on a real model was a 500."""
    from fastapi.testclient import TestClient

    from tests.fakes import FakeOpenAI
    from tests.test_server import wait_for
    from threadline.server import create_app
    from threadline.server.config import ServerConfig

    (project / "deep").mkdir()
    (project / "deep" / "SKILL.md").write_text(nested_description(), encoding="utf-8")
    token = "parse-bounds-token-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    store = open_store("memory://")
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        fake.reply_text("an answer from the real model")
        config = ServerConfig(token=token, default_model="openai/gpt-4o")
        app = create_app(store, config)
        headers = {"Authorization": f"Bearer {token}", "Host": "127.0.0.1"}
        with TestClient(app, headers=headers) as c:
            created = c.post("/v1/sessions", json={"workerId": "w", "workspaceId": "ws"})
            sid = created.json()["sessionId"]
            r = c.post(f"/v1/sessions/{sid}/prompt", json={"text": "hello"})
            assert r.status_code == 202, r.text
            assert wait_for(lambda: not app.state.runner.is_running(sid), timeout=20)
        system = fake.requests[0].json()["messages"][0]["content"]
    assert store.get_session(sid).messages()[-1].text == "an answer from the real model"
    assert "- good: Works." in system and "deep" not in system
