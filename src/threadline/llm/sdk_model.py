"""What the providers built on an official SDK (OpenAI-compatible, Anthropic) share.

Both find the key the same way, turn the SDK's own retries off and retry through
``threadline.llm.retry``, turn every SDK exception into a ``ModelError`` with the
same wording for timeouts, unreachable servers, rejected keys and unknown models,
and read a stream ahead to its first text inside the retry, so that a failure
before anything was shown is retried and one after it is raised. A request's
``cancel`` token shuts its connection down at once (``threadline.llm.abort``), and
``timeout`` bounds the whole request while ``first_byte_timeout`` bounds each wait
for data (a model that accepted the request and sends nothing). A provider
supplies its SDK's client and exception classes and what is its own: the request
body, the reply, and how its error bodies read.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, ClassVar, Generic, Protocol, Self, TypedDict, TypeVar

import httpx2

from threadline.errors import MissingCredentials, ModelError
from threadline.llm.abort import CallScope, abortable_transport, model_timeout
from threadline.llm.base import DEFAULT_FIRST_BYTE_TIMEOUT, DEFAULT_TIMEOUT
from threadline.llm.cancel import CallCancelled, on_cancel
from threadline.llm.retry import (
    RetriesExhausted,
    Retryable,
    RetryEvent,
    RetryPolicy,
    call_with_retries,
)

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection (at most the whole request's)."""
KEYLESS_PLACEHOLDER = "not-needed"
"""Sent as the key to servers that need none (Ollama, llama.cpp); the SDK insists on one."""


class SDKOptions(TypedDict, total=False):
    """The constructor options every SDK provider takes (see ``SDKChatModel``)."""

    api_key: str | None
    base_url: str | None
    timeout: float
    first_byte_timeout: float
    retry: RetryPolicy | None
    max_retries: int | None
    on_retry: Callable[[RetryEvent], None] | None
    default_headers: Mapping[str, str] | None


def missing_sdk(provider: str, package: str) -> ImportError:
    """The error for a provider whose SDK is not installed: it names the extra."""
    return ImportError(
        f"the {provider} provider needs the {package!r} package: "
        f"pip install 'threadline[{package}]'"
    )


class _Client(Protocol):
    @property
    def base_url(self) -> Any: ...

    def close(self) -> None: ...


class _EventStream(Protocol):
    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Assembler(Protocol):
    def add(self, event: Any) -> str:
        """Take one stream event; return the text it adds ('' for none)."""
        ...


ClientT = TypeVar("ClientT", bound=_Client)
AssemblerT = TypeVar("AssemblerT", bound=Assembler)


@dataclasses.dataclass(slots=True)
class _OpenStream(Generic[AssemblerT]):
    """A stream read up to its first text (or its end)."""

    stream: _EventStream
    events: Iterator[Any]
    assembler: AssemblerT
    first_text: str


