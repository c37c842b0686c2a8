"""Imported native checkpoints are shown as what they are: another tool's text (issue 31.4).

A Codex ``compacted`` record's replacement history becomes the checkpoint's text in its
own order (user and assistant items interleaved, the user's whole), the developer and
permission instructions (and Codex's AGENTS.md / environment blocks) out, headed as
Codex's text, not threadline's; a window too small for it drops assistant items first;
a Claude Code ``isCompactSummary`` stays Claude's text. Neither is parsed as a threadline
snapshot: when one does not fit a window it is cut at its end with a note, never thinned
section by section (a user's plan headings are not snapshot sections "left out to fit this
window").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRANSCRIPTS, require_shared
from tests.real_runs import import_into
from threadline import ContextPolicy, Message, build_context, open_store
from threadline.context.builder import NATIVE_KEY, SUMMARY_HEADER
from threadline.interop.codex_echoes import CONTEXT_PREFIXES

CODEX_RUNS = (
    "codex/standard-syntax-basic-2compactions-019fc928.jsonl",
    "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl",
)
THINNED = "- (left out to fit this window)"
"""What the builder writes under a snapshot section whose bullets it dropped."""


def replacement_histories(path: Path) -> list[list[dict[str, Any]]]:
    """Each ``compacted`` record's replacement history, read straight from the file."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "compacted":
            out.append(rec["payload"].get("replacement_history") or [])
    return out


def text_of(item: dict[str, Any]) -> str:
    """A message item's text parts, an image as ``[image]``."""
    return "\n".join(
        "[image]" if c.get("type") == "input_image" else c.get("text", "")
        for c in item.get("content") or []
    )


@pytest.mark.parametrize("run", CODEX_RUNS)
def test_a_codex_compaction_shows_the_users_messages_whole_and_no_instructions(
    run: str,
) -> None:
    require_shared(TRANSCRIPTS)
    source = TRANSCRIPTS / run
    (session,) = import_into(open_store("memory://"), source)
    checkpoints = session.checkpoints()
    histories = replacement_histories(source)
    assert len(checkpoints) == len(histories) >= 1
    for checkpoint, history in zip(checkpoints, histories, strict=True):
        text = checkpoint.summary
        assert checkpoint.metadata[NATIVE_KEY] == "codex"
        users = [
            text_of(i)
            for i in history
            if i.get("role") == "user" and not text_of(i).lstrip().startswith(CONTEXT_PREFIXES)
        ]
        given = [
            text_of(i)
            for i in history
            if i.get("role") in ("developer", "system")
            or (i.get("role") == "user" and text_of(i).lstrip().startswith(CONTEXT_PREFIXES))
        ]
        assert users
        for said in users:
            assert f"user: {said}" in text  # whole
        for instruction in given:
            assert instruction.strip()[:200] not in text
        shown = [
            f"{i['role']}: {text_of(i)}"
            for i in history
            if i.get("type") == "message"
            and i.get("role") in ("user", "assistant")
            and not text_of(i).lstrip().startswith(CONTEXT_PREFIXES)
        ]
        at = [text.index(block) for block in shown]
        assert at == sorted(at)  # the replacement history's own order
        if given:
            assert f"[{len(given)} instruction message(s)" in text


def test_a_codex_compaction_in_a_window_is_not_thinned_into_sections() -> None:
    """The replacement history holds the user's plan (``## Summary``, ``## Public
    Interfaces``, ...): in a 32k window it is shown whole, the 36k characters of developer
    memory guidance are not, and no heading says it was left out."""
    require_shared(TRANSCRIPTS)
    source = TRANSCRIPTS / CODEX_RUNS[0]
    (session,) = import_into(open_store("memory://"), source)
    window = build_context(session, policy=ContextPolicy(context_limit=32_000))
    (summary,) = [m.text for m in window.messages if m.summary]
    history = replacement_histories(source)[-1]
    plan = next(text_of(i) for i in history if text_of(i).startswith("A previous agent"))
    assert "## Public Interfaces" in plan and plan in summary
    assert THINNED not in summary
    assert "You have access to a memory folder" not in summary


def test_a_native_summary_too_long_for_the_window_is_cut_at_its_end() -> None:
    """A Claude Code summary in a window too small for it: its opening, then a note;
    never its numbered headings kept with their bullets dropped."""
    require_shared(TRANSCRIPTS)
    source = TRANSCRIPTS / "claude-code/entire-cli-2compactions-b8659b3a4d.jsonl"
    (session,) = import_into(open_store("memory://"), source)
    native = session.checkpoints()[-1]
    assert native.metadata[NATIVE_KEY] == "claude-code"
    policy = ContextPolicy(context_limit=12_000, response_reserve=1_000)
    window = build_context(session, policy=policy)
    (summary,) = [m.text for m in window.messages if m.summary]
    assert native.summary.strip()[:2_000] in summary  # the opening, untouched
    assert "summary (" in summary and "characters) is left out to fit this window" in summary
    assert THINNED not in summary
    assert window.report.total_tokens <= 12_000


