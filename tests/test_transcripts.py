"""Every real transcript in ../shared/transcripts imports, with the counts its README states."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from threadline import interop
from threadline.messages import Message, group_units

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "transcripts"

if not TRANSCRIPTS.is_dir():
    if os.environ.get("CI", "").lower() == "true":
        raise RuntimeError(f"CI=true but the shared transcripts are missing: {TRANSCRIPTS}")
    pytest.skip(f"shared transcripts not found at {TRANSCRIPTS}", allow_module_level=True)

pytestmark = pytest.mark.transcripts

S1 = "claude-code/spotter-4d5611e5/4d5611e5-241a-462a-8d15-5122611a9569"
S2 = "claude-code/spotter-8463c716/8463c716-a2ea-4c14-9efa-87158ebd9f20"

# file -> (format, conversations, tool calls, tool results); calls/results from the README,
# a Codex file's ``web_search_call`` items counted as a call and a result each (README's "+N")
EXPECTED: dict[str, tuple[str, int, int, int]] = {
    f"{S1}.jsonl": ("claude-code", 1, 150, 150),
    f"{S1}/subagents/agent-a2898e3.jsonl": ("claude-code", 1, 33, 33),
    f"{S1}/subagents/agent-acompact-e1f845.jsonl": ("claude-code", 1, 0, 0),
    f"{S2}.jsonl": ("claude-code", 1, 177, 177),
    f"{S2}/subagents/agent-a7be2f0.jsonl": ("claude-code", 1, 19, 19),
    f"{S2}/subagents/agent-acompact-f46190.jsonl": ("claude-code", 1, 0, 0),
    "claude-code/spotter-tool_heavy.jsonl": ("claude-code", 1, 6, 6),
    "claude-code/spotter-subagent-task.jsonl": ("claude-code", 1, 16, 16),
    "claude-code/codemie-session-624a4a58-compacted.jsonl": ("claude-code", 1, 48, 48),
    "claude-code/codemie-session-9eda1058-summary-lines.jsonl": ("claude-code", 1, 3, 3),
    "claude-code/codemie-session-196820da.jsonl": ("claude-code", 1, 65, 65),
    "codex/codemie-rollout-2026-05-11T11-26-55-019e1625.jsonl": ("codex", 1, 102 + 3, 102 + 3),
    "codex/rtchess-session-019aad50-exported.jsonl": ("codex", 1, 298, 298),
    "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl": (
        "codex",
        1,
        365 + 7,
        365 + 7,
    ),
    "codex/localpush-redacted-rollout-2026-02-23T12-40-23.jsonl": ("codex", 1, 104 + 1, 104 + 1),
    "other/gemini-cli-session-2025-12-01T21-45-5b959dae.json": ("gemini", 1, 10, 10),
    "openai-chat/tau-bench-gpt-4o-airline.json": ("openai-runs", 200, 1164, 1164),
    "swe-agent/function-calling-marshmallow-code__marshmallow-1867.traj": ("swe-agent", 1, 13, 13),
    "swe-agent/ctf-web-i_got_id_demo.traj": ("swe-agent", 1, 0, 0),
    "swe-agent/gpt4-swe-agent__test-repo-i1.traj": ("swe-agent", 1, 0, 0),
    "openhands/multi-swe-bench-llama4-maverick-output.jsonl": ("openhands", 3, 105, 103),
    "aider/pocketflow-text2sql-gui.aider.chat.history.md": ("aider", 1, 0, 0),
    # the second wave
    "aider/inversity-snapswap-udiff-mixed.aider.chat.history.md": ("aider", 1, 0, 0),
    "aider/verilog-simulasyonu-tr.aider.chat.history.md": ("aider", 1, 0, 0),
    "aider/mozgoslav-ru.aider.chat.history.md": ("aider", 1, 0, 0),
    "aider/supplychaintracker2-es-architect.aider.chat.history.md": ("aider", 1, 0, 0),
    "aider/haav-catalogservice-ask-diff.aider.chat.history.md": ("aider", 1, 0, 0),
    "codex/standard-syntax-basic-2compactions-019fc928.jsonl": ("codex", 1, 374, 374),
    "codex/mokiofactory-codex-desktop-websearch-019f4514.jsonl": ("codex", 1, 5 + 9, 5 + 9),
    "codex/communique-parallel-019efb65.jsonl": ("codex", 1, 52 + 4, 52 + 4),
    "codex/entirecontext-codex-exec-01a00de5.jsonl": ("codex", 1, 16, 16),
    "claude-code/entire-cli-2compactions-b8659b3a4d.jsonl": ("claude-code", 1, 171, 171),
    "claude-code/entire-cli-glued-lines-5ac45bc322.jsonl": ("claude-code", 1, 55, 55),
    "claude-code/mokiofactory-glm5-zh.jsonl": ("claude-code", 1, 68, 68),
    "claude-code/claude-code-setup-sidechain-only-agent-58e69205.jsonl": ("claude-code", 1, 52, 52),
    "claude-code/ta93abe-me-ja-700k-tool-result.jsonl": ("claude-code", 1, 118, 118),
    "other/opencode-export-shui-ja-fork-compaction-ses_ff982d45.json": ("opencode", 1, 182, 182),
    # the main path and the branch the user left; the last call was still running
    "other/pi-session-herdr-subagents-01a00acb.jsonl": ("pi", 2, 101, 100),
}
V1_EVENTS = "openhands/openhands-cli-v1-events-2496927b"
"""One conversation stored as a file per event: each file reads as the whole of it."""
if (TRANSCRIPTS / V1_EVENTS).is_dir():
    for _event in sorted((TRANSCRIPTS / V1_EVENTS).iterdir()):
        EXPECTED[f"{V1_EVENTS}/{_event.name}"] = ("openhands", 1, 3, 3)


def _files() -> list[str]:
    return sorted(
        str(p.relative_to(TRANSCRIPTS))
        for p in TRANSCRIPTS.rglob("*")
        if p.is_file() and p.name != "README.md"
    )


def test_every_file_is_covered() -> None:
    assert _files() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reader_yields_messages_with_stated_counts(name: str) -> None:
    fmt, n_runs, n_calls, n_results = EXPECTED[name]
    path = TRANSCRIPTS / name
    assert interop.detect_format(path) == fmt
    runs = interop.read_transcript_runs(path)
    assert len(runs) == n_runs
    assert all(runs), "every conversation has messages"
    messages = [m for run in runs for m in run]
    assert sum(len(m.tool_calls) for m in messages) == n_calls
    assert sum(m.role == "tool" for m in messages) == n_results
    synthesized = 0
    for run in runs:
        _, report = group_units(run)
        assert report.orphans == []
        synthesized += len(report.synthesized)
    assert synthesized == n_calls - n_results  # only calls the file never answered


def test_openhands_unanswered_finish_is_repaired_in_view() -> None:
    runs = interop.read_openhands_runs(
        TRANSCRIPTS / "openhands/multi-swe-bench-llama4-maverick-output.jsonl"
    )
    assert [len(r) for r in runs] == [47, 68, 101]
    repaired = [group_units(r)[1].synthesized for r in runs]
    assert [len(s) for s in repaired] == [1, 1, 0]
    finishes = [m.tool_calls[-1].name for r in runs[:2] for m in r[-1:]]
    assert finishes == ["finish", "finish"]
    with pytest.raises(Exception, match="3 conversations"):
        interop.read_openhands(
            TRANSCRIPTS / "openhands/multi-swe-bench-llama4-maverick-output.jsonl"
        )


def test_tau_bench_reuses_ids_and_pairs_positionally() -> None:
    runs = interop.read_openai_runs(TRANSCRIPTS / "openai-chat/tau-bench-gpt-4o-airline.json")
    assert sum(len(r) for r in runs) == 5308 and max(len(r) for r in runs) == 62
    reused = 0
    for run in runs:
        ids = [c.id for m in run for c in m.tool_calls]
        reused += len(ids) != len(set(ids))
        units, report = group_units(run)
        assert not report.changed
        for unit in units:
            if unit.is_tool_chain:
                assert unit.messages[1].tool_call_id == unit.messages[0].tool_calls[0].id
    # the README says ids repeat in 71 runs; counting runs with a repeated call id gives 49
    assert reused == 49


def test_claude_code_merges_streamed_lines_and_keeps_compaction() -> None:
    ms = interop.read_claude_code(
        TRANSCRIPTS / "claude-code/codemie-session-624a4a58-compacted.jsonl"
    )
    summary = [m for m in ms if m.metadata.get("compact_summary")]
    assert len(summary) == 1 and summary[0].role == "user"
    boundary = summary[0].metadata["compact_boundary"]
    assert boundary["trigger"] == "auto" and boundary["pre_tokens"] == 155979
    assert summary[0].text.startswith("This session is being continued")
    thinking = [m for m in ms if m.metadata.get("thinking")]
    assert thinking and all(m.role == "assistant" for m in thinking)
    assert all(isinstance(t, dict) for m in thinking for t in m.metadata["thinking"])
    errors = interop.read_claude_code(TRANSCRIPTS / "claude-code/codemie-session-196820da.jsonl")
    assert sum(bool(m.metadata.get("is_error")) for m in errors) == 2
    heavy = interop.read_claude_code(TRANSCRIPTS / "claude-code/spotter-tool_heavy.jsonl")
    assert max(len(m.tool_calls) for m in heavy) == 2  # two streamed lines, one response
    assert all(m.model for m in heavy if m.role == "assistant")


def test_claude_code_summary_lines_are_kept_and_the_title_is_the_request() -> None:
    got = interop.import_file(
        TRANSCRIPTS / "claude-code/codemie-session-9eda1058-summary-lines.jsonl"
    )
    # the summary lines describe other sessions (their leafUuids are not in this file)
    assert got.agent == "claude-code" and got.title == "show tools and store response in file"
    assert len(got.metadata["summaries"]) == 16
    assert got.metadata["skipped"]["file-history-snapshot"] == 3


def test_codex_roles_usage_and_compaction() -> None:
    ms = interop.read_codex(
        TRANSCRIPTS / "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl"
    )
    roles = [m.role for m in ms]
    assert roles.count("system") == 45 and roles.count("user") == 46
    assert sum(1 for m in ms if m.role == "assistant" and m.text) == 255
    assert sum("codex_compacted" in m.metadata for m in ms) == 1
    assert any(m.usage and m.usage.input_tokens for m in ms if m.role == "assistant")
    assert all(m.model for m in ms if m.role == "assistant")
    imported = interop.import_file(
        TRANSCRIPTS / "codex/codemie-rollout-2026-05-11T11-26-55-019e1625.jsonl"
    )
    assert imported.metadata["skipped"]["response_item:reasoning"] == 25
    assert imported.model


def test_gemini_results_follow_their_calls() -> None:
    ms = interop.read_gemini(
        TRANSCRIPTS / "other/gemini-cli-session-2025-12-01T21-45-5b959dae.json"
    )
    assert [m.role for m in ms].count("user") == 3
    assert sum(m.role == "assistant" for m in ms) == 11
    for i, m in enumerate(ms):
        if m.tool_calls:
            following = ms[i + 1 : i + 1 + len(m.tool_calls)]
            assert [r.tool_call_id for r in following] == [c.id for c in m.tool_calls]


def test_swe_agent_text_runs_and_function_calling() -> None:
    text_only = interop.read_swe_agent(TRANSCRIPTS / "swe-agent/gpt4-swe-agent__test-repo-i1.traj")
    assert [m.role for m in text_only][:3] == ["system", "user", "user"]
    assert any(m.metadata.get("is_demo") for m in text_only)
    fc = interop.read_swe_agent(
        TRANSCRIPTS / "swe-agent/function-calling-marshmallow-code__marshmallow-1867.traj"
    )
    assert len(fc) == 28 and not group_units(fc)[1].changed


def test_aider_replies_and_notes() -> None:
    ms = interop.read_aider(TRANSCRIPTS / "aider/pocketflow-text2sql-gui.aider.chat.history.md")
    assert {m.role for m in ms} == {"user", "assistant"}
    assert sum(m.role == "assistant" for m in ms) >= 62  # 62 replies report token use
    notes = [n for m in ms for n in m.metadata.get("aider_notes", [])]
    assert sum(n.startswith("Tokens:") for n in notes) == 62
    assert sum(n.startswith("Applied edit") for n in notes) == 68
    assert ms[0].metadata["aider_session_started"] == "2025-08-06 12:06:30"


def test_single_conversation_readers_refuse_many() -> None:
    tau = TRANSCRIPTS / "openai-chat/tau-bench-gpt-4o-airline.json"
    with pytest.raises(Exception, match=r"200 conversations; read them with read_openai_runs\(\)"):
        interop.read_openai_chat(tau)
    with pytest.raises(Exception, match="200 conversations"):
        interop.read_transcript(tau)


def test_all_messages_are_valid_values() -> None:
    for name in EXPECTED:
        for run in interop.read_transcript_runs(TRANSCRIPTS / name):
            for m in run:
                assert Message.model_validate(m.model_dump()) == m
