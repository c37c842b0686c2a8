"""Generated coding sessions with planted values, for compaction tests.

``coding_session(seed, turns=300)`` writes what a coding agent's history looks
like after hours of work: requests, plans, tool calls and their results, file
dumps and test logs tens of KB long, configuration changes, deployments,
commits, decisions, todo lists, and failures followed by their fixes. It is a
pure function of ``seed`` (same seed, same messages, same ids and times).

Every turn plants values of the kinds compaction must carry over verbatim
(paths, URLs, UUIDs, commit hashes, error lines, settings, ports, versions) in
the places they occur in real sessions: the user's words, the assistant's,
tool arguments, short tool results, and error lines inside long test logs.
Each is recorded as a ``Planted`` with the message that first holds it, so a
test can ask how many of the values planted in a window a snapshot kept.
Around them sit distractors: file dumps and logs full of other paths, hashes,
addresses and identifiers that a good summary leaves out.

(``threadline.demo.coding_run`` is the product's own simulated run, used by
the demo and the benchmark; it plants one value per turn, in the user's text.
This generator is harsher and is kept with the tests.)
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from threadline.demo.sample import make_test_log
from threadline.messages import Message, ToolCall

DEFAULT_TURNS = 300
SESSION_START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
"""Fixed, so the same seed gives byte-identical messages."""
SECONDS_PER_MESSAGE = (4, 90)
CODE_LINES = (60, 180)
"""Lines in a generated file dump."""
LOG_LINES = (80, 240)
"""Lines in a generated application log."""
UNREPEATED_SHARE = 0.5
"""Share of tool-returned values (deployment ids, commit hashes) the assistant never restates."""
VERBOSE_TEST_LOG_SHARE = 0.25
"""Share of test runs that print the full (40-50 KB) verbose log."""

_PROJECTS = ("invoicer", "ledgerly", "shipyard", "quillmark", "tallyho", "orbitdesk")
_PACKAGES = ("api", "core", "billing", "auth", "storage", "reports", "sync", "cli")
_MODULES = ("client", "models", "service", "handlers", "retry", "cache", "schema", "tasks")
_FEATURES = (
    "retry with exponential backoff",
    "pagination for list endpoints",
    "a dry-run flag",
    "request timeouts",
    "structured logging",
    "a health check",
    "idempotency keys",
    "CSV export",
)
_SETTING_KEYS = (
    "MAX_RETRIES",
    "REQUEST_TIMEOUT_S",
    "POOL_SIZE",
    "CACHE_TTL",
    "BATCH_SIZE",
    "LOG_LEVEL",
    "WORKERS",
)
_HOSTS = ("api.acme-corp.io", "billing.internal.example.net", "hooks.tallyho.dev", "s3.eu.example")
_PACKAGES_PYPI = ("httpx", "pydantic", "sqlalchemy", "redis", "celery", "uvicorn", "structlog")
_ERRORS = (
    (
        'psycopg.OperationalError: connection to server at "{ip}", port {port} failed: '
        "Connection refused"
    ),
    "KeyError: '{key}'",
    "ValueError: invalid literal for int() with base 10: '{word}'",
    "TimeoutError: request to {url} timed out after {n}s",
    "AssertionError: expected status 200, got {code} for {path}",
    "ModuleNotFoundError: No module named '{module}'",
)
_CHOICES = (
    ("httpx", "requests", "the HTTP client"),
    ("PostgreSQL", "SQLite", "the job store"),
    ("structlog", "the logging module", "logs"),
    ("Redis", "an in-process dict", "the rate limiter"),
    ("pytest fixtures", "setUp methods", "the test setup"),
)
_WORDS = ("alpha", "bravo", "delta", "kilo", "lima", "oscar", "tango", "zulu", "nova", "vega")


@dataclass(frozen=True, slots=True)
class Planted:
    """One value the session holds that a summary of it should keep verbatim."""

    kind: str
    text: str
    index: int
    """Position (0-based) of the first message holding it."""


@dataclass(slots=True)
class Scenario:
    """A generated session: its messages and the values planted in them."""

    seed: int
    messages: list[Message] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)

    def planted_in(self, start: int, end: int) -> list[Planted]:
        """Values first planted in messages ``start <= index < end``."""
        return [p for p in self.planted if start <= p.index < end]


class _Writer:
    """Appends messages and planted values, with seeded ids and times."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.scenario = Scenario(seed=seed)
        self.clock = SESSION_START
        self.calls = 0
        project = self.rng.choice(_PROJECTS)
        self.project = project
        self.root = f"/home/dev/{project}"
        self.files: list[str] = []
        self.known: set[str] = set()
        self.pending: list[tuple[str, str]] = []

    # -- primitives

    def _stamp(self, m: Message) -> Message:
        self.clock += timedelta(seconds=self.rng.randint(*SECONDS_PER_MESSAGE))
        m.created_at = self.clock
        m.id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.scenario.messages.append(m)
        return m

    def plant(self, kind: str, text: str) -> str:
        """Record ``text`` as planted; ``settle`` finds the message that first holds it."""
        if text not in self.known:
            self.known.add(text)
            self.pending.append((kind, text))
        return text

    def settle(self, since: int) -> None:
        """Pin each pending value to the first message from ``since`` on that holds it."""
        messages = self.scenario.messages
        for kind, text in self.pending:
            for index in range(since, len(messages)):
                m = messages[index]
                args = (str(v) for call in m.tool_calls for v in call.arguments.values())
                if text in m.text or any(text in a for a in args):
                    self.scenario.planted.append(Planted(kind, text, index))
                    break
            else:
                raise AssertionError(f"planted value {text!r} is in no message")
        self.pending = []

    def user(self, text: str) -> None:
        self._stamp(Message.user(text))

    def say(self, text: str) -> None:
        self._stamp(Message.assistant(text, model="sim-coder-1"))

    def call(self, name: str, arguments: dict[str, Any], result: str, *, text: str = "") -> None:
        self.calls += 1
        call = ToolCall(id=f"call_{self.calls:05d}", name=name, arguments=arguments)
        self._stamp(Message.assistant(text, tool_calls=[call], model="sim-coder-1"))
        self._stamp(Message.tool(result, tool_call_id=call.id, name=name))

    # -- random values

    def word(self) -> str:
        return self.rng.choice(_WORDS)

    def path(self) -> str:
        pkg, mod = self.rng.choice(_PACKAGES), self.rng.choice(_MODULES)
        suffix = self.rng.randint(2, 99)
        return f"src/{self.project}/{pkg}/{mod}_{suffix}.py"

    def url(self) -> str:
        host = self.rng.choice(_HOSTS)
        return (
            f"https://{host}/v{self.rng.randint(1, 4)}/{self.word()}s/{self.rng.randint(100, 999)}"
        )

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def sha(self) -> str:
        while True:
            digest = f"{self.rng.getrandbits(28):07x}"
            if any(c.isalpha() for c in digest) and any(c.isdigit() for c in digest):
                return digest

    def port(self) -> int:
        return self.rng.randint(1025, 65000)

    def ip(self) -> str:
        return (
            f"10.{self.rng.randint(0, 255)}.{self.rng.randint(0, 255)}.{self.rng.randint(2, 254)}"
        )

    def version(self) -> str:
        return f"{self.rng.randint(1, 9)}.{self.rng.randint(0, 30)}.{self.rng.randint(0, 20)}"

    # -- distractors

    def code_dump(self, path: str) -> str:
        rng = self.rng
        lines = [f'"""{path}: generated module."""', "", "from __future__ import annotations", ""]
        for i in range(rng.randint(*CODE_LINES)):
            pick = rng.random()
            if pick < 0.15:
                lines.append(
                    f"from {self.project}.{rng.choice(_PACKAGES)} import {self.word()}_{i}"
                )
            elif pick < 0.3:
                lines.append(f'CACHE_KEY_{i} = "{self.word()}:{rng.getrandbits(40):010x}"')
            elif pick < 0.45:
                lines.append(f"def {self.word()}_{i}(value: int) -> int:")
                lines.append(
                    f"    return value * {rng.randint(2, 99)}  # see docs/{self.word()}.md"
                )
            elif pick < 0.55:
                lines.append(f'    raise ValueError("bad {self.word()} {i}")')
            else:
                lines.append(f"    {self.word()}_{i} = {self.word()}({rng.randint(0, 999)})")
        return "\n".join(f"{n + 1:>5}  {line}" for n, line in enumerate(lines))

    def app_log(self) -> str:
        rng = self.rng
        lines = []
        for i in range(rng.randint(*LOG_LINES)):
            level = rng.choice(("INFO", "INFO", "INFO", "DEBUG", "WARN"))
            stamp = f"2025-03-03T10:{i // 60 % 60:02d}:{i % 60:02d}Z"
            lines.append(
                f"{stamp} {level} req={rng.getrandbits(48):012x} "
                f"path=/{self.word()}/{rng.randint(1, 999)} peer={self.ip()} "
                f"took={rng.randint(1, 900)}ms"
            )
        return "\n".join(lines)


