"""Crash safety under SIGKILL: a writer is killed at random moments, hundreds of times.

For each backend a child process appends batches of two messages to one session
(now and then one of 1-4 MiB) and prints each batch's number once the append
returns. The parent kills it with SIGKILL after a random delay, then reads the
session back and counts:

* acknowledged: batches whose append returned (printed) before the kill;
* lost: acknowledged batches not stored;
* duplicated: batches stored more than once;
* torn: batches stored with one message of the two;
* order: whether seqs are 1..n with no gap.

Every count but acknowledged must be 0 (invariant 5: a batch is all-or-nothing
and an acknowledged append survives a killed process). The suite runs a short
version of this (tests/test_sqlite_store.py, tests/test_jsonl_store.py); this
script is the long one, run by hand:

    python bench/stress_kill.py [--kills 200] [--pg-kills 50] [--backends sqlite,jsonl,postgres]
        [--live-rounds 50]

Then, on SQLite, the shape that SQLite's locks must survive (invariant 10): this
process keeps opening the store and keeps every handle, reading and appending
through them, while CLI processes import real transcripts and compact them (every
fifth compaction killed at a random instant). It counts rounds, handles, damage
reported to any handle and lost messages (0 expected), and runs an integrity check.

``--import-kills N`` runs another mode instead: ``threadline sessions import`` of a
directory of real transcripts (``--transcripts``, default ``../shared/transcripts``)
killed N times at random instants (see ``run_import_kills``).
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from threadline import open_store

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
BIG_EVERY = 25
"""About one batch in this many carries a 1-4 MiB message."""

CHILD = f"""
import random, sys
from threadline import Message, open_store
url, sid, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(run)
s = open_store(url).get_session(sid)
i = 0
while True:
    i += 1
    big = rng.randrange({BIG_EVERY}) == 0
    body = "x" * (rng.randint(1, 4) * 1024 * 1024 if big else rng.randint(1, 2000))
    s.append([
        Message.user(f"r{{run}}-b{{i}}-a " + body, metadata={{"batch": f"{{run}}-{{i}}"}}),
        Message.assistant(f"r{{run}}-b{{i}}-b", metadata={{"batch": f"{{run}}-{{i}}"}}),
    ])
    print(f"{{run}}-{{i}}", flush=True)
