"""Which session a resumed chat goes on with (``-c``, ``-s ID``).

The agent and model it runs are the session's own unless AGENT or ``--model`` say
otherwise: ``threadline.session_agent.setup_for`` (the rule the CLI's reports and the
server share).
"""

from __future__ import annotations

from threadline.agent import load_agent
from threadline.store.protocol import Store
from threadline.store.session_info import SessionInfo


def resume_target(
    store: Store, *, agent: str | None, session_id: str | None, resume_last: bool
) -> SessionInfo | None:
    """The session ``-s`` names, or for ``-c`` the most recently updated one (of AGENT,
    when given); None when there is none to resume."""
    if session_id is not None:
        return store.session_info(store.resolve_id(session_id))
    if not resume_last:
        return None
    name = load_agent(agent).name if agent else None
    latest = store.list_sessions(agent=name, limit=1).items
    return latest[0] if latest else None
