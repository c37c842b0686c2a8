"""The recorder (flagging, threshold, flush, durable pending state) and the memory tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadline import Message, open_store
from threadline.agent.tools import ToolRegistry
from threadline.errors import UsageError
from threadline.memory import MemoryRecorder, memory_tools, open_memory, scope_for
from threadline.messages import ToolCall

SCOPE = "agent:ana"


def chat(n: int) -> list[Message]:
    """``n`` exchanges, each a flagged user message and a plain reply."""
    out = []
    for i in range(n):
        out += [Message.user(f"I prefer option {i} for project P{i}."), Message.assistant("OK.")]
    return out


def test_extracts_every_threshold_flagged_exchanges(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    memory = open_memory(store)
    s = store.create_session(agent="ana")
    rec = MemoryRecorder(memory, scope=SCOPE, threshold=3)
    counts = [rec.observe(s, s.append(pair)) for pair in zip(*[iter(chat(4))] * 2, strict=True)]
    assert counts == [1, 2, 0, 1]
    assert len(memory.list_facts(SCOPE)) == 3
    assert {f.seq for f in memory.list_facts(SCOPE)} == {1, 3, 5}
    assert rec.pending(s) == 1
    assert rec.observe(s, s.messages()) == 1  # seeing the same messages again flags nothing new


def test_auto_extract_off_waits_for_flush_up_to_a_seq(tmp_path: Path) -> None:
    store = open_store(f"jsonl://{tmp_path / 'j'}")
    memory = open_memory(store)
    s = store.create_session(agent="ana")
    rec = MemoryRecorder(memory, scope=SCOPE, threshold=1, auto_extract=False)
    assert rec.observe(s, s.append(chat(3))) == 3
    assert memory.list_facts(SCOPE) == []
    assert rec.flush(s, up_to_seq=3) == 2
    assert rec.pending(s) == 1
    # a new process (new handles) still finds what is pending
    again = MemoryRecorder(open_memory(open_store(f"jsonl://{tmp_path / 'j'}")), scope=SCOPE)
    assert again.pending(s) == 1
    assert again.flush(s) == 1 and again.pending(s) == 0
    assert again.flush(s) == 0


def test_bad_settings_are_usage_errors() -> None:
    memory = open_memory(open_store("memory://"))
    with pytest.raises(UsageError):
        MemoryRecorder(memory, scope=SCOPE, threshold=0)
    with pytest.raises(UsageError):
        MemoryRecorder(memory, scope="no scope")


def test_scope_for() -> None:
    assert scope_for("coder") == "agent:coder"
    assert scope_for("coder", "user:ana") == "user:ana"
    assert scope_for("coder", "website") == "project:website"
    with pytest.raises(UsageError):
        scope_for("coder", "user:../x")


def run(registry: ToolRegistry, name: str, **arguments: object) -> Message:
    return registry.run(ToolCall(id=f"c-{name}", name=name, arguments=arguments))


def test_tools_search_recall_and_write_with_provenance() -> None:
    store = open_store("memory://")
    memory = open_memory(store)
    s = store.create_session(agent="ana")
    s.append(Message.user("Remember: the staging database is db-stage-2."))
    memory.write_fact("project:site", "The site deploys with terraform", subject="site")
    tools = ToolRegistry(
        memory_tools(memory, scopes=["project:site"], default_scope=SCOPE, session=lambda: s)
    )
    assert tools.names() == ["memory_search", "memory_recall", "memory_write"]

    written = run(
        tools, "memory_write", statement="The staging database is db-stage-2", subject="staging"
    )
    assert written.text.startswith("remembered (fact ")
    (fact,) = memory.list_facts(SCOPE)
    assert (fact.session_id, fact.seq, fact.subject) == (s.id, 1, "staging")

    found = json.loads(run(tools, "memory_search", query="staging database").text)
    assert found[0]["text"] == "The staging database is db-stage-2"
    assert (found[0]["session_id"], found[0]["seq"]) == (s.id, 1)
    shared = json.loads(run(tools, "memory_search", query="how does the site deploy", k=3).text)
    assert any("terraform" in h["text"] for h in shared)

    recalled = json.loads(run(tools, "memory_recall", entity="site").text)
    assert recalled["facts"][0]["statement"] == "The site deploys with terraform"

    missing = run(tools, "memory_recall", entity="nobody")
    assert missing.metadata.get("is_error") and "nothing is remembered" in missing.text
    bad = run(tools, "memory_search", query="", k=3)
    assert bad.metadata.get("is_error") and "non-empty query" in bad.text


def test_a_revision_flushed_later_supersedes_the_instruction_flushed_before(
    tmp_path: Path,
) -> None:
    """Issue 37, point 3: the recorder extracts a turn at a time, and a revision in a later
    flush still continues the chain of the instruction it revises."""
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    memory = open_memory(store)
    s = store.create_session(agent="ana")
    rec = MemoryRecorder(memory, scope=SCOPE, threshold=1)
    rec.observe(
        s,
        s.append(
            [
                Message.user("Always write the plans to the /docs/plans folder of the repo."),
                Message.assistant("OK."),
            ]
        ),
    )
    rec.observe(
        s,
        s.append(
            [
                Message.user(
                    "That's almost right. But always write the plans to the /specs folder."
                ),
                Message.assistant("OK."),
            ]
        ),
    )
    assert [f.statement for f in memory.list_facts(SCOPE)] == [
        "Always write the plans to the /specs folder."
    ]