"""


@dataclass
class Tally:
    backend: str
    kills: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    torn: int = 0
    out_of_order: int = 0
    seconds: float = 0.0


def run_backend(backend: str, url: str, kills: int, seed: int) -> Tally:
    tally = Tally(backend)
    store = open_store(url)
    sid = store.create_session(agent="crash").id
    store.close()
    rng = random.Random(seed)
    acked: set[str] = set()
    started = time.perf_counter()
    for run in range(kills):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, sid, str(run)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # the child is appending now
        time.sleep(rng.uniform(0.0, 0.2))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        acked.update(line for line in (first + out).split() if line)
        tally.kills += 1
    tally.seconds = time.perf_counter() - started
    store = open_store(url)
    messages = store.read_messages(sid)
    store.close()
    seqs = [m.seq for m in messages]
    tally.out_of_order = int(seqs != list(range(1, len(seqs) + 1)))
    per_batch = Counter(str(m.metadata.get("batch")) for m in messages)
    tally.acknowledged = len(acked)
    tally.lost = sum(1 for b in acked if b not in per_batch)
    tally.duplicated = sum(1 for n in per_batch.values() if n > 2)
    tally.torn = sum(1 for n in per_batch.values() if n % 2)
    return tally


LIVE_TRANSCRIPTS = (
    "claude-code/spotter-tool_heavy.jsonl",
    "claude-code/spotter-subagent-task.jsonl",
    "claude-code/codemie-session-196820da.jsonl",
)
"""Real Claude Code runs the CLI writers import in the live-readers scenario."""


LIVE_COLUMNS = ("rounds", "handles", "imports", "compactions killed", "damaged", "lost")
"""What the live-readers scenario counts (a Counter keyed by these)."""


def _fresh_source(template: str, directory: str, round_no: int) -> str:
    """A real Claude Code transcript under a new session id: a new source each round."""
    import json

    ids = {json.loads(line).get("sessionId") for line in template.splitlines() if line.strip()}
    text = template
    for old in ids - {None}:
        text = text.replace(old, str(uuid.uuid4()))
    path = f"{directory}/round-{round_no}.jsonl"
    Path(path).write_text(text, encoding="utf-8")
    return path


def run_live_readers(
    directory: str, transcripts: str, rounds: int, seed: int
) -> tuple[Counter[str], str, float]:
    """A long-lived process (this one) opens the store again every round and keeps every
    handle, reading and appending through them, while CLI processes import real
    transcripts and compact them; every fifth compaction is killed with SIGKILL at a
    random instant and run again. Damage reported to any handle, a lost message or a
    failed integrity check is a failure (invariant 10: only SQLite touches the file).
    Returns the counts (``LIVE_COLUMNS``), the integrity check's answer and the seconds."""
    import json
    import os
    import sqlite3

    from threadline import Message
    from threadline.errors import StoreDamaged

    rng = random.Random(seed)
    url = f"sqlite://{directory}/live.db"
    env = dict(os.environ, THREADLINE_STORE=url)
    cli = [sys.executable, "-m", "threadline.cli.app"]
    templates = [Path(transcripts, name).read_text(encoding="utf-8") for name in LIVE_TRANSCRIPTS]
    tally: Counter[str] = Counter()
    handles = [open_store(url)]
    ours = handles[0].create_session(agent="long-lived").id
    imported: dict[str, int] = {}
    appended: list[str] = []
    started = time.perf_counter()
    for round_no in range(rounds):
        source = _fresh_source(templates[round_no % len(templates)], directory, round_no)
        done = subprocess.run(
            [*cli, "sessions", "import", source, "--json"], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.exit(f"round {round_no}: import failed: {done.stderr.strip()}")
        [result] = json.loads(done.stdout)["sources"]
        imported[result["session_id"]] = result["messages_added"]
        tally["imports"] += 1
        compact = [*cli, "compact", result["session_id"], "--keep-turns", "1"]
        if round_no % 5 == 4:
            child = subprocess.Popen(
                compact, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(rng.uniform(0.05, 0.6))
            child.send_signal(signal.SIGKILL)
            child.wait()
            tally["compactions killed"] += 1
        subprocess.run(compact, env=env, capture_output=True, check=False)
        try:
            handle = open_store(url)
            handles.append(handle)
            handle.session_info(result["session_id"])
            text = f"round {round_no}"
            handles[rng.randrange(len(handles))].get_session(ours).append([Message.user(text)])
            appended.append(text)
            for h in rng.sample(handles, min(3, len(handles))):
                h.list_sessions()
        except StoreDamaged:
            tally["damaged"] += 1
        tally["rounds"] += 1
    seconds = time.perf_counter() - started
    tally["handles"] = len(handles)
    for handle in handles:
        handle.close()
    with open_store(url) as store:
        for session_id, count in imported.items():
            tally["lost"] += max(0, count - store.session_info(session_id).message_count)
        stored = [m.text for m in store.get_session(ours).messages()]
        tally["lost"] += len(set(appended) - set(stored))
    con = sqlite3.connect(f"{directory}/live.db")
    integrity = str(con.execute("PRAGMA integrity_check").fetchone()[0])
    con.close()
    return tally, integrity, seconds


def drop_schema(url: str) -> None:
    import psycopg
    from psycopg import sql

    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=200, help="kills per file backend")
    ap.add_argument("--pg-kills", type=int, default=50, help="kills on PostgreSQL")
    ap.add_argument("--backends", default="sqlite,jsonl,postgres")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--live-rounds", type=int, default=50, help="rounds of the live-readers scenario (0: skip)"
    )
    ap.add_argument(
        "--transcripts",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "transcripts"),
        help="real transcripts the live-readers and import-kill scenarios import",
    )
    ap.add_argument(
        "--import-kills",
        type=int,
        default=0,
        help="instead: kill a directory import this many times (its own mode; 50 or more)",
    )
    args = ap.parse_args()
    if args.import_kills:
        import_main(args.transcripts, args.import_kills, args.seed)
        return
    from rich.console import Console
    from rich.table import Table

    tallies: list[Tally] = []
    with tempfile.TemporaryDirectory(prefix="threadline-kill-") as tmp:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                tallies.append(run_backend(backend, f"sqlite://{tmp}/s.db", args.kills, args.seed))
            elif backend == "jsonl":
                tallies.append(run_backend(backend, f"jsonl://{tmp}/j", args.kills, args.seed))
            elif backend == "postgres":
                url = f"{POSTGRES}?schema=kill{uuid.uuid4().hex[:12]}"
                try:
                    tallies.append(run_backend(backend, url, args.pg_kills, args.seed))
                finally:
                    drop_schema(url)
            else:
                sys.exit(f"unknown backend {backend!r}")
    table = Table(title="SIGKILL during appends (batches of two; some messages 1-4 MiB)")
    for col in ("backend", "kills", "acknowledged", "lost", "duplicated", "torn", "gap-free", "s"):
        table.add_column(col, justify="right")
    for t in tallies:
        table.add_row(
            t.backend,
            f"{t.kills}",
            f"{t.acknowledged:,}",
            f"{t.lost}",
            f"{t.duplicated}",
            f"{t.torn}",
            "yes" if not t.out_of_order else "NO",
            f"{t.seconds:.0f}",
        )
    Console().print(table)
    bad = [t.backend for t in tallies if t.lost or t.duplicated or t.torn or t.out_of_order]
    if args.live_rounds:
        with tempfile.TemporaryDirectory(prefix="threadline-live-") as tmp:
            live, integrity, seconds = run_live_readers(
                tmp, args.transcripts, args.live_rounds, args.seed
            )
        table = Table(title="A long-lived reader (handles kept) beside CLI imports and compactions")
        for col in (*LIVE_COLUMNS, "integrity", "s"):
            table.add_column(col, justify="right")
        table.add_row(*(f"{live[col]}" for col in LIVE_COLUMNS), integrity, f"{seconds:.0f}")
        Console().print(table)
        if live["damaged"] or live["lost"] or integrity != "ok":
            bad.append("sqlite (live readers)")
    if bad:
        sys.exit(f"crash safety broken on: {', '.join(bad)}")


