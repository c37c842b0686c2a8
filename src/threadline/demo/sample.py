"""A realistic sample session: a coding agent fixing a bug, with what makes history hard.

``build_sample_session`` writes one conversation into a store the way an agent
would, turn by turn: a user request, plans, tool calls (one turn with two
calls in parallel) and their results, two large test logs (tens of KB each),
a failed tool call, an error the agent introduces and then fixes, and a
screenshot as an inline PNG. Content is a pure function of ``seed``, so the
same seed gives the same conversation. Timestamps start ``SESSION_MINUTES``
before ``now`` and advance by seeded gaps, so listings look natural.

It is library code for tests and examples (one realistic session with an image
and large outputs); the long offline run of ``threadline demo`` is
``demo.run`` driving ``demo.coding_run``.
"""

from __future__ import annotations

import base64
import random
import struct
import uuid
import zlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from threadline.messages import ImagePart, Message, Part, TextPart, ToolCall, Usage
from threadline.stamps import utcnow
from threadline.store import Session, Store

DEMO_AGENT = "demo-coder"
DEMO_MODEL = "gpt-4o"
DEMO_TITLE = "Fix Decimal rounding in invoice totals"
SYSTEM_PROMPT_TOKENS = 850
"""What the simulated provider reports on top of the stored history (prompt + tools)."""
SESSION_MINUTES = 50
"""The conversation starts this many minutes before ``now``."""
TEST_MODULES = (
    "test_money",
    "test_totals",
    "test_tax",
    "test_currency",
    "test_discounts",
    "test_render",
    "test_parse",
    "test_cli",
)
TESTS_PER_MODULE = (60, 95)
"""Range of test cases per module in a generated log (about 600 lines, 40-50 KB)."""
IMAGE_SIZE = (48, 32)
"""Width and height of the generated screenshot."""

DEMO_SYSTEM_PROMPT = (
    "You are demo-coder, a careful coding agent working in the user's repository at "
    "/home/dev/invoicer. Read before you write, run the tests after every change, keep the "
    "public API stable, and report exactly what you changed."
)


def _tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
                "required": list(params)[:1],
            },
        },
    }


DEMO_TOOLS: list[dict[str, Any]] = [
    _tool("list_files", "List files under a directory with their sizes.", path="Directory."),
    _tool("read_file", "Read a text file.", path="File path.", lines="Optional range a-b."),
    _tool("grep", "Search files for a regular expression.", pattern="Regex.", path="Where."),
    _tool("write_file", "Create or overwrite a file.", path="File path.", content="Text."),
    _tool("edit_file", "Replace text in a file.", path="File.", old="Old text.", new="New text."),
    _tool("run_tests", "Run pytest with arguments.", args="Arguments for pytest."),
    _tool("run_command", "Run a shell command.", command="The command line."),
    _tool("git_diff", "Show the working tree diff."),
]
"""The tool definitions the sample agent was given (OpenAI function format)."""

_SUBJECTS = ("vat", "rate", "line", "total", "discount", "currency", "invoice", "rounding")
_VERBS = ("applies", "rounds", "parses", "renders", "rejects", "keeps", "sums", "converts")
_CASES = ("DE-19", "FR-20", "zero", "negative", "EUR", "USD", "JPY", "half-up", "big", "tiny")

MONEY_PY = '''"""Money helpers: all amounts are Decimal, rounded once, at the edge."""
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_money(value: str | int | Decimal) -> Decimal:
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def round_money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)
'''

TOTALS_PY = '''"""Invoice totals."""
from invoicer.money import round_money


def subtotal(lines):
    subtotal = 0.0
    for line in lines:
        subtotal += line.qty * line.unit_price
    return round_money(subtotal)


def total(lines, tax_rate, discount=0):
    net = subtotal(lines) - discount
    return round_money(net * (1 + tax_rate))
'''

TOTALS_FIXED = TOTALS_PY.replace("subtotal = 0.0", 'subtotal = Decimal("0")').replace(
    "tax_rate))", "Decimal(tax_rate)))"
)

RENDER_PY = '''"""Plain-text and PDF rendering of invoices."""


def fmt_amount(value):
    return f"{float(value):.2f}"


def discount_row(invoice):
    return ("Discount", fmt_amount(-invoice.discount))
'''

