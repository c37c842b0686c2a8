"""What a server is configured with; plain data so tests and the CLI build it the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from threadline.context.policy import ContextPolicy
from threadline.demo.run import DEMO_MODEL_SPEC, DEMO_POLICY
from threadline.server.events import DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENT_BYTES
from threadline.server.search_gate import DEFAULT_SEARCH_SLOTS, DEFAULT_SEARCH_WAIT
from threadline.session_agent import SIMULATED_PROVIDER as SIMULATED_PROVIDER
from threadline.session_agent import SIMULATED_TURNS as SIMULATED_TURNS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_IDLE_SECONDS = 30 * 60
"""A cached agent is dropped (its model's connections closed) after this long idle."""
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""Bigger request bodies are refused with 413 before they are read."""
DEFAULT_MESSAGE_PAGE = 50
MAX_PROMPT_CHARS = 200_000
MAX_FILES = 10
EVENT_BUFFER = 5000
"""Events kept per session for ``Last-Event-ID`` resumption (all sessions together keep
at most ``DEFAULT_MAX_BYTES``; see ``events``)."""
HEADER_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's headers (from its first byte, or
from the connection's start); then it is closed."""
BODY_TIMEOUT = 30.0
"""Seconds a request body may go without a byte arriving; then 408."""
AUTH_FAILURES = 30
AUTH_WINDOW = 60.0
"""After ``AUTH_FAILURES`` wrong tokens (bearer, login form or login link) from one
client (an IPv6 one by its /64) within ``AUTH_WINDOW`` seconds, its wrong tokens get
429 until the oldest of them is that old; the right token always passes."""
AUTH_GLOBAL_FAILURES = 20
"""Wrong tokens a second from all clients together before every wrong one gets 429."""


@dataclass
class ServerConfig:
    """Everything ``create_app`` needs besides the store and the hooks.

    ``default_model`` is what a prompt runs on when neither the prompt, nor the
    session (its stored model), nor its workspace (``workspace_models``) names one; it
    is the offline simulated model, so a bare server needs no API key and no network.
    """

    token: str
    default_model: str = DEMO_MODEL_SPEC
    workspace_models: Mapping[str, str] = field(default_factory=dict)
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    search_slots: int = DEFAULT_SEARCH_SLOTS
    """Searches this process runs at once; more wait ``search_wait`` s, then get 429."""
    search_wait: float = DEFAULT_SEARCH_WAIT
    sweep_seconds: float = 60.0
    """How often idle agents are evicted and running turns' locks renewed."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    simulated_policy: ContextPolicy = DEMO_POLICY
    """The simulated model's context policy (tests shrink it to see compaction)."""
    clock: Callable[[], float] | None = None
    """Monotonic seconds for idle eviction and the auth throttle; ``time.monotonic`` when
    None."""
    host: str = DEFAULT_HOST
    """The address the server is bound to: requests must name it (or a loopback name when
    it is loopback) in their ``Host`` header, which stops DNS rebinding (see ``hosts``)."""
    allowed_hosts: tuple[str, ...] = ()
    """More names the ``Host`` header may carry (a proxy's public name); ``*`` allows any."""
    event_buffer: int = EVENT_BUFFER
    event_buffer_bytes: int = DEFAULT_MAX_BYTES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    auth_failures: int = AUTH_FAILURES
    auth_window: float = AUTH_WINDOW
    auth_global_failures: int = AUTH_GLOBAL_FAILURES