# -- turns ---------------------------------------------------------------------------


def _configure(w: _Writer) -> None:
    key = w.rng.choice(_SETTING_KEYS)
    setting = w.plant("setting", f"{key}={w.rng.randint(2, 500)}")
    config = w.plant("path", f"config/{w.word()}-{w.rng.randint(1, 9)}.toml")
    url = w.plant("url", w.url())
    w.user(f"Set {setting} in {config} and point the client at {url}, please.")
    w.call(
        "edit_file",
        {"path": config, "old": f"{key}=1", "new": setting},
        "ok",
        text=f"I'll update {config}.",
    )
    w.say(f"Done: {config} now has {setting}, and the client uses {url}.")


def _feature(w: _Writer) -> None:
    path = w.plant("path", w.path())
    feature = w.rng.choice(_FEATURES)
    w.user(f"Add {feature} to {path}.")
    w.call("read_file", {"path": path}, w.code_dump(path), text="Let me read the module first.")
    w.files.append(path)
    func = f"{w.word()}_{w.rng.randint(1, 99)}"
    w.call(
        "edit_file",
        {"path": path, "old": "    pass", "new": f"    return {func}(value)"},
        "ok",
        text=f"Now I'll add {feature} through a new helper `{func}`.",
    )
    w.say(f"Added {feature} to {path} via `{func}`.")