class SDKChatModel(Generic[ClientT]):
    """The common half of a ``ChatModel`` over an SDK client of type ``ClientT``."""

    sdk_error: ClassVar[type[Exception]]
    """The SDK's base exception: every one of them leaves as a ``ModelError``."""
    timeout_error: ClassVar[type[Exception]]
    connection_error: ClassVar[type[Exception]]
    """Checked after ``timeout_error``, which the SDKs derive from it."""
    key_hint: ClassVar[str] = "check that the key is valid"
    """The advice after "rejected the API key"."""

    def __init__(
        self,
        model: str,
        client_class: Callable[..., ClientT],
        *,
        provider: str,
        api_key_env: str | None,
        require_api_key: bool = True,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        first_byte_timeout: float = DEFAULT_FIRST_BYTE_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_retries: int | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        """The key is ``api_key``, else the ``api_key_env`` variable; when neither is set
        a keyless server gets a placeholder and any other raises ``MissingCredentials``.
        ``max_retries`` overrides the one of ``retry``. ``timeout`` bounds one whole
        request, ``first_byte_timeout`` each wait for data within it."""
        if not (timeout > 0 and first_byte_timeout > 0):
            raise ValueError("timeout and first_byte_timeout must be > 0 seconds")
        self.model = model
        self.provider = provider
        key = api_key or (os.environ.get(api_key_env) if api_key_env else None)
        if not key:
            if require_api_key:
                raise MissingCredentials(_missing_key_message(provider, api_key_env))
            key = KEYLESS_PLACEHOLDER
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = dataclasses.replace(policy, max_retries=max_retries)
        self.retry = policy
        self.on_retry = on_retry
        self._api_key_env = api_key_env
        self.timeout = timeout
        self.first_byte_timeout = first_byte_timeout
        limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        self._client = client_class(
            api_key=key,
            base_url=base_url,
            timeout=model_timeout(timeout, first_byte_timeout, CONNECT_TIMEOUT),
            max_retries=0,
            default_headers=dict(default_headers) if default_headers else None,
            http_client=httpx2.Client(
                transport=abortable_transport(limits=limits),
                limits=limits,
                follow_redirects=True,
            ),
        )
        self.base_url = str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider}/{self.model} at {self.base_url})"

    def close(self) -> None:
        """Close the HTTP connections this model opened."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- for the providers ----------------------------------------------------------

    def _call(
        self,
        fn: Callable[[], Any],
        cancel: threading.Event | None = None,
        scope: CallScope | None = None,
    ) -> Any:
        """``fn()`` under the retry policy, each attempt in ``scope`` (its deadline
        restarted) and shut down when ``cancel`` is set; an SDK exception leaves
        translated, a cancelled call as ``CallCancelled``."""
        own = scope is None
        scope = scope or CallScope(self.timeout)
        forget = on_cancel(cancel, scope.abort) if own else _nothing

        def attempt() -> Any:
            scope.restart()
            with scope.active():
                return fn()

        try:
            return call_with_retries(
                attempt,
                policy=self.retry,
                classify=self._classify,
                on_retry=self.on_retry,
                cancel=cancel,
            )
        except RetriesExhausted as exc:
            cause = exc.__cause__
            assert isinstance(cause, self.sdk_error)
            raise self._translate(cause, note=str(exc)) from cause
        except self.sdk_error as exc:
            raise self._translate(exc) from exc
        finally:
            forget()

    def _stream_text(
        self,
        create: Callable[[], _EventStream],
        assembler: Callable[[], AssemblerT],
        cancel: threading.Event | None = None,
    ) -> Generator[str, None, AssemblerT]:
        """Yield a stream's text as it arrives; return the assembler that saw all of it.

        The stream is read in the call's scope, so a cancel shuts it down between
        pieces as well as before the first."""
        scope = CallScope(self.timeout)
        forget = on_cancel(cancel, scope.abort)
        try:
            opened: _OpenStream[AssemblerT] = self._call(
                lambda: _open(create(), assembler()), cancel, scope
            )
        except BaseException:
            forget()
            raise
        acc = opened.assembler
        try:
            if opened.first_text:
                yield opened.first_text
            while True:
                with scope.active():
                    event = next(opened.events, _END)
                if event is _END:
                    break
                text = acc.add(event)
                if text:
                    yield text
        except (self.sdk_error, httpx2.TransportError) as exc:
            if cancel is not None and cancel.is_set():
                raise CallCancelled("the model call was cancelled") from exc
            if isinstance(exc, httpx2.TransportError):
                raise ModelError(f"{self._where()}: the stream broke off: {exc}") from exc
            raise self._translate(exc) from exc
        finally:
            forget()
            opened.stream.close()
        return acc

    def _where(self) -> str:
        return f"{self.provider} ({self.model} at {self.base_url})"

    def _translate(self, exc: Exception, *, note: str | None = None) -> ModelError:
        where = self._where()
        suffix = f" ({note})" if note else ""
        if isinstance(exc, self.timeout_error):
            return ModelError(f"{where}: the request timed out{suffix}")
        if isinstance(exc, self.connection_error):
            cause = exc.__cause__
            detail = f": {cause}" if cause is not None and str(cause) else ""
            return ModelError(
                f"the {self.provider} server at {self.base_url} is unreachable{detail}{suffix}"
            )
        return self._translate_reply(exc, where, suffix)

    def _translate_reply(self, exc: Exception, where: str, suffix: str) -> ModelError:
        """An SDK exception about what the server answered (not a timeout or no answer)."""
        raise NotImplementedError

    def _status_error(
        self, where: str, status: int, message: str, suffix: str, *, label: str = ""
    ) -> ModelError:
        """An error status that is not about the context length."""
        if status == 401:
            var = f" in {self._api_key_env}" if self._api_key_env else ""
            return MissingCredentials(
                f"{where} rejected the API key{var} (HTTP 401: {message}); {self.key_hint}"
            )
        if status == 404:
            return ModelError(f"{where}: not found (HTTP 404: {message}); is the model name right?")
        return ModelError(f"{where}: HTTP {status}{label}: {message}{suffix}")

    def _classify(self, exc: BaseException) -> Retryable | None:
        if isinstance(exc, self.timeout_error):
            return Retryable("request timed out")
        if isinstance(exc, self.connection_error):
            return Retryable("connection error")
        return self._classify_reply(exc)

    def _classify_reply(self, exc: BaseException) -> Retryable | None:
        """Whether an SDK exception about what the server answered is worth a retry."""
        raise NotImplementedError


_END = object()
"""What ``next`` gives at the end of a stream."""


def _nothing() -> None:
    return None


def _open(stream: _EventStream, acc: AssemblerT) -> _OpenStream[AssemblerT]:
    """Read ``stream`` up to its first text; closed if that fails."""
    events = iter(stream)
    try:
        for event in events:
            text = acc.add(event)
            if text:
                return _OpenStream(stream, events, acc, text)
    except BaseException:
        stream.close()
        raise
    return _OpenStream(stream, events, acc, "")


def _missing_key_message(provider: str, env: str | None) -> str:
    if env is None:
        return f"{provider} needs an API key: pass api_key=..."
    return (
        f"no API key for {provider}: set the {env} environment variable "
        f"(export {env}=...) or pass api_key=..."
    )
