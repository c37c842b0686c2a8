"""A round-robin proxy in front of ``threadline serve`` workers: HAProxy or nginx, as the
distribution packages them, with a generated configuration on free ports.

The configurations are the ones the documentation recommends (issue 34), but for
their files and the worker header: no sticky routing, every request balanced on its
own (HAProxy ``option http-server-close``, nginx's round robin), SSE passed through as
it comes (nginx ``proxy_buffering off``, though the server also says
``X-Accel-Buffering: no``; HAProxy does not buffer), timeouts longer than the
server's 15-second keep-alive frames so an idle event stream stays open, and a
request whose worker refuses the connection (a dead worker) retried on the next
(HAProxy ``retries``/``redispatch``, nginx's default ``proxy_next_upstream error``).
Each answer says which worker served it in ``X-Threadline-Worker`` (``host:port``;
nginx lists each worker it tried), so a test can check where its calls land.

Used by ``bench/server_scale.py`` and ``tests/test_server_balancer.py``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

WORKER_HEADER = "X-Threadline-Worker"
START_SECONDS = 20.0
PROXIES = ("haproxy", "nginx")


def haproxy_config(port: int, workers: list[str]) -> str:
    """HAProxy: ``workers`` are ``host:port``; each is also its server's name."""
    servers = "\n".join(f"    server {w} {w} check inter 1s fall 1 rise 2" for w in workers)
    return f"""global
    maxconn 4096

listen threadline
    bind 127.0.0.1:{port}
    mode http
    balance roundrobin
    option http-server-close
    option forwardfor
    option redispatch 1
    timeout connect 2s
    timeout client 5m
    timeout server 5m
    http-response set-header {WORKER_HEADER} %[srv_name]
{servers}
"""


def nginx_config(port: int, workers: list[str], prefix: Path) -> str:
    """nginx, in the foreground, with every file under ``prefix``."""
    servers = " ".join(f"server {w};" for w in workers)
    temp = "\n".join(
        f"    {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""worker_processes 1;
daemon off;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{ worker_connections 4096; }}

http {{
    access_log off;
{temp}
    upstream threadline {{ {servers} keepalive 32; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://threadline;
            proxy_http_version 1.1; proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off; proxy_read_timeout 5m;
            add_header {WORKER_HEADER} $upstream_addr always;
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available(kind: str) -> str | None:
    """The proxy's executable, or None when it is not installed."""
    return shutil.which(kind, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/local/sbin")


@dataclass
class Proxy:
    kind: str
    proc: subprocess.Popen[bytes]
    base: str
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_proxy(kind: str, workers: list[str], home: Path) -> Proxy:
    """``kind`` (``haproxy`` or ``nginx``) on a free port in front of ``workers``, once it
    accepts connections; raises RuntimeError with its log if it does not start."""
    exe = available(kind)
    if exe is None:
        raise RuntimeError(f"{kind} is not installed")
    port = free_port()
    prefix = home / f"{kind}-{port}"
    prefix.mkdir(parents=True)
    config = prefix / f"{kind}.conf"
    log = prefix / "out.log"
    if kind == "haproxy":
        config.write_text(haproxy_config(port, workers))
        command = [exe, "-f", str(config), "-db"]
    else:
        config.write_text(nginx_config(port, workers, prefix))
        command = [exe, "-p", str(prefix), "-c", str(config), "-e", str(prefix / "error.log")]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    proxy = Proxy(kind, proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proxy
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proxy.stop()
                errors = prefix / "error.log"
                told = log.read_text(errors="replace")
                if errors.exists():
                    told += errors.read_text(errors="replace")
                raise RuntimeError(f"{kind} did not start:\n{told}") from None
            time.sleep(0.05)
