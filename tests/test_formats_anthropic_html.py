"""Anthropic Messages JSON import (detection that does not steal OpenAI files), the
shareable HTML page, and OpenHands titles taken from the issue, not its wrapper."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from threadline import open_store
from threadline.cli.app import app
from threadline.interop.html_export import to_html
from threadline.interop.importers import detect_format, import_sessions, session_title
from threadline.messages import ImagePart, Message, TextPart, ToolCall
from threadline.requests import request_text

runner = CliRunner()

BODY = {
    "model": "claude-sonnet-4-5",
    "system": "You are terse.",
    "messages": [
        {"role": "user", "content": "List files"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"dir": "."}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"},
                {"type": "text", "text": "and count them"},
            ],
        },
        {"role": "assistant", "content": "One file."},
    ],
}


@pytest.mark.parametrize("shape", ["body", "list"])
def test_anthropic_json_imports(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "conversation.json"
    data = BODY if shape == "body" else BODY["messages"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert detect_format(path) == "anthropic"
    (imported,) = import_sessions(path)
    roles = [m.role for m in imported.messages]
    expected = ["user", "assistant", "tool", "user", "assistant"]
    assert roles == (["system", *expected] if shape == "body" else expected)
    result = next(m for m in imported.messages if m.role == "tool")
    assert (result.tool_call_id, result.name, result.text) == ("toolu_1", "ls", "a.py")
    assert imported.title == "List files"
    if shape == "body":
        assert imported.model == "claude-sonnet-4-5"


@pytest.mark.parametrize(
    "data",
    [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]},
        [{"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": "t"}]}],
    ],
)
def test_openai_files_stay_openai(tmp_path: Path, data: object) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert detect_format(path) in ("openai", "openai-runs")


def sample() -> list[Message]:
    messages = [
        Message.system("sys <b>bold</b>"),
        Message.user('<script>alert(1)</script> & "quotes"'),
        Message.assistant(
            "calling",
            tool_calls=[ToolCall(id="c1", name="run<x>", arguments={"cmd": "</details>"})],
            model="m<1>",
        ),
        Message.tool("out <img src=x onerror=alert(1)>", tool_call_id="c1", name="run<x>"),
        Message.user(
            [
                TextPart(text="look"),
                ImagePart(url="https://example.com/cat.png"),
                ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
                ImagePart(data="PHN2Zz4=", media_type="image/svg+xml"),
            ]
        ),
    ]
    for seq, m in enumerate(messages, start=1):
        m.seq = seq
    return messages


def test_html_page_is_escaped_self_contained_and_collapsible() -> None:
    page = to_html(
        {"title": "T <i>x</i>", "id": "s1"},
        sample(),
        [{"covers_up_to": 3, "summary": "sum <script>bad()</script>"}],
    )
    assert "<script" not in page and "onerror=" not in page.replace("onerror=alert", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "T &lt;i&gt;x&lt;/i&gt;" in page
    # no fetches: no external src/href, no @import or url() in the style sheet
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "@import" not in page and "url(" not in page
    assert "[image: https://example.com/cat.png]" in page
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in page
    assert "image/svg+xml" in page and "data:image/svg" not in page  # SVG is not drawn
    assert page.count("<details") >= 3  # the call, its result, the checkpoint summary
    assert "Tool call: run&lt;x&gt; (c1)" in page and "&lt;/details&gt;" in page
    checkpoint = page.index('class="checkpoint"')
    assert page.index("Tool call:") < checkpoint < page.index("look")
    assert "default-src &#x27;none&#x27;" in page or "default-src 'none'" in page


def test_html_pairs_each_tool_call_with_its_result_and_previews_the_call() -> None:
    calls = [
        ToolCall(id="c1", name="read_file", arguments={"path": "src/app.py"}),
        ToolCall(id="c2", name="grep", arguments={"pattern": "TODO", "path": "src"}),
    ]
    messages = [
        Message.user("look"),
        Message.assistant("reading", tool_calls=calls),
        Message.tool("print('app')", tool_call_id="c1", name="read_file"),
        Message.tool("src/a.py:3: TODO", tool_call_id="c2", name="grep"),
        Message.assistant("done"),
    ]
    for seq, m in enumerate(messages, start=1):
        m.seq = seq
    cps = [{"number": 1, "id": 41, "covers_up_to": 4, "summary": "read and grepped"}]
    page = html.unescape(to_html({"title": "t"}, messages, cps))
    order = [
        page.index(needle)
        for needle in (
            'Tool call: read_file (c1): {"path": "src/app.py"}',
            "Result: read_file (c1) · 12 chars",
            'Tool call: grep (c2): {"pattern": "TODO", "path": "src"}',
            "Result: grep (c2) · 16 chars",
            "Checkpoint #1: messages up to #4",
            "done",
        )
    ]
    assert order == sorted(order)
    assert "#41" not in page  # the store's id is no number a reader sees


def test_cli_exports_every_format(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    store = open_store(url)
    session = store.create_session(title="demo")
    session.append(
        [
            Message.user("hi"),
            Message.assistant("", tool_calls=[ToolCall(id="c1", name="ls", arguments={})]),
            Message.tool("a.py", tool_call_id="c1", name="ls"),
            Message.assistant("done"),
        ]
    )
    for fmt in ("md", "markdown", "json", "html", "openai-jsonl", "anthropic-json", "supyagent"):
        out = tmp_path / f"out-{fmt}"
        done = runner.invoke(
            app, ["--store", url, "sessions", "export", session.id, "-f", fmt, "-o", str(out)]
        )
        assert done.exit_code == 0, (fmt, done.output)
        assert out.read_text(encoding="utf-8")
    default = runner.invoke(
        app, ["--store", url, "sessions", "export", session.id, "-f", "html", "-o", "-"]
    )
    assert default.stdout.startswith("<!DOCTYPE html>")


OPENHANDS_FIRST = (
    "<uploaded_files>\n/workspace/ponylang__ponyc__0.1\n</uploaded_files>\n"
    "I've uploaded a C code repository in the directory ponylang__ponyc__0.1. Consider the "
    "following issue description:\n\n<issue_description>\nponyc segfaults when trying to match "
    "using a single element tuple form\n</issue_description>\n\nCan you help me implement the "
    "necessary changes?"
)


def test_openhands_title_is_the_issue_not_the_wrapper() -> None:
    request = request_text(Message.user(OPENHANDS_FIRST))
    assert request is not None and request.startswith("ponyc segfaults when trying")
    assert "Can you help me implement" in request  # the instructions are kept
    title = session_title([Message.user(OPENHANDS_FIRST)])
    assert (
        title == "ponyc segfaults when trying to match using a single element tuple form Can you…"
    )
    assert request_text(Message.user("<uploaded_files>\n/w\n</uploaded_files>\n")) is None


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "p", "article", "header",
    "pre", "details", "summary", "section", "strong", "img",
}  # fmt: skip
HOSTILE = st.text(alphabet=st.sampled_from(list("<>&\"'/= ascriptdetailsonerror\n")), max_size=60)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(HOSTILE, min_size=1, max_size=4), name=HOSTILE, title=HOSTILE)
def test_html_never_lets_stored_text_become_markup(texts: list[str], name: str, title: str) -> None:
    call = ToolCall(id="c", name=name or "t", raw_arguments=texts[0])
    messages = [Message.user(t) for t in texts] + [
        Message.assistant(texts[-1], tool_calls=[call]),
        Message.tool(texts[0], tool_call_id="c", name=name or "t"),
    ]
    page = to_html({"title": title}, messages, [{"covers_up_to": 1, "summary": texts[-1]}])
    parsed = _Tags()
    parsed.feed(page)
    assert parsed.tags <= PAGE_TAGS
    assert parsed.attributes <= {"lang", "charset", "name", "content", "http-equiv", "class"}
    shown = "".join(parsed.text)
    assert all(t.strip() in shown for t in texts)