PYPROJECT = """[project]
name = "invoicer"
version = "2.3.0"
requires-python = ">=3.10"
dependencies = ["reportlab>=4.0"]
"""

CHANGELOG = """# Changelog

## 2.3.0
- Money amounts are Decimal end to end (money.py).
"""


def _png(width: int, height: int, rng: random.Random) -> bytes:
    """A small RGB PNG that looks like a screenshot of a table with one red row."""
    rows = []
    red_row = rng.randrange(2, height // 4) * 4
    for y in range(height):
        row = bytearray([0])  # filter: none
        for x in range(width):
            if y in (red_row, red_row + 1, red_row + 2):
                pixel = (220, 40, 40) if 4 <= x < width - 4 else (255, 255, 255)
            elif y % 4 == 0:
                pixel = (200, 200, 200)
            elif 4 <= x < 4 + (x * 7 + y * 3) % 20:
                pixel = (60, 60, 60)
            else:
                pixel = (255, 255, 255)
            row.extend(pixel)
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


def sample_png(seed: int = 0) -> bytes:
    """The screenshot the sample user attaches, as PNG bytes."""
    return _png(*IMAGE_SIZE, random.Random(seed))


def _test_names(rng: random.Random, module: str, count: int) -> list[str]:
    names = []
    for i in range(count):
        name = f"test_{rng.choice(_SUBJECTS)}_{rng.choice(_VERBS)}_{i:02d}"
        if rng.random() < 0.4:
            name += f"[{rng.choice(_CASES)}]"
        names.append(f"tests/{module}.py::{name}")
    return names


def make_test_log(rng: random.Random, *, failures: Sequence[str] = (), verbose: bool = True) -> str:
    """A pytest log of about 600 tests; ``failures`` get tracebacks. 40-50 KB when verbose."""
    names = [n for m in TEST_MODULES for n in _test_names(rng, m, rng.randint(*TESTS_PER_MODULE))]
    failed = set(rng.sample(range(len(names)), len(failures))) if failures else set()
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /home/dev/invoicer",
        "configfile: pyproject.toml",
        f"collected {len(names)} items",
        "",
    ]
    for i, name in enumerate(names):
        status = "FAILED" if i in failed else "PASSED"
        pct = f"[{(i + 1) * 100 // len(names):3d}%]"
        if verbose:
            lines.append(f"{name} {status}".ljust(72) + pct)
    if not verbose:
        lines.append("." * len(names))
    fail_names = [names[i] for i in sorted(failed)]
    if failures:
        lines += [
            "",
            "=================================== FAILURES ===================================",
        ]
        for name, error in zip(fail_names, failures, strict=True):
            short = name.split("::")[1]
            lines += [
                f"_____________________________ {short} _____________________________",
                "",
                "    def " + short.split("[")[0] + "():",
                "        inv = make_invoice(lines=[Line(qty=3, unit_price=Decimal('3.33'))])",
                ">       assert total(inv.lines, tax_rate=0.19) == Decimal('11.89')",
                "",
                "tests/test_totals.py:41: ",
                "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
                "src/invoicer/totals.py:8: in subtotal",
                "    subtotal += line.qty * line.unit_price",
                f"E   {error}",
            ]
        lines += [
            "",
            "=========================== short test summary info ============================",
        ]
        lines += [f"FAILED {n} - {e}" for n, e in zip(fail_names, failures, strict=True)]
    seconds = rng.uniform(6.0, 11.0)
    passed = len(names) - len(failures)
    tail = f"{len(failures)} failed, {passed} passed" if failures else f"{passed} passed"
    lines.append(f"========================= {tail} in {seconds:.2f}s =========================")
    return "\n".join(lines) + "\n"


def _listing(rng: random.Random) -> str:
    files = [
        "pyproject.toml",
        "CHANGELOG.md",
        "README.md",
        "src/invoicer/__init__.py",
        "src/invoicer/money.py",
        "src/invoicer/totals.py",
        "src/invoicer/render.py",
        "src/invoicer/tax.py",
        "src/invoicer/cli.py",
    ] + [f"tests/{m}.py" for m in TEST_MODULES]
    return "\n".join(f"{rng.randint(200, 9000):>6}  {f}" for f in files)


