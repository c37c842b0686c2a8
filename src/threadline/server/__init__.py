"""The agent server: sessions and agent turns over HTTP (``threadline serve``).

Needs the ``server`` extra (``pip install 'threadline[server]'``: FastAPI and
uvicorn); nothing outside this package imports it (but ``doctor``, for the event
streams servers keep in a PostgreSQL or Redis store, and it does without them), so the
library and the other commands work without them. ``create_app`` builds the ASGI
app; see ``app`` for the wire formats and ``runner`` for how agents are cached per
session.
"""

from threadline.server.app import create_app
from threadline.server.config import ServerConfig
from threadline.server.hooks import HOOK_EVENTS, Hook, HookDispatcher, Webhook, sign
from threadline.server.runner import AgentRunner

__all__ = [
    "HOOK_EVENTS",
    "AgentRunner",
    "Hook",
    "HookDispatcher",
    "ServerConfig",
    "Webhook",
    "create_app",
    "sign",
]
