"""The tool registry: schemas, results, and failures that become error results."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from threadline import Message, ToolCall, UsageError, open_store
from threadline.agent.tools import (
    BUILTIN_TOOLS,
    MAX_RESULT_CHARS,
    NO_OUTPUT,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    builtin_registry,
    schema_from_signature,
)
from threadline.store.protocol import Session


def call(tool: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"call_{tool}", name=tool, arguments=dict(arguments))


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool()
    def add(a: int, b: int = 0) -> int:
        """Add two integers.

        Second paragraph, not part of the description.
        """
        return a + b

    @reg.tool(name="echo", description="Echo a value back.")
    def _echo(value: str, mode: Literal["plain", "upper"] = "plain") -> dict[str, str]:
        return {"value": value.upper() if mode == "upper" else value}

    @reg.tool()
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    @reg.tool()
    def nothing() -> None:
        """Returns nothing."""

    return reg


@pytest.fixture
def session() -> Session:
    return open_store("memory://").create_session(agent="t")


def test_definitions_are_neutral_and_derived_from_signatures(registry: ToolRegistry) -> None:
    defs = {d["name"]: d for d in registry.definitions()}
    assert list(defs) == ["add", "echo", "explode", "nothing"]
    assert defs["add"] == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a"],
        },
    }
    assert defs["echo"]["description"] == "Echo a value back."
    assert defs["echo"]["parameters"]["properties"]["mode"] == {"enum": ["plain", "upper"]}
    assert defs["nothing"]["parameters"] == {"type": "object", "properties": {}}


def test_results_are_text_or_json(registry: ToolRegistry) -> None:
    result = registry.run(call("add", a=2, b=3))
    assert result.role == "tool"
    assert result.tool_call_id == "call_add"
    assert result.name == "add"
    assert result.text == "5"
    assert not result.metadata.get("is_error")
    echoed = registry.run(call("echo", value="hi", mode="upper"))
    assert json.loads(echoed.text) == {"value": "HI"}
    assert registry.run(call("nothing")).text == NO_OUTPUT


def test_a_raising_tool_becomes_an_error_result(registry: ToolRegistry) -> None:
    result = registry.run(call("explode", reason="disk full"))
    assert result.metadata["is_error"] is True
    assert result.metadata["error_kind"] == "exception"
    assert "RuntimeError" in result.text
    assert "boom: disk full" in result.text
    assert result.tool_call_id == "call_explode"


def test_tool_error_shows_just_the_message() -> None:
    reg = ToolRegistry()

    @reg.tool()
    def lookup(key: str) -> str:
        """Look up a key."""
        raise ToolError(f"no such key {key!r}")

    result = reg.run(call("lookup", key="k"))
    assert result.text == "Error: no such key 'k'"
    assert result.metadata["error_kind"] == "tool_error"


def test_unknown_tool_lists_the_available_ones(registry: ToolRegistry) -> None:
    result = registry.run(call("rm_rf"))
    assert result.metadata["is_error"] is True
    assert "unknown tool 'rm_rf'" in result.text
    assert "add, echo, explode, nothing" in result.text


def test_bad_json_arguments_are_an_error_result(registry: ToolRegistry) -> None:
    broken = ToolCall.from_json_arguments(id="c1", name="add", arguments='{"a": 1,')
    assert broken.raw_arguments is not None
    result = registry.run(broken)
    assert result.metadata["error_kind"] == "bad_arguments"
    assert "not a JSON object" in result.text
    not_object = ToolCall.from_json_arguments(id="c2", name="add", arguments="[1, 2]")
    assert registry.run(not_object).metadata["is_error"] is True


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "missing required argument(s) 'a'"),
        ({"a": "one"}, "argument 'a' must be integer, got string"),
        ({"a": True}, "argument 'a' must be integer, got boolean"),
        ({"a": 1.5}, "argument 'a' must be integer, got number"),
    ],
)
def test_arguments_are_checked(
    registry: ToolRegistry, arguments: dict[str, object], expected: str
) -> None:
    result = registry.run(call("add", **arguments))
    assert result.metadata["is_error"] is True
    assert expected in result.text


def test_enum_and_unexpected_arguments(registry: ToolRegistry) -> None:
    assert "must be one of" in registry.run(call("echo", value="x", mode="loud")).text
    extra = registry.run(call("add", a=1, c=2))
    assert extra.metadata["is_error"] is True
    assert "TypeError" in extra.text and "'c'" in extra.text


def test_registration_rules() -> None:
    reg = ToolRegistry()

    def f(x: str) -> str:
        """F."""
        return x

    reg.register(f)
    with pytest.raises(UsageError, match="already registered"):
        reg.register(f)
    reg.register(f, replace=True)
    assert reg.names() == ["f"]
    with pytest.raises(UsageError, match="type object"):
        reg.tool(name="g", parameters={"type": "array"})(f)
    explicit = Tool(
        name="h",
        description="explicit",
        parameters={"type": "object", "properties": {"n": {"type": "number"}}},
        func=lambda n: n * 2,
    )
    reg.register(explicit)
    assert reg.run(call("h", n=2)).text == "4"
    assert reg.unregister("h") and "h" not in reg


def test_schema_handles_optionals_and_unknown_annotations() -> None:
    def g(a: str | None, b: list[int], c: object = None, *rest: int, **kw: int) -> None:
        return None

    schema = schema_from_signature(g)
    assert schema["properties"] == {"a": {"type": "string"}, "b": {"type": "array"}, "c": {}}
    assert schema["required"] == ["a", "b"]


def test_huge_results_are_cut_before_storage() -> None:
    reg = ToolRegistry()

    @reg.tool()
    def big() -> str:
        """Big."""
        return "x" * (MAX_RESULT_CHARS + 10)

    text = reg.run(call("big")).text
    assert len(text) < MAX_RESULT_CHARS + 200
    assert "tool output cut" in text


def test_scratchpad_tools_use_the_session(session: Session) -> None:
    reg = builtin_registry(BUILTIN_TOOLS)
    assert reg.names() == ["scratchpad_write", "scratchpad_read", "scratchpad_list"]
    wrote = reg.run(call("scratchpad_write", name="plan", content="1. fix bug"), session=session)
    assert not wrote.metadata.get("is_error"), wrote.text
    assert session.scratchpad_read("plan") is not None
    assert reg.run(call("scratchpad_read", name="plan"), session=session).text == "1. fix bug"
    listed = json.loads(reg.run(call("scratchpad_list"), session=session).text)
    assert [e["name"] for e in listed] == ["plan"]
    missing = reg.run(call("scratchpad_read", name="nope"), session=session)
    assert missing.metadata["is_error"] is True
    assert "'plan'" in missing.text


def test_context_tools_need_a_session() -> None:
    reg = builtin_registry(["scratchpad_list"])
    result = reg.run(call("scratchpad_list"))
    assert result.metadata["error_kind"] == "no_session"
    with pytest.raises(UsageError, match="unknown built-in tool"):
        builtin_registry(["shell"])


def test_custom_context_tool(session: Session) -> None:
    reg = ToolRegistry()

    @reg.tool(takes_context=True)
    def whoami(ctx: ToolContext) -> str:
        """Which session is this."""
        return f"{ctx.session.id}/{ctx.call.id}/{ctx.store is session.store}"

    assert reg.definitions()[0]["parameters"] == {"type": "object", "properties": {}}
    assert reg.run(call("whoami"), session=session).text == f"{session.id}/call_whoami/True"


def test_results_are_storable_messages(registry: ToolRegistry, session: Session) -> None:
    results = registry.run_all([call("add", a=1), call("explode", reason="x")])
    session.append([Message.assistant(tool_calls=[call("add", a=1), call("explode", reason="x")])])
    stored = session.append(results)
    assert [m.metadata.get("is_error", False) for m in stored] == [False, True]
