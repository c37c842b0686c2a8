"""A turn's lock lives exactly as long as the turn (issue 34): the lease renewal of
running turns never takes again the lock of a turn that ended meanwhile.

``bench/server_scale.py`` (three workers behind HAProxy) saw prompts refused with 409
"busy, held by" a worker that ran nothing: its renewal listed a running turn, the
turn ended and released its lock, then the renewal acquired the lock anew, for
nobody, until the lease ran out.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from tests.test_server import SIM, TOKEN, BlockingModel
from threadline import open_store
from threadline.server.config import ServerConfig
from threadline.server.runner import AgentRunner
from threadline.store.locks import LockHolder
from threadline.store.protocol import Store

RENEWAL_SECONDS = 0.3


class SlowRenewal:
    """A store whose lock acquisitions take ``RENEWAL_SECONDS`` once ``slow`` is set."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.slow = threading.Event()
        self.renewing = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def acquire_lock(self, session_id: str, holder: LockHolder | None = None) -> LockHolder:
        if self.slow.is_set():
            self.renewing.set()
            time.sleep(RENEWAL_SECONDS)
        return self._store.acquire_lock(session_id, holder)


def test_a_turn_ending_during_the_renewal_leaves_no_lock() -> None:
    from threadline.agent import Agent, AgentConfig

    store = SlowRenewal(open_store("memory://"))
    config = AgentConfig(name="default", model=SIM, summarizer="extractive", tools=())

    def factory(store: Any, info: Any, spec: str) -> Agent:
        return Agent(config, store=store, model=BlockingModel())

    runner = AgentRunner(cast(Store, store), ServerConfig(token=TOKEN), agent_factory=factory)
    sid = store.create_session(model=SIM).id
    entry = runner.reserve(sid, SIM)  # a turn holds the session
    assert store.lock_holder(sid) is not None
    store.slow.set()
    renewal = threading.Thread(target=runner.renew)
    renewal.start()
    assert store.renewing.wait(5)  # the renewal has listed the turn and is renewing it
    runner.cancel(entry)  # the turn ends: its lock is released
    renewal.join(5)
    assert store.lock_holder(sid) is None  # not taken again for nobody
    runner.close()
