"""Provider validity: the checkers catch each rule, and converted windows pass them.

Windows are checked from three sources: every real transcript in
../shared/transcripts (whole repaired history and built windows at a few
limits), generated coding sessions, and hypothesis histories salted with what
real imports carry (blank text, redacted or foreign thinking, odd ids and names,
free-form arguments, unusable images, broken chains).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import TRANSCRIPTS, transcript_files
from tests.gen_sessions import coding_session
from tests.strategies import history
from threadline import ContextOverflow, ContextPolicy, build_context, open_store
from threadline.interop import (
    anthropic_problems,
    openai_problems,
    read_transcript_runs,
    to_anthropic,
    to_openai,
)
from threadline.messages import ImagePart, Message, TextPart, ToolCall, flatten, group_units
from threadline.store.encoding import prepare_messages
from threadline.store.protocol import Session

SIG = "EqQBCkYIBxgCKkDkoj34" + "Ab9+/" * 20  # shaped like a real signature
LIMITS = (8_000, 32_000, 1_000_000)


def assert_valid(messages: list[Message]) -> None:
    a = anthropic_problems(to_anthropic(messages))
    o = openai_problems(to_openai(messages))
    assert (a, o) == ([], [])


# -- Anthropic rules -------------------------------------------------------------


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def use(call_id: str = "toolu_1", name: str = "ls", data: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {} if data is None else data}


def result(call_id: str = "toolu_1", content: Any = "ok", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **kw}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def thinking(signature: Any) -> dict[str, Any]:
    block = {"type": "thinking", "thinking": "hmm"}
    if signature is not None:
        block["signature"] = signature
    return block


VALID_ANTHROPIC: list[dict[str, Any]] = [
    user("go"),
    assistant([thinking(SIG), text("looking"), use("toolu_1"), use("toolu_2", data={"p": "."})]),
    user([result("toolu_1", ""), result("toolu_2", [text("x.py")], is_error=True), text("and?")]),
    assistant([{"type": "redacted_thinking", "data": "opaque"}, text("done")]),
    user(
        [
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
            },
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
            },
        ]
    ),
]


def test_valid_anthropic_payload_passes_in_both_shapes() -> None:
    assert anthropic_problems(("rules", VALID_ANTHROPIC)) == []
    assert anthropic_problems({"system": [text("rules")], "messages": VALID_ANTHROPIC}) == []
    assert anthropic_problems({"messages": VALID_ANTHROPIC}) == []


ANTHROPIC_CASES: dict[str, tuple[Any, list[dict[str, Any]], str]] = {
    "no messages": (None, [], "at least one message"),
    "role": (None, [{"role": "system", "content": "x"}], "role 'system'"),
    "first is user": (None, [assistant("hi")], "first message must use the user role"),
    "alternation": (None, [user("a"), user("b")], "must alternate"),
    "empty string": (None, [user("")], "non-empty content"),
    "empty list": (None, [user([])], "non-empty content"),
    "blank string": (None, [user(" \n")], "non-whitespace text"),
    "blank block": (None, [user([text("\n\n"), text("hi")])], "non-whitespace text"),
    "blank system": ([text("  ")], [user("hi")], "system.0"),
    "input not a dict": (
        None,
        [user("go"), assistant([use(data="ls -l")]), user([result()])],
        "input must be an object",
    ),
    "id pattern": (
        None,
        [user("go"), assistant([use("call.1")]), user([result("call.1")])],
        "does not match",
    ),
    "ids unique": (
        None,
        [user("a"), assistant([use()]), user([result()]), assistant([use()]), user([result()])],
        "tool_use ids must be unique",
    ),
    "name pattern": (
        None,
        [user("go"), assistant([use(name="my tool")]), user([result()])],
        "tool_use.name",
    ),
    "unanswered before user": (
        None,
        [user("go"), assistant([use()]), user("next")],
        "without tool_result blocks immediately after: toolu_1",
    ),
    "unanswered at end": (None, [user("go"), assistant([use()])], "without tool_result"),
    "result of an older call": (
        None,
        [
            user("go"),
            assistant([use("toolu_1")]),
            user([result("toolu_1")]),
            assistant([use("toolu_2")]),
            user([result("toolu_2"), result("toolu_1")]),
        ],
        "unexpected tool_use_id 'toolu_1'",
    ),
    "result answered twice": (
        None,
        [user("go"), assistant([use()]), user([result(), result()])],
        "answered twice",
    ),
    "results first": (
        None,
        [user("go"), assistant([use()]), user([text("and"), result()])],
        "must come first",
    ),
    "tool_use in user": (None, [user([use()])], "tool_use blocks belong in an assistant"),
    "tool_result in assistant": (
        None,
        [user("go"), assistant([result()])],
        "tool_result blocks belong in a user",
    ),
    "redacted signature": (
        None,
        [user("go"), assistant([thinking("[REDACTED_SIGNATURE]"), text("x")])],
        "real signature",
    ),
    "missing signature": (
        None,
        [user("go"), assistant([thinking(None), text("x")])],
        "real signature",
    ),
    "empty signature": (None, [user("go"), assistant([thinking(""), text("x")])], "real signature"),
    "thinking in user": (None, [user([thinking(SIG), text("x")])], "belong in an assistant"),
    "empty error result": (
        None,
        [user("go"), assistant([use()]), user([result(content=" ", is_error=True)])],
        "cannot be empty if is_error is true",
    ),
    "blank text in a result": (
        None,
        [user("go"), assistant([use()]), user([result(content=[text("")])])],
        "content.0.content.0: text content blocks must contain non-whitespace text",
    ),
    "final assistant trailing whitespace": (
        None,
        [user("go"), assistant("done\n")],
        "final assistant content cannot end with trailing whitespace",
    ),
    "image url": (
        None,
        [user([{"type": "image", "source": {"type": "url", "url": "[REDACTED_IMAGE_URL]"}}])],
        "url not http(s)",
    ),
    "image format": (
        None,
        [
            user(
                [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/bmp", "data": "Qk0="},
                    }
                ]
            )
        ],
        "media_type 'image/bmp'",
    ),
    "unknown block": (None, [user([{"subject": "a gemini thought"}])], "unexpected block type"),
}


@pytest.mark.parametrize("case", sorted(ANTHROPIC_CASES))
def test_anthropic_rule_is_caught(case: str) -> None:
    system, messages, needle = ANTHROPIC_CASES[case]
    problems = anthropic_problems((system, messages))
    assert any(needle in p for p in problems), problems


# -- OpenAI rules ----------------------------------------------------------------


def call(call_id: str = "call_1", name: str = "grep", arguments: Any = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(*cs: dict[str, Any], content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(cs)}


def tool(call_id: str = "call_1", content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": call_id}


VALID_OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "rules"},
    {"role": "developer", "content": [text("be brief")]},
    {"role": "user", "content": "go", "name": "ana"},
    calls(call("call_1"), call("call_2", arguments='{"q":"x"}')),
    tool("call_1", ""),
    tool("call_2", [text("found")]),
    calls(call("call_1")),  # ids may repeat across messages (tau-bench does)
    tool("call_1"),
    {"role": "assistant", "content": [text("done"), {"type": "refusal", "refusal": "no"}]},
    {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ],
    },
]


def test_valid_openai_messages_pass() -> None:
    assert openai_problems(VALID_OPENAI) == []


OPENAI_CASES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "no messages": ([], "non-empty list"),
    "role": ([{"role": "robot", "content": "x"}], "unknown role 'robot'"),
    "function role": ([{"role": "function", "name": "f", "content": "x"}], "unknown role"),
    "tool without call": ([{"role": "user", "content": "x"}, tool()], "answers no open tool call"),
    "tool answers an older assistant": (
        [calls(call("call_1")), tool("call_1"), calls(call("call_2")), tool("call_2"), tool()],
        "'call_1' answers no open tool call",
    ),
    "tool after a user message": (
        [calls(call()), {"role": "user", "content": "x"}, tool()],
        "answers no open tool call",
    ),
    "unanswered before next message": (
        [calls(call()), {"role": "user", "content": "x"}],
        "tool_calls call_1 not answered by tool messages before messages.1",
    ),
    "unanswered at end": ([calls(call("call_1"), call("call_2")), tool("call_1")], "call_2"),
    "duplicate ids in a message": (
        [calls(call(), call()), tool(), tool()],
        "duplicate tool call id call_1",
    ),
    "arguments not JSON": ([calls(call(arguments="*** Begin Patch")), tool()], "JSON text"),
    "arguments not an object": ([calls(call(arguments="[1, 2]")), tool()], "JSON text"),
    "arguments as a dict": ([calls(call(arguments={"a": 1})), tool()], "JSON text"),
    "function name": ([calls(call(name="[REDACTED_NAME]")), tool()], "function.name"),
    "id too long": ([calls(call("x" * 41)), tool("x" * 41)], "longer than 40"),
    "type": ([calls({**call(), "type": "custom"}), tool()], "type must be 'function'"),
    "assistant needs content or calls": ([{"role": "assistant", "content": None}], "needs content"),
    "assistant empty string": ([{"role": "assistant", "content": ""}], "needs content"),
    "participant name": ([{"role": "user", "content": "x", "name": "Ana B."}], "name 'Ana B.'"),
    "tool_calls on user": (
        [{"role": "user", "content": "x", "tool_calls": [call()]}],
        "only assistant messages carry tool_calls",
    ),
    "empty tool_calls": ([{"role": "assistant", "content": "x", "tool_calls": []}], "non-empty"),
    "image in a tool result": (
        [
            calls(call()),
            tool(content=[{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]),
        ],
        "a tool message cannot carry a 'image_url' part",
    ),
    "image in a system message": (
        [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}],
        "cannot carry",
    ),
    "empty parts": ([{"role": "user", "content": []}], "empty array"),
    "user content missing": ([{"role": "user", "content": None}], "content is required"),
    "image url": (
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "[REDACTED]"}}]}],
        "http(s) or a data: URL",
    ),
    "image format": (
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Q"}}],
            }
        ],
        "'image/bmp' not accepted",
    ),
}


@pytest.mark.parametrize("case", sorted(OPENAI_CASES))
def test_openai_rule_is_caught(case: str) -> None:
    messages, needle = OPENAI_CASES[case]
    problems = openai_problems(messages)
    assert any(needle in p for p in problems), problems


# -- real transcripts ------------------------------------------------------------


def _session(messages: list[Message]) -> Session:
    """Stored through the low-level append, so imported chains get in as they are."""
    store = open_store("memory://")
    s = store.create_session(agent="rules", model="gpt-4o")
    store.append_messages(s.id, prepare_messages(s.model, messages))
    return s.refresh()


def _windows(messages: list[Message], limits: tuple[int, ...] = LIMITS) -> list[list[Message]]:
    s = _session(messages)
    out: list[list[Message]] = []
    for limit in limits:
        policy = ContextPolicy(context_limit=limit, response_reserve=1024, min_recent_messages=2)
        with contextlib.suppress(ContextOverflow):  # the newest unit alone is over the limit
            out.append(build_context(s, system_prompt="You are careful.", policy=policy).messages)
    return out


@pytest.mark.transcripts
@pytest.mark.parametrize("name", transcript_files() or ["(none)"])
def test_real_transcripts_convert_to_valid_requests(name: str) -> None:
    if not TRANSCRIPTS.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            raise RuntimeError(f"CI=true but the shared transcripts are missing: {TRANSCRIPTS}")
        pytest.skip(f"shared transcripts not found at {TRANSCRIPTS}")
    runs = read_transcript_runs(TRANSCRIPTS / name)
    assert runs
    for i, run in enumerate(runs):
        units, _ = group_units(run)
        assert_valid(flatten(units))
        if i % 10 == 0:  # tau-bench has 200 runs: windows for a sample keep this fast
            windows = _windows(run)
            assert windows, "no window could be built at any limit"
            for window in windows:
                assert_valid(window)


def test_generated_coding_sessions_convert_to_valid_requests() -> None:
    for seed in (0, 1):
        messages = coding_session(seed, turns=40).messages
        assert_valid(messages)
        for window in _windows(messages, (8_000, 64_000)):
            assert_valid(window)


# -- hypothesis: whatever an import may hold ------------------------------------

blank = st.sampled_from(["", " ", "\n\n", "\t \n"])
words = st.sampled_from(["ok", "done", "see a.py", "trailing space ", "x\n"])
some_text = blank | words
models = st.sampled_from([None, "claude-sonnet-4-5", "gemini-2.5-pro", "gpt-4o"])
thinking_meta = st.sampled_from(
    [
        {},
        {"thinking": [thinking("[REDACTED_SIGNATURE]")]},
        {"thinking": [thinking("")]},
        {"thinking": [thinking(None)]},
        {"thinking": [thinking(SIG)]},
        {"thinking": [{"type": "redacted_thinking", "data": "opaque"}]},
        {"thinking": [{"subject": "Plan", "description": "a Gemini thought"}]},
    ]
)
call_ids = st.sampled_from(["call_1", "toolu_01", "toolu.01", "call 2", "x" * 50, "a/b", "fc-1"])
tool_names = st.sampled_from(["grep", "mcp__srv__read", "[REDACTED_NAME len=4]", "my tool", ""])
raw = st.sampled_from(["*** Begin Patch", "[1, 2]", "null", "[REDACTED_ARGUMENTS len=9]"])
parts = st.lists(
    st.sampled_from(
        [
            TextPart(text="\n\n"),
            TextPart(text="look"),
            ImagePart(url="[REDACTED_IMAGE_URL len=9]"),
            ImagePart(data="Qk0=", media_type="image/bmp"),
            ImagePart(url="https://example.com/a.png"),
            ImagePart(data="aGk=", media_type="image/png"),
        ]
    ),
    max_size=3,
)


@st.composite
def tool_calls(draw: st.DrawFn) -> list[ToolCall]:
    """Ids repeat across messages (tau-bench does), never within one: a store refuses that."""
    out = []
    for call_id in draw(st.lists(call_ids, min_size=1, max_size=3, unique=True)):
        name = draw(tool_names)
        if draw(st.booleans()):
            out.append(ToolCall(id=call_id, name=name, raw_arguments=draw(raw)))
        else:
            out.append(
                ToolCall(id=call_id, name=name, arguments=draw(st.just({}) | st.just({"q": 1})))
            )
    return out


@st.composite
def hostile_history(draw: st.DrawFn) -> list[Message]:
    out = [Message.user("start")]
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "parts", "assistant", "system", "chain", "orphan"]))
        if kind == "user":
            out.append(Message.user(draw(some_text)))
        elif kind == "parts":
            out.append(Message.user(draw(parts)))
        elif kind == "system":
            out.append(Message.system(draw(some_text)))
        elif kind == "orphan":
            out.append(Message.tool("orphan", tool_call_id=draw(call_ids)))
        elif kind == "assistant":
            out.append(
                Message.assistant(
                    draw(some_text | parts), model=draw(models), metadata=draw(thinking_meta)
                )
            )
        else:
            cs = draw(tool_calls())
            meta = draw(thinking_meta)
            out.append(
                Message.assistant(draw(some_text), tool_calls=cs, model=draw(models), metadata=meta)
            )
            for c in cs:
                if draw(st.integers(0, 4)) == 0:
                    continue  # lost in a crash
                error = {"is_error": True} if draw(st.booleans()) else {}
                content = draw(some_text | parts)
                out.append(Message.tool(content, tool_call_id=c.id, name=c.name, metadata=error))
        if draw(st.integers(0, 5)) == 0:
            out.extend(draw(history(max_units=4, broken=True)))
    out.append(Message.user("what next?"))
    return out


PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(hostile_history())
def test_converted_histories_are_always_valid(messages: list[Message]) -> None:
    assert_valid(messages)


@PROPERTY
@given(hostile_history(), st.integers(600, 20_000), st.sampled_from(["stable", "greedy"]))
def test_converted_windows_are_always_valid(messages: list[Message], limit: int, trim: str) -> None:
    policy = ContextPolicy(context_limit=limit, response_reserve=200, trim_strategy=trim)
    try:
        window = build_context(_session(messages), system_prompt="sys", policy=policy)
    except ContextOverflow:
        return
    assert_valid(window.messages)
