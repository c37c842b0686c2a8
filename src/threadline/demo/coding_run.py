"""A deterministic simulated coding run: turns of a plausible agent session.

The offline demo plays it back through a simulated chat model, and the
compaction benchmark drives thousands of turns of it through the real engine.
Each turn is a user request, one or more assistant steps that call tools
(reads, greps, edits, test runs with large logs), and a closing answer.
Exact values a later turn may need (paths, URLs, ids, ports, settings, error
lines, versions) are planted along the way and listed on the turn, so
compaction can be judged on whether it kept them verbatim. An error appears
and is fixed a few turns later, as in real work.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from threadline.messages import Message, ToolCall

FILES = [
    "src/invoices/totals.py",
    "src/invoices/models.py",
    "src/invoices/api.py",
    "src/invoices/db.py",
    "src/invoices/rounding.py",
    "tests/test_totals.py",
    "tests/test_api.py",
    "config/settings.toml",
]
LARGE_LOG_EVERY = 25
"""Every this many turns a test run prints a large log."""
LARGE_LOG_LINES = (400, 900)
ERROR_EVERY = 40
"""Every this many turns a test run fails; the fix lands in the next turn."""


@dataclass
class Step:
    """One model reply: some text and the tools it calls, with their results."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)
    results: list[str] = field(default_factory=list)


@dataclass
class Turn:
    user: str
    steps: list[Step]
    final: str
    planted: list[str] = field(default_factory=list)
    """Exact values this turn introduces."""

    def messages(self) -> list[Message]:
        """The messages an agent loop would append for this turn, in order."""
        out = [Message.user(self.user)]
        for step in self.steps:
            out.append(Message.assistant(step.text, tool_calls=step.calls))
            out.extend(
                Message.tool(result, tool_call_id=call.id, name=call.name)
                for call, result in zip(step.calls, step.results, strict=True)
            )
        out.append(Message.assistant(self.final))
        return out


class _Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.failing: str | None = None

    def call(self, name: str, **arguments: object) -> ToolCall:
        self.calls += 1
        return ToolCall(id=f"call_{self.calls:05d}", name=name, arguments=dict(arguments))

    def planted_value(self, turn: int) -> tuple[str, str]:
        """A sentence carrying one exact value, and the value."""
        r = self.rng
        kind = turn % 7
        if kind == 0:
            v = f"https://tracker.example.com/INV-{r.randint(1000, 9999)}"
            return f"The bug report is {v}.", v
        if kind == 1:
            v = str(uuid.UUID(int=r.getrandbits(128), version=4))
            return f"The failing invoice has id {v}.", v
        if kind == 2:
            v = f"DATABASE_URL=postgresql://app@db{r.randint(1, 9)}.internal:5432/invoices"
            return f"Staging uses {v} in its environment.", v
        if kind == 3:
            v = f"port {r.choice([8080, 8443, 9090, 5433])}"
            return f"The API must listen on {v} behind the proxy.", v
        if kind == 4:
            v = f"v2.{r.randint(0, 9)}.{r.randint(0, 20)}"
            return f"We pin the decimal helper library at {v}.", v
        if kind == 5:
            v = f"{r.getrandbits(160):040x}"[:12]
            return f"The regression started at commit {v}.", v
        v = f"max_retries={r.randint(2, 9)}"
        return f"Set {v} for the payment client.", v

    def log(self, lines: int, failing: str | None) -> str:
        r = self.rng
        out = [f"============ test session starts ============ (seed {r.randint(0, 10**6)})"]
        for i in range(lines):
            mod = r.choice(FILES[5:7])
            out.append(f"{mod}::test_case_{i} PASSED [{100 * (i + 1) // max(lines, 1)}%]")
        if failing:
            out += [
                f"FAILED tests/test_totals.py::test_{failing} - decimal.InvalidOperation",
                "E   decimal.InvalidOperation: [<class 'decimal.DivisionUndefined'>]",
                f"============ 1 failed, {lines - 1} passed ============",
            ]
        else:
            out.append(f"============ {lines} passed ============")
        return "\n".join(out)

    def source(self, path: str, lines: int) -> str:
        r = self.rng
        body = [f"# {path}"]
        for i in range(lines):
            body.append(
                f"def helper_{i}(amount):\n    return round_half_even(amount * {r.randint(2, 99)})"
            )
        return "\n".join(body)


