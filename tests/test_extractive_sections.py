"""What each section of an extractive snapshot holds on sessions shaped like real ones.

Files Modified names each file once, relative to the working directory, with
what changed, and keeps naming every file across incremental rounds; Key
Decisions holds decisions and the user's constraints, not the agent narrating
its next step; Important Values are merged, ranked and not flooded by the
paths of commands that only run files.
"""

from __future__ import annotations

import re

from threadline.compaction.extractive import MAX_IDENTIFIERS, ExtractiveSummarizer
from threadline.compaction.snapshot import SectionName, parse, words
from threadline.compaction.toolcalls import edited_files
from threadline.messages import Message, ToolCall

SUMMARIZER = ExtractiveSummarizer()
ROOT = "/home/USER/proj"


def section(text: str, name: SectionName) -> list[str]:
    return [b.text for b in parse(text).section(name)]


def edit(n: int, path: str, text: str = "", **extra: object) -> list[Message]:
    c = ToolCall(
        id=f"e{n}",
        name="Edit",
        arguments={"file_path": path, "old_string": "a", "new_string": "b", **extra},
    )
    return [Message.assistant(text, tool_calls=[c]), Message.tool("ok", tool_call_id=c.id)]


def bash(n: int, command: str, output: str = "") -> list[Message]:
    c = ToolCall(id=f"b{n}", name="Bash", arguments={"command": command})
    return [Message.assistant("", tool_calls=[c]), Message.tool(output, tool_call_id=c.id)]


def rounds(messages: list[Message], size: int, max_words: int = 600) -> str:
    """Summarize in windows of ``size`` messages, each folding in the previous snapshot."""
    previous: str | None = None
    for start in range(0, len(messages), size):
        window = messages[start : start + size]
        previous = SUMMARIZER.summarize(window, previous=previous, max_words=max_words).text
        assert words(previous) <= max_words
    assert previous is not None
    return previous


# -- Files Modified ------------------------------------------------------------------


def test_one_entry_per_file_relative_to_the_working_directory_with_what_changed() -> None:
    msgs = [Message.user("Fix the retry bug.", metadata={"cwd": ROOT})]
    msgs += edit(1, f"{ROOT}/lib/client.ex", "Now I have the full picture.")
    msgs += bash(2, "sed -i 's/3/5/' lib/client.ex")
    msgs += edit(
        3, f"{ROOT}/lib/client.ex", "Now fix the retry loop by capping the backoff at 30s."
    )
    text = SUMMARIZER.summarize(msgs).text
    (files,) = section(text, "files_modified")
    assert (
        files == "`lib/client.ex`: edited ×3; e.g. fix the retry loop by capping the backoff at 30s"
    )
    assert f"Working directory: `{ROOT}`" in section(text, "current_state")


def test_definitions_say_what_changed_when_the_agent_does_not() -> None:
    msgs = [Message.user("go", metadata={"cwd": ROOT})]
    msgs += edit(1, f"{ROOT}/lib/a.ex", new_string="  defp build_index(lines) do")
    (files,) = section(SUMMARIZER.summarize(msgs).text, "files_modified")
    assert files == "`lib/a.ex`: edited: `build_index`"


def test_the_working_directory_and_counts_carry_over_to_the_next_round() -> None:
    first = [Message.user("go", metadata={"cwd": ROOT})]
    first += edit(1, f"{ROOT}/lib/a.ex") + edit(2, f"{ROOT}/lib/a.ex")
    previous = SUMMARIZER.summarize(first).text
    second = edit(3, f"{ROOT}/lib/a.ex") + bash(4, "rm lib/old.ex")  # no cwd in this window
    text = SUMMARIZER.summarize(second, previous=previous).text
    files = section(text, "files_modified")
    assert any(f.startswith("`lib/a.ex`: edited ×3") for f in files)
    assert any(f.startswith("`lib/old.ex`: deleted") for f in files)
    assert len(files) == 2 and f"Working directory: `{ROOT}`" in text


def test_every_file_stays_named_across_rounds_within_the_word_limit() -> None:
    msgs = [Message.user("Rename the config key everywhere.", metadata={"cwd": ROOT})]
    for n in range(60):
        path = f"{ROOT}/lib/module_{n}/handler.ex"
        msgs += edit(n, path, f"Now update handler {n} to read the new key.")
        msgs += bash(1000 + n, f"mix test test/module_{n}_test.exs", "4 tests, 0 failures")
    text = rounds(msgs, 100)
    named = set(re.findall(r"`(lib/module_\d+/handler\.ex)`", text))
    assert named == set(edited_files(msgs))
    assert any(f.startswith("Also changed: ") for f in section(text, "files_modified"))
    for limit in (250, 400):
        assert words(rounds(msgs, 100, max_words=limit)) <= limit


# -- Key Decisions -------------------------------------------------------------------


