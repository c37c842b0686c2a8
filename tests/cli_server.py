"""The ``threadline`` command run in processes of its own, each forked from one server
process that imported the CLI once.

A test that runs the CLI a hundred times against a store needs each run to be a process of
its own (its own descriptors and POSIX locks, its own SQLite connections), not a fresh
interpreter: starting Python and importing the compaction stack again cost about a second
of CPU a run. The server never opens a store; each child runs the entry point
(``cli.app.main``) with its arguments and environment, its output in files, and exits
with the command's code.

Run as ``python -m tests.cli_server COMMAND...``: the named commands are loaded before
the first request. Requests are JSON lines on stdin, ``{"args", "env", "out", "err"}``;
each answer is the child's exit code as a JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[1]
"""The project's folder: where ``tests.cli_server`` is importable from."""


class CliServer:
    """A server for the commands ``preload``; ``run`` is a drop-in for ``subprocess.run``
    of ``python -m threadline.cli.app ARGS`` with captured text output."""

    def __init__(self, *preload: str, env: dict[str, str] | None = None) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="cli-server-")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cli_server", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self._runs = 0

    def run(self, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._runs += 1
        out = Path(self._scratch.name) / f"{self._runs}.out"
        err = Path(self._scratch.name) / f"{self._runs}.err"
        request = {"args": args, "env": env, "out": str(out), "err": str(err)}
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the CLI server exited with {self._proc.wait()}")
        return subprocess.CompletedProcess(
            args, json.loads(answer), out.read_text(encoding="utf-8"), err.read_text("utf-8")
        )

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._scratch.cleanup()

    def __enter__(self) -> CliServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _child(request: dict[str, object]) -> int:
    """In the forked child: the command's exit code, as ``python -m`` would exit."""
    import threadline.cli.app as app

    args, env = request["args"], request["env"]
    assert isinstance(args, list) and isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    written = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["out"], written),
        (2, request["err"], written),
    ):
        target = os.open(str(path), flags, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["threadline", *map(str, args)]
    try:
        app.main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    return code or 0


def serve(preload: list[str]) -> None:
    from threadline import Message
    from threadline.cli.root import load_command

    for name in preload:
        load_command(name)
    Message.user("pydantic builds its validators at the first message")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # exits as a fresh process would: atexit, finalizers, flushed output
            sys.exit(_child(request))
        _, status = os.waitpid(pid, 0)
        print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)


if __name__ == "__main__":
    serve(sys.argv[1:])
