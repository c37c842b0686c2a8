"""Windows for a reader to judge: real runs imported, compacted, and windowed as a user would.

Issue 31 asks that a reader who has not seen the code score a snapshot window
beside the raw run and, where the run has one, the summary the agent's own
harness wrote for the same span. This script prepares that material, doing what
a new user does: ``threadline sessions import FILE``, ``threadline compact ID``
and ``threadline context ID --limit N --json`` in a fresh store.

Runs A-D are Claude Code transcripts cut just before a native compaction
(``compact_boundary``): the summary Claude Code wrote at that point
(``isCompactSummary``) is the reference, and threadline sees only what came
before it. Runs E-G are whole runs of Codex and Pi with no reference.

    python bench/snapshot_windows.py --out DIR [--limit 32000] [--only A,B]

For each run it writes ``DIR/<run>/raw.jsonl`` (the span threadline saw),
``window.md`` (the window as the model would read it), ``native.md`` (the
reference, where there is one) and ``report.json``. Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "transcripts"


@dataclass(frozen=True)
class Run:
    name: str
    path: str
    boundary: int = 0  # cut before the Nth compact_boundary (1-based); 0 keeps the whole file


RUNS = (
    Run("A", "claude-code/spotter-4d5611e5/4d5611e5-241a-462a-8d15-5122611a9569.jsonl", 1),
    Run("B", "claude-code/spotter-8463c716/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", 1),
    Run("C", "claude-code/entire-cli-2compactions-b8659b3a4d.jsonl", 2),
    Run("D", "claude-code/codemie-session-624a4a58-compacted.jsonl", 1),
    Run("E", "codex/rtchess-session-019aad50-exported.jsonl"),
    Run("F", "other/pi-session-herdr-subagents-01a00acb.jsonl"),
    Run("G", "codex/localpush-redacted-rollout-2026-02-23T12-54-34-compacted.jsonl"),
)


def cut(source: Path, boundary: int) -> tuple[list[str], str]:
    """The lines before the ``boundary``-th compaction, and the summary written there."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    if not boundary:
        return lines, ""
    seen = 0
    for index, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("subtype") == "compact_boundary":
            seen += 1
            if seen == boundary:
                return lines[:index], native_summary(lines[index + 1 :])
    raise SystemExit(f"{source}: no compaction number {boundary}")


def native_summary(lines: list[str]) -> str:
    for line in lines:
        record = json.loads(line)
        if record.get("isCompactSummary"):
            content = record["message"]["content"]
            if isinstance(content, list):
                return "\n".join(part.get("text", "") for part in content)
            return str(content)
    return ""


def threadline(home: Path, *args: str) -> str:
    env = dict(os.environ, THREADLINE_STORE=f"sqlite:///{home / 'store.db'}")
    env["THREADLINE_CONFIG_DIR"] = str(home / "config")
    # the tree this script is in, not whatever ``PYTHONPATH=src`` means in ``home``
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            'import sys; from threadline.cli.app import main; sys.argv[0] = "threadline"; main()',
            *args,
        ],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"threadline {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def render(window: dict) -> str:
    """The window's messages as a reader sees them, tool calls and results included."""
    out = []
    for message in window["messages"]:
        role = message.get("role", "?")
        text = message.get("content") or ""
        if isinstance(text, list):
            text = "\n".join(
                part.get("text", "") if isinstance(part, dict) else str(part) for part in text
            )
        out.append(f"### {role}\n\n{text}".rstrip())
        for call in message.get("tool_calls") or ():
            function = call.get("function", call)
            out.append(f"(tool call {function.get('name')}: {function.get('arguments')})")
    return "\n\n".join(out) + "\n"


def prepare(run: Run, out: Path, limit: int) -> dict:
    source = SHARED / run.path
    lines, native = cut(source, run.boundary)
    folder = out / run.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    raw = folder / source.name
    raw.write_text("".join(lines), encoding="utf-8")
    subagents = source.with_suffix("")
    if subagents.is_dir():  # Claude Code keeps a run's subagents beside it
        shutil.copytree(subagents, folder / subagents.name)
    home = folder / "home"
    home.mkdir()
    imported = json.loads(threadline(home, "sessions", "import", str(raw), "--json"))
    session = imported["sources"][0]["session_id"]
    compacted = threadline(home, "compact", session)
    window = json.loads(threadline(home, "context", session, "--limit", str(limit), "--json"))
    (folder / "window.md").write_text(render(window), encoding="utf-8")
    if native:
        (folder / "native.md").write_text(native, encoding="utf-8")
    report = {
        "run": run.name,
        "source": run.path,
        "lines": len(lines),
        "session": session,
        "compact": compacted.strip(),
        "window_messages": len(window["messages"]),
        "native": bool(native),
    }
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=32000)
    parser.add_argument("--only", default="", help="comma-separated run names")
    args = parser.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"no transcripts at {SHARED}")
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    for run in RUNS:
        if wanted and run.name not in wanted:
            continue
        print(json.dumps(prepare(run, args.out, args.limit)))


if __name__ == "__main__":
    main()