def test_decisions_and_constraints_but_not_narration() -> None:
    msgs = [
        Message.user(
            "Add retries to the client. Don't touch the public API. Always run the linter "
            "before committing. Use Postgres instead of SQLite for the tests."
        ),
        Message.assistant("Let me check the client first. I'll look at the tests too."),
        Message.assistant("Now I have the full picture. Now let's add the retry helper."),
        Message.assistant("We'll use httpx because it supports HTTP/2 and timeouts per request."),
        Message.assistant("I'll use the `view` command to see the file."),
        Message.assistant("Let me run the tests to see if the fix works."),
        Message.assistant("I decided to keep the old signature so callers need no change."),
    ]
    decisions = section(SUMMARIZER.summarize(msgs).text, "key_decisions")
    assert "User: Don't touch the public API." in decisions
    assert "User: Always run the linter before committing." in decisions
    assert "User: Use Postgres instead of SQLite for the tests." in decisions
    assert "We'll use httpx because it supports HTTP/2 and timeouts per request." in decisions
    assert "I decided to keep the old signature so callers need no change." in decisions
    joined = " ".join(decisions)
    for narration in (
        "Let me check",
        "I'll look",
        "full picture",
        "let's add",
        "`view`",
        "Let me run",
    ):
        assert narration not in joined


def test_a_compaction_summary_and_a_command_output_are_not_the_user() -> None:
    summary = Message.user(
        "This session is being continued. Must keep the old API.",
        metadata={"compact_summary": True},
    )
    msgs = [
        summary,
        Message.assistant("Run it.", metadata={"action": "python repro.py"}),
        Message.user("Traceback: you must not do this\nValueError: bad input"),
    ]
    text = SUMMARIZER.summarize(msgs).text
    assert not any(d.startswith("User:") for d in section(text, "key_decisions"))
    assert not any("Last request" in s for s in section(text, "current_state"))
    assert "ValueError: bad input" in text


def test_a_long_prompt_template_weighs_less_than_a_short_request() -> None:
    template = "You are an agent. " * 250 + "Always include exactly one tool call per response."
    msgs = [Message.user(template), Message.user("Never push to main.")]
    decisions = section(SUMMARIZER.summarize(msgs).text, "key_decisions")
    assert decisions[0] == "User: Never push to main."


# -- Important Values ----------------------------------------------------------------


def test_values_merge_what_names_the_same_thing_and_skip_modified_files() -> None:
    msgs = [
        Message.user("Look at lib/config.ex and deploy commit 3f9a2c1.", metadata={"cwd": ROOT})
    ]
    msgs += bash(1, f"cat {ROOT}/lib/config.ex", "port: 4000")
    msgs.append(Message.assistant(f"`{ROOT}/lib/config.ex` sets the port; 3f9a2c1d4e5b is live."))
    msgs += edit(2, f"{ROOT}/lib/router.ex")
    msgs.append(Message.assistant("I updated `lib/router.ex` and router.ex is done."))
    values = section(SUMMARIZER.summarize(msgs).text, "important_values")
    assert sum("config.ex" in v for v in values) == 1
    assert sum("3f9a2c1" in v for v in values) == 1
    assert not any("router.ex" in v for v in values)  # Files Modified names it
    assert f"`{ROOT}`" not in values  # the working directory line names it


def test_commands_that_only_run_files_do_not_flood_the_values() -> None:
    msgs = [Message.user("Run every test file and tell me which fail.", metadata={"cwd": ROOT})]
    for n in range(500):
        failing = n % 97 == 5
        output = (
            f"  1) test parses input\n     test/file_{n}_test.exs:12\n"
            "     ** (MatchError) no match of right hand side value: :error\n4 tests, 1 failure"
            if failing
            else f"Running ExUnit with seed: {1000 + 7 * n}, max_cases: 16\n"
            f"Finished in 0.{10 + n % 80} seconds\n4 tests, 0 failures"
        )
        msgs += bash(n, f"mix test test/file_{n}_test.exs", output)
    for text in (SUMMARIZER.summarize(msgs).text, rounds(msgs, 100)):
        values = section(text, "important_values")
        assert len(values) <= 12, values
        paths = [v for v in values if "test/file_" in v]
        assert paths and all(int(re.findall(r"\d+", p)[0]) % 97 == 5 for p in paths)
        assert sum("seed:" in v for v in values) <= 2
        assert "** (MatchError) no match of right hand side value: :error" in text


def test_values_rank_by_kind_frequency_and_recency_and_names_are_capped() -> None:
    names = " ".join(f"`helper_{n}`" for n in range(40))
    msgs = [
        Message.user(f"Rename {names} in the module."),  # names count when the person gives them
        Message.user(
            "The staging URL is https://staging.example.com/api and the key is ABC_KEY=7."
        ),
        Message.tool("ERROR: connection refused to db:5432", tool_call_id="x"),
        Message.assistant("Still failing: ERROR: connection refused to db:5432"),
    ]
    values = section(SUMMARIZER.summarize(msgs).text, "important_values")
    assert "ERROR: connection refused to db:5432" in values[0]
    assert values.index("URL: `https://staging.example.com/api`") < values.index(
        "name: `helper_0` (named by the user)"
    )
    assert sum(v.startswith("name: `helper_") for v in values) <= MAX_IDENTIFIERS
