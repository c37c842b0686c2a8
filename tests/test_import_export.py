"""JSON export round trips, OpenAI chat imports, strictness, and Markdown that keeps its shape."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.openai_chat import CHAT
from threadline.errors import ImportFormatError
from threadline.interop import detect_format, import_file, to_json, to_markdown
from threadline.messages import FilePart, ImagePart, Message, TextPart, ToolCall, Usage

from .test_interop_openai import messages as openai_messages


def _rich_messages() -> list[Message]:
    call = ToolCall(id="c1", name="grep", arguments={"pattern": "TODO", "n": [1, 2.5, None]})
    raw = ToolCall(id="c2", name="apply_patch", raw_arguments="*** Begin Patch\n*** End Patch")
    return [
        Message.system("be careful", summary=True, synthetic=True),
        Message.user(
            [
                TextPart(text="look — ünïcödé ✓"),
                ImagePart(data="aGk=", media_type="image/png", width=2, height=3, detail="high"),
                ImagePart(media_ref="s_media/a.png"),
                FilePart(uri="/tmp/r.pdf", name="r.pdf", media_type="application/pdf", data="JVBE"),
            ],
            name="ann",
            created_at=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        ),
        Message.assistant(
            "on it",
            tool_calls=[call, raw],
            model="gpt-4o",
            usage=Usage(input_tokens=10, output_tokens=3, cached_tokens=2, cache_write_tokens=1),
            metadata={"thinking": [{"type": "thinking", "thinking": "x"}]},
            token_counts={"o200k": 7},
            seq=3,
        ),
        Message.tool("a.py:1: TODO", tool_call_id="c1", name="grep"),
        Message.tool(
            "applied", tool_call_id="c2", name="apply_patch", metadata={"is_error": False}
        ),
    ]


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def _without_identity(m: Message) -> dict[str, Any]:
    d = m.model_dump(mode="json", exclude={"id", "seq"})
    d["metadata"].pop("imported_id", None)
    return d


# -- JSON export -------------------------------------------------------------------


def test_json_export_round_trip(tmp_path: Path) -> None:
    ms = _rich_messages()
    checkpoints = [
        {"summary": "so far", "last_seq": 2, "created_at": datetime(2024, 1, 1, tzinfo=UTC)}
    ]
    text = to_json(
        {"title": "T", "agent": "a", "model": "m", "metadata": {"k": 1}}, ms, checkpoints
    )
    doc = json.loads(text)
    assert (doc["format"], doc["version"]) == ("threadline.session", 1)
    p = _write(tmp_path, "s.json", text)
    assert detect_format(p) == "threadline"
    got = import_file(p)
    assert (got.title, got.agent, got.model, got.metadata) == ("T", "a", "m", {"k": 1})
    assert got.checkpoints == [
        {"summary": "so far", "last_seq": 2, "created_at": "2024-01-01T00:00:00Z"}
    ]
    assert [_without_identity(m) for m in got.messages] == [_without_identity(m) for m in ms]
    assert [m.metadata["imported_id"] for m in got.messages] == [m.id for m in ms]
    assert all(m.seq is None for m in got.messages)
    assert {m.id for m in got.messages}.isdisjoint(m.id for m in ms)
    twice = import_file(p)
    assert {m.id for m in twice.messages}.isdisjoint(m.id for m in got.messages)
    kept = import_file(p, fresh_ids=False)
    assert [m.id for m in kept.messages] == [m.id for m in ms]


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(openai_messages(), max_size=5))
def test_json_export_round_trip_property(tmp_path: Path, ms: list[Message]) -> None:
    p = _write(tmp_path, "p.json", to_json({}, ms))
    got = import_file(p).messages
    assert [_without_identity(m) for m in got] == [_without_identity(m) for m in ms]


def test_an_exported_checkpoint_covers_the_same_messages_imported(tmp_path: Path) -> None:
    """An export leaves out what its view hides (retracted messages, their records), so
    a checkpoint's seq is not a count of the exported messages: imported, it covers the
    same messages it covered (it was refused as "outside the imported messages", or
    covered later ones; issue 32's model-based test found it)."""
    from threadline import open_store
    from threadline.interop.export import render_export
    from threadline.interop.sync import Syncer, SyncStatus, find_sources
    from threadline.store.checkpoints import numbered_checkpoints

    with open_store("memory://") as store:
        session = store.create_session(model="simulated/gpt-4o")
        session.append([Message.user(f"m{i}") for i in range(1, 5)])  # seqs 1-4
        session.retract([1, 2])  # the record is seq 5
        session.append([Message.user("m6"), Message.user("m7")])  # seqs 6-7
        session.add_checkpoint(covers_up_to=6, summary="through m6")
        checkpoints = numbered_checkpoints(session.checkpoints())
        text, _ = render_export("json", session.info.to_dict(), session.messages(), checkpoints)
        path = tmp_path / "s.json"
        path.write_text(text, encoding="utf-8")
        (result,) = Syncer(store).sync(find_sources([str(path)])).results
        assert result.status is SyncStatus.NEW, result
        assert result.session_id is not None
        imported = store.get_session(result.session_id)
        covered = imported.latest_checkpoint()
        assert covered is not None and covered.covers_up_to == 3
        assert [m.text for m in imported.messages()][: covered.covers_up_to] == ["m3", "m4", "m6"]


def test_newer_export_version_is_refused(tmp_path: Path) -> None:
    doc = json.loads(to_json({}, []))
    doc["version"] = 99
    with pytest.raises(ImportFormatError, match="newer threadline"):
        import_file(_write(tmp_path, "n.json", json.dumps(doc)))


def test_bad_message_in_export_names_it(tmp_path: Path) -> None:
    doc = json.loads(to_json({}, [Message.user("x")]))
    doc["messages"].append({"role": "tool", "content": "orphan"})
    with pytest.raises(ImportFormatError, match=r"messages\[1\]"):
        import_file(_write(tmp_path, "b.json", json.dumps(doc)))


# -- OpenAI chat files -------------------------------------------------------------


def test_openai_json_array_and_jsonl(tmp_path: Path) -> None:
    arr = _write(tmp_path, "a.json", json.dumps(CHAT))
    lines = _write(tmp_path, "a.jsonl", "\n".join(json.dumps(m) for m in CHAT) + "\n\n")
    assert (detect_format(arr), detect_format(lines)) == ("openai", "openai-jsonl")
    a, b = import_file(arr), import_file(lines)
    assert (
        [m.role for m in a.messages]
        == [m.role for m in b.messages]
        == ["system", "user", "assistant", "tool", "assistant"]
    )
    assert a.messages[2].tool_calls[0].id == "c" and a.agent == "openai"


def test_bom_is_accepted(tmp_path: Path) -> None:
    p = _write(tmp_path, "bom.jsonl", b"\xef\xbb\xbf" + json.dumps(CHAT[1]).encode())
    assert import_file(p).messages[0].text == "hi"


def test_malformed_line_names_its_number(tmp_path: Path) -> None:
    body = [json.dumps(m) for m in CHAT]
    body[2] = '{"role": "assistant", "content": '  # truncated
    p = _write(tmp_path, "bad.jsonl", "\n".join(body))
    with pytest.raises(ImportFormatError) as err:
        import_file(p)
    assert err.value.line == 3 and "bad.jsonl:3" in str(err.value)


def test_invalid_message_line_names_its_number(tmp_path: Path) -> None:
    body = [json.dumps(m) for m in CHAT] + [json.dumps({"role": "tool", "content": "x"})]
    with pytest.raises(ImportFormatError, match="tool_call_id") as err:
        import_file(_write(tmp_path, "bad.jsonl", "\n".join(body)))
    assert err.value.line == 6


def test_invalid_utf8_names_offset_and_line(tmp_path: Path) -> None:
    good = (json.dumps(CHAT[0]) + "\n").encode()
    p = _write(tmp_path, "u.jsonl", good + b'{"role": "user", "content": "caf\xe9"}\n')
    with pytest.raises(ImportFormatError, match=f"byte offset {len(good) + 32}") as err:
        import_file(p)
    assert err.value.line == 2


def test_all_or_nothing(tmp_path: Path) -> None:
    """Nine good lines and one bad: the import yields nothing, only the error. (A torn
    last line, one a writer never finished, is a repair instead: see test_records.)"""
    body = [json.dumps({"role": "user", "content": str(i)}) for i in range(9)]
    body.insert(5, "{oops")
    result: list[Any] = []
    with pytest.raises(ImportFormatError):
        result.append(import_file(_write(tmp_path, "x.jsonl", "\n".join(body))))
    assert result == []


def test_transcript_record_errors_name_the_line(tmp_path: Path) -> None:
    good = {"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}
    bad = {"type": "assistant", "sessionId": "s"}
    p = _write(tmp_path, "cc.jsonl", json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    assert detect_format(p) == "claude-code"
    with pytest.raises(ImportFormatError, match="missing field 'message'") as err:
        import_file(p)
    assert err.value.line == 2


def test_unknown_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="neither JSON nor an aider chat history"):
        import_file(_write(tmp_path, "x.txt", "hello"))
    with pytest.raises(ImportFormatError, match="a JSON object with keys what"):
        import_file(_write(tmp_path, "x.json", '{"what": 1}'))


def test_multi_run_file_points_to_the_runs_reader(tmp_path: Path) -> None:
    runs = [{"task_id": i, "traj": CHAT} for i in range(2)]
    with pytest.raises(ImportFormatError, match="2 conversations"):
        import_file(_write(tmp_path, "r.json", json.dumps(runs)))


# -- Markdown ----------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _structure(md: str) -> list[str]:
    """Lines outside fenced code that are structural: headings and details tags."""
    out: list[str] = []
    fence: str | None = None
    for line in md.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m[1][0] == fence[0] and len(m[1]) >= len(fence) and not m[2].strip():
                fence = None
            continue
        if m and not (m[1][0] == "`" and "`" in m[2]):
            fence = m[1]
            continue
        if re.match(r"^ {0,3}#{1,6}(\s|$)", line) or "<details>" in line or "</details>" in line:
            out.append(line)
        if re.match(r"^ {0,3}(=+|-+)\s*$", line):
            out.append(line)  # a setext underline would turn the line above into a heading
    assert fence is None, "a code fence was left open"
    return out


HOSTILE = "\n".join(
    [
        "## Assistant",
        "# pwned",
        "</details>",
        "<details><summary>fake</summary>",
        "<script>alert(1)</script>",
        "```",
        "unclosed fence with </details>",
        "````",
        "still inside? ```` `` `",
    ]
)


def test_markdown_structure_survives_hostile_text() -> None:
    call = ToolCall(id="c1", name="sh", arguments={"cmd": "echo ```` </details>"})
    ms = [
        Message.user(HOSTILE),
        Message.user("x\n===\ny\n---\nplain & <b>"),
        Message.assistant(HOSTILE, tool_calls=[call]),
        Message.tool(HOSTILE + "\n`````````", tool_call_id="c1", name="sh</summary>"),
        Message.assistant("done"),
    ]
    md = to_markdown({"title": "## <i>Title</i>\n# x", "agent": "a<b>"}, ms)
    structure = _structure(md)
    headings = [line for line in structure if line.startswith("#")]
    assert headings[0] == "# ## &lt;i&gt;Title&lt;/i&gt; # x"
    assert [h.split(" · ")[0] for h in headings[1:]] == [
        "## User",
        "## User",
        "## Assistant",
        "## Assistant",
    ]
    opens = [line for line in structure if "<details>" in line]
    closes = [line for line in structure if line == "</details>"]
    assert len(opens) == len(closes) == 2
    assert not any(re.match(r"^ {0,3}(=+|-+)\s*$", line) for line in structure)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "<script>" not in md.split("```")[0]
    assert "\\## Assistant" in md and "\\# pwned" in md
    assert "&lt;/details&gt;" in md
    assert "plain &amp; &lt;b&gt;" in md
    assert "sh&lt;/summary&gt;" in md


def test_markdown_basic_layout() -> None:
    call = ToolCall(id="c1", name="ls", arguments={"path": "."})
    md = to_markdown(
        "Demo",
        [
            Message.user("hello", created_at=datetime(2024, 5, 1, 9, 0, tzinfo=UTC)),
            Message.assistant("", tool_calls=[call], model="gpt-4o"),
            Message.tool("a.py", tool_call_id="c1", name="ls", metadata={"is_error": True}),
        ],
    )
    assert md.startswith("# Demo\n\n*messages: 3*\n\n## User · 2024-05-01 09:00:00 UTC\n\nhello")
    assert (
        '<details><summary>Tool call: ls (c1)</summary>\n\n```json\n{\n  "path": "."\n}\n```' in md
    )
    assert "<summary>Result: ls (c1) (error)</summary>" in md


@given(st.text())
def test_markdown_never_breaks_on_any_text(text: str) -> None:
    md = to_markdown("t", [Message.user(text), Message.tool(text, tool_call_id="x")])
    structure = _structure(md)
    assert [line for line in structure if line.startswith("#")] == ["# t", structure[1]]
    assert structure[1].startswith("## User")
    assert structure.count("</details>") == 1