def _fail_and_fix(w: _Writer) -> None:
    template = w.rng.choice(_ERRORS)
    path = w.files[-1] if w.files else w.path()
    error = template.format(
        ip=w.ip(),
        port=w.port(),
        key=f"{w.word()}_{w.rng.randint(10, 99)}",
        word=f"{w.word()}{w.rng.randint(10, 99)}",
        url=w.url(),
        n=w.rng.randint(5, 120),
        code=w.rng.choice((400, 401, 404, 409, 500, 503)),
        path=f"/{w.word()}/{w.rng.randint(1, 99)}",
        module=f"{w.project}.{w.word()}",
    )
    w.plant("error", error)
    w.user("Run the test suite.")
    verbose = w.rng.random() < VERBOSE_TEST_LOG_SHARE
    w.call("run_tests", {"args": "-q"}, make_test_log(w.rng, failures=[error], verbose=verbose))
    exc = error.split(":", 1)[0]
    w.say(f"One test fails with {exc}. I'll fix the cause in {path}.")
    w.call("edit_file", {"path": path, "old": "timeout=None", "new": "timeout=30"}, "ok")
    w.call("run_tests", {"args": "-q"}, make_test_log(w.rng, verbose=False))
    w.say("The suite passes again.")


def _deploy(w: _Writer) -> None:
    env = w.rng.choice(("staging", "preview", "canary"))
    w.user(f"Deploy the current branch to {env}.")
    dep_id, url = w.uuid(), w.url()
    result = json.dumps({"deployment_id": dep_id, "url": url, "status": "live", "env": env})
    w.call("deploy", {"environment": env}, result, text="Deploying now.")
    w.plant("uuid", dep_id)
    w.plant("url", url)
    if w.rng.random() < UNREPEATED_SHARE:
        w.say("Deployed.")  # the values live only in the tool result
    else:
        w.say(f"Deployment {dep_id} is live at {url}.")


