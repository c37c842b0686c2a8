"""Deleting a session that nothing is listed under reads no session list (a fork is
always listed under its parent); one with forks still goes by the fork rule."""

from __future__ import annotations

from typing import Any

import pytest

from threadline import Message, open_store
from threadline.errors import SessionHasForks
from threadline.store.fork import delete_session, fork_session


class Counting:
    """A store that counts ``list_sessions`` calls and forwards everything."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.listed = 0

    def list_sessions(self, **options: Any) -> Any:
        self.listed += 1
        return self._store.list_sessions(**options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_leaf_is_deleted_without_reading_the_session_list(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    counting = Counting(store)
    keep = store.create_session(id="keep")
    keep.append(Message.user("hi"))
    leaf = store.create_session(id="leaf")
    assert delete_session(counting, leaf.id) == ["leaf"]  # type: ignore[arg-type]
    assert counting.listed == 0
    fork = fork_session(keep, id="child")
    with pytest.raises(SessionHasForks):
        delete_session(counting, "keep")  # type: ignore[arg-type]
    assert counting.listed > 0
    assert [m.text for m in fork.messages()] == ["hi"]
    assert delete_session(counting, "keep", force=True) == ["child", "keep"]  # type: ignore[arg-type]
    store.close()
