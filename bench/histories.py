"""Realistic coding-agent histories for the benchmarks, built fast.

A pool of messages (user asks, assistant tool calls, tool results of 0.3-6 KB,
assistant answers) is counted once; histories of any length cycle through it
with fresh ids, so filling a store with a million messages costs only the
store's own work.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from threadline import Message, ToolCall
from threadline.messages import new_id
from threadline.store.encoding import prepare_messages

POOL_TURNS = 60
MODEL = "gpt-4o"


def turn(rng: random.Random, i: int) -> list[Message]:
    path = f"src/pkg/module_{rng.randint(1, 40)}.py"
    call = ToolCall(
        id=f"call_{i}",
        name=rng.choice(["read_file", "grep", "run_tests"]),
        arguments={"path": path},
    )
    lines = "\n".join(
        f"{path}:{n}: value_{rng.randint(0, 9999)} = compute({rng.random():.4f})"
        for n in range(rng.randint(5, 120))
    )
    return [
        Message.user(f"Step {i}: please look at {path} and fix the failing check."),
        Message.assistant(f"Looking at {path}.", tool_calls=[call]),
        Message.tool(lines, tool_call_id=call.id, name=call.name),
        Message.assistant(f"In {path} the value is computed twice; I changed it to reuse it. " * 3),
    ]


def pool(seed: int = 0) -> list[list[Message]]:
    """Turns of prepared messages (token counts already stored)."""
    rng = random.Random(seed)
    return [prepare_messages(MODEL, turn(rng, i)) for i in range(POOL_TURNS)]


def batches(total: int, batch: int, seed: int = 0) -> Iterator[list[Message]]:
    """``total`` messages in batches of about ``batch``, whole turns, fresh ids."""
    turns = pool(seed)
    made = 0
    current: list[Message] = []
    i = 0
    while made < total:
        for m in turns[i % len(turns)]:
            if made >= total:
                break
            call_id = f"c{made}"
            update: dict[str, object] = {"id": new_id()}
            if m.tool_calls:
                update["tool_calls"] = [m.tool_calls[0].model_copy(update={"id": call_id})]
            if m.role == "tool":
                update["tool_call_id"] = f"c{made - 1}"
            current.append(m.model_copy(update=update))
            made += 1
        i += 1
        if len(current) >= batch:
            yield current
            current = []
    if current:
        yield current