def _commit(w: _Writer) -> None:
    message = f"Add {w.rng.choice(_FEATURES)}"
    sha = w.sha()
    w.user("Commit what we have.")
    out = f"[main {sha}] {message}\n 2 files changed, {w.rng.randint(3, 90)} insertions(+)"
    w.call("run_command", {"command": f'git commit -am "{message}"'}, out)
    w.plant("hex", sha)
    w.say("Committed." if w.rng.random() < UNREPEATED_SHARE else f"Committed as {sha}.")


def _pin(w: _Writer) -> None:
    pin = w.plant("version", f"{w.rng.choice(_PACKAGES_PYPI)}=={w.version()}")
    port = w.plant("port", f"port {w.port()}")
    w.user(f"Pin {pin} in pyproject.toml; the staging database listens on {port}.")
    w.call(
        "edit_file",
        {"path": "pyproject.toml", "old": "dependencies = [", "new": f'dependencies = ["{pin}",'},
        "ok",
    )
    w.say(f"Pinned {pin}. I'll use {port} for the staging database.")


def _decide(w: _Writer) -> None:
    chosen, other, purpose = w.rng.choice(_CHOICES)
    w.user(f"Let's use {chosen} instead of {other} for {purpose}.")
    w.say(f"Agreed: we'll use {chosen} for {purpose}.")


def _plan(w: _Writer) -> None:
    tasks = [f"{w.rng.choice(_FEATURES)} in {w.rng.choice(_PACKAGES)}" for _ in range(3)]
    lines = "\n".join(f"- [ ] {t}" for t in tasks)
    w.say(f"Remaining work:\n{lines}\nTODO: document {w.rng.choice(_FEATURES)}.")


def _containers(w: _Writer) -> None:
    """A short result full of ids and ports, none of them planted: distractors that compete."""
    w.user("Which containers are running?")
    rows = ["CONTAINER ID   IMAGE             PORTS                     NAMES"]
    for _ in range(w.rng.randint(4, 9)):
        cid = f"{w.rng.getrandbits(48):012x}"
        rows.append(f"{cid}   {w.word()}:{w.version()}   0.0.0.0:{w.port()}->80/tcp   {w.word()}")
    w.call("run_command", {"command": "docker ps"}, "\n".join(rows))
    w.say(f"{len(rows) - 1} containers are up.")


def _logs(w: _Writer) -> None:
    w.user("Something is slow in production; check the logs.")
    w.call("run_command", {"command": "tail -n 200 logs/app.log"}, w.app_log())
    w.say("Nothing stands out beyond a few slow requests.")


_TURNS: Sequence[tuple[Callable[[_Writer], None], int]] = (
    (_feature, 5),
    (_fail_and_fix, 3),
    (_configure, 3),
    (_deploy, 2),
    (_commit, 2),
    (_pin, 2),
    (_decide, 2),
    (_plan, 1),
    (_logs, 2),
    (_containers, 2),
)


def coding_session(seed: int = 0, *, turns: int = DEFAULT_TURNS) -> Scenario:
    """A session of ``turns`` user-assistant exchanges (about 4 messages each)."""
    w = _Writer(seed)
    kinds = [t for t, _ in _TURNS]
    weights = [weight for _, weight in _TURNS]
    for _ in range(turns):
        start = len(w.scenario.messages)
        w.rng.choices(kinds, weights)[0](w)
        w.settle(start)
    w.scenario.planted.sort(key=lambda p: p.index)
    return w.scenario


__all__ = ["DEFAULT_TURNS", "Planted", "Scenario", "coding_session"]
