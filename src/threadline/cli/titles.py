"""Titles for chat sessions: the first real request at once, a model's title later.

A session the chat creates gets a title after its first turn: the first person's
request on one line (``interop.importers.session_title``, which skips tool
wrappers, caveats and reminders by ``threadline.requests``). When a title model
is configured (``--title-model`` / ``THREADLINE_TITLE_MODEL``), a background
thread then asks it for a short title and replaces the first one, unless the user
renamed the session meanwhile. The conversation never waits for it. A title model
that cannot be made (an unknown provider, no key) stops the chat before it starts;
a title request that fails leaves the first title in place, and the chat says so
once (``failure``), never as an error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from threadline.llm import ChatModel
from threadline.llm.base import ChatRequest
from threadline.messages import Message
from threadline.store.protocol import Session, Store

logger = logging.getLogger(__name__)

TITLE_SCAN = 50
"""Messages read from a session's start to find its first request."""
TITLE_PROMPT = (
    "Write a title of at most six words for a conversation that starts with the request "
    "below. Reply with the title only: no quotes, no punctuation at the end."
)
REQUEST_CHARS = 2000
"""Characters of the request the title model is shown."""
TITLE_MAX_TOKENS = 24
JOIN_SECONDS = 5.0
"""How long leaving the chat waits for a title still being written."""


def request_title(session: Session) -> str | None:
    """The first real request of ``session``, on one line and cut to a title's length."""
    from threadline.interop.importers import session_title  # the importers load lazily

    return session_title(session.read_messages(limit=TITLE_SCAN))


def clean_title(text: str) -> str | None:
    """A model's reply as a title: its first line, without quotes or a final period."""
    from threadline.interop.importers import session_title

    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = line.strip().strip("\"'`*#").strip().rstrip(".").strip()
    return session_title([Message.user(line)]) if line else None


def model_title(model: ChatModel, request: str) -> str | None:
    """What ``model`` calls a conversation that starts with ``request``."""
    response = model.complete(
        ChatRequest(
            messages=[
                Message.system(TITLE_PROMPT),
                Message.user(request[:REQUEST_CHARS]),
            ],
            max_tokens=TITLE_MAX_TOKENS,
            tool_choice="none",
        )
    )
    return clean_title(response.message.text)


class Titler:
    """Titles the sessions a chat creates; see the module docstring."""

    def __init__(self, make_model: Callable[[], ChatModel] | None = None) -> None:
        self.make_model = make_model
        """The title model, made on first use; None: titles come from the request only."""
        self._threads: list[threading.Thread] = []
        self._failure: str | None = None
        self._told = False

    def failure(self) -> str | None:
        """Why the title model gave no title, the first time it failed; None after that
        has been asked for once (the chat says it once, not after every turn)."""
        if self._failure is None or self._told:
            return None
        self._told = True
        return self._failure

    def title(self, store: Store, session: Session) -> str | None:
        """Give an untitled session its request title now, and ask the title model in the
        background. Returns the title set now, or None when there was nothing to do."""
        if session.title is not None:
            return None
        first = request_title(session)
        if first is None:
            return None
        session.rename(first)
        if self.make_model is not None:
            worker = threading.Thread(
                target=self._ask,
                args=(store, session.id, first),
                name=f"threadline-title-{session.id[:8]}",
                daemon=True,
            )
            self._threads.append(worker)
            worker.start()
        return first

    def _ask(self, store: Store, session_id: str, first: str) -> None:
        assert self.make_model is not None
        try:
            better = model_title(self.make_model(), first)
            if better and better != first and store.session_info(session_id).title == first:
                store.rename_session(session_id, better)  # not renamed by the user meanwhile
        except Exception as exc:  # a title is a nicety: never fail the chat for it
            logger.info("no model title for session %s: %s", session_id, exc)
            self._failure = self._failure or f"{type(exc).__name__}: {exc}"

    def wait(self, timeout: float = JOIN_SECONDS) -> None:
        """Let titles still being written finish (bounded), as the chat ends."""
        for worker in self._threads:
            worker.join(timeout)
        self._threads = [t for t in self._threads if t.is_alive()]
