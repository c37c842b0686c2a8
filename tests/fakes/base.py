"""The scripted local HTTP server that the provider fakes share.

A fake is a real ``ThreadingHTTPServer`` on 127.0.0.1 (random port) in a
daemon thread; the SDK talks to it over real sockets, so what is tested is
the wire format, not our own functions. The test scripts a queue of answers
(``reply_text``, ``reply_tool_call``, ``fail``, ``disconnect``, ``silent``, ...); each
POST to the provider's endpoint takes the next one and is recorded, so tests
can assert what was sent. A reply is rendered when the request arrives: as
one JSON body, or as server-sent events when the request asked to stream, so
the same script serves ``complete`` and ``stream``.

Subclasses supply the provider's dialect: the endpoint path, the JSON and
SSE renderings of a reply, and the error bodies.
"""

from __future__ import annotations

import itertools
import json
import re
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar

FAKE_CREATED = 1_700_000_000
"""The fixed ``created`` timestamp in fake replies (deterministic output)."""
CHARS_PER_TOKEN = 4
"""For the usage a fake reports when the test gives none."""
SHUTDOWN_POLL = 0.02
"""Seconds between the serving loop's shutdown checks (keeps teardown quick)."""
SILENT_POLL = 0.05
"""How often a silent request looks whether its client hung up."""
ARGUMENT_PIECE = 8
"""Characters per streamed piece of a tool call's argument string."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def streaming(self) -> bool:
        data = self.json()
        return isinstance(data, dict) and data.get("stream") is True


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """A dict (sent as JSON), or a string sent verbatim (to test malformed arguments)."""
    id: str | None = None
    """Chosen by the fake (``call_...`` / ``toolu_...``) when None."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful answer, rendered in the provider's format when the request arrives."""

    text: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()
    usage: tuple[int, int] | None = None
    """``(input, output)`` tokens; estimated from the sizes when None."""
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    finish_reason: str | None = None
    """The provider's stop reason; its usual one for text / tool calls when None."""
    model: str | None = None
    """The model name in the reply; the requested one when None."""
    chunks: tuple[str, ...] | None = None
    """How the text is split when streamed; word by word when None."""


@dataclass(frozen=True, slots=True)
class Failure:
    """An error status with the provider's error body."""

    status: int
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Close the connection without answering (a dropped connection)."""


@dataclass(frozen=True, slots=True)
class StreamFailure:
    """Stream ``text`` as usual, then an in-stream error event instead of the end."""

    text: str
    error_type: str
    message: str


@dataclass(frozen=True, slots=True)
class Raw:
    """Exactly these bytes, for wire details no helper covers."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


@dataclass(frozen=True, slots=True)
class Held:
    """``reply``, sent only once ``wait()`` returns (tests of requests in flight at the same
    time); a ``wait`` that raises is answered with a 500 saying so."""

    reply: Reply
    wait: Any
    """A callable taking no argument, run in the server's request thread."""


@dataclass(frozen=True, slots=True)
class Silent:
    """Accept the request and send nothing, not even headers, until the client closes
    the connection (a model that hangs); the fake records when it did."""


Scripted = Reply | Failure | Disconnect | StreamFailure | Raw | Held | Silent