# -- a directory import killed at random instants -------------------------------------
#
# Its own mode (``--import-kills N``): a real directory of transcripts is imported
# with ``threadline sessions import DIR`` into a fresh SQLite store, and the import
# is killed with SIGKILL at a random instant within the time a whole import takes.
# Each source must then be complete (its session holds what an import that was not
# killed stores) or not yet there: no session, or one cut short (no import markers
# yet). None may be damaged (markers that count what is not stored: it would read as
# ``unchanged`` for good). A second import must then make every source complete.

CLI = [sys.executable, "-c", "from threadline.cli.app import main; main()"]
IMPORT_MARKERS = ("source_sha256", "source_messages", "source_fingerprint", "source_checkpoints")


IMPORT_COUNTS = ("complete", "cut short", "absent", "damaged", "repaired", "wrong after")
"""Per source after each kill (``run_import_kills`` says what each means)."""


def import_states(url: str) -> dict[str, tuple[bool, int, int]]:
    """Per source id: (markers written, messages stored, checkpoints stored)."""
    from threadline.store.fork import all_sessions

    store = open_store(url)
    try:
        return {
            str(info.metadata.get("source_id")): (
                all(k in info.metadata for k in IMPORT_MARKERS),
                info.last_seq,
                len(store.list_checkpoints(info.id)),
            )
            for info in all_sessions(store)
        }
    finally:
        store.close()


def import_dir(url: str, directory: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CLI, "--store", url, "sessions", "import", directory, "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run_import_kills(directory: str, kills: int, seed: int, tmp: str) -> Counter[str]:
    """Per kill, each source of ``directory`` is complete (as an unkilled import stores
    it), cut short (a session without its markers yet), absent (no session) or damaged
    (markers that count what is not there); then the next import must repair the cut
    short ones, and leave none wrong after (not as an unkilled import stores it)."""
    tally: Counter[str] = Counter({name: 0 for name in IMPORT_COUNTS})
    reference_url = f"sqlite://{tmp}/import-reference.db"
    started = time.perf_counter()
    import_dir(reference_url, directory).wait()
    whole = time.perf_counter() - started
    reference = import_states(reference_url)
    tally["sources"] = len(reference)
    rng = random.Random(seed)
    started = time.perf_counter()
    for kill in range(kills):
        url = f"sqlite://{tmp}/import-{kill}.db"
        child = import_dir(url, directory)
        time.sleep(rng.uniform(0.0, whole))
        child.send_signal(signal.SIGKILL)
        child.wait()
        tally["kills"] += 1
        states = import_states(url)
        short = set()
        for key, want in reference.items():
            got = states.get(key)
            if got is None:
                tally["absent"] += 1
            elif not got[0]:
                tally["cut short"] += 1
                short.add(key)
            else:
                tally["complete" if got == want else "damaged"] += 1
        import_dir(url, directory).wait()
        after = import_states(url)
        tally["repaired"] += sum(1 for key in short if after.get(key) == reference[key])
        tally["wrong after"] += sum(1 for key, want in reference.items() if after.get(key) != want)
    tally["seconds"] = round(time.perf_counter() - started)
    return tally


def import_main(directory: str, kills: int, seed: int) -> None:
    from rich.console import Console
    from rich.table import Table

    with tempfile.TemporaryDirectory(prefix="threadline-import-kill-") as tmp:
        tally = run_import_kills(directory, kills, seed, tmp)
    title = f"SIGKILL during `sessions import {directory}` ({tally['sources']} conversations)"
    table = Table(title=title)
    columns = ("kills", *IMPORT_COUNTS, "seconds")
    for col in columns:
        table.add_column(col, justify="right")
    table.add_row(*(f"{tally[col]:,}" for col in columns))
    Console().print(table)
    print(
        "per kill, each source: complete, cut short (a session without its markers) or "
        "absent; damaged must be 0. repaired: cut-short sessions completed by the next "
        "import; wrong after: sources not equal to an unkilled import after it (must be 0)"
    )
    if tally["damaged"] or tally["wrong after"]:
        sys.exit("a killed directory import left damage behind")


if __name__ == "__main__":
    main()
