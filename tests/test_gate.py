"""A model's snapshot is reconciled with the evidence, not gated away.

Against a local server speaking OpenAI's wire format: a reply whose sections are thin
or whose values are paraphrased is kept (its prose stored), with the files, open items
and unresolved failures of the history laid over it; only an unusable reply (empty,
no section, naming files no message shows) gives way to the offline snapshot, with a
note in the checkpoint's metadata and in ``threadline compact``'s report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes import FakeOpenAI
from threadline import ContextPolicy, Message, ToolCall, open_store
from threadline.cli.app import app
from threadline.compaction.compactor import Compactor
from threadline.compaction.gate import FALLBACK_KEY, check
from threadline.compaction.llm import HybridSummarizer, LLMSummarizer, evidence_text
from threadline.compaction.snapshot import Snapshot, SummaryResult, parse
from threadline.compaction.trail import build_trail
from threadline.llm.openai_provider import OpenAIChatModel

URL = "https://api.example.com/v2/items"
SETTING = "max_connections=250"
SOUND = f"""## Files Modified
- src/mod0.py: retry added
- src/mod1.py: retry added

## Key Decisions
- Retry with backoff, because the server drops requests

## Important Values
- {URL}
- {SETTING}

## Current State
- The fix is in; the tests pass

## Pending Tasks
- Document the retry in README.md
"""
NO_FILES = SOUND.replace("- src/mod0.py: retry added\n- src/mod1.py: retry added\n", "")
PARAPHRASED = SOUND.replace(URL, "the items endpoint").replace(SETTING, "a higher limit")
INVENTED = SOUND.replace("src/mod1.py", "lib/payments/ledger.rs")
CHATTER = "Sure! The user wanted retries and I think it went well overall."


@pytest.fixture
def srv(openai_server: FakeOpenAI) -> FakeOpenAI:
    return openai_server


def messages() -> list[Message]:
    out: list[Message] = []
    for i in range(6):
        call = ToolCall(
            id=f"c{i}",
            name="Edit",
            arguments={"file_path": f"src/mod{i % 2}.py", "old_string": "a", "new_string": "b"},
        )
        out += [
            Message.user(f"Add a retry to src/mod{i % 2}.py; {URL} drops requests."),
            Message.assistant("Adding it, because the server drops requests.", tool_calls=[call]),
            Message.tool("ok", tool_call_id=call.id, name="Edit"),
            Message.assistant(f"Done; I also set {SETTING}. Next: document it in README.md."),
        ]
    return out


def open_work() -> list[Message]:
    """An open todo item and a test run that failed and was never run clean again."""
    todo = ToolCall(
        id="t1",
        name="TodoWrite",
        arguments={
            "todos": [
                {"content": "Add the retry", "status": "completed", "activeForm": "Adding"},
                {
                    "content": "Wire the retry into the CLI",
                    "status": "in_progress",
                    "activeForm": "Wiring",
                },
            ]
        },
    )
    run = ToolCall(id="b1", name="Bash", arguments={"command": "pytest tests/test_cli.py"})
    return [
        Message.assistant("Tracking the work.", tool_calls=[todo]),
        Message.tool("Todos have been modified successfully", tool_call_id="t1", name="TodoWrite"),
        Message.assistant("Running the CLI tests.", tool_calls=[run]),
        Message.tool(
            "FAILED tests/test_cli.py::test_retry - AssertionError: retry flag missing\n"
            "1 failed, 4 passed",
            tool_call_id="b1",
            name="Bash",
            metadata={"is_error": True},
        ),
        Message.user("Keep going."),
        Message.assistant("On it."),
    ]


def compact(
    srv: FakeOpenAI, reply: str, *, hybrid: bool = False, extra: list[Message] | None = None
) -> dict[str, object]:
    srv.reply_text(reply, usage=(700, 90))
    store = open_store("memory://")
    session = store.create_session(model="gpt-4o")
    session.append(messages() + (extra or []))
    llm = LLMSummarizer(OpenAIChatModel("gpt-4o", api_key="test", base_url=srv.url, max_retries=0))
    summarizer = HybridSummarizer(llm) if hybrid else llm
    result = Compactor(summarizer, policy=ContextPolicy()).compact(
        session, force=True, keep_recent=2, keep_turns=0
    )
    assert result.checkpoint is not None
    assert result.fallback == result.checkpoint.metadata.get(FALLBACK_KEY)
    return {"summary": result.checkpoint.summary, **result.checkpoint.metadata}


def section(text: object, name: str) -> str:
    return "\n".join(b.text for b in parse(str(text)).section(name))  # type: ignore[arg-type]


def test_a_snapshot_that_names_no_file_is_kept_and_the_files_are_laid_over(
    srv: FakeOpenAI,
) -> None:
    """Under the value-retention gate this reply gave way (an empty Files Modified); now
    its prose is stored and the history's files are laid over it."""
    md = compact(srv, NO_FILES)
    assert FALLBACK_KEY not in md and md["summarizer"] == "llm"
    files = section(md["summary"], "files_modified")
    assert "`src/mod0.py`" in files and "`src/mod1.py`" in files
    assert "Retry with backoff, because the server drops requests" in str(md["summary"])


