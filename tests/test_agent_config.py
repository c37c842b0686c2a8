"""Agent files: lookup order, validation errors that name file and field, the default agent."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from threadline import ConfigError, ContextPolicy
from threadline.agent.config import (
    CONFIG_DIR_ENV,
    DEFAULT_MODEL_SPEC,
    DEFAULT_TOOLS,
    MODEL_ENV,
    AgentConfig,
    RuntimeContextConfig,
    default_agent,
    list_agents,
    load_agent,
    parse_agent,
)
from threadline.agent.prompt import build_system_prompt

SEED_YAML = """\
name: myagent
model:
  provider: anthropic/claude-sonnet-4-5-20250929

context:
  auto_summarize: true                  # Enable auto-summarization
  max_messages_before_summary: 30       # Trigger after N messages since last summary
  max_tokens_before_summary: 128000     # Trigger when total tokens exceed K
  min_recent_messages: 6                # Always include at least this many recent messages
  response_reserve: 4096                # Reserve tokens for the model's response

memory:
  enabled: true
  extraction_threshold: 5     # Extract every 5 signal-flagged exchanges
  retrieval_limit: 10          # Inject up to 10 memories per turn
  auto_extract: true           # Automatically extract from conversation
"""


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A project dir (cwd) and a user config dir, both with an ``agents`` folder."""
    project = tmp_path / "project"
    user = tmp_path / "config"
    (project / "agents").mkdir(parents=True)
    (user / "agents").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(user))
    return project / "agents", user / "agents"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_seed_yaml_loads_with_its_fields(tmp_path: Path) -> None:
    config = load_agent(write(tmp_path / "myagent.yaml", SEED_YAML))
    assert config.name == "myagent"
    assert config.model_spec == "anthropic/claude-sonnet-4-5-20250929"
    assert isinstance(config.context, ContextPolicy)
    assert config.context.max_messages_before_summary == 30
    assert config.context.min_recent_messages == 6
    assert config.context.response_reserve == 4096
    assert config.memory.enabled is True
    assert config.memory.retrieval_limit == 10
    assert config.max_steps == 10
    assert config.summarizer == "auto"


def test_model_as_string_or_mapping_and_our_context_fields() -> None:
    config = parse_agent(
        "name: a\nmodel: ollama/llama3.1\ncontext:\n  trim_strategy: greedy\n  pruning: false\n"
    )
    assert config.model_spec == "ollama/llama3.1"
    assert config.model.base_url is None
    assert config.context.trim_strategy == "greedy"
    assert config.context.pruning is False
    mapped = parse_agent(
        "model:\n  provider: ollama/llama3.1\n  base_url: http://gpu:11434/v1\n"
        "  temperature: 0.2\n  max_tokens: 800\n",
        default_name="b",
    )
    assert mapped.name == "b"
    assert mapped.model.base_url == "http://gpu:11434/v1"
    assert mapped.model.temperature == 0.2
    assert mapped.model.max_tokens == 800


def test_memory_block_defaults_are_kept() -> None:
    config = parse_agent("name: a\n")
    assert config.memory.model_dump() == {
        "enabled": False,
        "extraction_threshold": 5,
        "retrieval_limit": 10,
        "auto_extract": True,
        "scope": None,
        "share": 0.1,
        "relevance_floor": 0.15,
    }


def test_project_agents_win_over_the_user_config_dir(dirs: tuple[Path, Path]) -> None:
    project, user = dirs
    write(user / "coder.yaml", "model: anthropic/claude-sonnet-4-5\n")
    assert load_agent("coder").model_spec == "anthropic/claude-sonnet-4-5"
    write(project / "coder.yaml", "model: openai/gpt-4o-mini\n")
    config = load_agent("coder")
    assert config.model_spec == "openai/gpt-4o-mini"
    assert config.name == "coder"  # from the file name
    assert set(list_agents()) == {"coder"}
    assert list_agents()["coder"] == project / "coder.yaml"


def test_yml_suffix_and_paths_work(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    _, user = dirs
    write(user / "helper.yml", "system_prompt: hi\n")
    assert load_agent("helper").system_prompt == "hi"
    path = write(tmp_path / "elsewhere.yaml", "system_prompt: there\n")
    assert load_agent(str(path)).system_prompt == "there"
    assert load_agent(path).name == "elsewhere"


def test_missing_agent_says_where_it_looked(dirs: tuple[Path, Path]) -> None:
    project, user = dirs
    write(project / "known.yaml", "")
    with pytest.raises(ConfigError) as info:
        load_agent("nosuch")
    text = str(info.value)
    assert "nosuch" in text
    assert str(project / "nosuch.yaml") in text
    assert str(user / "nosuch.yaml") in text
    assert "known" in text
    with pytest.raises(ConfigError, match="not found"):
        load_agent("/no/such/file.yaml")


@pytest.mark.parametrize("name", ["../etc/passwd", "..", "a/b", "", "x\x00y", ".hidden"])
def test_agent_names_cannot_reach_paths(dirs: tuple[Path, Path], name: str) -> None:
    if "/" in name:
        with pytest.raises(ConfigError):  # treated as a path, which does not exist
            load_agent(name)
        return
    with pytest.raises(ConfigError, match="agent name"):
        load_agent(name)


def test_name_field_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"agents/x.yaml: name: agent name"):
        parse_agent("name: ../escape\n", source="agents/x.yaml")