@dataclass(slots=True)
class Rendered:
    """What the handler writes: a body with Content-Length, or chunked SSE events."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes | None = None
    events: list[bytes] | None = None
    disconnect: bool = False
    silent: bool = False


def word_chunks(text: str) -> list[str]:
    """Split text into word-sized pieces that concatenate back to it."""
    return re.findall(r"\S+\s*|\s+", text)


def pieces(text: str, size: int = ARGUMENT_PIECE) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def retry_after(failure: Failure) -> list[tuple[str, str]]:
    """The ``retry-after`` header a scripted failure asks for, if any (whole seconds
    without a fraction, as providers send them)."""
    value = failure.retry_after
    if value is None:
        return []
    return [("retry-after", str(int(value)) if float(value).is_integer() else str(value))]


def estimate_tokens(data: bytes | str) -> int:
    return max(1, len(data) // CHARS_PER_TOKEN)


def arguments_json(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, separators=(",", ":"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Small writes (headers, then body or events) must not wait for delayed ACKs.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self._write(self.server.fake._answer(request))

    def do_GET(self) -> None:
        self._write(self.server.fake._not_found(self.path))

    def _write(self, out: Rendered) -> None:
        if out.silent:
            self._hang()
            return
        if out.disconnect:
            self.close_connection = True
            return
        self.send_response(out.status)
        for name, value in out.headers:
            self.send_header(name, value)
        if out.events is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in out.events:
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = out.body or b""
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        self.wfile.flush()

    def _hang(self) -> None:
        """Say nothing until the client hangs up (or the fake stops); record when."""
        fake = self.server.fake
        with fake._lock:
            fake.silent_open += 1
        self.close_connection = True
        try:
            while not fake._stopping.is_set():
                readable, _, _ = select.select([self.connection], [], [], SILENT_POLL)
                if readable and not self.connection.recv(1024):
                    with fake._lock:
                        fake.hung_up.append(time.monotonic())
                    return
        except OSError:
            with fake._lock:
                fake.hung_up.append(time.monotonic())
        finally:
            with fake._lock:
                fake.silent_open -= 1


class FakeServer:
    """A scripted provider server; use as a context manager (``with FakeOpenAI() as srv``)."""

    endpoint = "/"
    """The path a chat request is POSTed to."""
    url_suffix = ""
    """Appended to ``http://127.0.0.1:PORT`` to make the SDK's base URL."""
    request_id_header = "x-request-id"
    """The response header naming the request, as the provider names it."""
    rate_limit_header: str | None = None
    """The header a 429 sends as ``0`` (the spent budget), if the provider sends one."""
    errors: ClassVar[dict[int, tuple[str, str, str | None]]] = {}
    """``status -> (error type, message, code)`` as the provider sends them."""
    server_error_type = "server_error"
    """The error type of a 5xx ``errors`` does not name (any other is a bad request)."""

    def __init__(self) -> None:
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.requests: list[RecordedRequest] = []
        """Every chat request received, in order (including failed ones)."""
        self.unexpected: list[RecordedRequest] = []
        """Chat requests that found the script empty."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.silent_forever = False
        """Set: every request gets ``Silent`` (a model that hangs for good)."""
        self.silent_open = 0
        """Silent requests whose client has not hung up yet."""
        self.hung_up: list[float] = []
        """``time.monotonic()`` of each silent request's client closing the connection."""

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> FakeServer:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake server is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give the SDK (``base_url=srv.url``)."""
        return f"http://127.0.0.1:{self.port}{self.url_suffix}"

    # -- scripting ----------------------------------------------------------------

    def enqueue(self, *items: Scripted) -> None:
        with self._lock:
            self._queue.extend(items)

    def reply(self, reply: Reply) -> None:
        self.enqueue(reply)

    def reply_text(
        self,
        text: str,
        *,
        usage: tuple[int, int] | None = None,
        cached_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        finish_reason: str | None = None,
        model: str | None = None,
        chunks: list[str] | None = None,
    ) -> None:
        self.enqueue(
            Reply(
                text=text,
                usage=usage,
                cached_tokens=cached_tokens,
                cache_write_tokens=cache_write_tokens,
                finish_reason=finish_reason,
                model=model,
                chunks=tuple(chunks) if chunks is not None else None,
            )
        )

    def reply_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str | None = None,
        *,
        id: str | None = None,
        text: str = "",
        usage: tuple[int, int] | None = None,
    ) -> None:
        call = FakeToolCall(name=name, arguments=arguments if arguments is not None else {}, id=id)
        self.enqueue(Reply(text=text, tool_calls=(call,), usage=usage))

    def reply_tool_calls(
        self, calls: list[FakeToolCall], *, text: str = "", usage: tuple[int, int] | None = None
    ) -> None:
        self.enqueue(Reply(text=text, tool_calls=tuple(calls), usage=usage))

    def reply_held(self, reply: Reply, wait: Any) -> None:
        """``reply``, once ``wait()`` returns (it runs when the request arrives)."""
        self.enqueue(Held(reply, wait))

    def fail(self, status: int, **fields: Any) -> None:
        """An error status with the provider's error body; ``fields`` are ``Failure``'s
        (``message``, ``error_type``, ``code``, ``retry_after``), named once there."""
        self.enqueue(Failure(status, **fields))

    def disconnect(self) -> None:
        self.enqueue(Disconnect())

    def silent(self, times: int = 1) -> None:
        """The next ``times`` requests are accepted and never answered."""
        self.enqueue(*[Silent()] * times)

    def fail_mid_stream(self, text: str, *, error_type: str, message: str) -> None:
        self.enqueue(StreamFailure(text, error_type, message))

    def raw(
        self, status: int, body: bytes | str, *, content_type: str = "application/json"
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.enqueue(Raw(status, data, (("Content-Type", content_type),)))

    # -- inspection ---------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Scripted answers not yet taken."""
        with self._lock:
            return len(self._queue)

    @property
    def request_count(self) -> int:
        return len(self.requests)

    @property
    def last_request(self) -> RecordedRequest:
        if not self.requests:
            raise AssertionError("the fake server has received no request")
        return self.requests[-1]

    @property
    def last_json(self) -> Any:
        return self.last_request.json()

    # -- serving ------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def _answer(self, request: RecordedRequest) -> Rendered:
        if request.path.split("?")[0] != self.endpoint:
            return self._not_found(request.path)
        rejected = self.validate(request)
        if rejected is not None:
            with self._lock:
                self.requests.append(request)
            return self.render_failure(rejected)
        with self._lock:
            self.requests.append(request)
            item = self._queue.popleft() if self._queue else None
            if item is None and self.silent_forever:
                item = Silent()
            if item is None:
                self.unexpected.append(request)
        if item is None:
            return self.render_failure(
                Failure(418, message="fake server: no scripted response left for this request"),
            )
        if isinstance(item, Held):
            try:
                item.wait()
            except Exception as exc:
                failure = Failure(500, message=f"fake server: held reply: {exc!r}")
                return self.render_failure(failure)
            item = item.reply
        if isinstance(item, Disconnect):
            return Rendered(status=0, headers=[], disconnect=True)
        if isinstance(item, Silent):
            return Rendered(status=0, headers=[], silent=True)
        if isinstance(item, Raw):
            return Rendered(item.status, list(item.headers), body=item.body)
        if isinstance(item, Failure):
            return self.render_failure(item)
        if isinstance(item, StreamFailure):
            return self.render_stream_failure(item, request)
        if request.streaming:
            return self.render_stream(item, request)
        return self.render_json(item, request)

    def _not_found(self, path: str) -> Rendered:
        return self.render_failure(Failure(404, message=f"fake server: no route for {path}"))

    @staticmethod
    def json_body(status: int, data: Any, headers: list[tuple[str, str]] | None = None) -> Rendered:
        out = [("Content-Type", "application/json")]
        out.extend(headers or [])
        return Rendered(status, out, body=json.dumps(data).encode())

    @staticmethod
    def sse_headers() -> list[tuple[str, str]]:
        return [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache")]

    # -- the provider's dialect (subclasses) ----------------------------------------

    def validate(self, request: RecordedRequest) -> Failure | None:
        """The error the real API gives a request it rejects outright (script untouched)."""
        return None

    def render_json(self, reply: Reply, request: RecordedRequest) -> Rendered:
        raise NotImplementedError

    def render_stream(self, reply: Reply, request: RecordedRequest) -> Rendered:
        raise NotImplementedError

    def render_failure(self, failure: Failure) -> Rendered:
        """The error response, what the script leaves out taken from ``errors``."""
        fallback = (
            self.server_error_type if failure.status >= 500 else "invalid_request_error",
            f"HTTP {failure.status}",
            None,
        )
        kind, message, code = self.errors.get(failure.status, fallback)
        body = self.error_body(
            failure.error_type or kind,
            failure.message or message,
            failure.code if failure.code is not None else code,
        )
        return self.json_body(failure.status, body, self.failure_headers(failure))

    def error_body(self, error_type: str, message: str, code: str | None) -> dict[str, Any]:
        """The provider's JSON error body."""
        raise NotImplementedError

    def render_stream_failure(self, failure: StreamFailure, request: RecordedRequest) -> Rendered:
        """``failure.text`` streamed as a reply starts, then the in-stream error event."""
        reply = Reply(text=failure.text)
        events = [*self.stream_text(reply, request), self.stream_error(failure)]
        return Rendered(200, self.sse_headers(), events=events)

    def stream_text(self, reply: Reply, request: RecordedRequest) -> list[bytes]:
        """The opening events of a stream and ``reply``'s text, left open."""
        raise NotImplementedError

    def stream_error(self, failure: StreamFailure) -> bytes:
        """The event a stream that fails midway ends with."""
        raise NotImplementedError

    # -- shared helpers for subclasses ----------------------------------------------

    def id_headers(self) -> list[tuple[str, str]]:
        return [(self.request_id_header, "req_fake")]

    def failure_headers(self, failure: Failure) -> list[tuple[str, str]]:
        """What an error response carries: the request id, the ``retry-after`` the script
        asks for, and on a 429 the spent rate limit."""
        headers = [*self.id_headers(), *retry_after(failure)]
        if failure.status == 429 and self.rate_limit_header is not None:
            headers.append((self.rate_limit_header, "0"))
        return headers

    @staticmethod
    def requested_model(request: RecordedRequest, reply: Reply) -> str:
        if reply.model:
            return reply.model
        data = request.json()
        return str(data.get("model", "fake-model")) if isinstance(data, dict) else "fake-model"

    @staticmethod
    def usage_numbers(reply: Reply, request: RecordedRequest) -> tuple[int, int]:
        if reply.usage is not None:
            return reply.usage
        produced = reply.text + "".join(
            c.name + arguments_json(c.arguments) for c in reply.tool_calls
        )
        return estimate_tokens(request.body), estimate_tokens(produced)

    @staticmethod
    def text_chunks(reply: Reply) -> list[str]:
        if reply.chunks is not None:
            return list(reply.chunks)
        return word_chunks(reply.text)
