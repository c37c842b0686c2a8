"""``threadline serve`` starts or says why (issue 20, point 3), run as a user runs it.

Each failed start is one ``threadline: error:`` line, no banner, no login link, no
traceback, and an exit code of its own (the CLI page's table): a port in use 9, a host that
is not this machine's 10, a model that cannot be resolved 11, a bad token 2. ``--port
0`` prints the port the system chose, and the login link uses it.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import httpx
import pytest

from tests.serve_cli import LOGIN_LINK, run_serve, start_serve
from threadline.cli import errors as cli_errors
from threadline.errors import HostUnavailable, PortUnavailable, UnknownModel

TOKEN = "startup-token-0123456789abcdef"
EXIT_CODES = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def failed_start(output: str) -> str:
    """The one error line of a start that failed (and that nothing else was said)."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("threadline: error: "), output
    assert "Traceback" not in output and "login?code=" not in output
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path}/s.db"


def test_port_in_use_exits_9(tmp_path: Path, store: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, output = run_serve(tmp_path, "--store", store, "--port", str(port), "--token", TOKEN)
    assert code == PortUnavailable.exit_code == cli_errors.EXIT_PORT == 9
    assert "already in use" in failed_start(output) and str(port) in output


@pytest.mark.parametrize("host", ["999.1.1.1", "192.0.2.1", "no-such-host.invalid"])
def test_a_host_that_is_not_this_machines_exits_10(tmp_path: Path, store: str, host: str) -> None:
    code, output = run_serve(tmp_path, "--store", store, "--host", host, "--token", TOKEN)
    assert code == HostUnavailable.exit_code == cli_errors.EXIT_HOST == 10
    assert host in failed_start(output)


@pytest.mark.parametrize("model", ["nonsense", "acme/x", "compatible/needs-a-url", "simulated/"])
def test_a_model_that_cannot_be_resolved_exits_11(
    tmp_path: Path, store: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, output = run_serve(tmp_path, "--store", store, "--model", model, "--token", TOKEN)
    assert code == UnknownModel.exit_code == cli_errors.EXIT_UNKNOWN_MODEL == 11
    assert repr(model) in failed_start(output)
    assert not Path(store.removeprefix("sqlite://")).exists()  # refused before the store


def test_a_model_without_its_key_exits_7(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, output = run_serve(tmp_path, "--store", store, "--model", "openai/gpt-4o")
    assert code == cli_errors.EXIT_MODEL == 7
    assert "OPENAI_API_KEY" in failed_start(output)


@pytest.mark.parametrize("token", ["", "   ", "short", "tøken-with-non-ascii-0123456789"])
def test_an_empty_short_or_non_ascii_token_exits_2(tmp_path: Path, store: str, token: str) -> None:
    code, output = run_serve(tmp_path, "--store", store, "--token", token)
    assert code == cli_errors.EXIT_USAGE == 2
    assert "printable ASCII" in failed_start(output)


def test_port_0_prints_the_port_it_got(tmp_path: Path, store: str) -> None:
    with start_serve(tmp_path, "--store", store, "--port", "0", "--token", TOKEN) as live:
        port = int(live.base.rsplit(":", 1)[1])
        assert port != 0 and live.base == f"http://127.0.0.1:{port}"
        assert live.login_link.startswith(f"http://127.0.0.1:{port}/login?code=")
        assert f"Uvicorn running on http://127.0.0.1:{port}" in live.output()
        r = httpx.get(live.login_link, timeout=10)  # the link works, once
        assert r.status_code == 303 and "threadline_session" in r.cookies
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(live.base + "/v1/sessions", headers=auth, timeout=10).status_code == 200
    assert len(LOGIN_LINK.findall(live.output())) == 1


def test_the_cli_page_lists_every_exit_code() -> None:
    text = EXIT_CODES.read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", text, flags=re.MULTILINE))
    codes = {
        value
        for name, value in vars(cli_errors).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    assert codes <= {int(c) for c in table}, sorted(codes - {int(c) for c in table})
    assert "port" in table["9"] and "host" in table["10"] and "model" in table["11"]


def test_every_address_of_a_host_is_bound_on_one_port() -> None:
    from threadline.server.listen import bind

    for host in ("", "localhost", "127.0.0.1"):
        sockets = bind(host, 0)
        try:
            ports = {s.getsockname()[1] for s in sockets}
            assert len(ports) == 1 and 0 not in ports, (host, ports)
        finally:
            for s in sockets:
                s.close()