def test_field_errors_name_file_field_and_expectation(dirs: tuple[Path, Path]) -> None:
    project, _ = dirs
    path = write(project / "bad.yaml", "context:\n  min_recent_messages: -1\n")
    with pytest.raises(ConfigError) as info:
        load_agent("bad")
    text = str(info.value)
    assert text.startswith(str(path))
    assert "context.min_recent_messages" in text
    assert "greater than or equal to 0" in text
    assert "-1" in text


def test_unknown_fields_are_errors_with_their_path() -> None:
    with pytest.raises(ConfigError, match=r"context\.max_mesages_before_summary: unknown field"):
        parse_agent("context:\n  max_mesages_before_summary: 3\n", source="a.yaml")
    with pytest.raises(ConfigError, match=r"model\.temp: unknown field"):
        parse_agent("model:\n  provider: openai/gpt-4o\n  temp: 1\n", source="a.yaml")
    with pytest.raises(ConfigError, match=r"^a.yaml: colour: unknown field"):
        parse_agent("colour: blue\n", source="a.yaml")


def test_several_errors_are_all_listed() -> None:
    with pytest.raises(ConfigError) as info:
        parse_agent("max_steps: 0\nsummarizer: magic\n", source="a.yaml")
    text = str(info.value)
    assert "max_steps: Input should be greater than or equal to 1" in text
    assert "summarizer: Input should be 'extractive', 'llm', 'hybrid' or 'auto'" in text


def test_bad_model_and_tools_say_what_is_expected() -> None:
    with pytest.raises(ConfigError, match="model: expected a provider/model string"):
        parse_agent("model: 42\n", source="a.yaml")
    with pytest.raises(ConfigError, match=r"tools: unknown tool.*'shell'.*scratchpad_write"):
        parse_agent("tools: [shell]\n", source="a.yaml")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.yaml", "name: a\ncontext:\n  min_recent_messages: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_agent(path)
    assert f"{path}:4:" in str(info.value) or f"{path}:3:" in str(info.value)
    assert "YAML syntax error" in str(info.value)
    tabbed = write(tmp_path / "tabbed.yaml", "name: a\n\tmodel: x\n")
    with pytest.raises(ConfigError, match=rf"{tabbed}:2:"):
        load_agent(tabbed)


def test_non_mapping_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_agent(write(tmp_path / "list.yaml", "- a\n- b\n"))
    empty = load_agent(write(tmp_path / "empty.yaml", ""))
    assert empty.name == "empty"
    assert empty.model_spec == DEFAULT_MODEL_SPEC


def test_default_agent(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    agent = load_agent("default")
    assert agent.name == "default"
    assert agent.model_spec == DEFAULT_MODEL_SPEC
    assert agent.system_prompt
    assert agent.tools == DEFAULT_TOOLS
    monkeypatch.setenv(MODEL_ENV, "anthropic/claude-sonnet-4-5")
    assert default_agent().model_spec == "anthropic/claude-sonnet-4-5"
    project, _ = dirs
    write(project / "default.yaml", "system_prompt: mine\n")
    assert load_agent("default").system_prompt == "mine"


def test_with_model_keeps_base_url_only_for_the_same_provider() -> None:
    config = AgentConfig.model_validate(
        {"model": {"provider": "ollama/llama3.1", "base_url": "http://gpu:11434/v1"}}
    )
    same = config.with_model("ollama/qwen2.5")
    assert same.model_spec == "ollama/qwen2.5"
    assert same.model.base_url == "http://gpu:11434/v1"
    other = config.with_model("openai/gpt-4o")
    assert other.model.base_url is None
    with pytest.raises(ConfigError):
        config.with_model("  ")


# -- the system prompt's runtime context ---------------------------------------------------


def test_runtime_context_is_coarse_so_the_prompt_prefix_stays_stable() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    morning = datetime(2025, 1, 15, 9, 1, 2, tzinfo=berlin)
    evening = datetime(2025, 1, 15, 21, 59, 59, tzinfo=berlin)
    prompt = build_system_prompt("Be brief.", now=morning, cwd="/work/proj")
    assert prompt.startswith("Be brief.\n\n# Working directory\n/work/proj\n\n# Runtime context")
    assert "2025-01-15 (Wednesday), timezone Europe/Berlin (UTC+01:00)" in prompt
    assert "Operating system:" in prompt
    assert "09:01" not in prompt
    assert build_system_prompt("Be brief.", now=evening, cwd="/work/proj") == prompt
    next_day = datetime(2025, 1, 16, 0, 0, 1, tzinfo=berlin)
    assert build_system_prompt("Be brief.", now=next_day, cwd="/work/proj") != prompt


def test_runtime_context_settings() -> None:
    now = datetime(2025, 7, 1, 14, 30, tzinfo=ZoneInfo("America/New_York"))
    hourly = build_system_prompt(
        "x", RuntimeContextConfig(time="hour", os=False), now=now, cwd="/w"
    )
    assert "2025-07-01 14:00 (Tuesday), timezone America/New_York (UTC-04:00)" in hourly
    assert "Operating system" not in hourly
    bare = RuntimeContextConfig(time="none", working_directory=False, os=False)
    assert build_system_prompt("x", bare, now=now) == "x"
    assert parse_agent("runtime_context:\n  time: hour\n").runtime_context.time == "hour"