class _Script:
    """Writes the conversation turn by turn, the way an agent appends."""

    def __init__(self, session: Session, rng: random.Random, start: datetime) -> None:
        self.session = session
        self.rng = rng
        self.clock = start
        self.batch: list[Message] = []
        self.count = 0

    def _id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _tick(self, low: int, high: int) -> datetime:
        self.clock += timedelta(seconds=self.rng.randint(low, high))
        return self.clock

    def user(self, content: str | list[Part]) -> None:
        self.flush()
        self.batch.append(Message.user(content, id=self._id(), created_at=self._tick(20, 90)))
        self.flush()

    def assistant(self, text: str, *calls: tuple[str, dict[str, Any]]) -> list[str]:
        """An assistant message (a new turn step); returns the call ids it made."""
        self.flush()
        tool_calls = [
            ToolCall(id=f"call_{self.rng.getrandbits(48):012x}", name=name, arguments=args)
            for name, args in calls
        ]
        prompt = self.session.total_tokens + SYSTEM_PROMPT_TOKENS
        usage = Usage(
            input_tokens=prompt,
            output_tokens=max(1, len(text) // 4) + 25 * len(tool_calls),
            cached_tokens=(prompt * 7 // 10) // 128 * 128,
        )
        msg = Message.assistant(
            text,
            tool_calls=tool_calls,
            id=self._id(),
            created_at=self._tick(3, 25),
            model=DEMO_MODEL,
            usage=usage,
        )
        self.batch.append(msg)
        return [c.id for c in tool_calls]

    def result(self, call_id: str, name: str, content: str, *, error: bool = False) -> None:
        meta = {"is_error": True} if error else {}
        self.batch.append(
            Message.tool(
                content,
                tool_call_id=call_id,
                name=name,
                id=self._id(),
                created_at=self._tick(1, 12),
                metadata=meta,
            )
        )

    def call(self, text: str, name: str, args: dict[str, Any], output: str, **kw: Any) -> None:
        """One assistant step with one tool call and its result."""
        (cid,) = self.assistant(text, (name, args))
        self.result(cid, name, output, **kw)

    def flush(self) -> None:
        if self.batch:
            self.session.append(self.batch)
            self.count += len(self.batch)
            self.batch = []


def build_sample_session(
    store: Store, *, agent: str = DEMO_AGENT, seed: int = 0, now: datetime | None = None
) -> Session:
    """Write the sample conversation into a new session of ``store`` and return it."""
    rng = random.Random(seed)
    session = store.create_session(
        agent=agent, model=DEMO_MODEL, title=DEMO_TITLE, metadata={"demo": True, "seed": seed}
    )
    start = (now or utcnow()) - timedelta(minutes=SESSION_MINUTES)
    s = _Script(session, rng, start)
    _conversation(s, rng, seed)
    s.flush()
    session.scratchpad_write(
        "plan",
        "- [x] find why totals tests fail (float + Decimal in totals.subtotal)\n"
        "- [x] fix render.fmt_amount rounding (discount row)\n"
        "- [x] regression test + CHANGELOG\n"
        "- [x] commit",
    )
    return session.refresh()


def _conversation(s: _Script, rng: random.Random, seed: int) -> None:
    type_error = "TypeError: unsupported operand type(s) for +=: 'float' and 'decimal.Decimal'"
    s.user(
        "The invoicer test suite started failing after I moved money handling to Decimal in "
        "src/invoicer/money.py. Can you find out why and fix it? Keep the public API the same."
    )
    s.call(
        "I'll start by looking at the project layout, then read the money and totals modules "
        "and run the tests to see the actual failures.",
        "list_files",
        {"path": "."},
        _listing(rng),
    )
    s.call("", "read_file", {"path": "src/invoicer/money.py"}, MONEY_PY)
    read_id, grep_id = s.assistant(
        "money.py looks right. Let me read totals.py and find every caller of round_money.",
        ("read_file", {"path": "src/invoicer/totals.py"}),
        ("grep", {"pattern": "round_money", "path": "src"}),
    )
    s.result(read_id, "read_file", TOTALS_PY)
    s.result(
        grep_id,
        "grep",
        "src/invoicer/money.py:11:def round_money(value: Decimal) -> Decimal:\n"
        "src/invoicer/totals.py:2:from invoicer.money import round_money\n"
        "src/invoicer/totals.py:9:    return round_money(subtotal)\n"
        "src/invoicer/totals.py:14:    return round_money(net * (1 + tax_rate))",
    )
    failures = [type_error] * 3
    s.call(
        "Now the test suite:", "run_tests", {"args": ["-v"]}, make_test_log(rng, failures=failures)
    )
    s.call(
        "Three failures, all the same cause: `subtotal()` starts from the float `0.0` and adds "
        "Decimal products (totals.py:8), so `+=` raises TypeError. `total()` also multiplies by "
        "a float tax rate. Let me check how the tests call it before changing anything.",
        "read_file",
        {"path": "tests/test_totals.py", "lines": "30-60"},
        "def test_total_with_tax():\n"
        "    inv = make_invoice(lines=[Line(qty=3, unit_price=Decimal('3.33'))])\n"
        "    assert total(inv.lines, tax_rate=0.19) == Decimal('11.89')\n",
    )
    s.call(
        "The tests pass tax_rate as a float, so `total()` must accept floats and convert. "
        "Writing the fix: start the sum at Decimal('0') and convert tax_rate with Decimal().",
        "write_file",
        {"path": "src/invoicer/totals.py", "content": TOTALS_FIXED},
        f"wrote {len(TOTALS_FIXED):,} bytes to src/invoicer/totals.py",
    )
    s.call(
        "",
        "run_tests",
        {"args": ["-q", "tests/test_totals.py"]},
        "ImportError while importing test module '/home/dev/invoicer/tests/test_totals.py'.\n"
        "tests/test_totals.py:3: in <module>\n    from invoicer.totals import subtotal, total\n"
        "src/invoicer/totals.py:6: in subtotal\n"
        "E   NameError: name 'Decimal' is not defined\n"
        "=========================== 1 error in 0.31s ===========================",
        error=True,
    )
    s.call(
        "My mistake: I used Decimal in totals.py without importing it. Adding the import.",
        "edit_file",
        {
            "path": "src/invoicer/totals.py",
            "old": "from invoicer.money import round_money",
            "new": "from decimal import Decimal\n\nfrom invoicer.money import round_money",
        },
        "ok: 1 replacement in src/invoicer/totals.py",
    )
    s.call("", "run_tests", {"args": ["-q"]}, make_test_log(rng, verbose=False))
    s.assistant(
        "Fixed. The cause was float/Decimal mixing in `invoicer.totals`:\n\n"
        "- `subtotal()` now starts from `Decimal('0')`\n"
        "- `total()` converts `tax_rate` with `Decimal(tax_rate)`\n\n"
        "I briefly broke the module by forgetting `from decimal import Decimal`; that is fixed "
        "too, and the whole suite passes."
    )
    png = sample_png(seed)
    s.user(
        [
            TextPart(
                text="Tests pass, but the rendered PDF still shows 10.00 instead of 9.99 on the "
                "discount row. Screenshot attached."
            ),
            ImagePart(
                data=base64.b64encode(png).decode("ascii"),
                media_type="image/png",
                width=IMAGE_SIZE[0],
                height=IMAGE_SIZE[1],
            ),
        ]
    )
    s.call(
        "The highlighted row is the discount. Rendering must be converting the Decimal back to "
        "float somewhere; let me look for formatting code.",
        "grep",
        {"pattern": "float\\(", "path": "src/invoicer"},
        'src/invoicer/render.py:5:    return f"{float(value):.2f}"',
    )
    s.call("", "read_file", {"path": "src/invoicer/render.py"}, RENDER_PY)
    s.call(
        "`fmt_amount` goes through `float(value)`, and binary floats make 9.995 print as 10.00 "
        "after the discount is computed. Formatting the Decimal directly keeps it exact.",
        "edit_file",
        {
            "path": "src/invoicer/render.py",
            "old": 'return f"{float(value):.2f}"',
            "new": 'return f"{round_money(Decimal(value)):.2f}"',
        },
        "ok: 1 replacement in src/invoicer/render.py",
    )
    s.call(
        "",
        "run_tests",
        {"args": ["-q", "tests/test_render.py"]},
        "................................................                         [100%]\n"
        "48 passed in 0.92s",
    )
    s.assistant("The discount row now renders 9.99. `fmt_amount` formats the Decimal directly.")
    s.user("Great. Add a regression test for the discount rounding and update the CHANGELOG.")
    test_src = (
        "from decimal import Decimal\n\nfrom invoicer.render import fmt_amount\n\n\n"
        "def test_discount_renders_exact_cents():\n"
        "    assert fmt_amount(Decimal('9.99')) == '9.99'\n"
        "    assert fmt_amount(Decimal('9.995')) == '10.00'\n"
    )
    s.call(
        "Adding tests/test_discount_rounding.py.",
        "write_file",
        {"path": "tests/test_discount_rounding.py", "content": test_src},
        f"wrote {len(test_src):,} bytes to tests/test_discount_rounding.py",
    )
    s.call("", "read_file", {"path": "CHANGELOG.md"}, CHANGELOG)
    s.call(
        "",
        "edit_file",
        {
            "path": "CHANGELOG.md",
            "old": "## 2.3.0\n",
            "new": "## 2.3.1\n- Fix float/Decimal mixing in invoice totals.\n"
            "- Render amounts from Decimal (discount row showed 10.00 for 9.99).\n\n## 2.3.0\n",
        },
        "ok: 1 replacement in CHANGELOG.md",
    )
    s.call("Running the full suite verbosely:", "run_tests", {"args": ["-v"]}, make_test_log(rng))
    s.call(
        "All green. Here is the diff for review.",
        "git_diff",
        {},
        _diff(),
    )
    s.assistant(
        "Done:\n\n1. `src/invoicer/totals.py`: Decimal arithmetic throughout\n"
        "2. `src/invoicer/render.py`: no float round-trip in `fmt_amount`\n"
        "3. `tests/test_discount_rounding.py`: regression test\n"
        "4. `CHANGELOG.md`: 2.3.1 entry"
    )
    s.user("Thanks! CI still runs Python 3.9 for one job. Is this compatible?")
    s.call(
        "Let me try running the tests with 3.9.",
        "run_command",
        {"command": "python3.9 -m pytest -q"},
        "bash: python3.9: command not found (exit status 127)",
        error=True,
    )
    s.call(
        "No 3.9 interpreter here. The project's metadata decides what is supported:",
        "read_file",
        {"path": "pyproject.toml"},
        PYPROJECT,
    )
    s.assistant(
        'pyproject.toml says `requires-python = ">=3.10"`, and `money.py` already uses '
        "`str | int | Decimal` annotations, which need 3.10. So the 3.9 CI job is testing an "
        "unsupported version; I'd drop it rather than change the code."
    )
    s.user("Makes sense, I'll drop it. Please commit.")
    commit = f"{rng.getrandbits(28):07x}"
    s.call(
        "",
        "run_command",
        {"command": "git commit -am 'Fix Decimal handling in totals and rendering'"},
        f"[main {commit}] Fix Decimal handling in totals and rendering\n"
        " 4 files changed, 19 insertions(+), 5 deletions(-)\n"
        " create mode 100644 tests/test_discount_rounding.py",
    )
    s.assistant(f"Committed as {commit}.")


def _diff() -> str:
    return (
        "diff --git a/src/invoicer/totals.py b/src/invoicer/totals.py\n"
        "--- a/src/invoicer/totals.py\n+++ b/src/invoicer/totals.py\n"
        "@@ -1,9 +1,11 @@\n"
        ' """Invoice totals."""\n+from decimal import Decimal\n+\n'
        " from invoicer.money import round_money\n \n \n def subtotal(lines):\n"
        '-    subtotal = 0.0\n+    subtotal = Decimal("0")\n'
        "diff --git a/src/invoicer/render.py b/src/invoicer/render.py\n"
        "@@ -4,3 +4,3 @@\n"
        ' def fmt_amount(value):\n-    return f"{float(value):.2f}"\n'
        '+    return f"{round_money(Decimal(value)):.2f}"\n'
    )
