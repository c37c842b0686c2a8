"""The budgeted Agents SDK session (``ThreadlineSession(..., policy=..., compactor=...)``)
against the session failures reported on the SDK's own tracker:

* openai-agents #5010: its compaction session compacts only the ``SessionSettings``
  window and then replaces the whole store with the result, deleting every item
  older than the window. Ours compacts by appending checkpoints: after many
  compactions every item is still stored, and the CLI sees them all.
* openai-agents #4322: ``SessionSettings(limit=n)`` cut history between a
  ``function_call`` and its ``function_call_output`` and passed the output alone.
  Ours never returns a result without its call, at any limit (property-tested).
* openai-agents #2020: reasoning items replayed without their ids (or a call replayed
  without the reasoning item it belongs to) break the next request. Ours keeps
  reasoning items with their ids, and keeps or drops a reasoning item together with
  the output items of the same response.

The model is the scripted local ``Model`` of ``test_integration_openai_agents``, run
by the SDK's real ``Runner``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.memory import SessionSettings
from typer.testing import CliRunner

from tests.test_integration_openai_agents import (
    ScriptedModel,
    add,
    assert_no_orphans,
    run_turns,
    turns,
)
from threadline import open_store
from threadline.cli.app import app
from threadline.compaction.compactor import Compactor
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.context.policy import ContextPolicy
from threadline.integrations.openai_agents import ThreadlineSession

SMALL = ContextPolicy(context_limit=800, response_reserve=150, min_recent_messages=2)
OUTPUT_KINDS = {"reasoning", "function_call", "message"}


def responses(items: list[Any]) -> list[list[int]]:
    """Indexes of the items each model response produced: a reasoning item and the
    output items after it, up to the next input (a user message or a tool output)."""
    groups: list[list[int]] = []
    current: list[int] | None = None
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "reasoning":
            current = [index]
            groups.append(current)
        elif current is not None and kind in OUTPUT_KINDS and item.get("role") != "user":
            current.append(index)
        else:
            current = None
    return groups


def assert_reasoning_pairs(window: list[Any], everything: list[Any]) -> None:
    """Every reasoning item in ``window`` is a stored one, id and all; an output item
    of a response that began with reasoning is there only with that reasoning item."""
    for group in responses(everything):
        reasoning, outputs = everything[group[0]], [everything[i] for i in group[1:]]
        shown = [item in window for item in outputs]
        if any(shown):
            assert reasoning in window, f"{outputs} replayed without reasoning {reasoning['id']}"
    for item in window:
        if item.get("type") == "reasoning":
            assert item in everything and item.get("id"), item


# -- openai-agents #5010 ------------------------------------------------------------------


def test_5010_compaction_never_deletes_stored_history(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    store = open_store(url)
    compactor = Compactor(ExtractiveSummarizer(), policy=SMALL)
    ours = ThreadlineSession(
        "long-run",
        store=store,
        policy=SMALL,
        model="gpt-4o",
        compactor=compactor,
        session_settings=SessionSettings(limit=6),  # the window #5010 compacted and kept
    )
    sdk = SQLiteSession("long-run", tmp_path / "sdk.db")
    script = turns(40)

    async def scenario() -> tuple[ScriptedModel, list[Any], list[Any]]:
        model = await run_turns(ours, script)
        await run_turns(sdk, script)
        return model, await ThreadlineSession("long-run", store).get_items(), await sdk.get_items()

    model, kept, everything = asyncio.run(scenario())
    session = ours.threadline_session()
    assert session is not None
    assert len(session.checkpoints()) >= 3  # compacted again and again
    assert kept == everything  # not one item lost
    assert all(len(sent) < len(everything) for sent in model.inputs[-5:])  # the window moved
    stored = len(session.refresh().messages())
    shown = CliRunner().invoke(app, ["--store", url, "sessions", "show", "oa-long-run", "--json"])
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["session"]["message_count"] == stored
    history = CliRunner().invoke(
        app, ["--store", url, "sessions", "history", "oa-long-run", "--count", str(stored)]
    )
    for item in everything:
        if item.get("role") == "user":
            assert item["content"] in history.stdout
    store.close()
    sdk.close()


# -- openai-agents #4322 and #2020 ----------------------------------------------------------


def test_4322_runner_with_every_limit_sends_no_orphan(tmp_path: Path) -> None:
    store = open_store("memory://")
    ours = ThreadlineSession("limits", store=store, policy=SMALL, model="gpt-4o")
    plain = ThreadlineSession("limits", store=store)

    async def scenario() -> None:
        await run_turns(ours, turns(5))
        everything = await plain.get_items()
        for limit in range(1, len(everything) + 2):
            window = await ours.get_items(limit)
            assert len(window) <= limit
            assert_no_orphans(window)
            assert_reasoning_pairs(window, everything)
            model = ScriptedModel([[]])
            agent = Agent(name="calc", model=model, tools=[add])
            config = RunConfig(session_settings=SessionSettings(limit=limit))
            session = ThreadlineSession("probe", store=store, policy=SMALL, model="gpt-4o")
            await session.clear_session()
            await session.add_items(everything)
            await Runner.run(agent, "next", session=session, run_config=config)
            assert_no_orphans(model.inputs[0])
            assert_reasoning_pairs(model.inputs[0], everything)

    asyncio.run(scenario())


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    n_turns=st.integers(min_value=1, max_value=7),
    limit=st.integers(min_value=1, max_value=40),
    window=st.integers(min_value=500, max_value=4000),
    popped=st.integers(min_value=0, max_value=4),
)
def test_4322_and_2020_property_every_limit_and_budget(
    n_turns: int, limit: int, window: int, popped: int
) -> None:
    """At any limit, budget and history (pops included), the budgeted window holds no
    result without its call and no response's output without its reasoning item."""
    store = open_store("memory://")
    policy = ContextPolicy(
        context_limit=window, response_reserve=200, min_recent_messages=2, trim_strategy="greedy"
    )
    ours = ThreadlineSession("prop", store=store, policy=policy, model="gpt-4o")
    plain = ThreadlineSession("prop", store=store)

    async def scenario() -> None:
        await run_turns(ours, turns(n_turns))
        for _ in range(popped):
            await ours.pop_item()
        everything = await plain.get_items()
        got = await ours.get_items(limit)
        assert len(got) <= limit
        assert_no_orphans(got)
        assert_reasoning_pairs(got, everything)
        full = await ours.get_items()
        assert_no_orphans(full)
        assert_reasoning_pairs(full, everything)

    asyncio.run(scenario())
    store.close()


def test_2020_reasoning_items_keep_their_ids() -> None:
    store = open_store("memory://")
    ours = ThreadlineSession("ids", store=store, policy=SMALL, model="gpt-4o")

    async def scenario() -> None:
        await run_turns(ours, turns(4))
        window = await ours.get_items()
        reasoning = [i for i in window if i.get("type") == "reasoning"]
        assert reasoning and all(i["id"].startswith("rs_") for i in reasoning)

    asyncio.run(scenario())