def coding_run(turns: int, *, seed: int = 0) -> list[Turn]:
    """``turns`` deterministic turns of a coding session."""
    w = _Writer(seed)
    out: list[Turn] = []
    for t in range(turns):
        path = w.rng.choice(FILES)
        sentence, value = w.planted_value(t)
        planted = [value, path]
        if w.failing:
            name, w.failing = w.failing, None
            steps = [
                Step(
                    f"Fixing test_{name}: dividing by a zero quantity.",
                    [
                        w.call(
                            "edit_file",
                            path="src/invoices/totals.py",
                            old="/ qty",
                            new="/ max(qty, 1)",
                        )
                    ],
                    ["ok"],
                ),
                Step(
                    "Re-running the tests.",
                    [w.call("run_tests", target="tests/")],
                    [w.log(40, None)],
                ),
            ]
            out.append(
                Turn(
                    f"Please fix the failing test. {sentence}",
                    steps,
                    f"Fixed: test_{name} passes now; the guard is in src/invoices/totals.py.",
                    planted,
                )
            )
            continue
        if t % ERROR_EVERY == ERROR_EVERY - 1:
            w.failing = f"zero_quantity_{t}"
            steps = [
                Step(
                    "Running the suite.",
                    [w.call("run_tests", target="tests/")],
                    [w.log(60, w.failing)],
                )
            ]
            final = (
                f"One test fails: test_{w.failing} raises decimal.InvalidOperation. "
                "Next, I'll guard the division in src/invoices/totals.py."
            )
            out.append(Turn(f"Run the tests. {sentence}", steps, final, planted))
            continue
        if t % LARGE_LOG_EVERY == 0:
            lines = w.rng.randint(*LARGE_LOG_LINES)
            steps = [
                Step(
                    "Running the full suite.",
                    [w.call("run_tests", target="tests/", verbose=True)],
                    [w.log(lines, None)],
                )
            ]
            out.append(
                Turn(
                    f"Run the whole suite verbosely. {sentence}",
                    steps,
                    f"All {lines} tests pass.",
                    planted,
                )
            )
            continue
        kind = t % 3
        if kind == 0:
            steps = [
                Step(
                    f"Reading {path}.",
                    [w.call("read_file", path=path)],
                    [w.source(path, w.rng.randint(8, 60))],
                ),
            ]
            final = f"{path} rounds each line item; we'll use ROUND_HALF_EVEN instead of float."
            user = f"Look at {path}. {sentence}"
        elif kind == 1:
            steps = [
                Step(
                    "Searching for callers.",
                    [w.call("grep", pattern="round_half_even", path="src/")],
                    [
                        "\n".join(
                            f"{w.rng.choice(FILES[:5])}:{w.rng.randint(1, 400)}: round_half_even("
                            for _ in range(w.rng.randint(3, 30))
                        )
                    ],
                ),
                Step(f"Updating {path}.", [w.call("write_file", path=path, content="...")], ["ok"]),
            ]
            final = f"Updated {path}. TODO: add a regression test for {value}."
            user = f"Change the rounding in {path}. {sentence}"
        else:
            steps = [
                Step(
                    "Checking the settings.",
                    [w.call("read_file", path="config/settings.toml")],
                    [f'[invoices]\ncurrency = "EUR"\n{value}\n'],
                )
            ]
            final = f"Agreed: we keep {value} and document it in config/settings.toml."
            user = f"What do the settings say? {sentence}"
        out.append(Turn(user, steps, final, planted))
    return out
