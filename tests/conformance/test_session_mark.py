"""``Store.session_mark`` is ``session_info``'s ``(created_at, last_seq)``, read alone."""

from __future__ import annotations

import pytest

from threadline import Message, Store
from threadline.errors import SessionNotFound


def test_the_mark_is_what_session_info_says(store: Store) -> None:
    session = store.create_session(id="marked")
    for n in range(3):
        info = store.session_info("marked")
        assert store.session_mark("marked") == (info.created_at, info.last_seq)
        session.append(Message.user(f"m {n}"))
    assert store.session_mark("marked")[1] == 3
    session.delete()
    with pytest.raises(SessionNotFound):
        store.session_mark("marked")
    again = store.create_session(id="marked")
    assert store.session_mark("marked") == (again.info.created_at, 0)