def test_code_the_model_names_beside_its_files_is_no_file(srv: FakeOpenAI) -> None:
    """A function's arity or a sigil in a Files Modified line is neither an unknown file
    (no fallback) nor a file of its own in the stored section."""
    helpers = "- New helpers: `render_row/2`, `classify_line/3`, `~r/agent-[a-z]+/`\n"
    md = compact(srv, SOUND.replace("## Key Decisions", helpers + "\n## Key Decisions"))
    assert FALLBACK_KEY not in md and md["summarizer"] == "llm"
    files = section(md["summary"], "files_modified")
    assert "render_row/2" not in files and "`src/mod0.py`" in files


def test_paraphrased_values_are_kept_as_the_model_wrote_them(srv: FakeOpenAI) -> None:
    """Under the old gate this reply fell back (retention below the offline snapshot's)."""
    md = compact(srv, PARAPHRASED)
    assert FALLBACK_KEY not in md and md["summarizer"] == "llm"
    values = section(md["summary"], "important_values")
    assert "the items endpoint" in values and "a higher limit" in values


def test_open_items_and_unresolved_failures_are_laid_over_the_models_prose(
    srv: FakeOpenAI,
) -> None:
    md = compact(srv, SOUND, extra=open_work())
    assert FALLBACK_KEY not in md and md["summarizer"] == "llm"
    pending = section(md["summary"], "pending_tasks")
    assert "Wire the retry into the CLI" in pending  # the todo list's open item, first
    assert pending.index("Wire the retry") < pending.index("Document the retry")
    assert "Add the retry\n" not in pending + "\n"  # completed: not pending
    values = section(md["summary"], "important_values")
    assert "pytest tests/test_cli.py" in values and "retry flag missing" in values
    assert URL in values  # the model's own values stay beside the failure
    assert "Retry with backoff" in section(md["summary"], "key_decisions")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        (CHATTER, "nothing under any of the five snapshot sections"),
        (INVENTED, "lib/payments/ledger.rs"),
    ],
)
def test_an_unusable_reply_falls_back_and_says_why(
    srv: FakeOpenAI, reply: str, reason: str
) -> None:
    md = compact(srv, reply)
    note = md[FALLBACK_KEY]
    assert isinstance(note, dict)
    assert note["from"] == "llm" and any(reason in r for r in note["reasons"]), note
    assert (note["input_tokens"], note["output_tokens"]) == (700, 90)  # what the model cost
    assert md["summarizer"] == "extractive"
    assert "`src/mod0.py`" in str(md["summary"])


def test_a_sound_hybrid_snapshot_is_kept(srv: FakeOpenAI) -> None:
    md = compact(srv, SOUND, hybrid=True)
    assert FALLBACK_KEY not in md
    assert md["summarizer"] == "hybrid"
    assert "Retry with backoff" in str(md["summary"])


def test_the_verdict_reads_the_history_not_the_offline_snapshot() -> None:
    said = messages()
    trail, evidence = build_trail(said), evidence_text(said)

    def written(text: str, unusable: str | None = None) -> SummaryResult:
        result = SummaryResult.counted(text, Snapshot.parse(text), [], summarizer="llm")
        result.unusable = unusable
        return result

    assert check(written(SOUND), trail, evidence).passed
    assert check(written(NO_FILES), trail, evidence).passed
    assert check(written(PARAPHRASED), trail, evidence).passed
    invented = check(written(INVENTED), trail, evidence)
    assert not invented.passed and invented.unknown_files == ["lib/payments/ledger.rs"]
    # a path spelled absolute or relative is the same file the trail saw
    absolute = SOUND.replace("src/mod1.py", "/home/dev/app/src/mod1.py")
    assert check(written(absolute), trail, evidence).passed
    empty = check(written(Snapshot().render(), "the model returned an empty reply"), trail, "")
    assert not empty.passed and empty.reasons() == ["the model returned an empty reply"]


def test_the_compact_command_says_when_it_fell_back(
    srv: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite://{tmp_path / 'gate.db'}"
    monkeypatch.setenv("THREADLINE_STORE", url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
    store = open_store(url)
    session = store.create_session(model="openai/gpt-4o")
    session.append(messages())
    sid = session.id
    store.close()
    srv.reply_text(INVENTED, usage=(700, 90))
    args = ["compact", sid, "--summarizer", "llm", "--model", "openai/gpt-4o", "--keep-recent", "2"]
    out = CliRunner().invoke(app, [*args, "--dry-run"])
    assert out.exit_code == 0, out.output
    assert "Fallback:" in out.output and "lib/payments/ledger.rs" in out.output
    srv.reply_text(SOUND, usage=(700, 90))
    # stdout alone: under pytest every warning shows, and one from the garbage collector
    # (a socket of the previous run closed late) lands on stderr at any moment
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert doc["fallback"] is None and doc["summarizer"] == "llm"