def test_a_threadline_snapshot_is_still_thinned_by_section() -> None:
    """Only another tool's text is cut at its end; threadline's own snapshot keeps every
    section heading and gives up its lowest-ranked bullets first."""
    store = open_store("memory://")
    session = store.create_session()
    session.append([Message.user(f"request {i} " + "word " * 40) for i in range(30)])
    bullets = "\n".join(f"- value {i} " + "x " * 30 for i in range(60))
    text = (
        "## Files Modified\n- a.py\n## Key Decisions\n- keep it\n## Important Values\n"
        f"{bullets}\n## Current State\n- working\n## Pending Tasks\n- finish\n"
    )
    session.add_checkpoint(covers_up_to=25, summary=text)
    window = build_context(session, policy=ContextPolicy(context_limit=2_500, response_reserve=200))
    (summary,) = [m.text for m in window.messages if m.summary]
    assert "## Pending Tasks\n- finish" in summary and "- value 0 " in summary
    assert "- value 59 " not in summary and "left out to fit this window" not in summary


def rollout(tmp_path: Path, history: list[dict[str, Any]]) -> Path:
    """A Codex rollout shaped like the shared ones: meta, a developer block, turns, then a
    ``compacted`` record whose replacement history is ``history``, then one more turn."""

    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps(
            {"timestamp": "2026-02-23T11:54:52.353Z", "type": kind, "payload": payload}
        )

    def message(role: str, text: str) -> dict[str, Any]:
        part = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}

    meta = {"id": "019c8a59-e9dd-71f0-9ae3-4079fe9726a9", "cwd": "/repo", "git": {"branch": "main"}}
    lines = [line("session_meta", meta), line("response_item", message("developer", "rules"))]
    for item in history:
        if item.get("role") in ("user", "assistant"):
            lines.append(line("response_item", item))
    lines.append(line("compacted", {"message": "", "replacement_history": history}))
    lines.append(line("response_item", message("user", "and now the tests")))
    path = tmp_path / "rollout-2026-02-23T12-54-34-019c8a59.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def interleaved(turns: int, size: int, asked: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "DEV " * 50}],
        }
    ]
    for i in range(turns):
        out.append(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"ask{i} " + "u " * (asked or size)}],
            }
        )
        out.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"did{i} " + "a " * size}],
            }
        )
    out.append({"type": "compaction", "encrypted_content": "x" * 51})
    return out


def test_a_codex_compaction_keeps_its_order_and_is_headed_as_codex_text(tmp_path: Path) -> None:
    """Judge, run G: the replacement history was shown as every user item, then every
    assistant item, under "written by threadline's compaction"."""
    (session,) = import_into(open_store("memory://"), rollout(tmp_path, interleaved(3, 5)))
    (checkpoint,) = session.checkpoints()
    text = checkpoint.summary
    at = [text.index(f"{who}{i} ") for i in range(3) for who in ("ask", "did")]
    assert at == sorted(at)
    assert "DEV" not in text
    window = build_context(session, policy=ContextPolicy(context_limit=32_000))
    (summary,) = [m.text for m in window.messages if m.summary]
    assert "written by Codex" in summary
    assert SUMMARY_HEADER.split("(")[0] + "(messages up to #" in summary
    assert "written by threadline's compaction" not in summary


def test_a_codex_compaction_too_long_for_the_window_drops_assistant_items_first(
    tmp_path: Path,
) -> None:
    """Clipped, the user's messages stay whole and in order; the assistant's go (the
    oldest first), with a note saying how many."""
    (session,) = import_into(
        open_store("memory://"), rollout(tmp_path, interleaved(6, 300, asked=40))
    )
    policy = ContextPolicy(context_limit=6_000, response_reserve=500)
    window = build_context(session, policy=policy)
    (summary,) = [m.text for m in window.messages if m.summary]
    for i in range(6):
        assert f"user: ask{i} " + "u " * 39 + "u" in summary  # whole
    assert "did0 " not in summary and "assistant message(s) are left out" in summary
    users = [summary.index(f"ask{i} ") for i in range(6)]
    assert users == sorted(users)
    assert window.report.total_tokens <= 6_000
