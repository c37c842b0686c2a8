"""Plugin hooks: Python callables and webhooks told about session lifecycle events.

Events: ``session_create``, ``session_delete``, ``session_save`` (after a turn
stored its messages, and after a rename) and ``context_compacted``. A hook is
an observer: whatever it does (raise, time out, answer 500) is logged and never
fails or delays the operation that fired it. Webhooks are sent from a small
thread pool; each is a JSON POST ``{"event", "payload", "timestamp"}`` with
``X-Threadline-Signature: sha256=<hex HMAC-SHA256 of the body with the hook's
secret>`` and ``X-Threadline-Event``, so the receiver can check who sent it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import httpx

logger = logging.getLogger(__name__)

HOOK_EVENTS: Final = ("session_create", "session_delete", "session_save", "context_compacted")
SIGNATURE_HEADER = "X-Threadline-Signature"
EVENT_HEADER = "X-Threadline-Event"
WEBHOOK_TIMEOUT = 5.0

Hook = Callable[[str, Mapping[str, Any]], None]
"""``hook(event, payload)``; the return value is ignored, an exception logged."""


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Webhook:
    url: str
    secret: str
    events: tuple[str, ...] = HOOK_EVENTS
    """Which events this hook receives."""


class HookDispatcher:
    """Fans an event out to every hook; see the module docstring for the guarantees."""

    def __init__(self, hooks: Iterable[Hook] = (), webhooks: Iterable[Webhook] = ()) -> None:
        self.hooks = list(hooks)
        self.webhooks = list(webhooks)
        self._pool: ThreadPoolExecutor | None = None
        self._client: httpx.Client | None = None

    def fire(self, event: str, payload: Mapping[str, Any]) -> None:
        if event not in HOOK_EVENTS:
            raise ValueError(f"unknown hook event {event!r}")
        for hook in self.hooks:
            try:
                hook(event, payload)
            except Exception as exc:
                logger.warning("hook %r failed on %s: %s", hook, event, exc, exc_info=exc)
        targets = [w for w in self.webhooks if event in w.events]
        if targets:
            body = json.dumps(
                {"event": event, "payload": dict(payload), "timestamp": time.time()},
                default=str,
            ).encode()
            for webhook in targets:
                self._executor().submit(self._post, webhook, event, body).add_done_callback(
                    _log_failure
                )

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="threadline-hook")
        return self._pool

    def _post(self, webhook: Webhook, event: str, body: bytes) -> None:
        if self._client is None:
            self._client = httpx.Client(timeout=WEBHOOK_TIMEOUT, follow_redirects=False)
        response = self._client.post(
            webhook.url,
            content=body,
            headers={
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign(webhook.secret, body),
                EVENT_HEADER: event,
            },
        )
        if response.status_code >= 300:
            raise RuntimeError(f"webhook {webhook.url} answered {response.status_code}")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None


def _log_failure(future: Future[None]) -> None:
    exc = future.exception()
    if exc is not None:
        logger.warning("webhook failed: %s", exc)
